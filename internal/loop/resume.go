package loop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/report"
)

// resumeInterrupted records the iteration a crash or interrupt cut short
// and returns the attempt the resumed IMPLEMENT continues, if any.
// stoppedFirst is what Build stopped of the killed run's agent before it
// read anything; clearedLock the index.lock it removed from a worker's
// worktree.
func (b *builder) resumeInterrupted(stoppedFirst proc.Stopped, clearedLock string) *Attempt {
	if lock := clearedLock; lock != "" {
		b.sayf(report.KindRun, "ralph: removed %s, which the killed run left in this worker's worktree\n", lock)
		b.event("removed git's index.lock left by a crash (%s)", lock)
	}
	a := b.st.Attempt
	if a != nil {
		// A crash of ralph does not stop the agent's processes; an agent
		// still editing the tree would race the resumed run, and what it
		// writes would land in the next story's commit.
		b.stopLeftoverAgent(a, stoppedFirst)
	}
	if a == nil || b.st.Machine.State != StateImplement {
		return nil
	}
	b.restoreOwnFilesAfterCrash(a)
	if a.Iteration == b.st.Machine.Iteration-1 && a.TaskID == b.st.Machine.TaskID {
		// A second crash came after the cut-short iteration was recorded
		// but before the rerun's own attempt was: the rerun still
		// continues it, so that work the first agent left (it may have
		// outlived ralph) counts as this attempt's, not as the tree the
		// rerun started from.
		return a
	}
	if a.Iteration != b.st.Machine.Iteration {
		return nil
	}
	rec := &IterationRecord{SchemaVersion: 1, RunID: b.id, Iteration: a.Iteration, Kind: "build", TaskID: a.TaskID,
		Agent: b.opts.Agent.Name, StartedAt: a.StartedAt, HeadBefore: a.HeadBefore, Status: StatusInterrupted,
		Reason: "ralph stopped during this iteration; it is run again", ExitCode: -1, PromptFile: a.Prompt, LogFile: a.Log}
	rec.StoryID, _, _ = strings.Cut(a.TaskID, "/")
	b.saveIteration(rec)
	// Re-entering IMPLEMENT runs the agent again as a new iteration; the
	// cut-short one keeps its number in the records.
	b.st.Machine.Iteration++
	b.st.Metrics.Iterations = b.st.Machine.Iteration
	b.saveState()
	CrashPoint("interrupted-recorded")
	return a
}

func (b *builder) breakerCooldown() time.Duration {
	if d := b.opts.Breaker.Cooldown; d > 0 {
		return d
	}
	return 5 * time.Minute
}

// breakerGate holds the loop while the circuit breaker is open, then lets
// one iteration through half-open. It never needs a person to reset it.
func (b *builder) breakerGate(ctx context.Context) error {
	br := &b.st.Breaker
	if br.State != BreakerOpen {
		return nil
	}
	// The transition into IMPLEMENT reaches the disk and the journal
	// before a wait that may last minutes.
	if err := b.flush(); err != nil {
		return err
	}
	until := br.OpenedAt.Add(b.breakerCooldown())
	// The breaker opened earlier ({"breaker":"open"}); this is the wait
	// it imposes, which may start in a later run.
	b.say(report.KindWait, fmt.Sprintf("  ⚡ circuit breaker open (%s)\n", br.Reason),
		report.Wait{Wait: "breaker", State: "started", Until: until.UTC().Format(time.RFC3339), Reason: br.Reason})
	if err := b.waitUntil(ctx, until, WaitBreaker, "circuit breaker cooling down"); err != nil {
		return err
	}
	br.State = BreakerHalfOpen
	b.event("circuit breaker HALF_OPEN: one iteration may try")
	b.say(report.KindWait, "  ⚡ circuit breaker half-open: one iteration may try\n", report.Wait{Breaker: "half_open"})
	return b.saveState()
}
