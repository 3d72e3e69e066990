package cli

import (
	"fmt"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/spf13/cobra"
)

// InitOptions holds the flags of `ralph init`.
type InitOptions struct {
	Env  *Env
	BMAD bool
}

func newInitCmd(env *Env, runF func(*InitOptions) error) *cobra.Command {
	opts := &InitOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create .ralph/ with config, progress, guardrails and logs",
		Long: `Create the .ralph/ folder of this repository: config.toml (with the checks
detected in the project), progress.md, guardrails.md, errors.log,
activity.log and a .gitignore for machine state. Existing files are never
overwritten, so init is safe to run again.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runInit(cmd, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.BMAD, "bmad", false, "also write progress.txt, the task file of BMAD mode, from its template")
	return cmd
}

func runInit(cmd *cobra.Command, opts *InitOptions) error {
	env := opts.Env
	ws, _, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return err
	}
	detected := check.Detect(ws.Root)
	created, err := app.Init(ws, env.Now(), detected)
	if err != nil {
		return err
	}
	if opts.BMAD {
		p := ws.Abs("progress.txt")
		wrote, err := store.WriteIfMissing(p, []byte(tasks.ProgressTemplate()), 0o644)
		if err != nil {
			return err
		}
		if wrote {
			created = append(created, p)
		}
	}
	out := env.IO.Out
	if len(created) == 0 {
		fmt.Fprintln(out, "ralph: .ralph/ is already set up; nothing changed")
	}
	for _, p := range created {
		fmt.Fprintf(out, "created %s\n", ws.Rel(p))
	}
	if len(created) > 0 {
		if len(detected) == 0 {
			fmt.Fprintln(out, "no checks detected: add [[checks]] to .ralph/config.toml so ralph can verify stories")
		}
		for _, c := range detected {
			fmt.Fprintf(out, "check detected: %s (%s): %s\n", c.Name, c.Kind, c.Run)
			if c.Format != "" {
				fmt.Fprintf(out, "  ralph reads its tests one by one (%s), so it tells a test the agent fixed from one it broke\n", c.Format)
			}
		}
		if opts.BMAD {
			fmt.Fprintln(out, "next: describe your stories in progress.txt, then ralph build (it finds progress.txt by itself)")
		} else {
			fmt.Fprintln(out, "next: ralph prd \"what you want built\", then ralph plan, then ralph build")
		}
	}
	return nil
}

// noArgs rejects positional arguments as a usage error, so that a flag
// typed without its dashes is never silently ignored.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}
