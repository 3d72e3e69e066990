package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ralphloop/ralph/internal/errs"
)

// A session and a thread run on Temporal the same way, written here
// once: a workflow whose work is done by activities on the queue of the
// host that holds the checkout (no other host can do it), with the runner
// `ralph run` or `ralph thread` uses there; a person's input taken as an
// Update whose validator refuses what cannot be taken now; the states the
// runner passes signalled to the workflow, so that its status Query shows
// them. The activities are checkouthost.go's; session.go and thread.go
// keep what is theirs: their state, their validator and how a run ends.

// Names of the session workflow (seed 002 on Temporal) and the thread
// workflow (seed 003), their activities, Updates and Signals. Like the
// build's, they are part of the recorded histories. Both answer the
// status Query, QueryStatus, as the build does.
const (
	SessionWorkflow = "ralph.session"
	ThreadWorkflow  = "ralph.thread"

	// ActivitySessionRun runs the session with the session runner in the
	// checkout that holds it, until it waits for answers or ends;
	// ActivitySessionAnswer records a person's answer there.
	ActivitySessionRun    = "ralph.session.run"
	ActivitySessionAnswer = "ralph.session.answer"
	// ActivityThreadCommand runs one human command on the thread there,
	// and the work it leads to, until the thread waits for a person
	// again; ActivityThreadLoad reads the thread there.
	ActivityThreadCommand = "ralph.thread.command"
	ActivityThreadLoad    = "ralph.thread.load"

	// UpdateAnswer carries a person's answer to a queued question,
	// UpdateCheckpoint a person's command on a thread; the progress
	// Signals the states a session or a thread passes while its host
	// works on it.
	UpdateAnswer          = "answer"
	UpdateCheckpoint      = "checkpoint"
	SignalSessionProgress = "session-progress"
	SignalThreadProgress  = "thread-progress"
)

// SessionWorkflowID and ThreadWorkflowID are the workflow ids of a
// session and a thread: one workflow each, so a second start while it
// runs is refused. The prefixes keep their ids apart from each other's
// and the builds' in a namespace.
func SessionWorkflowID(id string) string { return "ralph-session-" + id }
func ThreadWorkflowID(id string) string  { return "ralph-thread-" + id }

// Errors of the clients of the session and thread workflows: a start
// while the workflow runs, and an Update or a Query when it does not (it
// ended, or never started).
var (
	ErrSessionRunning    = errors.New("the session runs on Temporal already")
	ErrThreadRunning     = errors.New("the thread runs on Temporal already")
	ErrNoSessionWorkflow = errors.New("the session's workflow is not running on Temporal")
	ErrNoThreadWorkflow  = errors.New("the thread's workflow is not running on Temporal")
)

// StartSession starts the session's workflow, refused with
// ErrSessionRunning (a usage error) while it runs.
func StartSession(ctx context.Context, c client.Client, in SessionInput) (client.WorkflowRun, error) {
	id := SessionWorkflowID(in.SessionID)
	return startOnce(ctx, c, id, in.Shared, SessionWorkflow, in, &errs.UsageError{Err: fmt.Errorf(
		"%w: session %s is workflow %s; answer its questions with `ralph answer --session %s ID \"...\"`", ErrSessionRunning, in.SessionID, id, in.SessionID)})
}

// StartThread starts the thread's workflow, refused with
// ErrThreadRunning (a usage error) while it runs.
func StartThread(ctx context.Context, c client.Client, in ThreadInput) (client.WorkflowRun, error) {
	id := ThreadWorkflowID(in.ThreadID)
	return startOnce(ctx, c, id, in.Shared, ThreadWorkflow, in, &errs.UsageError{Err: fmt.Errorf(
		"%w: thread %s is workflow %s; give it commands with `ralph thread approve|pause|abandon|... %s` (see it: ralph thread show %s)",
		ErrThreadRunning, in.ThreadID, id, in.ThreadID, in.ThreadID)})
}

// QuerySession and QueryThread return the status of a session's and a
// thread's workflow.
func QuerySession(ctx context.Context, c client.Client, id string) (SessionStatus, error) {
	return queryWorkflowStatus[SessionStatus](ctx, c, SessionWorkflowID(id), ErrNoSessionWorkflow)
}

func QueryThread(ctx context.Context, c client.Client, id string) (ThreadStatus, error) {
	return queryWorkflowStatus[ThreadStatus](ctx, c, ThreadWorkflowID(id), ErrNoThreadWorkflow)
}

// Placement is where a session's or a thread's work runs: Host holds its
// checkout, so all its work goes to HostQueue(Shared, Host). Heartbeat is
// how long a run there may be silent before Temporal takes its worker for
// dead and retries it (0: 1m).
type Placement struct {
	Host, Shared string
	Heartbeat    time.Duration
}

// hostedRun is the working memory a session's and a thread's workflows
// share: where their work runs, the runs numbered so far, and the log
// the status shows.
type hostedRun struct {
	Placement
	// seq numbers the runs on the host, so that the progress a host
	// reports is applied to the run it belongs to only.
	seq int
	log []string
}

// serve sets a hosted workflow's handlers: its status Query, the Update
// a person's input comes as (validate refuses it before it is accepted)
// and the progress Signal of its host, which take applies.
func serve[S, U, P any](ctx workflow.Context, status func(history int) S, update string, handle func(workflow.Context, U) (S, error),
	validate func(U) error, signal string, take func(P)) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (S, error) { return status(historyLength(ctx)), nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, update, handle, workflow.UpdateHandlerOptions{Validator: validate}); err != nil {
		return err
	}
	progress := workflow.GetSignalChannel(ctx, signal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var p P
			progress.Receive(ctx, &p)
			take(p)
		}
	})
	return nil
}

func historyLength(ctx workflow.Context) int { return workflow.GetInfo(ctx).GetCurrentHistoryLength() }

// handlersFinished waits until every accepted Update has its reply: a
// workflow does so before it ends.
func handlersFinished(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
}

// runOptions are the options of a run on the host. No schedule-to-start
// timeout: no other host can do the work, so it waits for its host's
// worker. A worker lost in a run is found by the heartbeat, and the retry
// resumes where the host's record says (the runner's resume).
func (w *hostedRun) runOptions(nonRetryable ...string) workflow.ActivityOptions {
	hb := w.Heartbeat
	if hb <= 0 {
		hb = time.Minute
	}
	return workflow.ActivityOptions{
		TaskQueue:           HostQueue(w.Shared, w.Host),
		StartToCloseTimeout: 7 * 24 * time.Hour,
		HeartbeatTimeout:    hb,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts: 10, NonRetryableErrorTypes: nonRetryable},
	}
}

// note adds s to the log, which keeps the last 50 lines.
func (w *hostedRun) note(s string) {
	w.log = append(w.log, s)
	if len(w.log) > 50 {
		w.log = w.log[len(w.log)-50:]
	}
}

func orPerson(by string) string {
	if by == "" {
		return "a person"
	}
	return by
}

// Refused is a person's input that a session's or a thread's validator
// refused: nothing changed. It comes as a usage error (errs.UsageError).
type Refused struct{ Reason string }

func (e *Refused) Error() string { return e.Reason }

// sendUpdate sends arg as Update name to workflow id and waits up to wait
// for the result, into v: a rejected Update comes back at once as a
// completed one whose result is the validator's error (a *Refused); an
// accepted one completes when its handler is done. gone is the error when
// the workflow is not running; waited is set when wait passed first.
func sendUpdate(ctx context.Context, c client.Client, id, name string, arg any, gone error, wait time.Duration, v any) (h client.WorkflowUpdateHandle, waited bool, err error) {
	uh, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name,
		Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageAccepted})
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, false, fmt.Errorf("%w: %v", gone, err)
		}
		return nil, false, refusal(err)
	}
	h = patientUpdate{uh}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := h.Get(wctx, v); err != nil {
		return h, wctx.Err() != nil, refusal(err)
	}
	return h, false, nil
}

func refusal(err error) error {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return &errs.UsageError{Err: &Refused{Reason: ae.Message()}}
	}
	return err
}
