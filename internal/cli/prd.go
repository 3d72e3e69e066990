package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/spf13/cobra"
)

// PRDOptions holds the flags and arguments of `ralph prd`.
type PRDOptions struct {
	Env     *Env
	Request string
	Out     string
	Agent   string
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
wrong with it.`,
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
	return cmd
}

func runPRD(cmd *cobra.Command, opts *PRDOptions) error {
	env := opts.Env
	ws, cfg, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return err
	}
	spec, err := resolveAgent(env, cfg, opts.Agent)
	if err != nil {
		return err
	}
	request := opts.Request
	if request == "" {
		if !env.IO.InTerminal {
			return usageErrorf("no request given and no terminal to ask on: run `ralph prd \"what you want built\"`")
		}
		fmt.Fprint(env.IO.Out, "Describe what you want built (an empty line cancels): ")
		line, _ := bufio.NewReader(env.IO.In).ReadString('\n')
		request = strings.TrimSpace(line)
		if request == "" {
			fmt.Fprintln(env.IO.Out, "cancelled; nothing was written")
			return nil
		}
	}
	out := cfg.Build.PRD
	if opts.Out != "" {
		out = opts.Out
	}
	outPath := ws.Abs(out)
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
	code, err := agent.RunInteractive(cmd.Context(), spec, promptFile, text, ws.Root, env.IO.In, env.IO.Out, env.IO.Err)
	if err != nil {
		if cmd.Context().Err() != nil {
			return &ExitError{Code: ExitInterrupted, Msg: "interrupted"}
		}
		return err
	}
	if code != 0 {
		ws.LogError(env.Now(), fmt.Sprintf("prd: agent %s exited with code %d", spec.Name, code))
	}
	prd, err := loop.ReadPRD(ws, outPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the agent (exit code %d) did not write %s: run `ralph prd` again or write the file by hand", code, ws.Rel(outPath))
	}
	if err != nil {
		return fmt.Errorf("the PRD the agent wrote needs fixing: %w", err)
	}
	fmt.Fprintf(env.IO.Out, "PRD %s has %d stories (%d open):\n", ws.Rel(outPath), len(prd.Stories), prd.Remaining())
	for _, s := range prd.Stories {
		mark := " "
		if s.Done {
			mark = "x"
		}
		fmt.Fprintf(env.IO.Out, "  [%s] %s: %s (%d criteria)\n", mark, s.ID, s.Title, len(s.Criteria))
	}
	fmt.Fprintln(env.IO.Out, "next: ralph plan, then ralph build")
	return nil
}
