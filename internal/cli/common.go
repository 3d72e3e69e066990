package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// iterationsArg reads the iteration limit of build and plan: the [N]
// argument or --max-iterations N, the name thread start uses for it;
// 0 when neither is given.
func iterationsArg(cmd *cobra.Command, args []string) (int, error) {
	n, err := parseIterations(args, 0)
	if err != nil || !cmd.Flags().Changed("max-iterations") {
		return n, err
	}
	m, _ := cmd.Flags().GetInt("max-iterations")
	switch {
	case m < 1:
		return 0, usageErrorf("--max-iterations must be a whole number of at least 1, got %d", m)
	case len(args) > 0 && n != m:
		return 0, usageErrorf("N (%d) and --max-iterations (%d) are the same limit: give one", n, m)
	}
	return m, nil
}

// parseIterations reads the optional [N] argument.
func parseIterations(args []string, def int) (int, error) {
	if len(args) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return 0, usageErrorf("iterations must be a whole number of at least 1, got %q", args[0])
	}
	return n, nil
}

// openWorkspace finds the repository around the working directory and
// reads its configuration (app.Open); ws is a's workspace.
func openWorkspace(ctx context.Context, env *Env) (ws *workspace.Workspace, a *app.App, err error) {
	wd, err := env.WorkDir()
	if err == nil {
		a, err = app.Open(ctx, wd, env.Getenv, env.Now)
		ws = a.WS
	}
	return ws, a, err
}

// events renders a run's events on stdout: the text a person reads, or
// one JSON object per line with --json.
func (env *Env) events(asJSON bool) report.Sink {
	if asJSON {
		return report.JSONLines{W: env.IO.Out}
	}
	return report.Text{W: env.IO.Out}
}

// progress is where a command's lines that are not events go: stdout, but
// stderr with --json, whose stdout holds JSON alone.
func (env *Env) progress(asJSON bool) io.Writer {
	if asJSON {
		return env.IO.Err
	}
	return env.IO.Out
}

// writeJSON prints v as the command's one JSON document.
func writeJSON(env *Env, v any) error { return encodeJSON(env.IO.Out, v) }

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// askYes asks a person question on w and reads the answer from in: only
// y or yes is a yes.
func askYes(in *bufio.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, _ := in.ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}
