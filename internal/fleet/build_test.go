package fleet

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/verify"
)

// A build of four stories, C depending on A, with two workers: every
// task lands exactly once, one landing at a time, C only after A landed,
// and never more than two attempts at once (but two at once, so the
// workers are used).
func TestBuildRunsToDone(t *testing.T) {
	stories := wfStories("A", "B", "C", "D")
	stories[2].DependsOn = []string{"A"}
	env, f := wfNewEnv(t, stories...)
	f.hold = 20 * time.Millisecond
	f.overlapWork = true
	env.ExecuteWorkflow(BuildWorkflow, wfInput(2))
	st := wfResult(t, env)

	if st.Outcome != "complete" {
		t.Fatalf("outcome %q (%s), want complete; tasks %s", st.Outcome, st.Reason, wfStates(st))
	}
	for _, id := range []string{"A", "B", "C", "D"} {
		if f.landed[id] != 1 || f.count("land", id) != 1 {
			t.Errorf("%s landed %d times in %d Land calls, want once", id, f.landed[id], f.count("land", id))
		}
		task := wfTask(st, id)
		if task.State != landing.Landed || task.Commit != "commit-"+id {
			t.Errorf("%s ends %s with commit %q", id, task.State, task.Commit)
		}
		if task.Host != "h1" || task.Head != "head-"+id {
			t.Errorf("%s: host %q head %q, want what Prepare and Work returned", id, task.Host, task.Head)
		}
	}
	if f.maxLanding != 1 {
		t.Errorf("%d landings ran at once: the merge queue lands one at a time", f.maxLanding)
	}
	if f.maxWorking != 2 {
		t.Errorf("at most %d Work activities ran at once, want 2 (--workers 2)", f.maxWorking)
	}
	landA := f.ofKind("land", "A")[0]
	prepC := f.ofKind("prepare", "C")[0]
	if prepC.start < landA.end {
		t.Errorf("C was prepared (order %d) before A, its dependency, landed (order %d)", prepC.start, landA.end)
	}
	// Every landed task's worktree is removed from its host, and the run's
	// integration worktree and tip at the end.
	for _, id := range []string{"A", "B", "C", "D"} {
		cl := f.ofKind("cleanup", id)
		if len(cl) != 1 || cl[0].queue != HostQueue("q", "h1") || cl[0].start < f.ofKind("land", id)[0].end {
			t.Errorf("%s: %d cleanups, want one on h1's queue after it landed", id, len(cl))
		}
	}
	if len(f.finished) != 1 || !f.finished[0].Complete || f.finished[0].RunID != "r1" {
		t.Errorf("Finish calls %+v, want one of the complete run", f.finished)
	}
	if st.Iterations != 4 {
		t.Errorf("iterations %d, want 4 (one per task)", st.Iterations)
	}
	// Work runs on the queue of the host that prepared the task; Prepare
	// on the shared queue; Land on the integration host's.
	for _, c := range f.calls {
		want := map[string]string{"prepare": "q", "work": HostQueue("q", "h1"), "land": IntegrationQueue("q"), "cleanup": HostQueue("q", "h1")}[c.kind]
		if c.queue != want {
			t.Errorf("%s of %s ran on queue %q, want %q", c.kind, c.task, c.queue, want)
		}
	}
}

// A usage limit of five hours is a durable timer: the test environment
// skips it, the run completes in well under a second of wall time, the
// workflow clock moved five hours, and no task started Work while every
// agent was limited, not even one whose Prepare was still running.
func TestBuildCooldownIsADurableTimer(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A", "B")...)
	start := env.Now()
	f.onWork = func(in WorkInput, n int) (*WorkResult, error) {
		if in.Task == "A" && n == 1 {
			return &WorkResult{Outcome: WorkLimited, Until: env.Now().Add(5 * time.Hour), Reason: "claude: usage limit", Iterations: 1}, nil
		}
		return nil, nil
	}
	// B's host takes a while to make its worktree: A hits its limit
	// meanwhile. B's Prepare ends once the workflow has been handed A's
	// limited Work (the test environment calls the listener as it hands a
	// result over), not after a guess at how long that takes.
	var mu sync.Mutex
	aLimited := false
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		if info.ActivityType.Name == ActivityWork {
			f.mu.Lock()
			limited := !f.limitedAt.IsZero()
			f.mu.Unlock()
			mu.Lock()
			aLimited = aLimited || limited
			mu.Unlock()
		}
	})
	f.onPrepare = func(in PrepareInput, n int) (*PrepareResult, error) {
		if in.Task == "B" && !wait.Within(wait.Long, func() bool { mu.Lock(); defer mu.Unlock(); return aLimited }) {
			t.Error("A's limited Work was never handed to the workflow")
		}
		return nil, nil
	}
	var during Status
	env.RegisterDelayedCallback(func() { during = wfStatus(t, env) }, time.Hour)
	wall := time.Now()
	env.ExecuteWorkflow(BuildWorkflow, wfInput(2))
	elapsed := time.Since(wall)
	st := wfResult(t, env)

	if st.Outcome != "complete" {
		t.Fatalf("outcome %q (%s), want complete", st.Outcome, st.Reason)
	}
	// Generous for a loaded machine: a cooldown spent in real time would
	// take five hours.
	if elapsed > 30*time.Second {
		t.Errorf("the run took %v of wall time: a cooldown must cost nothing", elapsed)
	}
	if got := env.Now().Sub(start); got < 5*time.Hour {
		t.Errorf("the workflow clock moved %v, want at least the 5h cooldown", got)
	}
	if f.limitedAt.IsZero() {
		t.Fatal("A never hit its limit")
	}
	for _, c := range f.ofKind("work", "") {
		if c.start > f.limitedSeq && c.wfTime.Before(f.limitedUntil) {
			t.Errorf("Work of %s started at %v, inside the cooldown from %v to %v", c.task, c.wfTime.Sub(start), f.limitedAt.Sub(start), f.limitedUntil.Sub(start))
		}
	}
	// ralph status during the cooldown shows both tasks cooling and
	// when the cooldown ends.
	if !during.CooldownUntil.Equal(f.limitedUntil) {
		t.Errorf("status during the cooldown says it ends at %v, want %v", during.CooldownUntil, f.limitedUntil)
	}
	if got := wfStates(&during.RunState); got != "A=cooling B=cooling " {
		t.Errorf("status during the cooldown: %s, want both cooling", got)
	}
	if n := f.count("work", "A"); n != 2 {
		t.Errorf("A was worked %d times, want 2 (limited, then verified after the reset)", n)
	}
	if !st.CooldownUntil.IsZero() {
		t.Errorf("the cooldown is still recorded at the end: %v", st.CooldownUntil)
	}
	if a := wfTask(st, "A"); a.Iters != 2 || a.Attempt != 1 {
		t.Errorf("A: %d iterations in attempt %d, want 2 in 1 (a limit is no new attempt)", a.Iters, a.Attempt)
	}
}

// Pause (a Signal) stops new work while in-flight attempts finish; a hint
// (a Signal) reaches the next attempt's prompt; resume (an Update) starts
// work again.
func TestBuildPauseHintResume(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A", "B", "C")...)
	start := env.Now()
	var paused Status
	var resume *wfUpdate
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalControl, Command{Kind: CmdPause, By: "ana"})
	}, 0)
	env.RegisterDelayedCallback(func() {
		paused = wfStatus(t, env)
		env.SignalWorkflow(SignalControl, Command{Kind: CmdHint, Text: "  use the fast path  "})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		resume = wfSendUpdate(env, "resume-1", Command{Kind: CmdResume})
	}, 2*time.Hour)
	env.ExecuteWorkflow(BuildWorkflow, wfInput(1))
	st := wfResult(t, env)

	if st.Outcome != "complete" {
		t.Fatalf("outcome %q (%s), want complete", st.Outcome, st.Reason)
	}
	if !paused.Paused {
		t.Fatalf("status at 1h does not say paused: %+v", paused.RunState)
	}
	left := 0
	for _, task := range paused.Tasks {
		if task.State == landing.Ready {
			left++
		} else if task.State != landing.Landed {
			t.Errorf("%s is %s while the run is paused and idle: in-flight work finishes, nothing new starts", task.ID, task.State)
		}
	}
	if left == 0 {
		t.Fatal("every task landed before the pause took effect: the test shows nothing")
	}
	resumedAt := start.Add(2 * time.Hour)
	var firstAfter *wfCall
	for _, c := range f.ofKind("prepare", "") {
		if c.wfTime.After(start) && c.wfTime.Before(resumedAt) {
			t.Errorf("Prepare of %s started at %v, while the run was paused", c.task, c.wfTime.Sub(start))
		}
	}
	for _, c := range f.ofKind("work", "") {
		if !c.wfTime.Before(resumedAt) && firstAfter == nil {
			firstAfter = c
		}
	}
	if resume == nil || !resume.accepted || !resume.completed || resume.err != nil {
		t.Fatalf("resume Update: %+v", resume)
	}
	if resume.result != "resumed" {
		t.Errorf("resume Update answered %v", resume.result)
	}
	if firstAfter == nil {
		t.Fatal("no Work after the resume")
	}
	if !strings.Contains(firstAfter.work.Feedback, "A person watching the run says: use the fast path") {
		t.Errorf("the first attempt after the hint (%s) has feedback %q, want the hint", firstAfter.task, firstAfter.work.Feedback)
	}
	if len(st.Hints) != 1 || st.Hints[0] != "use the fast path" {
		t.Errorf("hints %q", st.Hints)
	}
}

// The control Update's validator refuses what the run cannot take, and a
// refused command changes nothing; an accepted block of a ready task
// keeps it from ever being worked.
func TestBuildUpdateValidators(t *testing.T) {
	stories := wfStories("A", "B")
	stories[1].DependsOn = []string{"A"}
	env, f := wfNewEnv(t, stories...)
	var notPaused, pause, unknown, unblockReady, block, resume *wfUpdate
	var before, after Status
	env.RegisterDelayedCallback(func() {
		notPaused = wfSendUpdate(env, "u1", Command{Kind: CmdResume})
		pause = wfSendUpdate(env, "u2", Command{Kind: CmdPause})
	}, 0)
	env.RegisterDelayedCallback(func() {
		before = wfStatus(t, env)
		unknown = wfSendUpdate(env, "u3", Command{Kind: CmdBlock, Task: "nope"})
		unblockReady = wfSendUpdate(env, "u4", Command{Kind: CmdUnblock, Task: "B"})
		after = wfStatus(t, env)
		block = wfSendUpdate(env, "u5", Command{Kind: CmdBlock, Task: "B", Text: "wrong approach", By: "ana"})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		resume = wfSendUpdate(env, "u6", Command{Kind: CmdResume})
	}, 2*time.Hour)
	env.ExecuteWorkflow(BuildWorkflow, wfInput(2))
	st := wfResult(t, env)

	refused := func(name string, u *wfUpdate, want string) {
		t.Helper()
		if u == nil || !u.rejected || u.accepted || u.completed {
			t.Errorf("%s: %+v, want refused by the validator", name, u)
			return
		}
		if !strings.Contains(u.err.Error(), want) {
			t.Errorf("%s refused with %q, want it to say %q", name, u.err, want)
		}
	}
	accepted := func(name string, u *wfUpdate) {
		t.Helper()
		if u == nil || !u.accepted || u.rejected || !u.completed || u.err != nil {
			t.Errorf("%s: %+v, want accepted", name, u)
		}
	}
	refused("resume of a run not paused", notPaused, "not paused")
	accepted("pause", pause)
	refused("block of an unknown task", unknown, `no task "nope"`)
	refused("unblock of a ready task", unblockReady, "B is ready: only a blocked task")
	accepted("block of a ready task", block)
	accepted("resume", resume)

	if len(before.Controls) != len(after.Controls) || wfStates(&before.RunState) != wfStates(&after.RunState) || before.Paused != after.Paused {
		t.Errorf("refused commands changed the run:\nbefore %s %q\nafter  %s %q", wfStates(&before.RunState), before.Controls, wfStates(&after.RunState), after.Controls)
	}
	b := wfTask(st, "B")
	if b.State != landing.Blocked || b.Reason != "blocked by ana: wrong approach" {
		t.Errorf("B ends %s (%q), want blocked by ana", b.State, b.Reason)
	}
	if n := f.count("prepare", "B") + f.count("work", "B"); n != 0 {
		t.Errorf("B, blocked while ready, was prepared or worked %d times", n)
	}
	if a := wfTask(st, "A"); a.State != landing.Landed {
		t.Errorf("A ends %s, want landed", a.State)
	}
	if st.Outcome != "needs_human" || !strings.Contains(st.Reason, "B blocked") {
		t.Errorf("outcome %q (%s), want needs_human naming B", st.Outcome, st.Reason)
	}
}

// wfContinued decodes the input a run continued as new with.
func wfContinued(t *testing.T, err error) BuildInput {
	t.Helper()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("the run ended with %v, want continue-as-new", err)
	}
	if can.WorkflowType.Name != BuildWorkflow {
		t.Errorf("continued as %q, want %q", can.WorkflowType.Name, BuildWorkflow)
	}
	var in BuildInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
		t.Fatal(err)
	}
	if in.State == nil {
		t.Fatal("the continued input carries no state")
	}
	return in
}

// A run whose history reaches its limit stops starting work, lets its
// in-flight work land, and continues as new with its state; the next
// generation finishes the rest and lands nothing twice.
func TestBuildContinuesAsNewWithItsState(t *testing.T) {
	ids := []string{"A", "B", "C", "D", "E", "F"}
	env, f := wfNewEnv(t, wfStories(ids...)...)
	// The test environment's history does not grow by itself: every
	// completed activity adds five events, as on a server.
	done := 0
	env.SetOnActivityCompletedListener(func(*activity.Info, converter.EncodedValue, error) {
		done++
		env.SetCurrentHistoryLength(5 * done)
	})
	in := wfInput(2)
	in.HistoryLimit = 30
	in.MaxIterations = 100
	env.ExecuteWorkflow(BuildWorkflow, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the first generation did not end")
	}
	next := wfContinued(t, env.GetWorkflowError())
	if next.State.Generation != 1 || next.HistoryLimit != 30 || next.Workers != 2 || next.MaxIterations != 100 {
		t.Errorf("continued with generation %d, limit %d, workers %d, max iterations %d", next.State.Generation, next.HistoryLimit, next.Workers, next.MaxIterations)
	}
	landed := map[string]bool{}
	for _, task := range next.State.Tasks {
		switch task.State {
		case landing.Landed:
			landed[task.ID] = true
			if f.landed[task.ID] != 1 {
				t.Errorf("%s is landed in the carried state but landed %d times", task.ID, f.landed[task.ID])
			}
		case landing.Ready:
		default:
			t.Errorf("%s carried over %s: continue-as-new waits for in-flight work", task.ID, task.State)
		}
	}
	if len(landed) == 0 || len(landed) == len(ids) {
		t.Fatalf("%d of %d tasks landed before continuing: the test shows nothing", len(landed), len(ids))
	}
	if next.State.Iterations != len(landed) {
		t.Errorf("carried %d iterations, want %d", next.State.Iterations, len(landed))
	}

	// The next generation, as the server would start it. The task file
	// at the tip now marks the landed stories done.
	stories := wfStories(ids...)
	for i := range stories {
		stories[i].Done = landed[stories[i].ID]
	}
	env2, f2 := wfNewEnv(t, stories...)
	env2.ExecuteWorkflow(BuildWorkflow, next)
	st := wfResult(t, env2)
	if st.Outcome != "complete" || st.Generation != 1 {
		t.Fatalf("second generation: outcome %q (%s), generation %d", st.Outcome, st.Reason, st.Generation)
	}
	for _, id := range ids {
		if landed[id] && f2.count("land", id)+f2.count("work", id)+f2.count("prepare", id) != 0 {
			t.Errorf("%s, landed by the first generation, was worked again", id)
		}
		if !landed[id] && f2.landed[id] != 1 {
			t.Errorf("%s landed %d times in the second generation, want once", id, f2.landed[id])
		}
	}
	if st.Iterations != len(ids) {
		t.Errorf("iterations %d over both generations, want %d", st.Iterations, len(ids))
	}
}

// Temporal's own suggestion to continue as new is followed too.
func TestBuildContinuesAsNewWhenSuggested(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A", "B", "C")...)
	env.SetContinueAsNewSuggested(true)
	env.ExecuteWorkflow(BuildWorkflow, wfInput(1))
	next := wfContinued(t, env.GetWorkflowError())
	if next.State.Generation != 1 {
		t.Errorf("generation %d, want 1", next.State.Generation)
	}
	if a := wfTask(next.State, "A"); a.State != landing.Landed || f.landed["A"] != 1 {
		t.Errorf("A, in flight when the suggestion came, is %s (landed %d times): in-flight work finishes first", a.State, f.landed["A"])
	}
	if f.count("prepare", "B")+f.count("prepare", "C") != 0 {
		t.Error("new work started after Temporal suggested continue-as-new")
	}
}

// A plain error from Work is retried by Temporal's retry policy and the
// task lands.
func TestBuildWorkRetried(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A")...)
	f.onWork = func(in WorkInput, n int) (*WorkResult, error) {
		if n == 1 {
			return nil, errors.New("ssh: connection reset")
		}
		return nil, nil
	}
	env.ExecuteWorkflow(BuildWorkflow, wfInput(1))
	st := wfResult(t, env)
	if st.Outcome != "complete" || f.landed["A"] != 1 {
		t.Fatalf("outcome %q (%s), A landed %d times", st.Outcome, st.Reason, f.landed["A"])
	}
	if n := f.count("work", "A"); n != 2 {
		t.Errorf("Work ran %d times, want 2 (failed, retried)", n)
	}
	if n := f.count("prepare", "A"); n != 1 || wfTask(st, "A").Attempt != 1 {
		t.Errorf("a retry is the same attempt: %d Prepare calls, attempt %d", n, wfTask(st, "A").Attempt)
	}
}

// An agent that cannot run is no task's fault and no retry fixes it: the
// run ends with an error that says why, after one call. The error type
// alone (not the non-retryable flag) must be enough: the retry policy
// lists it.
func TestBuildAgentCannotRunEndsTheRun(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A", "B")...)
	f.onWork = func(in WorkInput, n int) (*WorkResult, error) {
		return nil, temporal.NewApplicationError("claude is not logged in: run claude /login", ErrTypeAgentCannotRun)
	}
	env.ExecuteWorkflow(BuildWorkflow, wfInput(1))
	st := wfResult(t, env)
	if st.Outcome != "error" || st.Reason != "claude is not logged in: run claude /login" {
		t.Errorf("outcome %q (%q), want error with the agent's message", st.Outcome, st.Reason)
	}
	if n := len(f.ofKind("work", "")); n != 1 {
		t.Errorf("Work ran %d times, want once: nothing is retried and nothing else starts", n)
	}
	for _, task := range st.Tasks {
		if task.State != landing.Ready {
			t.Errorf("%s ends %s, want ready: the environment's failure blocks no task", task.ID, task.State)
		}
	}
}

// A host that never picks up a task's work (its worker is dead) loses the
// task: it is prepared again on the shared queue, by any host, and lands.
// A host that lost the worktree is the same.
func TestBuildHostLost(t *testing.T) {
	for name, hostErr := range map[string]error{
		"schedule-to-start": temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil),
		"worktree-gone":     temporal.NewNonRetryableApplicationError("host h1 no longer holds the worktree of A", ErrTypeWorktreeGone, nil),
	} {
		t.Run(name, func(t *testing.T) {
			env, f := wfNewEnv(t, wfStories("A")...)
			f.onPrepare = func(in PrepareInput, n int) (*PrepareResult, error) {
				return &PrepareResult{Host: []string{"", "h1", "h2"}[min(n, 2)], Base: "base"}, nil
			}
			f.onWork = func(in WorkInput, n int) (*WorkResult, error) {
				if n == 1 {
					return nil, hostErr
				}
				return nil, nil
			}
			env.ExecuteWorkflow(BuildWorkflow, wfInput(1))
			st := wfResult(t, env)
			if st.Outcome != "complete" || f.landed["A"] != 1 {
				t.Fatalf("outcome %q (%s), A landed %d times", st.Outcome, st.Reason, f.landed["A"])
			}
			preps, works := f.ofKind("prepare", "A"), f.ofKind("work", "A")
			if len(preps) != 2 || len(works) != 2 {
				t.Fatalf("%d Prepare and %d Work calls, want 2 each", len(preps), len(works))
			}
			if preps[1].queue != "q" {
				t.Errorf("the second Prepare ran on %q, want the shared queue: any host may take the task", preps[1].queue)
			}
			if works[0].queue != HostQueue("q", "h1") || works[1].queue != HostQueue("q", "h2") {
				t.Errorf("Work ran on %q then %q, want h1's then h2's queue", works[0].queue, works[1].queue)
			}
			a := wfTask(st, "A")
			if a.Host != "h2" || a.Hosts != 1 || a.Attempt != 2 {
				t.Errorf("A: host %q, %d host moves, attempt %d; want h2, 1, 2", a.Host, a.Hosts, a.Attempt)
			}
		})
	}
}

// A run whose tasks all landed while a check still fails on the tip (as
// the last landing reported it) is never complete: it ends checks_failing,
// naming the check, and the integration host is not told the run is done.
func TestBuildNeverCompleteWhileACheckFails(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A", "B")...)
	f.onLand = func(in LandInput, n int) (*LandResult, error) {
		res := &LandResult{Landed: true, Commit: "commit-" + in.Task}
		if in.Task == "B" {
			res.Failing = []string{"go test"}
		}
		return res, nil
	}
	env.ExecuteWorkflow(BuildWorkflow, wfInput(1))
	st := wfResult(t, env)
	if st.Outcome != "checks_failing" || !strings.Contains(st.Reason, "go test") {
		t.Fatalf("outcome %q (%s), want checks_failing naming go test", st.Outcome, st.Reason)
	}
	if len(f.finished) != 1 || f.finished[0].Complete {
		t.Errorf("Finish calls %+v, want one of a run that is not complete", f.finished)
	}
}

// A landing sent back by a failed check hands the task's next attempt the
// check's feedback, in the same words as the local engine (one
// verify.SentBack), and the task keeps it only until that attempt ends.
func TestBuildSentBackAttemptGetsTheCheckFeedback(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A")...)
	reason := `check "go test" failed after integration on main (TestAdd passed on the tip and fails now)`
	feedback := "Check \"go test\" (`go test ./...`) exited with code 1.\nFailing tests (1): TestAdd\n\nIts output:\n```\n… 2,000 lines above left out\nFAIL\n```\n"
	f.onLand = func(in LandInput, n int) (*LandResult, error) {
		if n == 1 {
			return &LandResult{Reason: reason, Feedback: feedback}, nil
		}
		return &LandResult{Landed: true, Commit: "commit-" + in.Task}, nil
	}
	env.ExecuteWorkflow(BuildWorkflow, wfInput(1))
	st := wfResult(t, env)
	if st.Outcome != "complete" {
		t.Fatalf("outcome %q (%s), want complete", st.Outcome, st.Reason)
	}
	works := f.ofKind("work", "A")
	if len(works) != 2 {
		t.Fatalf("%d Work calls of A, want 2", len(works))
	}
	if want := verify.SentBack("A", "main", reason, feedback); works[1].work.Feedback != want {
		t.Errorf("the second attempt's feedback:\n%s\nwant:\n%s", works[1].work.Feedback, want)
	}
	if a := wfTask(st, "A"); a.Feedback != "" || a.Reason != "" {
		t.Errorf("A landed keeping reason %q, feedback %q", a.Reason, a.Feedback)
	}
}

// A story its loop blocked (its agent failed twice) frees its slot at
// once: the other stories land, Work of the blocked one is not run again,
// and the run ends needs_human naming it and why, as the local engine
// does.
func TestBuildBlockedStoryEndsTheRun(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A", "B", "C", "D")...)
	f.onWork = func(in WorkInput, n int) (*WorkResult, error) {
		if in.Task == "B" {
			return &WorkResult{Outcome: WorkBlocked, Reason: "agent exited with code 1", Iterations: 2}, nil
		}
		return nil, nil
	}
	env.ExecuteWorkflow(BuildWorkflow, wfInput(2))
	st := wfResult(t, env)
	if st.Outcome != "needs_human" || !strings.Contains(st.Reason, "B blocked") {
		t.Fatalf("outcome %q (%s), want needs_human naming B", st.Outcome, st.Reason)
	}
	for _, id := range []string{"A", "C", "D"} {
		if f.landed[id] != 1 {
			t.Errorf("%s landed %d times, want once", id, f.landed[id])
		}
	}
	if n := f.count("work", "B"); n != 1 {
		t.Errorf("Work of B ran %d times, want once: the loop's blocker is final for the run", n)
	}
	if b := wfTask(st, "B"); b.State != landing.Blocked || b.Reason != "agent exited with code 1" || b.Iters != 2 {
		t.Errorf("B ends %s (%q, %d iterations), want blocked with its loop's reason", b.State, b.Reason, b.Iters)
	}
}

// A person's block kept in the workspace (ralph block, given to an
// earlier run or while none went) starts the run with its task blocked:
// it is never worked, and the run ends for a person with its reason.
func TestBuildHonoursAPersonsBlock(t *testing.T) {
	stories := wfStories("A", "B")
	stories[1].Held = "blocked by cli: waiting for the API key"
	env, f := wfNewEnv(t, stories...)
	env.ExecuteWorkflow(BuildWorkflow, wfInput(2))
	st := wfResult(t, env)
	if f.count("prepare", "B") != 0 || f.count("work", "B") != 0 {
		t.Fatalf("B was prepared %d and worked %d times, want never", f.count("prepare", "B"), f.count("work", "B"))
	}
	if b := wfTask(st, "B"); b.State != landing.Blocked || b.Reason != stories[1].Held {
		t.Fatalf("B ends %s (%s), want blocked with the person's reason", b.State, b.Reason)
	}
	if a := wfTask(st, "A"); a.State != landing.Landed {
		t.Fatalf("A ends %s, want landed", a.State)
	}
	if st.Outcome == "complete" {
		t.Fatalf("outcome complete with B blocked by a person")
	}
}
