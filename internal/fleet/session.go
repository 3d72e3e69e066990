package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ralphloop/ralph/internal/session"
)

// How a run of the session on its host ended (SessionStep.Outcome).
const (
	// SessionDone: the goal check passed. SessionFailed: the session
	// reached Failed. Both end the workflow.
	SessionDone   = "done"
	SessionFailed = "failed"
	// SessionWaiting: questions only a person can answer are open; the
	// workflow takes answers and runs the session again once none is left.
	SessionWaiting = "waiting"
	// SessionLimited: a usage limit longer than the runner waits in place;
	// the workflow sleeps until it resets (a durable timer) and goes on.
	SessionLimited = "limited"
	// SessionStopped: a stop a person must fix on the host (the budget, an
	// agent that cannot run); the workflow ends and `ralph run --resume`
	// starts it again.
	SessionStopped = "stopped"
)

// SessionInput starts a session workflow.
type SessionInput struct {
	SessionID string
	Placement
	// Agent is `ralph run --agent`: the agent of every role without
	// [roles.NAME] agent on the host.
	Agent string
	// Title is the request; State the session as the starting command
	// read it; Open the questions it found open (a resumed session that
	// waits for answers waits for them before it runs).
	Title string
	State session.OrchestratorState
	Open  []session.Question
}

// SessionRunInput asks the host to run the session.
type SessionRunInput struct {
	SessionID string
	Agent     string
	// Seq numbers the workflow's runs, so that the progress a host reports
	// is applied to the run it belongs to only.
	Seq int
}

// SessionAnswer is a person's answer to question QuestionID: the answer
// Update's argument, and the answer activity's.
type SessionAnswer struct {
	SessionID  string `json:"session_id,omitempty"`
	QuestionID string `json:"question_id"`
	Text       string `json:"text"`
	By         string `json:"by,omitempty"`
}

// SessionStep is how a run of the session, or an answer, left the
// session on its host: progress.md's state and the open questions.
type SessionStep struct {
	Outcome   string                    `json:"outcome,omitempty"`
	State     session.OrchestratorState `json:"state"`
	Title     string                    `json:"title,omitempty"`
	Open      []session.Question        `json:"open,omitempty"`
	Tasks     int                       `json:"tasks"`
	TasksDone int                       `json:"tasks_done"`
	// Until is when a usage limit resets (SessionLimited).
	Until time.Time `json:"until,omitzero"`
	// Error is why the run stopped, for a person to read.
	Error string `json:"error,omitempty"`
}

// SessionProgress is a state the session entered while a run works on
// its host: the activity signals it, so that the status Query shows the
// state and task the session is at, not the one the run began in.
type SessionProgress struct {
	Seq       int                       `json:"seq"`
	State     session.OrchestratorState `json:"state"`
	Tasks     int                       `json:"tasks"`
	TasksDone int                       `json:"tasks_done"`
}

// SessionStatus is what the session's status Query returns.
type SessionStatus struct {
	SessionID string `json:"session_id"`
	Host      string `json:"host"`
	Title     string `json:"title"`
	// State is where the session is for a person: where a Stopped
	// session resumes.
	State       session.State `json:"state"`
	CurrentTask string        `json:"current_task,omitempty"`
	Attempt     int           `json:"attempt,omitempty"`
	Tasks       int           `json:"tasks"`
	TasksDone   int           `json:"tasks_done"`
	// Working is set while a run of the session works on the host.
	Working bool `json:"working"`
	// WaitsForAnswers is set while the workflow waits for answers to
	// OpenQuestions; UntilLimit while it sleeps out a usage limit.
	WaitsForAnswers bool               `json:"waits_for_answers"`
	OpenQuestions   []session.Question `json:"open_questions"`
	UntilLimit      time.Time          `json:"until_limit,omitzero"`
	Done            bool               `json:"done,omitempty"`
	// Outcome is how the last run ended (SessionDone, ...), Reason why a
	// Failed session failed, LastError why the last run stopped.
	Outcome   string `json:"outcome,omitempty"`
	Reason    string `json:"reason,omitempty"`
	LastError string `json:"last_error,omitempty"`
	Runs      int    `json:"runs"`
	// Log is what the workflow did, oldest first (at most 50 lines).
	Log           []string `json:"log,omitempty"`
	HistoryLength int      `json:"history_length"`
}

// sessionRun is the session workflow's working memory.
type sessionRun struct {
	hostedRun
	in      SessionInput
	st      session.OrchestratorState
	title   string
	open    []session.Question
	tasks   int
	done    int
	working bool
	runs    int
	until   time.Time
	outcome string
	lastErr string
	// answered maps a question answered through the workflow to who
	// answered it; recording to who is answering it now.
	answered  map[string]string
	recording map[string]string
}

// Session is the session workflow: the session of seed 002, its runs
// done by an activity on the queue of the host that holds its folder,
// with the session runner of internal/session, exactly as `ralph run`
// runs it there. A run goes until the session waits for answers or ends.
// While it waits, the workflow takes answers as Updates whose validator
// refuses a question that is not open; each accepted answer is recorded
// on the host with the code `ralph answer` uses, and once no question is
// open the workflow runs the session again. It ends when the session is
// Complete or Failed, or stopped for a reason a person fixes on the host.
func Session(ctx workflow.Context, in SessionInput) (SessionStatus, error) {
	w := &sessionRun{hostedRun: hostedRun{Placement: in.Placement}, in: in, st: in.State, title: in.Title,
		open: slices.Clone(in.Open), answered: map[string]string{}, recording: map[string]string{}}
	if err := serve(ctx, w.status, UpdateAnswer, w.answer, w.validate, SignalSessionProgress, func(p SessionProgress) {
		// Progress of a run that ended already is older than its
		// result: only the running one's is taken.
		if w.working && p.Seq == w.seq {
			w.st, w.tasks, w.done = p.State, p.Tasks, p.TasksDone
		}
	}); err != nil {
		return w.status(0), err
	}
	var runErr error
	for {
		if len(w.open) > 0 {
			if err := workflow.Await(ctx, func() bool { return len(w.open) == 0 && len(w.recording) == 0 }); err != nil {
				return w.status(0), err
			}
			w.note("every question answered: the session goes on")
		}
		if !w.until.IsZero() {
			// At least a minute: a host whose clock runs behind the
			// workflow's sees the limit still in force, and must not be
			// asked again and again at once.
			if err := workflow.Sleep(ctx, max(w.until.Sub(workflow.Now(ctx)), time.Minute)); err != nil {
				return w.status(0), err
			}
			w.until = time.Time{}
		}
		step, err := w.run(ctx)
		if err != nil {
			// Every retry failed: the host's record says where it stopped.
			w.lastErr, runErr = errText(err), err
			w.note("the run failed on " + w.in.Host + ": " + w.lastErr)
			break
		}
		if step.Outcome != SessionWaiting && step.Outcome != SessionLimited {
			break
		}
	}
	if err := handlersFinished(ctx); err != nil {
		return w.status(0), err
	}
	st := w.status(historyLength(ctx))
	if runErr != nil {
		return st, temporal.NewNonRetryableApplicationError(fmt.Sprintf("session %s stopped on host %s: %s", w.in.SessionID, w.in.Host, w.lastErr), ErrTypeUsage, runErr)
	}
	return st, nil
}

// run runs the session on its host and takes what it left.
func (w *sessionRun) run(ctx workflow.Context) (SessionStep, error) {
	w.seq++
	w.runs++
	w.working, w.open = true, nil
	defer func() { w.working = false }()
	// A retry resumes the session where progress.md says.
	ao := w.runOptions(ErrTypeUsage, ErrTypeAgentCannotRun)
	in := SessionRunInput{SessionID: w.in.SessionID, Agent: w.in.Agent, Seq: w.seq}
	var step SessionStep
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ao), ActivitySessionRun, in).Get(ctx, &step); err != nil {
		return step, err
	}
	w.st, w.open, w.tasks, w.done = step.State, step.Open, step.Tasks, step.TasksDone
	if step.Title != "" {
		w.title = step.Title
	}
	w.outcome, w.lastErr = step.Outcome, step.Error
	line := fmt.Sprintf("run %d on %s → %s", w.runs, w.in.Host, w.st.Resumes())
	switch step.Outcome {
	case SessionWaiting:
		line += ", waits for answers to " + questionIDs(step.Open)
		if len(step.Open) == 0 {
			// The runner saw questions that were answered meanwhile (on
			// the host, by `ralph answer` there): nothing to wait for.
			line += " (answered meanwhile)"
		}
	case SessionLimited:
		w.until = step.Until
		line += ", usage limit until " + step.Until.UTC().Format(time.RFC3339)
	case SessionDone:
		line += ", goal check passed"
	case SessionFailed:
		line += ", failed: " + step.State.Reason
	}
	if step.Error != "" && step.Outcome != SessionWaiting {
		line += ": " + step.Error
	}
	w.note(line)
	return step, nil
}

// validate refuses, before it is accepted, an answer the session cannot
// take now: it waits for no answer (a run works on it, or it ended), the
// question is not one it asked, was answered already or is being
// answered, or the answer is empty. The errors say what to do instead.
func (w *sessionRun) validate(a SessionAnswer) error {
	id := strings.TrimSpace(a.QuestionID)
	if strings.TrimSpace(a.Text) == "" {
		return fmt.Errorf("the answer to %s is empty: give the answer text", id)
	}
	if by, ok := w.recording[id]; ok {
		return fmt.Errorf("question %s is being answered by %s right now: that answer stands once recorded", id, orPerson(by))
	}
	if by, ok := w.answered[id]; ok {
		return fmt.Errorf("question %s was already answered by %s: that answer stands; ask a new question if it needs to change", id, orPerson(by))
	}
	if len(w.open) == 0 {
		switch {
		case w.working:
			return fmt.Errorf("session %s waits for no answer: ralph is working on it on host %s (%s); `ralph questions` lists what it asks when it does",
				w.in.SessionID, w.in.Host, w.st.Resumes())
		case w.st.Final():
			return fmt.Errorf("session %s waits for no answer: it has ended (%s)", w.in.SessionID, w.st.Current)
		}
		return fmt.Errorf("session %s waits for no answer (%s)", w.in.SessionID, w.st.Resumes())
	}
	if slices.ContainsFunc(w.open, func(q session.Question) bool { return q.ID == id }) {
		return nil
	}
	return fmt.Errorf("there is no open question %q in session %s: answer one of the open questions, %s", id, w.in.SessionID, questionIDs(w.open))
}

func questionIDs(qs []session.Question) string {
	ids := make([]string, len(qs))
	for i, q := range qs {
		ids[i] = q.ID
	}
	return strings.Join(ids, ", ")
}

// answer is the Update's handler: it records the answer on the host (the
// activity runs `ralph answer`'s code there) and takes the questions the
// host has open after it. The Update completes with the status once the
// answer is recorded; the last one lets the session go on.
func (w *sessionRun) answer(ctx workflow.Context, a SessionAnswer) (SessionStatus, error) {
	id := strings.TrimSpace(a.QuestionID)
	a.QuestionID, a.SessionID = id, w.in.SessionID
	w.recording[id] = a.By
	defer delete(w.recording, id)
	ao := workflow.ActivityOptions{
		TaskQueue:           HostQueue(w.in.Shared, w.in.Host),
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 5, NonRetryableErrorTypes: []string{ErrTypeUsage}},
	}
	var step SessionStep
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ao), ActivitySessionAnswer, a).Get(ctx, &step); err != nil {
		return w.status(0), errors.New(errText(err))
	}
	// The host's queue is the truth: a question answered there meanwhile
	// (the host refused this answer) is no longer open either, and the
	// session must not wait for it.
	w.open = step.Open
	if step.Error != "" {
		return w.status(0), errors.New(step.Error)
	}
	w.answered[id] = a.By
	w.note(fmt.Sprintf("%s answered by %s", id, orPerson(a.By)))
	return w.status(historyLength(ctx)), nil
}

func (w *sessionRun) status(history int) SessionStatus {
	st := SessionStatus{SessionID: w.in.SessionID, Host: w.in.Host, Title: w.title, State: w.st.Resumes(),
		CurrentTask: w.st.CurrentTaskID, Attempt: w.st.CurrentAttemptNumber, Tasks: w.tasks, TasksDone: w.done,
		Working: w.working, OpenQuestions: slices.Clone(w.open), UntilLimit: w.until, Done: w.st.Done,
		Outcome: w.outcome, Reason: w.st.Reason, LastError: w.lastErr, Runs: w.runs, Log: slices.Clone(w.log), HistoryLength: history}
	st.WaitsForAnswers = !w.working && len(w.open) > 0
	if st.OpenQuestions == nil {
		st.OpenQuestions = []session.Question{}
	}
	return st
}

// SendAnswer sends a person's answer to session id as an Update and
// waits up to wait for the host to record it. An answer the session
// cannot take is refused by the validator (*Refused, with its reason).
// recorded is false when the answer was accepted but its host did not
// record it within wait (its worker is down): the workflow records it
// once the host's worker runs.
func SendAnswer(ctx context.Context, c client.Client, id string, a SessionAnswer, wait time.Duration) (st SessionStatus, recorded bool, err error) {
	_, waited, err := sendUpdate(ctx, c, SessionWorkflowID(id), UpdateAnswer, a, ErrNoSessionWorkflow, wait, &st)
	if waited && ctx.Err() == nil {
		return st, false, nil
	}
	return st, err == nil, err
}
