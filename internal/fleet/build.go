package fleet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/verify"
)

// Control command kinds a build takes.
const (
	CmdPause   = "pause"
	CmdResume  = "resume"
	CmdStop    = "stop"
	CmdHint    = "hint"
	CmdSkip    = "skip"
	CmdBlock   = "block"
	CmdUnblock = "unblock"
)

// Version markers for workflow.GetVersion: a change to what the workflow
// does must keep the old path for histories recorded before it.
const (
	changeBoardAfterContinue = "board-after-continue"
)

// run is the workflow's working memory around RunState.
type run struct {
	in   BuildInput
	st   *RunState
	ctx  workflow.Context // the task coroutines', cancelled by stop
	root workflow.Context // the landing's: a stop lets a landing finish
	stop workflow.CancelFunc
	done workflow.Channel // stepDone from the task coroutines
	// wake is poked by the Update handler, so that a command changes
	// what the main loop waits for (a resume of an idle run).
	wake  workflow.Channel
	queue []string // verified tasks waiting to land, in order
	// inFlight counts task coroutines running; landing whether the merge
	// queue's one landing runs.
	inFlight int
	landing  bool
	draining bool // continue-as-new asked: no new work, then continue
	tidying  int  // cleanups running: the run waits for them before it ends
}

// stepDone is what a task coroutine hands back to the workflow.
type stepDone struct {
	task  string
	event landing.TaskEvent
	// Fields of the activity's result the event carries.
	work WorkResult
	prep PrepareResult
	land LandResult
	err  error
}

// Build is the build workflow: the scheduler and merge queue of a
// parallel build, with the task machine's state for every task, and the
// work done by activities on the hosts' task queues.
func Build(ctx workflow.Context, in BuildInput) (*RunState, error) {
	r := &run{in: in}
	if in.HistoryLimit <= 0 {
		r.in.HistoryLimit = DefaultHistoryLimit
	}
	if in.Workers < 1 {
		r.in.Workers = 1
	}
	if in.State != nil {
		r.st = in.State
	} else {
		r.st = &RunState{RunID: in.RunID, Target: in.Target, StartedAt: workflow.Now(ctx)}
	}
	wctx, cancel := workflow.WithCancel(ctx)
	r.ctx, r.root, r.stop = wctx, ctx, cancel
	r.done = workflow.NewChannel(ctx)
	r.wake = workflow.NewBufferedChannel(ctx, 16)
	if err := r.handlers(ctx); err != nil {
		return nil, err
	}
	if err := r.loadBoard(ctx); err != nil {
		return r.end(ctx, "error", "cannot read the task file: "+err.Error())
	}
	// A continued run lands what it had verified first, in order; it
	// drained its workers before it continued, so nothing else is in
	// flight.
	for _, t := range r.st.Tasks {
		switch t.State {
		case landing.Queued:
			r.queue = append(r.queue, t.ID)
		case landing.Landing:
			t.State = landing.Queued
			r.queue = append(r.queue, t.ID)
		}
	}
	for {
		r.dispatch()
		if r.finished() {
			break
		}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(r.done, func(c workflow.ReceiveChannel, _ bool) {
			var d stepDone
			c.Receive(ctx, &d)
			r.apply(d)
		})
		sel.AddReceive(r.wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
		sig := workflow.GetSignalChannel(ctx, SignalControl)
		sel.AddReceive(sig, func(c workflow.ReceiveChannel, _ bool) {
			var cmd Command
			c.Receive(ctx, &cmd)
			if err := r.validate(cmd); err != nil {
				r.note(fmt.Sprintf("refused %s: %v", cmd.Kind, err))
				return
			}
			r.control(cmd)
		})
		if !r.st.CooldownUntil.IsZero() && r.inFlight == 0 {
			// Wake up for the end of a cooldown even with nothing else
			// going on: the next dispatch waits for it.
			d := r.st.CooldownUntil.Sub(workflow.Now(ctx))
			if d > 0 {
				sel.AddFuture(workflow.NewTimer(ctx, d), func(workflow.Future) {})
			}
		}
		sel.Select(ctx)
		r.checkHistory(ctx)
	}
	if r.draining && !r.st.Stopping {
		// Every handler finishes before the run continues as new, so no
		// accepted command is lost.
		if err := workflow.Await(ctx, func() bool { return r.tidying == 0 && workflow.AllHandlersFinished(ctx) }); err != nil {
			return nil, err
		}
		next := r.in
		st := *r.st
		st.Generation++
		next.State = &st
		return nil, workflow.NewContinueAsNewError(ctx, BuildWorkflow, next)
	}
	return r.end(ctx, "", "")
}

// handlers registers the status Query and the control Update; the Signal
// is read in the main loop.
func (r *run) handlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		return Status{RunState: *r.st, HistoryLength: workflow.GetInfo(ctx).GetCurrentHistoryLength(), Workers: r.in.Workers}, nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateControl, func(ctx workflow.Context, cmd Command) (string, error) {
		msg := r.control(cmd)
		r.wake.SendAsync(true)
		return msg, nil
	}, workflow.UpdateHandlerOptions{Validator: func(cmd Command) error { return r.validate(cmd) }})
}

// loadBoard reads the task file at the target's tip (on the integration
// host) and adds its stories to the run. A continued run keeps its tasks
// and only learns stories added since.
func (r *run) loadBoard(ctx workflow.Context) error {
	if r.st.Generation > 0 && workflow.GetVersion(ctx, changeBoardAfterContinue, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	actx := workflow.WithActivityOptions(ctx, r.options(r.in.Integration, time.Minute, 0, 5))
	var stories []Story
	if err := workflow.ExecuteActivity(actx, ActivityBoard, BoardInput{RunID: r.st.RunID, Target: r.st.Target, PRD: r.in.PRD}).Get(ctx, &stories); err != nil {
		return err
	}
	for _, s := range stories {
		if r.task(s.ID) != nil {
			continue
		}
		t := &Task{ID: s.ID, Title: s.Title, DependsOn: s.DependsOn, Priority: s.Priority, State: landing.Ready, Branch: "ralph/" + r.st.RunID + "/" + s.ID}
		if s.Done {
			t.State, t.Reason = landing.Landed, "done before the run"
		} else if s.Held != "" {
			t.State, t.Reason = landing.Blocked, s.Held // a person's block outlives runs
		}
		r.st.Tasks = append(r.st.Tasks, t)
	}
	return nil
}

func (r *run) task(id string) *Task {
	for _, t := range r.st.Tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// options are the activity options of one queue: schedule-to-start bounds
// the wait for a host (a dead host is noticed), the heartbeat timeout a
// silent attempt, and the retry policy leaves out errors no retry fixes.
func (r *run) options(queue string, startToClose, scheduleToStart time.Duration, attempts int32) workflow.ActivityOptions {
	o := workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: startToClose,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			MaximumAttempts:        attempts,
			NonRetryableErrorTypes: []string{ErrTypeAgentCannotRun, ErrTypeUsage, ErrTypeWorktreeGone, ErrTypeTargetMoved},
		},
	}
	if scheduleToStart > 0 {
		o.ScheduleToStartTimeout = scheduleToStart
	}
	return o
}

// dispatch starts work on free slots and the next landing, unless the run
// is paused, stopping, cooling down or draining for continue-as-new.
func (r *run) dispatch() {
	if !r.landing && len(r.queue) > 0 && !r.st.Stopping {
		id := r.queue[0]
		r.queue = r.queue[1:]
		if t := r.task(id); t != nil && t.State == landing.Queued {
			r.move(t, landing.Taken)
			r.landing = true
			r.goLand(t)
		}
	}
	if r.st.Paused || r.st.Stopping || r.draining {
		return
	}
	if !r.st.CooldownUntil.IsZero() {
		if workflow.Now(r.ctx).Before(r.st.CooldownUntil) {
			return
		}
		r.st.CooldownUntil = time.Time{}
	}
	for r.inFlight < r.in.Workers {
		if r.in.MaxIterations > 0 && r.st.Iterations >= r.in.MaxIterations {
			return
		}
		t := r.nextReady()
		if t == nil {
			return
		}
		r.move(t, landing.Dispatched)
		if !t.Resume {
			t.Attempt++
		}
		r.inFlight++
		r.goWork(t)
	}
}

// nextReady is the first ready task whose dependencies landed, skipped
// tasks last.
func (r *run) nextReady() *Task {
	b := tasks.Board{}
	busy := map[string]bool{}
	for _, t := range r.st.Tasks {
		s := tasks.Story{ID: t.ID, Title: t.Title, DependsOn: t.DependsOn, Priority: t.Priority, Status: tasks.StatusNotStarted}
		if t.State == landing.Landed {
			s.Done, s.Status = true, tasks.StatusComplete
		}
		b.Stories = append(b.Stories, s)
		if t.State != landing.Ready && t.State != landing.SentBack {
			busy[t.ID] = true
		}
	}
	ready := tasks.ReadyStories(b, busy)
	var skipped *Task
	for _, s := range ready {
		t := r.task(s.ID)
		if t.Skipped {
			if skipped == nil {
				skipped = t
			}
			continue
		}
		return t
	}
	if skipped != nil && r.inFlight == 0 && !r.landing && len(r.queue) == 0 {
		skipped.Skipped = false
		return skipped
	}
	return nil
}

// goWork runs one task from Prepare to a verified branch (or a blocker)
// in a coroutine: Prepare on the shared queue, then Work on the queue of
// the host that prepared it, with durable cooldowns in between.
func (r *run) goWork(t *Task) {
	in := WorkInput{RunID: r.st.RunID, Target: r.st.Target, PRD: r.in.PRD, Task: t.ID, Attempt: t.Attempt, Feedback: r.feedback(t)}
	host, base, resume := t.Host, t.Base, t.Resume && t.Host != ""
	t.Resume = false
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		if resume {
			// The worktree and the loop's state are on host already, from
			// a run that was stopped: no Prepare, which would start over.
			r.done.Send(ctx, stepDone{task: in.Task, event: landing.Prepared, prep: PrepareResult{Host: host, Base: base}})
		} else {
			// Prepare heartbeats: a host that dies during it loses the
			// task to another host after the heartbeat timeout. A task
			// sent back keeps its host and worktree: Prepare on that host
			// resets its branch to the new tip.
			queue, wait := r.in.Shared, time.Duration(0)
			if host != "" {
				queue, wait = HostQueue(r.in.Shared, host), r.in.HostTimeout
			}
			ao := r.options(queue, 10*time.Minute, wait, 5)
			ao.HeartbeatTimeout = r.in.Heartbeat
			actx := workflow.WithActivityOptions(ctx, ao)
			var prep PrepareResult
			err := workflow.ExecuteActivity(actx, ActivityPrepare, PrepareInput{RunID: in.RunID, Target: in.Target, Task: in.Task, Attempt: in.Attempt}).Get(ctx, &prep)
			if err != nil {
				r.done.Send(ctx, stepDone{task: in.Task, event: classify(err), err: err})
				return
			}
			r.done.Send(ctx, stepDone{task: in.Task, event: landing.Prepared, prep: prep})
			if host == "" {
				host = prep.Host
			}
		}
		for {
			// A task prepared while every agent is at its limit waits for
			// the reset too, on the same durable timer (and shows as
			// cooling): an attempt started now would only hit the limit.
			if r.inCooldown(ctx) {
				r.done.Send(ctx, stepDone{task: in.Task, event: landing.Limited, work: WorkResult{Outcome: WorkLimited, Until: r.st.CooldownUntil, Reason: "every agent is at a usage limit"}})
				if !r.coolOff(ctx, &in, r.st.CooldownUntil) {
					return
				}
			}
			ao := r.options(HostQueue(r.in.Shared, host), 24*time.Hour, r.in.HostTimeout, 20)
			ao.HeartbeatTimeout = r.in.Heartbeat
			// A stop ends the run only once the host stopped the agent and
			// the loop saved its state, so the next run resumes it.
			ao.WaitForCancellation = true
			actx := workflow.WithActivityOptions(ctx, ao)
			var res WorkResult
			err := workflow.ExecuteActivity(actx, ActivityWork, in).Get(ctx, &res)
			if err != nil {
				r.done.Send(ctx, stepDone{task: in.Task, event: classify(err), err: err})
				return
			}
			switch res.Outcome {
			case WorkLimited:
				r.done.Send(ctx, stepDone{task: in.Task, event: landing.Limited, work: res})
				if !r.coolOff(ctx, &in, res.Until) {
					return
				}
				continue
			case WorkVerified:
				r.done.Send(ctx, stepDone{task: in.Task, event: landing.Verified, work: res})
			default:
				r.done.Send(ctx, stepDone{task: in.Task, event: landing.Failed, work: res})
			}
			return
		}
	})
}

func (r *run) inCooldown(ctx workflow.Context) bool {
	return !r.st.CooldownUntil.IsZero() && workflow.Now(ctx).Before(r.st.CooldownUntil)
}

// coolOff waits, for a cooling task, until until and the run's cooldown
// ended (a later limit met meanwhile extends it) and the run is not
// paused, and reports it cooled; false when the run stopped meanwhile
// (reported). until is the limit's own reset: the Limited just sent may
// not be applied to the run's cooldown yet. The cooldown is a durable
// timer: a 5-hour wait costs nothing, and survives any restart of worker
// or server.
func (r *run) coolOff(ctx workflow.Context, in *WorkInput, until time.Time) bool {
	for {
		end := until
		if r.st.CooldownUntil.After(end) {
			end = r.st.CooldownUntil
		}
		d := end.Sub(workflow.Now(ctx))
		if d <= 0 {
			break
		}
		if err := workflow.Sleep(ctx, d); err != nil {
			r.done.Send(ctx, stepDone{task: in.Task, event: landing.Stopped, err: err})
			return false
		}
	}
	if err := workflow.Await(ctx, func() bool { return !r.st.Paused || r.st.Stopping }); err != nil || r.st.Stopping {
		r.done.Send(ctx, stepDone{task: in.Task, event: landing.Stopped, err: err})
		return false
	}
	r.done.Send(ctx, stepDone{task: in.Task, event: landing.Cooled})
	in.Feedback = r.feedback(r.task(in.Task))
	return true
}

// classify turns an activity's failure into the task's event: a host
// that never took the work (its worker is gone) or no longer holds the
// worktree loses the task to another host; a cancellation is the run
// stopping; anything else, once Temporal's retries are spent, fails the
// task with the error as its reason.
func classify(err error) landing.TaskEvent {
	if temporal.IsCanceledError(err) {
		return landing.Stopped
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		return landing.HostLost
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		switch ae.Type() {
		case ErrTypeWorktreeGone:
			return landing.HostLost
		case ErrTypeAgentCannotRun, ErrTypeUsage:
			return landing.Stopped
		}
	}
	return landing.Failed
}

// goLand runs the landing of one verified task on the integration host.
func (r *run) goLand(t *Task) {
	in := LandInput{RunID: r.st.RunID, Target: r.st.Target, PRD: r.in.PRD, Task: t.ID, Title: t.Title, Base: t.Base, Head: t.Head,
		Attempt: t.Attempt, Host: t.Host, Token: fmt.Sprintf("land-%s-%s-%d", r.st.RunID, t.ID, t.Attempt)}
	workflow.Go(r.root, func(ctx workflow.Context) {
		ao := r.options(r.in.Integration, time.Hour, 0, 10)
		ao.HeartbeatTimeout = r.in.Heartbeat
		actx := workflow.WithActivityOptions(ctx, ao)
		var res LandResult
		err := workflow.ExecuteActivity(actx, ActivityLand, in).Get(ctx, &res)
		ev := res.Event(in.Attempt, r.landAttempts())
		if err != nil {
			ev = landing.Stopped
		}
		r.done.Send(ctx, stepDone{task: in.Task, event: ev, land: res, err: err})
	})
}

func (r *run) landAttempts() int {
	if r.in.LandAttempts > 0 {
		return r.in.LandAttempts
	}
	return 3
}

// cleanup removes a landed task's worktree and branch from its host, in
// the background: a host that is gone keeps them, which costs disk, not
// correctness (ralph clean removes them there).
func (r *run) cleanup(t *Task) {
	if t.Host == "" {
		return
	}
	queue, in := HostQueue(r.in.Shared, t.Host), CleanupInput{RunID: r.st.RunID, Task: t.ID}
	r.tidying++
	workflow.Go(r.root, func(ctx workflow.Context) {
		actx := workflow.WithActivityOptions(ctx, r.options(queue, 5*time.Minute, time.Minute, 3))
		_ = workflow.ExecuteActivity(actx, ActivityCleanup, in).Get(ctx, nil)
		r.tidying--
	})
}

// apply moves a task on what its coroutine reported.
func (r *run) apply(d stepDone) {
	t := r.task(d.task)
	if t == nil {
		return
	}
	switch d.event {
	case landing.Prepared:
		t.Host, t.Base = d.prep.Host, d.prep.Base
		r.move(t, landing.Prepared)
		return
	case landing.Limited:
		r.st.Iterations += d.work.Iterations
		t.Iters += d.work.Iterations
		if d.work.Until.After(r.st.CooldownUntil) {
			r.st.CooldownUntil = d.work.Until
		}
		t.Reason = d.work.Reason
		r.move(t, landing.Limited)
		return
	case landing.Cooled:
		r.move(t, landing.Cooled)
		return
	}
	// The rest end a coroutine.
	if t.State == landing.Landing {
		r.landing = false
		switch d.event {
		case landing.Integrated:
			t.Commit, t.Reason, t.Feedback = d.land.Commit, "", ""
			r.st.Failing = d.land.Failing
			r.cleanup(t)
		case landing.Conflicted, landing.Exhausted:
			t.Reason, t.Feedback = d.land.Reason, d.land.Feedback
		case landing.Stopped:
			// The landing failed for good (its retries ran out): it stays
			// queued for a person to look at, with the error.
			t.Reason = errText(d.err)
			t.State = landing.Queued
			r.st.Stopping = true
			r.st.Outcome, r.st.Reason = "error", "landing "+t.ID+" failed: "+t.Reason
			return
		}
		r.move(t, d.event)
		return
	}
	r.inFlight--
	r.st.Iterations += d.work.Iterations
	t.Iters += d.work.Iterations
	// The attempt that was told of the landing sent back is over.
	t.Feedback = ""
	switch d.event {
	case landing.Verified:
		t.Head, t.Reason = d.work.Head, ""
		r.move(t, landing.Verified)
		r.queue = append(r.queue, t.ID)
		if t.HeldBy != "" {
			r.move(t, landing.BlockedBy)
			t.Reason, t.HeldBy = t.HeldBy, ""
		}
	case landing.Failed:
		t.Reason = d.work.Reason
		if t.Reason == "" {
			t.Reason = errText(d.err)
		}
		r.move(t, landing.Failed)
	case landing.HostLost:
		t.Host, t.Reason = "", "its host did not take the work in time: "+errText(d.err)
		t.Hosts++
		r.move(t, landing.HostLost)
	case landing.Stopped:
		t.Resume = (t.State == landing.Working || t.State == landing.Cooling) && t.Host != ""
		if d.err != nil && !r.st.Stopping {
			var ae *temporal.ApplicationError
			if errors.As(d.err, &ae) && (ae.Type() == ErrTypeAgentCannotRun || ae.Type() == ErrTypeUsage) {
				// No retry fixes it and no other task would fare
				// better: the run ends for a person to fix it.
				r.st.Stopping = true
				r.st.Outcome, r.st.Reason = "error", ae.Message()
			}
			t.Reason = errText(d.err)
		}
		r.move(t, landing.Stopped)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

// move applies the task machine; an edge the table lacks is a bug in the
// workflow, recorded rather than panicking in a replay.
func (r *run) move(t *Task, ev landing.TaskEvent) {
	to, _, err := landing.Next(t.State, ev)
	if err != nil {
		r.note(fmt.Sprintf("%s: %v", t.ID, err))
		return
	}
	t.State = to
}

func (r *run) note(s string) {
	r.st.Controls = append(r.st.Controls, s)
	if len(r.st.Controls) > 50 {
		r.st.Controls = r.st.Controls[len(r.st.Controls)-50:]
	}
}

// feedback is what the next prompt of t says beyond the task: why its
// last attempt could not land, and the people's hints.
func (r *run) feedback(t *Task) string {
	var parts []string
	if t != nil && t.State == landing.Preparing && t.Reason != "" && t.Attempt > 1 {
		parts = append(parts, verify.SentBack(t.ID, r.st.Target, t.Reason, t.Feedback))
	}
	for _, h := range r.st.Hints {
		parts = append(parts, "A person watching the run says: "+h)
	}
	return strings.Join(parts, "\n\n")
}

// validate refuses a command the run cannot take now, before it is
// accepted: an Update sent to a run fails with this error and changes
// nothing.
func (r *run) validate(cmd Command) error {
	switch cmd.Kind {
	case CmdPause:
		if r.st.Paused {
			return errors.New("the run is already paused")
		}
	case CmdResume:
		if !r.st.Paused {
			return errors.New("the run is not paused")
		}
	case CmdStop:
		if r.st.Stopping {
			return errors.New("the run is already stopping")
		}
	case CmdHint:
		if strings.TrimSpace(cmd.Text) == "" {
			return errors.New("a hint needs text")
		}
	case CmdSkip, CmdBlock, CmdUnblock:
		t := r.task(cmd.Task)
		if t == nil {
			return fmt.Errorf("the run has no task %q", cmd.Task)
		}
		switch cmd.Kind {
		case CmdSkip:
			if t.State != landing.Ready && t.State != landing.SentBack {
				return fmt.Errorf("%s is %s: only a task waiting for a worker can be skipped", t.ID, t.State)
			}
		case CmdBlock:
			if t.State == landing.Working || t.State == landing.Preparing || t.State == landing.Cooling {
				return nil // held until its worker is back
			}
			if _, _, err := landing.Next(t.State, landing.BlockedBy); err != nil {
				return fmt.Errorf("%s is %s: only a task that is waiting, in flight or queued can be blocked", t.ID, t.State)
			}
		case CmdUnblock:
			if _, _, err := landing.Next(t.State, landing.Unblocked); err != nil {
				return fmt.Errorf("%s is %s: only a blocked task or one that needs review can be unblocked", t.ID, t.State)
			}
		}
	default:
		return fmt.Errorf("unknown command %q: use pause, resume, stop, hint, skip, block or unblock", cmd.Kind)
	}
	return nil
}

// control applies a validated command and says what it did.
func (r *run) control(cmd Command) string {
	msg := ""
	switch cmd.Kind {
	case CmdPause:
		r.st.Paused = true
		msg = "paused: no new work starts; attempts in flight finish"
	case CmdResume:
		r.st.Paused = false
		msg = "resumed"
	case CmdStop:
		r.st.Stopping = true
		r.st.Outcome, r.st.Reason = "interrupted", "stopped by "+by(cmd)
		r.stop()
		msg = "stopping: attempts in flight are cancelled and keep their state"
	case CmdHint:
		r.st.Hints = append(r.st.Hints, strings.TrimSpace(cmd.Text))
		msg = "hint added to every next prompt"
	case CmdSkip:
		r.task(cmd.Task).Skipped = true
		msg = cmd.Task + " goes last"
	case CmdBlock:
		t := r.task(cmd.Task)
		reason := "blocked by " + by(cmd)
		if cmd.Text != "" {
			reason += ": " + cmd.Text
		}
		if t.State == landing.Working || t.State == landing.Preparing || t.State == landing.Cooling {
			t.HeldBy = reason
			msg = cmd.Task + " is in flight: blocked when its attempt ends"
			break
		}
		r.move(t, landing.BlockedBy)
		t.Reason = reason
		r.queue = slices.DeleteFunc(r.queue, func(id string) bool { return id == t.ID })
		msg = cmd.Task + " blocked"
	case CmdUnblock:
		t := r.task(cmd.Task)
		r.move(t, landing.Unblocked)
		t.Reason, t.Host = "", ""
		msg = cmd.Task + " unblocked"
	}
	r.note(cmd.Kind + " " + cmd.Task + ": " + msg)
	return msg
}

func by(cmd Command) string {
	if cmd.By != "" {
		return cmd.By
	}
	return "a person"
}

// finished reports whether nothing more can happen: nothing in flight,
// nothing to land, and nothing ready (or the run is stopping, or draining
// for continue-as-new).
func (r *run) finished() bool {
	if r.inFlight > 0 || r.landing {
		return false
	}
	if r.st.Stopping || r.draining {
		return true
	}
	if len(r.queue) > 0 {
		return false
	}
	if r.st.Paused {
		return false // a paused run waits for resume (or stop)
	}
	if !r.st.CooldownUntil.IsZero() {
		return false
	}
	if r.in.MaxIterations > 0 && r.st.Iterations >= r.in.MaxIterations {
		return true
	}
	return r.nextReady() == nil
}

// checkHistory starts draining for continue-as-new when the history grew
// past the limit or Temporal suggests it.
func (r *run) checkHistory(ctx workflow.Context) {
	info := workflow.GetInfo(ctx)
	if info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= r.in.HistoryLimit {
		r.draining = true
	}
}

// end records how the run ended and returns its state.
func (r *run) end(ctx workflow.Context, outcome, reason string) (*RunState, error) {
	if outcome != "" {
		r.st.Outcome, r.st.Reason = outcome, reason
	}
	if r.st.Outcome == "" {
		var left, stuck []string
		for _, t := range r.st.Tasks {
			switch t.State {
			case landing.Landed:
			case landing.Blocked, landing.NeedsReview:
				stuck = append(stuck, t.ID+" "+string(t.State))
				left = append(left, t.ID)
			default:
				left = append(left, t.ID)
			}
		}
		switch {
		case len(left) == 0 && len(r.st.Failing) > 0:
			// Never complete while a check fails on the tip.
			r.st.Outcome, r.st.Reason = "checks_failing", fmt.Sprintf("every task landed, but %s still fail on %s", strings.Join(r.st.Failing, ", "), r.st.Target)
		case len(left) == 0:
			r.st.Outcome, r.st.Reason = "complete", "every task landed"
		case len(stuck) > 0:
			r.st.Outcome, r.st.Reason = "needs_human", fmt.Sprintf("%d left: %s", len(left), strings.Join(stuck, ", "))
		case r.in.MaxIterations > 0 && r.st.Iterations >= r.in.MaxIterations:
			r.st.Outcome, r.st.Reason = "max_iterations", fmt.Sprintf("reached %d iterations with %d tasks left", r.in.MaxIterations, len(left))
		default:
			r.st.Outcome, r.st.Reason = "needs_human", fmt.Sprintf("%d left that no worker can start (their dependencies are not done)", len(left))
		}
	}
	_ = workflow.Await(ctx, func() bool { return r.tidying == 0 })
	actx := workflow.WithActivityOptions(ctx, r.options(r.in.Integration, 5*time.Minute, time.Minute, 3))
	_ = workflow.ExecuteActivity(actx, ActivityFinish, FinishInput{RunID: r.st.RunID, Target: r.st.Target, Complete: r.st.Outcome == "complete"}).Get(ctx, nil)
	_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
	return r.st, nil
}
