package cli

import (
	"context"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/spf13/cobra"
)

// Shell completion (ralph completion bash|zsh|fish) offers what a person
// would otherwise look up: the task ids of the workspace's task file for
// the commands that take one, and the agent names, built-in and from
// config, for every --agent flag. A workspace that cannot be read offers
// nothing rather than failing a keystroke.

// addCompletions walks the command tree once NewRootCmd built it. The
// commands that take a task id (the steering table's) complete it
// themselves.
func addCompletions(env *Env, root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("agent") != nil {
			_ = c.RegisterFlagCompletionFunc("agent", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				return completeAgents(cmd.Context(), env, toComplete), cobra.ShellCompDirectiveNoFileComp
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeTaskIDs offers the ids of the stories not done ("ID\tTitle"),
// only the blocked ones when blocked is set (ralph unblock).
func completeTaskIDs(ctx context.Context, env *Env, blocked bool, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	ws, a, err := openWorkspace(ctx, env)
	if err != nil {
		return nil
	}
	src, err := a.TaskSource("", "")
	if err != nil {
		return nil
	}
	b, err := src.Load()
	if err != nil {
		return nil
	}
	// A markdown PRD has no blocked mark: the loop's state holds those.
	inState := map[string]bool{}
	if st, err := loop.HomeOf(ws).Load(); err == nil && st != nil {
		for id, rec := range st.Tasks {
			if rec != nil && rec.Blocker != nil {
				sid, _ := tasks.ParseTaskID(id)
				inState[sid] = true
			}
		}
	}
	var out []string
	for _, s := range b.Stories {
		if s.Done || !strings.HasPrefix(s.ID, prefix) || (blocked && s.Status != tasks.StatusBlocked && !inState[s.ID]) {
			continue
		}
		out = append(out, s.ID+"\t"+s.Title)
	}
	return out
}

// completeAgents offers the agent names: built-in, then config's.
func completeAgents(ctx context.Context, env *Env, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	var custom map[string]agent.Custom
	if _, a, err := openWorkspace(ctx, env); err == nil {
		custom = a.CustomAgents()
	}
	var out []string
	for _, n := range agent.Names(custom) {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
