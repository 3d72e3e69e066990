package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/session"
)

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
	var rerr error
	if h.RecordAnswer != nil {
		rerr = h.RecordAnswer(ctx, a)
	} else {
		now := time.Now
		if h.Now != nil {
			now = h.Now
		}
		_, rerr = session.AnswerQuestion(SessionDir(h.RalphDir, a.SessionID), a.QuestionID, a.Text, now())
	}
	step, err := h.snapshot(a.SessionID)
	if err != nil {
		return step, err
	}
	if rerr != nil {
		step.Error = rerr.Error()
	}
	return step, nil
}
