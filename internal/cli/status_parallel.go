package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
)

// printParallelStatus shows the parallel build a person reads.
func printParallelStatus(out io.Writer, ps *ParallelStatus) {
	if b := ps.CheckoutBranch; b != "" {
		on := "branch " + b
		if b == "HEAD" {
			on = "a detached HEAD"
		}
		fmt.Fprintf(out, "your checkout is on %s, not on %s where the parallel build lands: the task file below is %s's (`git switch %s` goes back)\n", on, ps.Target, ps.Target, ps.Target)
	}
	state := "stopped: `ralph build --workers N` resumes it"
	switch {
	case ps.Finished:
		state = "finished: " + ps.Outcome + " (" + ps.Reason + ")"
	case ps.Running:
		state = "running"
	}
	fmt.Fprintf(out, "parallel build %s on %s, %s: %s\n", ps.RunID, ps.Target, words.Count(ps.Workers, "worker", "workers"), state)
	fmt.Fprintf(out, "  landed: %s · queue: %d · needs review: %d · blocked: %d\n", words.Count(ps.Landed, "task", "tasks"), len(ps.Queue), len(ps.NeedsReview), len(ps.Blocked))
	for _, w := range ps.Working {
		agent := ""
		if w.Agent != "" {
			agent = " · agent " + w.Agent
		}
		fmt.Fprintf(out, "  %s %s: %s · attempt %d · %s%s · %s\n", text.OrNone(w.Worker, "-"), w.Task, w.State, w.Attempt,
			(time.Duration(w.ElapsedMillis) * time.Millisecond).Round(time.Second), agent, w.Worktree)
	}
	for _, q := range ps.Queue {
		batch := ""
		if q.Batch != "" {
			batch = ", batch " + q.Batch
		}
		fmt.Fprintf(out, "  queue %s: %s (attempt %d%s)\n", q.Task, q.State, q.Attempt, batch)
	}
	for _, q := range ps.NeedsReview {
		fmt.Fprintf(out, "  needs review %s: %s", q.Task, q.Reason)
		if len(q.Conflicts) > 0 {
			fmt.Fprintf(out, " (conflicting files: %s)", strings.Join(q.Conflicts, ", "))
		}
		fmt.Fprintf(out, "\n    its work is on branch %s: see it with `%s`\n", q.Branch, q.Look)
	}
	for _, q := range ps.Blocked {
		fmt.Fprintf(out, "  blocked %s: %s\n    its work is on branch %s: `%s`\n", q.Task, q.Reason, q.Branch, q.Look)
	}
}
