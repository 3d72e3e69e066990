package loop

import (
	"fmt"
	"strconv"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
)

// attemptToken is the tag put in the environment of every process of an
// attempt's agent (agent.TokenVar). It is made only of fields that the
// attempt record holds, and that record is saved before the agent starts,
// so a crash at any instant after the start leaves what finds the agent:
// no window remains between starting the child and recording it.
func attemptToken(runID string, a *Attempt) string {
	if a == nil || a.StartedAt.IsZero() {
		return ""
	}
	return runID + "." + strconv.Itoa(a.Iteration) + "." + strconv.FormatInt(a.StartedAt.UnixNano(), 36)
}

// stopLeftoverAgent stops what an attempt's agent left running when ralph
// died (runkit.StopLeftover): every process carrying the attempt's token,
// wherever it went, and the recorded process group when one of its members
// is tagged or is the leader recorded (with its start time), never a group
// number reused by an unrelated program, wherever that works. It says what
// it stopped, or what Build stopped first (stoppedFirst); a process that
// had left the group (setsid) is named, because it shows the agent tried
// to outlive its run.
func (b *builder) stopLeftoverAgent(a *Attempt, stoppedFirst proc.Stopped) {
	st := stopAttemptAgent(b.id, a)
	if !st.Any() {
		// Build stopped it already, before it read anything.
		st = stoppedFirst
	}
	if !st.Any() {
		return
	}
	group := "its process group"
	if len(st.Groups) > 0 {
		group = fmt.Sprintf("process group %d", st.Groups[0])
	}
	b.sayf(report.KindRun, "ralph: stopped the agent the crashed run left behind (%s)\n", group)
	b.event("stopped the agent left running by a crash (%s)", group)
	for _, p := range st.Escaped {
		b.sayf(report.KindRun, "ralph: stopped %s, which had left the agent's process group\n", p)
		b.logError("iteration %d: stopped %s, started by the agent, which had left its process group and outlived ralph", a.Iteration, p)
	}
}

// stopAttemptAgent stops what attempt a of run runID left running.
func stopAttemptAgent(runID string, a *Attempt) proc.Stopped {
	pgid, start := a.PGID, a.PGIDStart
	if a.AgentDone {
		pgid, start = 0, 0 // ralph saw the group end; the number may be reused
	}
	return runkit.StopLeftover(attemptToken(runID, a), pgid, start)
}

// stopLeftoversFirst stops the agent a killed run of this home left
// running, before Build reads the task file or anything else: that agent
// may be rewriting the file at this moment, and if reading it (or any
// other check) fails, Build exits and the agent would go on alone. It runs
// under the run's lock, so that the agent of a run still alive is never
// taken for a leftover; with the lock held elsewhere it stops nothing, and
// Build then fails on the lock. What it stopped is reported once the run
// resumes (stopLeftoverAgent).
func stopLeftoversFirst(h *Home) proc.Stopped {
	if st, err := h.Load(); err != nil || st == nil || st.Finished || st.Attempt == nil {
		return proc.Stopped{}
	}
	lock, err := store.TryLock(h.LockPath(), "ralph build")
	if err != nil {
		return proc.Stopped{}
	}
	defer lock.Unlock()
	st, err := h.Load() // again: a run may have ended before the lock
	if err != nil || st == nil || st.Finished || st.Attempt == nil {
		return proc.Stopped{}
	}
	return stopAttemptAgent(st.RunID, st.Attempt)
}
