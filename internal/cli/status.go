package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/spf13/cobra"
)

// StatusOptions holds the flags of `ralph status`.
type StatusOptions struct {
	Env   *Env
	JSON  bool
	Tasks string
	// Engine is "local" or "temporal" ("": [engine] kind).
	Engine string
}

func newStatusCmd(env *Env) *cobra.Command {
	opts := &StatusOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the loop's state: current task, retries, blocked tasks, metrics",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&opts.Tasks, "tasks", "", "task source as for build (e.g. beads:MOLECULE-ID to show the molecule's progress)")
	cmd.Flags().StringVar(&opts.Engine, "engine", "", "local (this workspace's records) or temporal (the build of this branch on Temporal, through its status Query; default [engine] kind)")
	return cmd
}

func runStatus(cmd *cobra.Command, opts *StatusOptions) error {
	env := opts.Env
	_, a, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return err
	}
	onTemporal, err := a.OnTemporal(opts.Engine)
	if err != nil {
		return err
	}
	if onTemporal {
		return fleetStatus(cmd, opts, a)
	}
	rep, st, srcErr, err := a.Status(opts.Tasks)
	if err != nil {
		return err
	}
	return printStatus(env, opts, rep, st, srcErr)
}

// printStatus prints rep as `ralph status` does.
func printStatus(env *Env, opts *StatusOptions, rep StatusReport, st *loop.LoopState, srcErr error) error {
	out := env.IO.Out
	if opts.JSON {
		return writeJSON(env, rep)
	}
	switch {
	case rep.Running:
		fmt.Fprintf(out, "ralph is running (%s)\n", rep.Holder)
	case st == nil && rep.Parallel == nil:
		fmt.Fprintln(out, "no build has run in this workspace yet")
	case st == nil:
	case rep.Finished:
		fmt.Fprintf(out, "last run %s finished: %s (%s)\n", rep.RunID, rep.Outcome, rep.Reason)
	default:
		fmt.Fprintf(out, "run %s stopped in %s: `ralph build` resumes it\n", rep.RunID, rep.State)
	}
	if p := rep.Paused; p != nil {
		fmt.Fprintf(out, "paused by %s since %s: `ralph resume` goes on\n", p.By, p.Time.Local().Format("15:04:05"))
	}
	for _, c := range rep.Queued {
		fmt.Fprintf(out, "queued: %s by %s at %s: the run takes it at its next step\n", c.Describe(), c.By, c.Time.Local().Format("15:04:05"))
	}
	for _, w := range rep.Waiting {
		if w.Kind != "blocked" { // blocked tasks have lines of their own below
			fmt.Fprintf(out, "waiting for you: %s: %s (%s)\n", w.ID, w.Text, w.Hint)
		}
	}
	if rep.Session != nil {
		printSessionStatus(env, rep.Session)
	}
	if rep.Parallel != nil {
		printParallelStatus(out, rep.Parallel)
	}
	if srcErr != nil {
		fmt.Fprintf(out, "task file: %v\n", srcErr)
	} else {
		line := fmt.Sprintf("task file: %s (%s): %d of %s done", rep.TaskFile, rep.TaskSource, rep.StoriesDone, words.Count(rep.Stories, "story", "stories"))
		if rep.StoriesAgentWord > 0 {
			line += fmt.Sprintf(" (%d verified, %d on the agent's word)", rep.StoriesVerified, rep.StoriesAgentWord)
		}
		if rep.StoriesVerifying > 0 {
			line += fmt.Sprintf("; %s claimed by the agent, being verified", words.Count(rep.StoriesVerifying, "story", "stories"))
		}
		fmt.Fprintln(out, line)
	}
	printBeadsStatus(out, rep.Beads)
	if st == nil {
		printCooldowns(out, rep.Cooldowns)
		return nil
	}
	fmt.Fprintf(out, "state: %s · iteration %d/%d · elapsed %s\n", rep.State, rep.Iteration, rep.MaxIterations, (time.Duration(rep.ElapsedMillis) * time.Millisecond).Round(time.Second))
	if rep.CurrentTask != "" {
		fmt.Fprintf(out, "current task: %s (attempt %d)\n", rep.CurrentTask, st.Machine.RetryCount+1)
	}
	if len(rep.RetryCounts) > 0 {
		var parts []string
		for id, n := range rep.RetryCounts {
			parts = append(parts, fmt.Sprintf("%s: %d", id, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(out, "failed attempts: %s\n", strings.Join(parts, ", "))
	}
	if len(rep.Blocked) == 0 {
		fmt.Fprintln(out, "blocked: none")
	}
	for _, b := range rep.Blocked {
		human := ""
		if b.RequiresHuman {
			human = ", requires a human"
		}
		if b.ByPerson {
			fmt.Fprintf(out, "blocked: %s (by a person, until unblocked): %s\n  clear it with `ralph unblock %s`", b.ID, b.Reason, b.ID)
		} else {
			fmt.Fprintf(out, "blocked: %s (%s%s): %s\n  clear it with `ralph unblock %s`", b.ID, b.Type, human, b.Reason, b.ID)
		}
		switch {
		case b.WorkRef != "":
			fmt.Fprintf(out, "; the attempt's work is kept at %s: see it with `git show %s`, bring it back with `git cherry-pick --no-commit %s`", b.WorkRef, b.WorkRef, b.WorkRef)
		case b.Stash != "":
			fmt.Fprintf(out, "; the attempt's work is in stash %s", text.ShortHash(b.Stash))
		}
		fmt.Fprintln(out)
	}
	printBuildMetrics(out, st.Metrics)
	if br := st.Breaker; br.State != "" {
		line := "circuit breaker: " + br.State
		if br.State != loop.BreakerClosed {
			line += " (" + br.Reason + ")"
		}
		fmt.Fprintln(out, line)
	}
	printCooldowns(out, rep.Cooldowns)
	if li := rep.LastIteration; li != nil {
		fmt.Fprintf(out, "last iteration %d (%s, %s): %s · %s · %d in / %d out tokens · $%.4f estimated",
			li.Iteration, text.OrNone(li.TaskID, "-"), li.Agent, li.Status, (time.Duration(li.DurationMillis) * time.Millisecond).Round(100*time.Millisecond),
			li.Tokens.InputTokens, li.Tokens.OutputTokens, li.CostUSD)
		if len(li.LimitWaits) > 0 {
			fmt.Fprintf(out, " · %s", words.Count(len(li.LimitWaits), "usage limit", "usage limits"))
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "totals: %d in / %d out tokens · $%.4f estimated (the CLIs' own estimates, not a bill)\n",
		st.Metrics.Tokens.InputTokens, st.Metrics.Tokens.OutputTokens, st.Metrics.CostUSD)
	mem := "connected"
	if !rep.MemoryOK {
		mem = "unavailable (file-only context)"
	}
	if rep.Memory != "" {
		fmt.Fprintf(out, "memory: %s, %s\n", rep.Memory, mem)
	}
	if rep.PendingHints > 0 {
		fmt.Fprintf(out, "context hints queued for the next iteration: %d\n", rep.PendingHints)
	}
	return nil
}

// printCooldowns shows the agents resting after a usage limit, by name.
func printCooldowns(out io.Writer, cooldowns map[string]string) {
	names := make([]string, 0, len(cooldowns))
	for name := range cooldowns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(out, "cooling down: %s until %s (usage limit)\n", name, cooldowns[name])
	}
}

// waitWords name the reasons of loop.Metrics.WaitMillis in `ralph status`.
var waitWords = map[string]string{loop.WaitBreaker: "circuit breaker cooldown", loop.WaitLimit: "usage limit reset", loop.WaitPause: "paused by a person"}

// printBuildMetrics writes a build's counters (seed 002's metrics): for
// `ralph status` and `ralph metrics --build`.
func printBuildMetrics(out io.Writer, m loop.Metrics) {
	// A task that passed on its second attempt is a success with one
	// failed attempt, not a failed task: the words say attempts.
	// "done", not "verified": the task board says how many of them ralph
	// verified and how many it took on the agent's word.
	fmt.Fprintf(out, "metrics: %s done, %s, %s, %d blocked, total %s\n",
		words.Count(m.TaskSuccesses, "task", "tasks"), words.Count(m.TaskFailures, "failed attempt", "failed attempts"),
		words.Count(m.Reworks, "rework", "reworks"), m.Blocked, (time.Duration(m.TotalMillis) * time.Millisecond).Round(time.Second))
	if len(m.StateMillis) > 0 {
		var parts []string
		for _, s := range loop.States {
			if ms, ok := m.StateMillis[s]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", s, (time.Duration(ms)*time.Millisecond).Round(time.Millisecond)))
			}
		}
		fmt.Fprintf(out, "time in state: %s\n", strings.Join(parts, ", "))
	}
	if len(m.WaitMillis) > 0 {
		// Sleeping out a cooldown is not work in any state: shown apart.
		var parts []string
		for _, why := range []string{loop.WaitBreaker, loop.WaitLimit, loop.WaitPause} {
			if ms, ok := m.WaitMillis[why]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", waitWords[why], (time.Duration(ms)*time.Millisecond).Round(time.Second)))
			}
		}
		fmt.Fprintf(out, "waiting: %s\n", strings.Join(parts, ", "))
	}
}
