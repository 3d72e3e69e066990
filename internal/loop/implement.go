package loop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
)

// implement is IMPLEMENT's action: one agent run on the selected task. It
// hands on the iteration with its record, what the agent did, which the
// checks and the judgement fill in; a failure's reason goes in the event.
func (b *builder) implement(ctx context.Context, it iteration) (Event, iteration, error) {
	sel, err := b.selection(it.sel)
	if err != nil {
		return Event{}, it, err
	}
	next := iteration{sel: sel, resumedFrom: it.resumedFrom}
	m := b.st.Machine
	n := m.Iteration
	story := sel.Story
	taskID := sel.TaskID()
	text, err := b.prompt(n, sel)
	if err != nil {
		return Event{}, next, err
	}
	before, err := b.trees.before(context.WithoutCancel(ctx), n, b.src.Path())
	if err != nil {
		return b.fail(next, TrigUnresolvable, "git: "+err.Error(), "", "permanent"), next, nil
	}
	treeBefore := worktreeDigest(b.ws.Root, before)
	headBefore := before.Head
	if r := next.resumedFrom; r != nil && r.TaskID == taskID && r.TreeBefore != "" {
		treeBefore, headBefore = r.TreeBefore, r.HeadBefore
		before.Head = r.HeadBefore
	}
	next.resumedFrom = nil
	if b.st.TaskBaseFor != taskID {
		b.st.TaskBase, b.st.TaskBaseFor = headBefore, taskID
	}
	own, err := b.saveOwnFiles(n)
	if err != nil {
		return Event{}, next, fmt.Errorf("copying ralph's own files before the agent: %w", err)
	}
	// A task store outside the tree (beads) has no file to put back: its
	// statuses are read before the agent and set back after it.
	statuses := b.storeStatuses(taskID)
	started := b.opts.now()
	b.st.Attempt = &Attempt{Iteration: n, TaskID: taskID, StartedAt: started.UTC(), HeadBefore: headBefore, TreeBefore: treeBefore, Own: own.name}
	// The attempt, and with it the token that tags the agent's processes,
	// is on disk before the agent starts, so that a crash at any instant
	// leaves what finds and stops the agent. The transition into
	// IMPLEMENT, when it is still in memory, is saved with it and
	// journaled before the iteration's heading, as it always was.
	if err := b.saveState(); err != nil {
		return Event{}, next, err
	}
	attempt := fmt.Sprintf("attempt %d/%d", m.RetryCount+1, b.maxRetries())
	b.say(report.KindIteration, fmt.Sprintf("\n── iteration %d/%d · %s: %s · %s · agent %s ──\n", n, b.st.MaxIterations, taskID, story.Title, attempt, b.opts.Agent.Name),
		report.Iteration{Turn: &report.Turn{Iteration: n, Task: taskID}, Agent: b.opts.Agent.Name})
	b.event("iteration %d started: %s (%s) with agent %s", n, taskID, attempt, b.opts.Agent.Name)
	b.agentToken = attemptToken(b.id, b.st.Attempt)
	b.onAgentStart = func(pgid int) {
		// A crash here, with the agent running and its group not yet
		// recorded, must still find the agent on resume (by its token).
		CrashPoint("agent-started")
		b.st.Attempt.PGID = pgid
		if p, ok := proc.Lookup(pgid); ok {
			b.st.Attempt.PGIDStart = p.Start
		}
		b.home.save(b.st)
	}
	var waits []LimitWait
	var res runkit.Result
	var runErr error
	var spec agent.Spec
	var tree func() treeRead
	for {
		// Pick an agent that is not cooling down after a usage limit; when
		// every configured agent is, wait for the first to be free.
		var ok bool
		var until time.Time
		var err error
		spec, ok, until, err = b.availableAgent(b.opts.now())
		if err != nil {
			return Event{}, next, err
		}
		if !ok && b.opts.MaxLimitWait > 0 && until.Sub(b.opts.now()) > b.opts.MaxLimitWait {
			err := fmt.Errorf("%w: every agent is cooling down after a usage limit (%s)", ErrAllLimited, b.cooldownSummary())
			b.sayf(report.KindLimit, "  ⏸ %v; not waiting longer than %s\n", err, b.opts.MaxLimitWait)
			b.event("%v", err)
			return Event{}, next, err
		}
		if !ok {
			msg := "all agents are limited (" + b.cooldownSummary() + "); waiting for the earliest reset"
			b.say(report.KindWait, "  ⏸ "+msg+"\n", report.Wait{Wait: "limit", State: "started",
				Until: until.UTC().Format(time.RFC3339), Agent: report.Ptr(b.firstFree(until))})
			b.event("%s", msg)
			waitStart := b.opts.now()
			if err := b.waitUntil(ctx, until, WaitLimit, "waiting for a usage limit to reset"); err != nil {
				return Event{}, next, err
			}
			waited := b.opts.now().Sub(waitStart)
			b.say(report.KindWait, fmt.Sprintf("  ▶ the usage-limit wait is over after %s: going on\n", waited.Round(time.Second)),
				report.Wait{Wait: "limit", State: "ended", WaitedMS: report.Ptr(waited.Milliseconds())})
			if len(waits) > 0 {
				waits[len(waits)-1].WaitedMillis += b.opts.now().Sub(waitStart).Milliseconds()
			}
			continue
		}
		if spec.Name != b.opts.Agent.Name {
			b.sayf(report.KindLimit, "  ↻ %s is cooling down; using %s for this iteration\n", b.opts.Agent.Name, spec.Name)
		}
		tree = b.trees.watchAgentExit(context.WithoutCancel(ctx), &b.onAgentExit)
		res, runErr = b.agents.RunAgent(ctx, spec, n, text)
		// The agent may have changed the tasks (bd close, bd create):
		// what the source kept from before is old.
		if f, ok := b.src.(tasks.Forgetter); ok {
			f.Forget()
		}
		b.countUsage(res.Outcome)
		if res.Limit == nil {
			break
		}
		// The same task runs again: no status of this run may still
		// read the tree (or hold git's index lock) when the next starts.
		tree()
		wait, err := b.coolDown(spec, res.Limit, res.LimitSource, b.opts.now())
		if err != nil {
			return Event{}, next, err
		}
		waits = append(waits, wait)
		b.event("iteration %d: %s hit a usage limit; the same task runs again", n, spec.Name)
	}
	// Read beside agent.Run's scan for processes that left the group;
	// nothing below may run while that status still reads.
	afterAgent := tree()
	CrashPoint("agent-exited")
	b.agentToken = ""
	out, promptFile, logFile := res.Outcome, res.PromptFile, res.LogFile
	for _, p := range out.Strays {
		b.sayf(report.KindRun, "  ! stopped %s: the agent started it outside its process group and it was still running\n", p)
		b.logError("iteration %d (%s): stopped %s, which the agent had started outside its process group", n, taskID, p)
	}
	rec := b.newRecord(n, started, out, promptFile, logFile)
	rec.StoryID, rec.StoryTitle, rec.TaskID, rec.Agent = story.ID, story.Title, taskID, spec.Name
	if envErr := res.EnvFailure; envErr != nil {
		// The agent could not run at all: every task would fail the same
		// way, so none is charged (no attempt, retry, blocker or breaker
		// trip). The iteration is recorded and the attempt dropped; the
		// machine stays in IMPLEMENT, so the next build runs it again.
		rec.Status, rec.Reason = StatusAgentError, envErr.Error()
		b.saveIteration(rec)
		b.st.Attempt = nil
		if err := b.saveState(); err != nil {
			return Event{}, next, err
		}
		return Event{}, next, envErr
	}
	b.st.Attempt.AgentDone, b.st.Attempt.ExitCode, b.st.Attempt.Millis = true, out.ExitCode, out.Duration.Milliseconds()
	b.st.Attempt.PGID = 0
	b.st.Attempt.Prompt, b.st.Attempt.Log = b.ws.Rel(promptFile), b.ws.Rel(logFile)
	rec.LimitWaits = waits
	rec.MemoryConnected, rec.Neo4jConnected = b.st.MemoryConnected, b.st.Neo4jConnected
	next.rec = rec
	if runErr != nil && !out.Interrupted {
		rec.Status, rec.Reason = StatusAgentError, runErr.Error()
		b.saveIteration(rec)
		return Event{}, next, runErr
	}
	bg := context.WithoutCancel(ctx)
	after, gerr := b.trees.afterAgent(bg, rec, before, afterAgent)
	if out.Interrupted {
		rec.Status, rec.Reason = StatusInterrupted, "interrupted by the user"
		b.reopenClaim(story.ID, "interrupted before verification")
		b.saveIteration(rec)
		return Event{}, next, ErrInterrupted
	}
	if gerr == nil {
		if err := b.trees.history(bg, b.st.Branch, headBefore, after); err != nil {
			rec.Status, rec.Reason = StatusFailed, err.Error()
			b.saveIteration(rec)
			b.logError("iteration %d (%s): %v", n, taskID, err)
			if serr := b.saveState(); serr != nil {
				return Event{}, next, serr
			}
			return Event{}, next, err
		}
	}
	claim, err := b.putBackOwnFiles(own.files, story.ID)
	if err != nil {
		return Event{}, next, err
	}
	b.putBackStoreStatuses(statuses, taskID)
	b.st.Attempt.Claim = claim
	if len(after.Dirty) > 0 {
		// What ralph put back is no change of the agent's.
		after = b.withoutRestored(after, before, own.files)
		b.trees.restored(after)
	}
	changed := after.Head != headBefore || worktreeDigest(b.ws.Root, after) != treeBefore
	rec.Progress = changed
	if len(after.Unmerged) > 0 {
		// A merge conflict is not something another attempt fixes.
		rec.Status = StatusFailed
		return b.fail(next, TrigUnresolvable, "merge conflict in "+strings.Join(clipList(after.Unmerged, 5), ", "), "", "permanent"), next, nil
	}
	if status, why := b.agentStatus(out); status != "" {
		rec.Status = status
		// What the agent printed last says whether a retry may help: a
		// refused connection heals, a syntax error does not.
		tail := tailOfFile(logFile, 4<<10) + "\n" + strings.Join(out.Result.Errors, "\n")
		return b.fail(next, TrigImplementFailed, why, tail, classify(why+"\n"+tail, out.TimedOut)), next, nil
	}
	if pct := rec.ContextPercent; pct >= 0 {
		hard := b.opts.ContextHard
		if hard == 0 {
			hard = 80
		}
		if pct >= hard {
			b.logError("iteration %d (%s): the agent ended with %d%% of its context window in use (hard limit %d%%)", n, taskID, pct, hard)
		}
	}
	if slices.Contains(rec.Signals, "CONTEXT_EXHAUSTED") {
		rec.Status, rec.Reason = StatusPartial, "context exhausted: partial work is committed and a fresh agent continues"
		return Event{Trigger: TrigContextExhausted}, next, nil
	}
	if !changed {
		rec.Status = StatusNoChanges
		return b.fail(next, TrigImplementFailed, "the agent made no changes", clip(out.Result.FinalMessage, 2000), "permanent"), next, nil
	}
	return Event{Trigger: TrigCodeWritten}, next, nil
}

// fail ends the iteration it on a failed attempt, its record written, and
// returns the event trig that carries why; the machine decides whether
// that means a retry or a blocker.
func (b *builder) fail(it iteration, trig Trigger, reason, output, typ string) Event {
	if strings.TrimSpace(output) != "" {
		output = check.Excerpt(output)
	}
	return b.failWith(it, trig, reason, output, typ)
}

// failWith is fail with what the next prompt gets already in the one
// feedback format (check.Feedback for a failed check).
func (b *builder) failWith(it iteration, trig Trigger, reason, feedback, typ string) Event {
	b.logError("iteration %d (%s): %s", b.st.Machine.Iteration, b.st.Machine.TaskID, reason)
	b.reopenClaim(it.sel.Story.ID, reason)
	if rec := it.rec; rec != nil {
		rec.Reason = reason
		b.closeIteration(rec)
	}
	return Event{Trigger: trig, Failure: &Failure{Reason: reason, Feedback: feedback, Type: typ}}
}

// agentTicks reports whether the agent ticks the task file's checkboxes
// itself, so that its ticks are its claim.
func agentTicks(src tasks.Source) bool {
	_, ok := src.(tasks.AgentTicked)
	return ok
}

// reopenClaim unchecks markdown story id if the agent checked it but ralph
// did not accept it, criteria included: the PRD must never show a story
// done that was not verified, and marks from a rejected attempt must not
// count as the next attempt's claim.
func (b *builder) reopenClaim(id, why string) {
	if !agentTicks(b.src) || id == "" {
		return
	}
	data, err := inputlimit.ReadFile(b.src.Path())
	if err != nil {
		return
	}
	out, err := tasks.SetStoryDone(data, id, false)
	if err == nil {
		out, err = tasks.UncheckCriteria(out, id)
	}
	if err != nil || string(out) == string(data) {
		return
	}
	if err := store.WriteFileAtomic(b.src.Path(), out, 0o644); err == nil {
		b.event("story %s reopened: %s", id, why)
		b.sayf(report.KindBlocker, "  ↺ %s reopened: %s\n", id, why)
	}
}

// classify decides whether a failure may heal by itself (network,
// database, external service: transient) or needs a person (permanent).
func classify(text string, timedOut bool) string {
	if timedOut {
		return "transient"
	}
	l := strings.ToLower(text)
	for _, p := range []string{"timed out", "timeout", "connection refused", "connection reset", "econnrefused", "etimedout",
		"network", "could not resolve host", "temporarily unavailable", "service unavailable", "503", "502 bad gateway",
		"database is locked", "could not connect", "external service"} {
		if strings.Contains(l, p) {
			return "transient"
		}
	}
	return "permanent"
}
