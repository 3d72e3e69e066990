package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Call is one role run.
type Call struct {
	Role   string
	Prompt string
	// Name is unique within the session and names the run's log files.
	Name string
	// OnStart receives the agent's process group id once it runs; the
	// runner records it so that a resume after a crash can stop an agent
	// the crash left running.
	OnStart func(pgid int)
	// Token goes into the agent's environment (agent.Invocation.Token);
	// the runner saved it before the call, so that a resume finds every
	// process of the run even when ralph died before OnStart.
	Token string
	// OnUsage receives the tokens and the cost estimate the agent CLI
	// reported for the run, for the session's budget.
	OnUsage func(tokens int64, costUSD float64)
}

// Invoker runs roles. The CLI's invoker runs the agent configured for the
// role; tests pass a fake.
type Invoker interface {
	// Invoke returns the role's final message. An error is a failed run
	// (crash, network, non-zero exit), retried with backoff; a
	// *LimitError is a usage limit; an *agent.EnvError an agent that
	// cannot run at all; ctx's error means interrupted.
	Invoke(ctx context.Context, c Call) (string, error)
	// Agent names the agent that runs role, as its usage limits are
	// recorded in the workspace's shared cooldowns; "" for none.
	Agent(role string) string
}

// LimitError is a role run stopped by a usage limit.
type LimitError struct {
	Agent    string
	ResetsAt time.Time // zero when unknown
	Message  string
}

func (e *LimitError) Error() string {
	if e.ResetsAt.IsZero() {
		return fmt.Sprintf("%s hit a usage limit: %s", e.Agent, e.Message)
	}
	return fmt.Sprintf("%s hit a usage limit until %s: %s", e.Agent, e.ResetsAt.Format(time.RFC3339), e.Message)
}

// BudgetError stops a session that reached a [budget] limit; the session
// is saved and resumes once the budget is raised.
type BudgetError struct{ Why string }

func (e *BudgetError) Error() string {
	return "budget reached: " + e.Why + "; the session is saved: raise [budget] in .ralph/config.toml and resume with ralph run --resume"
}

// Outcomes of Run.
var (
	// ErrWaitingForAnswers stops a session until a person answers the
	// queued questions; resuming continues.
	ErrWaitingForAnswers = errors.New("waiting for answers")
	// ErrFailed is a session that reached Failed.
	ErrFailed = errors.New("session failed")
)

// MachineName is the envelope's machine for every event of a session.
const MachineName = "session"

// Runner drives one session from its folder: it performs the actions
// Next returns, through its ports, and turns each outcome into the next
// event. WS, Dir and Invoker are required; a nil port is the real one.
type Runner struct {
	WS      *workspace.Workspace
	Dir     string // the session folder
	Invoker Invoker
	// Git is the repository (nil: WS.Repo), Checker runs ralph's checks
	// (nil: as processes), Clock tells the time and waits (nil: the
	// system's, with runkit.Wait).
	Git     GitPort
	Checker runkit.CheckPort
	Clock   Clock
	Checks  []check.Check
	Policy  Policy
	// Backoff is the first wait after a failed role run; it doubles up to
	// MaxAgentRetries retries.
	Backoff         time.Duration
	MaxAgentRetries int
	// MaxLimitWait is the longest usage-limit wait sat out in place; a
	// longer one stops the session, to be resumed later.
	MaxLimitWait time.Duration
	// Budget bounds what the session spends across resumes: tokens, the
	// cost estimate and wall time; zero fields are no limit.
	Budget runkit.Budget
	// MaxTasks bounds the tasks of a session (0: DefaultMaxTasks): roles
	// that keep discovering work cannot grow the list without end. Tasks
	// past it are not added, and the session says so.
	MaxTasks int
	// Events receives everything a person is told about the session, as
	// events of machine "session" whose run is the session id; the
	// caller's sinks render them. Nil tells no one.
	Events *report.Emitter
	// Control is the session's hold on the workspace's control folder:
	// between two actions it waits while a pause is in force (ralph pause
	// from any terminal or front end). Nil takes no commands.
	Control *control.Attachment

	prog    Progress
	started time.Time
	spent   int64 // RunMillis when this Run started
	// todo is what the last transition left to do: the actions of Next
	// that run after it is recorded, in order.
	todo []Action
	// observe, when set (by tests), sees every transition made.
	observe func(Edge)
}

// Paths inside a session folder.
func (r *Runner) path(name string) string { return filepath.Join(r.Dir, name) }

// ProgressPath is where a session's progress.md lives.
func ProgressPath(dir string) string     { return filepath.Join(dir, "progress.md") }
func tasksPath(dir string) string        { return filepath.Join(dir, "tasks.md") }
func planPath(dir string) string         { return filepath.Join(dir, "plan.md") }
func requestPath(dir string) string      { return filepath.Join(dir, "request.md") }
func qaPath(dir string) string           { return filepath.Join(dir, "qa.md") }
func reportPath(dir, task string) string { return filepath.Join(dir, "reports", task+".md") }

// TransitionsPath is the session's transition log.
func TransitionsPath(dir string) string { return filepath.Join(dir, "transitions.jsonl") }

// NewID returns a session id in the seed's form, from t.
func NewID(t time.Time) string { return t.UTC().Format("060102-150405") }

// Create makes a new session folder for request and returns its runner's
// starting point. The folder must not exist.
func Create(ws *workspace.Workspace, dir, id, request, baseline string, now time.Time) error {
	if err := os.MkdirAll(filepath.Join(dir, "reports"), 0o755); err != nil {
		return err
	}
	if err := store.WriteFileAtomic(requestPath(dir), []byte(strings.TrimSpace(request)+"\n"), 0o644); err != nil {
		return err
	}
	p := Progress{Title: request, Baseline: baseline, UpdatedAt: now,
		State: OrchestratorState{Current: Initializing, SessionID: id, SessionPath: ws.Rel(dir)}}
	return store.WriteFileAtomic(ProgressPath(dir), p.Render(), 0o644)
}

// Load reads a session's progress.
func Load(dir string) (Progress, error) {
	data, err := os.ReadFile(ProgressPath(dir))
	if err != nil {
		return Progress{}, err
	}
	p, err := ParseProgress(ProgressPath(dir), data)
	p.State.SessionPath = dir
	return p, err
}

// Request returns the session's request.
func Request(dir string) string {
	b, _ := os.ReadFile(requestPath(dir))
	return strings.TrimSpace(string(b))
}

func (r *Runner) now() time.Time { return r.clock().Now() }

// say emits a line a person reads, with data for programs; the event
// names the task the session is on. Without a format, the data words
// the line (report.Render).
func (r *Runner) say(kind report.Kind, data report.Payload, format string, args ...any) {
	s := r.prog.State
	ev := report.Event{Kind: kind, Task: s.CurrentTaskID, Attempt: s.CurrentAttemptNumber, Data: data}
	if format != "" {
		ev.Text = fmt.Sprintf(format, args...) + "\n"
	}
	r.emit(ev)
}

func (r *Runner) emit(ev report.Event) {
	if r.Events != nil {
		r.Events.Emit(ev)
	}
}

// Run drives the session until it is done, failed, waiting for a person or
// stopped. It returns the final progress; the error is nil only when the
// holistic check passed. Every way a run ends is a transition: a run that
// stops before the session ends leaves it Stopped, where the next Run
// resumes it; the error says why, as the caller maps it to an exit code
// (errs.ErrInterrupted, *BudgetError, *LimitError, *agent.EnvError,
// ErrWaitingForAnswers, ErrFailed).
func (r *Runner) Run(ctx context.Context) (Progress, error) {
	r.Policy = r.Policy.WithDefaults()
	// An agent a kill of ralph left running goes first, whatever fails
	// next: it may be writing the very files read below.
	pgid, _, _, _ := r.agentFile().Read()
	stopped, found := r.agentFile().StopRecorded()
	p, err := Load(r.Dir)
	if err != nil {
		return p, err
	}
	r.prog = p
	if err := runkit.RepairEvents(TransitionsPath(r.Dir), p.LastEvent); err != nil {
		return p, err
	}
	r.started, r.spent = r.now(), p.RunMillis
	r.reportLeftoverAgent(pgid, stopped, found)
	// A kill while the start's test files stood in for the executor's
	// left them in place: put the work back before anything reads it.
	if err := r.startFiles().Restore(); err != nil {
		return p, err
	}
	if p.State.Final() {
		if p.State.Done {
			r.summary(ctx)
		}
		return p, r.finalError()
	}
	if p.State.Current != Initializing {
		r.say(report.KindRun, report.Run{Resumed: report.Ptr(true), State: string(p.State.Resumes())}, "")
	}
	switch p.State.Current {
	case Initializing:
		err = r.resolve(ctx, true)
	case Stopped:
		err = r.fire(ctx, Event{Type: Resumed}, "")
	default:
		// A session a crash left in a state resolves to it again.
		err = r.resolve(ctx, false)
	}
	perform := r.workPerformers()
	for err == nil && len(r.todo) > 0 {
		if ctx.Err() != nil && !r.prog.State.Final() {
			err = errs.ErrInterrupted
			break
		}
		if r.Control != nil {
			if r.Control.Boundary(ctx, r.paused, r.resumed) != nil {
				err = errs.ErrInterrupted
				break
			}
		}
		a := r.todo[0]
		r.todo = r.todo[1:]
		if f := perform[a]; f != nil {
			err = f(ctx)
		} else {
			err = fmt.Errorf("session %s: ralph has no performer for the action %s", r.prog.State.SessionID, a)
		}
	}
	if err == nil && !r.prog.State.Final() && r.prog.State.Current != Stopped {
		err = fmt.Errorf("session %s has nothing left to do at %s", r.prog.State.SessionID, r.prog.State.Current)
	}
	if err != nil {
		return r.prog, r.stop(ctx, err)
	}
	return r.prog, r.finalError()
}

// paused and resumed tell a person that the session waits for `ralph
// resume` between two of its steps, and that it goes on.
func (r *Runner) paused(p control.Command) {
	r.say(report.KindWait, report.Wait{Paused: true, By: p.By, ID: p.ID, State: string(r.prog.State.Current)},
		"⏸ paused by %s at %s: `ralph resume` goes on", p.By, p.Time.Local().Format("15:04:05"))
}

func (r *Runner) resumed() {
	r.say(report.KindNote, report.Note{Paused: report.Ptr(false)}, "")
}

// stopErr ends a run of the session by trigger, with detail for the
// transition; err is what the caller gets.
type stopErr struct {
	trigger Trigger
	detail  string
	err     error
}

func (e *stopErr) Error() string { return e.err.Error() }
func (e *stopErr) Unwrap() error { return e.err }

// stopCause is the trigger that ends the run for err, the detail its
// transition records, and the error the caller gets.
func stopCause(ctx context.Context, err error) (Trigger, string, error) {
	var (
		se     *stopErr
		budget *BudgetError
		envErr *agent.EnvError
		limit  *LimitError
	)
	switch {
	case ctx.Err() != nil || errors.Is(err, errs.ErrInterrupted):
		return Interrupted, "", errs.ErrInterrupted
	case errors.As(err, &se):
		return se.trigger, se.detail, se.err
	case errors.As(err, &budget):
		return BudgetExhausted, budget.Why, err
	case errors.As(err, &envErr):
		return AgentCannotRun, envErr.Error(), err
	case errors.As(err, &limit):
		return UsageLimit, limit.Error(), err
	}
	return UnexpectedError, err.Error(), err
}

// stop records that this run of the session ends: the edge from where the
// session is to Stopped, by err's trigger, so that the journal and the
// diagram show it and the next Run resumes there. It returns the error
// for the caller. A session that is not where a run can stop (it never
// resolved, or it is already stopped or ended) records nothing.
func (r *Runner) stop(ctx context.Context, err error) error {
	trig, detail, err := stopCause(ctx, err)
	return r.kernel().Stop(ctx, Event{Type: trig, Reason: detail, Detail: detail}, err)
}

func (r *Runner) finalError() error {
	if r.prog.State.Done {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrFailed, r.prog.State.Reason)
}

// summary is ReturnSummary: the session's success, told.
func (r *Runner) summary(context.Context) error {
	total, _ := r.prog.Counts()
	r.say(report.KindSummary, report.Summary{Complete: report.Ptr(true), Tasks: total}, "")
	return nil
}

// logBlockers is LogBlockers: why the session failed goes to errors.log.
func (r *Runner) logBlockers(context.Context) error {
	s := r.prog.State
	_ = r.WS.LogError(r.now(), fmt.Sprintf("session %s failed: %s", s.SessionID, s.Reason))
	return nil
}

// promptUser is PromptUser. A runner never talks to a person directly:
// Run returns ErrFailed with the reason, and its caller tells the person
// what to fix (the CLI's message names progress.md and the reports).
func (r *Runner) promptUser(context.Context) error { return nil }

// requestMissing is the critical error of a session without a request:
// nothing can plan, do or judge it.
const requestMissing = "request.md is missing or empty: the session has no request to work on"

// resolve is Initializing: a new session plans, a resumed one continues
// where progress.md says.
func (r *Runner) resolve(ctx context.Context, fresh bool) error {
	ev := Event{Type: SessionResolved, NewSession: fresh && len(r.prog.Tasks) == 0}
	if !fresh {
		ev.ResumeAt = r.prog.State.Current
	}
	ev.HasTasks = len(r.prog.Tasks) > 0
	ev.HasUncompletedTasks = r.prog.HasUncompleted()
	if !fresh {
		// Resuming logs Initializing -> the saved state, counters kept.
		r.prog.State.Current = Initializing
	}
	if Request(r.Dir) == "" {
		return r.fire(ctx, Event{Type: CriticalError, Reason: requestMissing}, requestMissing)
	}
	return r.fire(ctx, ev, "")
}

// transition is one step of the machine, for the actions that record it.
type transition = runkit.Step[OrchestratorState, Event, Action]

// stepTask is the task a transition is about: the one left, else the one
// entered.
func stepTask(t *transition) string {
	if t.From.CurrentTaskID != "" {
		return t.From.CurrentTaskID
	}
	return t.To.CurrentTaskID
}

// recordPerformers perform the actions that change ralph's records (see
// Action.Records), while fire makes the transition.
func (r *Runner) recordPerformers() map[Action]func(context.Context, *transition) error {
	return map[Action]func(context.Context, *transition) error{
		CommitTask: r.commitTask,
		MarkInReview: func(_ context.Context, t *transition) error {
			return r.setMark(stepTask(t), tasks.MarkInReview)
		},
		MarkDone: func(_ context.Context, t *transition) error {
			return r.setMark(stepTask(t), tasks.MarkDone)
		},
		MarkRework: func(_ context.Context, t *transition) error {
			if rec := r.prog.Task(stepTask(t)); rec != nil {
				rec.Failures++
				if t.Event.Type == ReviewerCompleted && t.Event.Verdict == role.VerdictFailed {
					rec.Reworks++
				}
			}
			return r.setMark(stepTask(t), tasks.MarkTodo)
		},
		AddTasks: func(_ context.Context, t *transition) error {
			_, err := r.addTasks(t.Event.NewTasks)
			return err
		},
	}
}

// workPerformers perform the other actions, after the transition is
// recorded; each role's performer ends with the event its result makes.
func (r *Runner) workPerformers() map[Action]func(context.Context) error {
	return map[Action]func(context.Context) error{
		InvokePlanner:    r.plan,
		InvokeQuestioner: r.questions,
		SelectTask:       r.selectTask,
		InvokeExecutor:   r.execute,
		InvokeReviewer:   r.review,
		RunGoalCheck:     r.goalCheck,
		ReturnSummary:    r.summary,
		LogBlockers:      r.logBlockers,
		PromptUser:       r.promptUser,
	}
}

// fire applies an event: Next, the actions that change ralph's records,
// then the progress write and the log line, in that order, so that a
// crash after the write resumes past this transition and a crash before
// it repeats it. The actions that run after the transition are left in
// r.todo. A failure before the write leaves the session as it was.
func (r *Runner) fire(ctx context.Context, e Event, detail string) error {
	if !e.Type.Stops() {
		// A stop is recorded even when tasks.md is broken: that may be
		// why the run stops.
		if err := r.syncMarks(); err != nil {
			return err
		}
	}
	e.Detail = detail
	_, err := r.kernel().Take(ctx, e)
	return err
}

// kernel is the runner kernel over the session machine. progress.md
// carries each transition too (LastEvent): a kill before its line in
// transitions.jsonl is repaired from it on resume.
func (r *Runner) kernel() *runkit.Kernel[OrchestratorState, Event, Action] {
	return &runkit.Kernel[OrchestratorState, Event, Action]{
		State: func() OrchestratorState { return r.prog.State },
		Next:  func(s OrchestratorState, e Event) (OrchestratorState, []Action, error) { return Next(s, e, r.Policy) },
		Begin: func(t *transition) func() {
			before := r.prog.clone()
			r.prog.State = t.To
			return func() {
				// The commit's token stays: the commit it names may be made.
				token := r.prog.CommitToken
				r.prog = before
				r.prog.CommitToken = token
			}
		},
		Record: r.recordPerformers(),
		Event:  r.transitionEvent,
		Store: func(ts []*transition, evs []report.Event) error {
			if n := len(ts); n > 0 {
				e := evs[n-1]
				r.prog.LastEvent = &runkit.TransitionEvent{Timestamp: r.now().UTC(), SessionID: ts[n-1].To.SessionID, Transition: runkit.TransitionEntry{
					From: e.From, To: e.To, Trigger: e.Trigger, TaskID: e.Task, AttemptNumber: e.Attempt, Detail: ts[n-1].Event.Detail}}
			}
			return r.save()
		},
		Saved: "session-saved",
		Log:   func(*transition) error { return store.AppendJSONLine(TransitionsPath(r.Dir), r.prog.LastEvent) },
		After: func(t *transition) error {
			r.todo = slices.DeleteFunc(slices.Clone(t.Actions), Action.Records)
			if r.observe != nil {
				r.observe(Edge{From: t.From.Current, To: t.To.Current, Trigger: t.Event.Type, Label: edgeLabel(t.Event, t.To)})
			}
			return nil
		},
		Emitter: r.Events,
	}
}

// transitionEvent is t in the journal's envelope, which reaches the
// caller's sinks: its journal (.ralph/events.jsonl) and the terminal.
func (r *Runner) transitionEvent(t *transition) report.Event {
	task := stepTask(t)
	attempt := t.From.CurrentAttemptNumber
	if attempt == 0 {
		attempt = t.To.CurrentAttemptNumber
	}
	return report.Event{Kind: report.KindTransition, From: string(t.From.Current), To: string(t.To.Current), Trigger: string(t.Event.Type),
		Task: task, Attempt: attempt, Data: report.Transition{Detail: t.Event.Detail}}
}

// save writes progress.md with the time spent so far.
func (r *Runner) save() error {
	return r.saveAt(r.prog.State)
}

// saveAt writes progress.md with the session in state s.
func (r *Runner) saveAt(s OrchestratorState) error {
	now := r.now()
	r.prog.UpdatedAt = now
	if !r.started.IsZero() {
		r.prog.RunMillis = r.spent + now.Sub(r.started).Milliseconds()
	}
	p := r.prog
	p.State = s
	return store.WriteFileAtomic(ProgressPath(r.Dir), p.Render(), 0o644)
}

// budgetExceeded names the [budget] limit the session reached, "" when
// none: what every role run of the session spent, across resumes.
func (r *Runner) budgetExceeded() string {
	return r.Budget.Exceeded(runkit.Spent{Tokens: r.prog.Tokens, CostUSD: r.prog.CostUSD,
		Wall: time.Duration(r.spent)*time.Millisecond + r.now().Sub(r.started)})
}
