package cli

import (
	"bufio"
	"fmt"

	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/spf13/cobra"
)

// CleanOptions holds the flags of `ralph clean`.
type CleanOptions struct {
	Env  *Env
	Yes  bool
	JSON bool
}

func newCleanCmd(env *Env) *cobra.Command {
	opts := &CleanOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove the worktrees and landed branches parallel builds left, after showing them",
		Long: `Show what finished or abandoned parallel builds (ralph build --workers N)
left in this repository, then remove it once you say yes: every ralph
worktree (uncommitted changes in one are first kept on a ref under
refs/ralph/abandoned/), and each ralph/<run>/<task> branch whose task landed
or whose commits are all on your branch. A branch whose task is done in the
task file (it landed in a later run, or a person marked it) goes too, its tip
kept under refs/ralph/abandoned/. A branch with work that never landed is
kept and named with the commands to look at it and delete it.
--yes removes without asking; --json prints the plan (and removes nothing
without --yes).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runClean(cmd, opts) },
	}
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "remove without asking")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the plan as JSON")
	return cmd
}

func runClean(cmd *cobra.Command, opts *CleanOptions) error {
	env := opts.Env
	ws, a, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return err
	}
	if h, held := store.Held(ws.LockPath()); held {
		return fmt.Errorf("ralph is running in this workspace (%s): clean up after it ends", h)
	}
	snap, err := ws.Repo.Snapshot(cmd.Context())
	if err != nil {
		return err
	}
	target := snap.Branch
	if reg, ok, _ := engine.LoadRegistry(ws.Dir()); ok && reg.Target != "" {
		target = reg.Target
	}
	if target == "" {
		return usageErrorf("HEAD is detached: check out the branch the parallel builds landed on, then run ralph clean again")
	}
	// The task file says which tasks are done: a branch of one holds work
	// that landed later or that a person settled.
	var done func(string) bool
	if src, err := a.TaskSource("", ""); err == nil {
		if b, err := src.Load(); err == nil {
			done = func(task string) bool {
				s, ok := b.Find(task)
				return ok && s.Done
			}
		}
	}
	plan, err := engine.PlanClean(cmd.Context(), ws, a.WorktreeRoot(), target, done)
	if err != nil {
		return err
	}
	out := env.IO.Out
	if opts.JSON {
		if err := writeJSON(env, plan); err != nil {
			return err
		}
	} else {
		if len(plan.Remove) == 0 {
			fmt.Fprintln(out, "nothing to clean: no ralph worktree, no landed ralph branch")
		}
		for _, it := range plan.Remove {
			fmt.Fprintf(out, "remove %s %s (%s)\n", it.Kind, it.Name, it.Why)
		}
		for _, it := range plan.Keep {
			fmt.Fprintf(out, "keep %s %s: %s\n", it.Kind, it.Name, it.Why)
		}
	}
	if len(plan.Remove) == 0 {
		return nil
	}
	if !opts.Yes {
		if opts.JSON || !env.IO.InTerminal {
			if !opts.JSON {
				fmt.Fprintln(out, "nothing was removed: run `ralph clean --yes` to remove the above")
			}
			return nil
		}
		if !askYes(bufio.NewReader(env.IO.In), out, fmt.Sprintf("Remove these %d?", len(plan.Remove))) {
			fmt.Fprintln(out, "nothing was removed")
			return nil
		}
	}
	if err := plan.Apply(cmd.Context(), ws); err != nil {
		return err
	}
	if !opts.JSON {
		fmt.Fprintf(out, "removed %d\n", len(plan.Remove))
	}
	return nil
}
