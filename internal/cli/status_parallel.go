package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// parallelStatus reads the registry of the workspace's last parallel
// build; nil when it never had one. held says the workspace's lock is
// held: a build that has not finished is then running.
func parallelStatus(ws *workspace.Workspace, now time.Time, held bool) (*ParallelStatus, error) {
	reg, ok, err := engine.LoadRegistry(ws.Dir())
	if err != nil || !ok {
		return nil, err
	}
	ps := &ParallelStatus{RunID: reg.RunID, Target: reg.Target, Workers: reg.Workers, Finished: reg.Finished, Outcome: reg.Outcome, Reason: reg.Reason,
		Running: held && !reg.Finished, StartedAt: reg.StartedAt,
		Working: []WorkerStatus{}, Queue: []QueuedTask{}, NeedsReview: []QueuedTask{}, Blocked: []QueuedTask{}, Worktrees: reg.WorktreeRoot}
	end := now
	if fi, err := os.Stat(engine.RegistryPath(ws.Dir())); err == nil && !ps.Running {
		end = fi.ModTime() // the registry is written last when the build ends or stops
	}
	if !reg.StartedAt.IsZero() && end.After(reg.StartedAt) {
		ps.ElapsedMillis = end.Sub(reg.StartedAt).Milliseconds()
	}
	for _, t := range reg.Sorted() {
		q := QueuedTask{Task: t.ID, State: string(t.State), Attempt: t.Attempt, Branch: t.Branch, Reason: t.Reason, Conflicts: t.Conflicts}
		switch t.State {
		case landing.Landed:
			ps.Landed++
			ps.LandedTasks = append(ps.LandedTasks, t.ID)
		case landing.Working, landing.SentBack:
			w := WorkerStatus{Worker: t.Worker, Task: t.ID, State: string(t.State), Attempt: t.Attempt, Worktree: t.Worktree, Branch: t.Branch,
				ElapsedMillis: now.Sub(t.Since).Milliseconds()}
			if t.Home != "" {
				if st, err := (&loop.Home{Dir: t.Home}).Load(); err == nil && st != nil {
					w.State = string(st.Machine.State)
					if li := lastIteration(filepath.Join(t.Home, "runs"), st.RunID); li != nil {
						w.Agent = li.Agent
					}
				}
			}
			ps.Working = append(ps.Working, w)
		case landing.Queued, landing.Landing:
			ps.Queue = append(ps.Queue, q)
		case landing.NeedsReview:
			q.Look = fmt.Sprintf("git diff %s...%s", reg.Target, t.Branch)
			ps.NeedsReview = append(ps.NeedsReview, q)
		case landing.Blocked:
			q.Look = fmt.Sprintf("git log %s..%s", reg.Target, t.Branch)
			ps.Blocked = append(ps.Blocked, q)
		}
	}
	return ps, nil
}

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
		fmt.Fprintf(out, "  queue %s: %s (attempt %d)\n", q.Task, q.State, q.Attempt)
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
