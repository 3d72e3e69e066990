package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/spf13/cobra"
)

// PRDOptions holds the flags and arguments of `ralph prd`.
type PRDOptions struct {
	Env     *Env
	Request string
	Out     string
	Agent   string
	// Force replaces an existing PRD without asking, keeping the old one
	// as <file>.bak.
	Force bool
	// Sandbox is --sandbox: off, bwrap or auto ("": [sandbox] mode).
	Sandbox string
}

func newPRDCmd(env *Env, runF func(*PRDOptions) error) *cobra.Command {
	opts := &PRDOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "prd [REQUEST]",
		Short: "Write a PRD with the agent in interactive mode",
		Long: `Run the agent interactively with the PRD prompt to turn a request into a PRD
of stories in the form "### [ ] US-001: Title" with "- [ ] criterion"
lines. Without a request, ralph asks for one on the terminal. Afterwards
ralph parses the file and lists the stories it found, or says what is
wrong with it.

An existing PRD is replaced only after a yes on the terminal, or with
--force; either way the old one is first kept as <file>.bak next to it.
Without a terminal and without --force, ralph refuses and changes nothing.
An agent that fails (non-zero exit) or leaves the PRD as it was is
reported with a non-zero exit.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Request = strings.TrimSpace(strings.Join(args, " "))
			if runF != nil {
				return runF(opts)
			}
			return runPRD(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "where the PRD is written (default from config: .agents/tasks/prd.md)")
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "agent to run (see ralph build --help)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "replace an existing PRD without asking (the old one is kept as <file>.bak)")
	cmd.Flags().StringVar(&opts.Sandbox, "sandbox", "", "run the agent in a sandbox, keeping the terminal: off, bwrap (fail when it cannot start) or auto (default [sandbox] mode: off)")
	return cmd
}

func runPRD(cmd *cobra.Command, opts *PRDOptions) error {
	env := opts.Env
	mode, err := sandboxFlag(opts.Sandbox)
	if err != nil {
		return err
	}
	ws, a, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return err
	}
	spec, err := a.Agent(opts.Agent)
	if err != nil {
		return err
	}
	// A sandbox that cannot start fails before the question and before
	// anything is written.
	box, warning, err := a.Sandbox(cmd.Context(), mode)
	if err != nil {
		return err
	}
	if warning != "" {
		fmt.Fprintln(env.IO.Err, warning)
	}
	// One reader for every answer: a second one could miss what the first
	// buffered.
	in := bufio.NewReader(env.IO.In)
	request := opts.Request
	if request == "" {
		if !env.IO.InTerminal {
			return usageErrorf("no request given and no terminal to ask on: run `ralph prd \"what you want built\"`")
		}
		fmt.Fprint(env.IO.Out, "Describe what you want built (an empty line cancels): ")
		line, _ := in.ReadString('\n')
		request = strings.TrimSpace(line)
		if request == "" {
			fmt.Fprintln(env.IO.Out, "cancelled; nothing was written")
			return nil
		}
	}
	// An agent that cannot run fails before anything is written: the old
	// PRD's .bak, the prompt file.
	argv, _ := agent.Argv(spec.Interactive, "PROMPT.md")
	if err := agent.CheckInstalled(spec, argv); err != nil {
		return err
	}
	outPath := a.LoopOptions(false).PRDPath
	if opts.Out != "" {
		outPath = ws.Abs(opts.Out)
	}
	if dir := filepath.Dir(outPath); box != nil && !insideDir(dir, ws.Root) {
		// The agent works in the checkout; a PRD asked for elsewhere is
		// the one other place it may write.
		b := *box
		b.Writable = append(slices.Clone(b.Writable), dir)
		box = &b
	}
	before, err := os.ReadFile(outPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(bytes.TrimSpace(before)) > 0 {
		ok, err := confirmReplacePRD(env, in, ws.Rel(outPath), before, opts.Force)
		if err != nil || !ok {
			return err
		}
		// The old PRD is kept before the agent can touch it: its finished
		// stories are a record of work done.
		if err := store.WriteFileAtomic(outPath+".bak", before, 0o644); err != nil {
			return fmt.Errorf("keeping the old PRD as %s.bak: %w; nothing was replaced", ws.Rel(outPath), err)
		}
		fmt.Fprintf(env.IO.Out, "ralph: the old PRD is kept as %s.bak\n", ws.Rel(outPath))
	}
	tpl, err := prompt.Load(prompt.PRD, ws.PromptsDir())
	if err != nil {
		return err
	}
	text, err := tpl.Render(map[string]string{"REQUEST": request, "PRD_PATH": ws.Rel(outPath), "REPO_ROOT": ws.Root})
	if err != nil {
		return err
	}
	if _, err := ws.EnsureStateFiles(env.Now()); err != nil {
		return err
	}
	tmp := ws.Path(".tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	promptFile := ws.Path(".tmp", "PROMPT_prd-"+env.Now().Format("20060102-150405")+".md")
	if err := store.WriteFileAtomic(promptFile, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.IO.Out, "ralph: starting %s interactively to write %s\n", spec.Name, ws.Rel(outPath))
	code, err := agent.RunInteractive(cmd.Context(), spec, promptFile, text, ws.Root, box, env.IO.In, env.IO.Out, env.IO.Err)
	if err != nil {
		if cmd.Context().Err() != nil {
			return &ExitError{Code: ExitInterrupted, Msg: "interrupted"}
		}
		return err
	}
	if code != 0 {
		ws.LogError(env.Now(), fmt.Sprintf("prd: agent %s exited with code %d", spec.Name, code))
	}
	after, err := os.ReadFile(outPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if gone := err != nil; gone || bytes.Equal(after, before) {
		what := fmt.Sprintf("%s was not changed (the old PRD is still there)", ws.Rel(outPath))
		switch {
		case gone && len(bytes.TrimSpace(before)) == 0:
			what = ws.Rel(outPath) + " was not written"
		case gone:
			what = fmt.Sprintf("%s was removed (the old PRD is in %s.bak)", ws.Rel(outPath), ws.Rel(outPath))
		}
		if code != 0 {
			return fmt.Errorf("the agent %s failed (exit code %d) and %s: run `ralph prd` again, or write the PRD by hand", spec.Name, code, what)
		}
		return fmt.Errorf("the agent %s exited without writing a new PRD: %s; run `ralph prd` again, or write the PRD by hand", spec.Name, what)
	}
	prd, err := loop.ReadPRD(ws, outPath)
	if err != nil {
		return fmt.Errorf("the PRD the agent wrote needs fixing: %w", err)
	}
	fmt.Fprintf(env.IO.Out, "PRD %s has %s (%d open):\n", ws.Rel(outPath), words.Count(len(prd.Stories), "story", "stories"), prd.Remaining())
	for _, s := range prd.Stories {
		mark := " "
		if s.Done {
			mark = "x"
		}
		fmt.Fprintf(env.IO.Out, "  [%s] %s: %s (%s)\n", mark, s.ID, s.Title, words.Count(len(s.Criteria), "criterion", "criteria"))
	}
	if code != 0 {
		// The file changed, but the agent failed on the way: it may have
		// stopped halfway through.
		return fmt.Errorf("the agent %s failed (exit code %d) after writing %s: read it through and fix it, or run `ralph prd` again, before `ralph plan`", spec.Name, code, ws.Rel(outPath))
	}
	fmt.Fprintln(env.IO.Out, "next: ralph plan, then ralph build")
	return nil
}

// confirmReplacePRD asks before an existing PRD is replaced: --force says
// yes, a person at a terminal answers y/N, and without either ralph refuses,
// since the PRD may hold finished stories that would be lost silently.
func confirmReplacePRD(env *Env, in *bufio.Reader, rel string, old []byte, force bool) (bool, error) {
	what := "a PRD"
	if prd, err := tasks.ParseMarkdown(rel, old); err == nil && len(prd.Stories) > 0 {
		what = fmt.Sprintf("a PRD with %s (%d done)", words.Count(len(prd.Stories), "story", "stories"), len(prd.Stories)-prd.Remaining())
	}
	if force {
		return true, nil
	}
	if !env.IO.InTerminal {
		return false, fmt.Errorf("%s already holds %s: ralph prd replaces it only when asked to; run it again with --force to replace it (the old one is kept as %s.bak), or pass --out to write a new PRD elsewhere", rel, what, rel)
	}
	if askYes(in, env.IO.Out, fmt.Sprintf("%s already holds %s. Replace it (the old one is kept as %s.bak)?", rel, what, rel)) {
		return true, nil
	}
	fmt.Fprintf(env.IO.Out, "kept %s; nothing was written\n", rel)
	return false, nil
}

// insideDir reports whether path is dir or below it.
func insideDir(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
