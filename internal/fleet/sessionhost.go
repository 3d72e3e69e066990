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
)

// SessionHost is one machine's part of the session workflows: the
// activities that run and answer the sessions of the checkout it holds.
// `ralph worker` makes one over its clone.
type SessionHost struct {
	// Name is the host's id: its task queue is HostQueue(shared, Name).
	Name string
	// RalphDir is the checkout's .ralph folder; its sessions are in
	// RalphDir/sessions/<id>.
	RalphDir string
	// Do runs session in.SessionID in this checkout with the session
	// runner, as `ralph run --resume --session ID` does, and returns the
	// runner's error (session.ErrWaitingForAnswers, session.ErrFailed,
	// *session.LimitError, ...); ctx ends it as Ctrl+C does.
	Do func(ctx context.Context, in SessionRunInput) error
	// Record records an answer as `ralph answer` does here (nil:
	// session.AnswerQuestion in the session's folder). Its error is a
	// refusal (already answered, unknown question).
	Record func(ctx context.Context, a SessionAnswer) error
	// Now is the time answers are recorded at (nil: time.Now).
	Now func() time.Time
	// Client, when set, signals the session's workflow each state the
	// session enters while Do works (SessionProgress).
	Client client.Client
	// Progress, when set, is used instead of Client to report a state
	// (tests hand it to the SDK's test environment).
	Progress func(ctx context.Context, p SessionProgress)
	// Poll is how often the run heartbeats and looks at progress.md
	// (0: 1s).
	Poll time.Duration
}

// RegisterSession puts the session workflow on w and, with sh, the
// session activities of this host.
func RegisterSession(w worker.Registry, sh *SessionHost) {
	w.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: SessionWorkflow})
	if sh != nil {
		w.RegisterActivityWithOptions(sh.Run, activity.RegisterOptions{Name: ActivitySessionRun})
		w.RegisterActivityWithOptions(sh.Answer, activity.RegisterOptions{Name: ActivitySessionAnswer})
	}
}

// SessionDir is the folder of session id under the .ralph folder
// ralphDir.
func SessionDir(ralphDir, id string) string { return filepath.Join(ralphDir, "sessions", id) }

// snapshot reads the session as its folder holds it.
func (sh *SessionHost) snapshot(id string) (SessionStep, error) {
	dir := SessionDir(sh.RalphDir, id)
	p, err := session.Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return SessionStep{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("host %s holds no session %s in %s", sh.Name, id, filepath.Dir(dir)), ErrTypeUsage, err)
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

// Run is the activity of a run of the session: the session runner on
// this host until the session waits for answers or ends, heartbeating.
// A worker lost in the middle is found by the heartbeat and the retry
// resumes the session where progress.md says, as `ralph run --resume`
// does after a crash: finished tasks are never repeated.
func (sh *SessionHost) Run(ctx context.Context, in SessionRunInput) (SessionStep, error) {
	if _, err := sh.snapshot(in.SessionID); err != nil {
		return SessionStep{}, err
	}
	poll := sh.Poll
	if poll <= 0 {
		poll = time.Second
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		sh.watch(ctx, in, poll, done)
	}()
	runErr := sh.Do(ctx, in)
	close(done)
	<-watched
	step, err := sh.snapshot(in.SessionID)
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

// watch heartbeats until done and reports each state the session enters.
func (sh *SessionHost) watch(ctx context.Context, in SessionRunInput, poll time.Duration, done <-chan struct{}) {
	dir := SessionDir(sh.RalphDir, in.SessionID)
	watchProgress(ctx, poll, done, "", func() (string, SessionProgress, bool) {
		p, err := session.Load(dir)
		s := p.State
		pr := SessionProgress{Seq: in.Seq, State: s}
		pr.Tasks, pr.TasksDone = p.Counts()
		return fmt.Sprintf("%s/%s/%s/%d", s.Current, s.StoppedIn, s.CurrentTaskID, s.CurrentAttemptNumber), pr, err == nil
	}, sh.Progress, sh.Client, SignalSessionProgress)
}

// Answer is the activity of an accepted answer: it records the answer in
// the session's folder with the code `ralph answer` uses and returns the
// questions left open. A refusal there (the question was answered on the
// host meanwhile) is the step's Error, with the open questions as they
// are, so that the workflow does not wait for an answered question.
func (sh *SessionHost) Answer(ctx context.Context, a SessionAnswer) (SessionStep, error) {
	if _, err := sh.snapshot(a.SessionID); err != nil {
		return SessionStep{}, err
	}
	var rerr error
	if sh.Record != nil {
		rerr = sh.Record(ctx, a)
	} else {
		now := time.Now
		if sh.Now != nil {
			now = sh.Now
		}
		_, rerr = session.AnswerQuestion(SessionDir(sh.RalphDir, a.SessionID), a.QuestionID, a.Text, now())
	}
	step, err := sh.snapshot(a.SessionID)
	if err != nil {
		return step, err
	}
	if rerr != nil {
		step.Error = rerr.Error()
	}
	return step, nil
}
