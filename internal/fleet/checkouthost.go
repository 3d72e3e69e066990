package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/thread"
)

// CheckoutHost is one machine's part of the session and thread
// workflows: the activities that work the sessions and threads of the
// checkout it holds. `ralph worker` makes one over its clone.
type CheckoutHost struct {
	// Name is the host's id: its task queue is HostQueue(shared, Name).
	Name string
	// RalphDir is the checkout's .ralph folder: its sessions are in
	// RalphDir/sessions/<id>, its threads in thread.Dir(RalphDir, id).
	RalphDir string
	// RunSession runs session in.SessionID in this checkout with the
	// session runner, as `ralph run --resume --session ID` does, and
	// returns the runner's error (session.ErrWaitingForAnswers,
	// session.ErrFailed, *session.LimitError, ...); ctx ends it as Ctrl+C
	// does.
	RunSession func(ctx context.Context, in SessionRunInput) error
	// RecordAnswer records an answer as `ralph answer` does here. Its
	// error is a refusal (already answered, unknown question).
	RecordAnswer func(ctx context.Context, a SessionAnswer) error
	// RunThread runs the thread command in.Name on thread in.ThreadID in
	// this checkout and the work it leads to, as `ralph thread NAME` does,
	// until the thread waits for a person; ctx ends it as Ctrl+C does. Its
	// error is the command's (the thread may have moved all the same).
	RunThread func(ctx context.Context, in ThreadCommandInput) error
	// Client, when set, signals a run's workflow each state the session
	// or thread enters while the runner works (SessionProgress,
	// ThreadProgress).
	Client client.Client
	// Signal, when set, is used instead of Client to report a state
	// (tests hand it to the SDK's test environment).
	Signal func(ctx context.Context, name string, progress any)
	// Poll is how often a run heartbeats and looks at the state on disk
	// (0: 1s).
	Poll time.Duration
}

// RegisterHosted puts the session and thread workflows on w and, with h,
// the activities of the checkout h holds.
func RegisterHosted(w worker.Registry, h *CheckoutHost) {
	w.RegisterWorkflowWithOptions(Thread, workflow.RegisterOptions{Name: ThreadWorkflow})
	w.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: SessionWorkflow})
	if h != nil {
		w.RegisterActivityWithOptions(h.ThreadCommand, activity.RegisterOptions{Name: ActivityThreadCommand})
		w.RegisterActivityWithOptions(h.LoadThread, activity.RegisterOptions{Name: ActivityThreadLoad})
		w.RegisterActivityWithOptions(h.SessionRun, activity.RegisterOptions{Name: ActivitySessionRun})
		w.RegisterActivityWithOptions(h.Answer, activity.RegisterOptions{Name: ActivitySessionAnswer})
	}
}

// watched runs do while the activity of ctx heartbeats every Poll and,
// each time look reads a state whose key changed from key, reports it as
// signal to the activity's workflow; it returns do's error once the
// watch has stopped. The key is also the heartbeat's detail.
func (h *CheckoutHost) watched(ctx context.Context, signal, key string, look func() (string, any, bool), do func() error) error {
	poll := h.Poll
	if poll <= 0 {
		poll = time.Second
	}
	done := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		tick := time.NewTicker(poll)
		defer tick.Stop()
		info := activity.GetInfo(ctx)
		for {
			activity.RecordHeartbeat(ctx, key)
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			k, p, ok := look()
			if !ok || k == key {
				continue
			}
			key = k
			if h.Signal != nil {
				h.Signal(ctx, signal, p)
			} else if h.Client != nil {
				_ = h.Client.SignalWorkflow(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, signal, p)
			}
		}
	}()
	err := do()
	close(done)
	<-watching
	return err
}

// SessionDir is the folder of session id under the .ralph folder
// ralphDir.
func SessionDir(ralphDir, id string) string { return filepath.Join(ralphDir, "sessions", id) }

// snapshot reads the session as its folder holds it.
func (h *CheckoutHost) snapshot(id string) (SessionStep, error) {
	dir := SessionDir(h.RalphDir, id)
	p, err := session.Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return SessionStep{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("host %s holds no session %s in %s", h.Name, id, filepath.Dir(dir)), ErrTypeUsage, err)
	}
	if err != nil {
		return SessionStep{}, err
	}
	qs, err := session.LoadQuestions(dir)
	if err != nil {
		return SessionStep{}, err
	}
	step := SessionStep{State: p.State, Title: p.Title, Open: session.OpenQuestions(qs)}
	step.Tasks, step.TasksDone = p.Counts()
	return step, nil
}

// SessionRun is the activity of a run of the session: the session runner
// on this host until the session waits for answers or ends, heartbeating
// and reporting each state the session enters. A worker lost in the
// middle is found by the heartbeat and the retry resumes the session
// where progress.md says, as `ralph run --resume` does after a crash:
// finished tasks are never repeated.
func (h *CheckoutHost) SessionRun(ctx context.Context, in SessionRunInput) (SessionStep, error) {
	if _, err := h.snapshot(in.SessionID); err != nil {
		return SessionStep{}, err
	}
	dir := SessionDir(h.RalphDir, in.SessionID)
	runErr := h.watched(ctx, SignalSessionProgress, "", func() (string, any, bool) {
		p, err := session.Load(dir)
		s := p.State
		pr := SessionProgress{Seq: in.Seq, State: s}
		pr.Tasks, pr.TasksDone = p.Counts()
		return fmt.Sprintf("%s/%s/%s/%d", s.Current, s.StoppedIn, s.CurrentTaskID, s.CurrentAttemptNumber), pr, err == nil
	}, func() error { return h.RunSession(ctx, in) })
	step, err := h.snapshot(in.SessionID)
	if err != nil {
		return step, err
	}
	if ctx.Err() != nil {
		// Cancelled, or the worker stops: the runner saved the session
		// as Stopped (interrupted); a retry resumes it.
		return step, ctx.Err()
	}
	var (
		limit  *session.LimitError
		budget *session.BudgetError
		envErr *agent.EnvError
	)
	switch {
	case runErr == nil:
		step.Outcome = SessionDone
	case errors.Is(runErr, session.ErrWaitingForAnswers):
		step.Outcome = SessionWaiting
	case errors.Is(runErr, session.ErrFailed):
		step.Outcome, step.Error = SessionFailed, runErr.Error()
	case errors.As(runErr, &limit) && !limit.ResetsAt.IsZero():
		step.Outcome, step.Until, step.Error = SessionLimited, limit.ResetsAt, runErr.Error()
	case errors.As(runErr, &budget), errors.As(runErr, &envErr), errors.As(runErr, &limit):
		// What a person fixes on the host: the workflow ends, and
		// `ralph run --resume` goes on once it is fixed.
		step.Outcome, step.Error = SessionStopped, runErr.Error()
	default:
		// Anything else (git, a file, another ralph holding the
		// checkout): Temporal retries the run, which resumes the session.
		return step, runErr
	}
	return step, nil
}

// Answer is the activity of an accepted answer: it records the answer in
// the session's folder with the code `ralph answer` uses and returns the
// questions left open. A refusal there (the question was answered on the
// host meanwhile) is the step's Error, with the open questions as they
// are, so that the workflow does not wait for an answered question.
func (h *CheckoutHost) Answer(ctx context.Context, a SessionAnswer) (SessionStep, error) {
	if _, err := h.snapshot(a.SessionID); err != nil {
		return SessionStep{}, err
	}
	rerr := h.RecordAnswer(ctx, a)
	step, err := h.snapshot(a.SessionID)
	if err != nil {
		return step, err
	}
	if rerr != nil {
		step.Error = rerr.Error()
	}
	return step, nil
}

// LoadThread reads the thread as this checkout holds it, once no ralph
// works on it: a command stopped by a pause saves the thread as it lets
// go of the thread's lock.
func (h *CheckoutHost) LoadThread(ctx context.Context, id string) (thread.Thread, error) {
	lock := filepath.Join(thread.Dir(h.RalphDir, id), "lock")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if _, held := store.Held(lock); !held {
			break
		}
		select {
		case <-ctx.Done():
			return thread.Thread{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	t, err := thread.Load(h.RalphDir, id)
	if errors.Is(err, os.ErrNotExist) {
		return t, temporal.NewNonRetryableApplicationError(fmt.Sprintf("host %s holds no thread %s in %s", h.Name, id, h.RalphDir), ErrTypeUsage, err)
	}
	return t, err
}

// ThreadCommand is the activity of a person's command: it runs the
// command with the thread runner, heartbeating and reporting each phase
// the thread enters; a pause or abandon from the workflow cancels it
// through the heartbeat, which stops the loop as Ctrl+C does. A retry
// after the worker was lost finds the thread moved on from the phase the
// command was given in: the command was taken, and the runner's resume
// goes on with the work of the phase it was cut short in.
func (h *CheckoutHost) ThreadCommand(ctx context.Context, in ThreadCommandInput) (ThreadStep, error) {
	t, err := h.LoadThread(ctx, in.ThreadID)
	if err != nil {
		return ThreadStep{}, err
	}
	if activity.GetInfo(ctx).Attempt > 1 && t.Phase.Type != in.From {
		switch t.Phase.Type {
		case thread.PhaseRunning, thread.PhaseVerifying, thread.PhasePreflight, thread.PhasePolishing:
			in.Name, in.Verb = "resume", ""
		default:
			return ThreadStep{Thread: t}, nil
		}
	}
	key := func(t thread.Thread) string { return fmt.Sprintf("%s/%d", t.Phase.Type, t.Phase.Iteration) }
	runErr := h.watched(ctx, SignalThreadProgress, key(t), func() (string, any, bool) {
		t, err := thread.Load(h.RalphDir, in.ThreadID)
		return key(t), ThreadProgress{Seq: in.Seq, Thread: t}, err == nil
	}, func() error { return h.RunThread(ctx, in) })
	settled, err := thread.Load(h.RalphDir, in.ThreadID)
	if err != nil {
		return ThreadStep{}, err
	}
	step := ThreadStep{Thread: settled}
	if ctx.Err() != nil {
		// Cancelled by the workflow: the runner saved the thread as it
		// stopped; the workflow reads it.
		return step, ctx.Err()
	}
	if runErr != nil {
		// The command's own ending (a refused reset, a loop that stopped
		// and paused the thread): the person's to read, not a failure
		// a retry could fix.
		step.Error = runErr.Error()
	}
	return step, nil
}
