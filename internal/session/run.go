package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
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
	Checker CheckPort
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

// DefaultMaxTasks is the default bound on a session's tasks.
const DefaultMaxTasks = 30

func (r *Runner) maxTasks() int {
	if r.MaxTasks > 0 {
		return r.MaxTasks
	}
	return DefaultMaxTasks
}

// capTasks keeps the first room tasks of add and reports the rest as a
// blocker, so that the planner and the goal check see what was left out.
func (r *Runner) capTasks(add []role.NewTask, room int) []role.NewTask {
	if len(add) <= room {
		return add
	}
	room = max(room, 0)
	var dropped []string
	for _, t := range add[room:] {
		dropped = append(dropped, text.OneLine(t.Title))
	}
	msg := fmt.Sprintf("the session holds at most %d tasks ([session] max_tasks); not added: %s", r.maxTasks(), strings.Join(dropped, "; "))
	r.say(report.KindWarning, map[string]any{"dropped": dropped}, "ralph: ⚠ %s", msg)
	_ = r.WS.LogError(r.now(), "session "+r.prog.State.SessionID+": "+msg)
	r.prog.State.Blockers = append(r.prog.State.Blockers, msg)
	return add[:room]
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
// names the task the session is on.
func (r *Runner) say(kind report.Kind, data map[string]any, format string, args ...any) {
	s := r.prog.State
	r.emit(report.Event{Kind: kind, Task: s.CurrentTaskID, Attempt: s.CurrentAttemptNumber,
		Text: fmt.Sprintf(format, args...) + "\n", Data: data})
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
// (loop.ErrInterrupted, *BudgetError, *LimitError, *agent.EnvError,
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
	if err := loop.RepairEvents(TransitionsPath(r.Dir), p.LastEvent); err != nil {
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
		r.say(report.KindRun, map[string]any{"resumed": true, "state": string(p.State.Resumes())},
			"ralph: resuming session %s at %s", p.State.SessionID, p.State.Resumes())
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
			err = loop.ErrInterrupted
			break
		}
		if r.Control != nil {
			if r.Control.Boundary(ctx, r.paused, r.resumed) != nil {
				err = loop.ErrInterrupted
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
	r.say(report.KindWait, map[string]any{"paused": true, "by": p.By, "id": p.ID, "state": string(r.prog.State.Current)},
		"⏸ paused by %s at %s: `ralph resume` goes on", p.By, p.Time.Local().Format("15:04:05"))
}

func (r *Runner) resumed() { r.say(report.KindNote, map[string]any{"paused": false}, "▶ resumed") }

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
		return Interrupted, "", loop.ErrInterrupted
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
	if _, _, illegal := Next(r.prog.State, Event{Type: trig}, r.Policy); illegal != nil {
		return err
	}
	if ferr := r.fire(context.WithoutCancel(ctx), Event{Type: trig, Reason: detail}, detail); ferr != nil {
		return fmt.Errorf("%w (and progress.md could not record the stop: %v)", err, ferr)
	}
	return err
}

func (r *Runner) finalError() error {
	if r.prog.State.Done {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrFailed, r.prog.State.Reason)
}

// summary is ReturnSummary: the session's success, told.
func (r *Runner) summary(context.Context) error {
	s := r.prog.State
	total, _ := r.prog.Counts()
	r.say(report.KindSummary, map[string]any{"complete": true, "tasks": total},
		"✓ session %s complete: %s done, goal check passed", s.SessionID, words.Count(total, "task", "tasks"))
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
type transition struct {
	from, next OrchestratorState
	event      Event
	task       string
}

// recordPerformers perform the actions that change ralph's records (see
// Action.Records), while fire makes the transition.
func (r *Runner) recordPerformers() map[Action]func(context.Context, transition) error {
	return map[Action]func(context.Context, transition) error{
		CommitTask: r.commitTask,
		MarkInReview: func(_ context.Context, t transition) error {
			return r.setMark(t.task, tasks.MarkInReview)
		},
		MarkDone: func(_ context.Context, t transition) error {
			return r.setMark(t.task, tasks.MarkDone)
		},
		MarkRework: func(_ context.Context, t transition) error {
			if rec := r.prog.Task(t.task); rec != nil {
				rec.Failures++
				if t.event.Type == ReviewerCompleted && t.event.Verdict == role.VerdictFailed {
					rec.Reworks++
				}
			}
			return r.setMark(t.task, tasks.MarkTodo)
		},
		AddTasks: func(_ context.Context, t transition) error {
			_, err := r.addTasks(t.event.NewTasks)
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
	from := r.prog.State
	next, acts, err := Next(from, e, r.Policy)
	if err != nil {
		return err
	}
	task := from.CurrentTaskID
	if task == "" {
		task = next.CurrentTaskID
	}
	before := r.prog.clone()
	undo := func(err error) error {
		// The commit's token stays: the commit it names may be made.
		token := r.prog.CommitToken
		r.prog = before
		r.prog.CommitToken = token
		return err
	}
	r.prog.State = next
	records := r.recordPerformers()
	var todo []Action
	for _, a := range acts {
		if !a.Records() {
			todo = append(todo, a)
			continue
		}
		if err := records[a](ctx, transition{from: from, next: next, event: e, task: task}); err != nil {
			return undo(err)
		}
	}
	ev := loop.TransitionEvent{Timestamp: r.now().UTC(), SessionID: next.SessionID, Transition: loop.TransitionEntry{
		From: string(from.Current), To: string(next.Current), Trigger: string(e.Type), TaskID: task,
		AttemptNumber: from.CurrentAttemptNumber, Detail: detail}}
	if ev.Transition.AttemptNumber == 0 {
		ev.Transition.AttemptNumber = next.CurrentAttemptNumber
	}
	// progress.md carries the transition too: a kill before the log line
	// below is repaired from it on resume.
	r.prog.LastEvent = &ev
	if err := r.save(); err != nil {
		return undo(err)
	}
	r.todo = todo
	loop.CrashPoint("session-saved")
	if err := store.AppendJSONLine(TransitionsPath(r.Dir), ev); err != nil {
		return err
	}
	// The same transition, in the journal's envelope, reaches the
	// caller's sinks: its journal (.ralph/events.jsonl) and the terminal.
	line := fmt.Sprintf("session %s: %s → %s (%s", next.SessionID, from.Current, next.Current, e.Type)
	if task != "" {
		line += ", " + task
	}
	if detail != "" {
		line += ": " + text.Clip(detail, 120)
	}
	data := map[string]any{}
	if detail != "" {
		data["detail"] = detail
	}
	r.emit(report.Event{Kind: report.KindTransition, From: ev.Transition.From, To: ev.Transition.To, Trigger: ev.Transition.Trigger,
		Task: task, Attempt: ev.Transition.AttemptNumber, Data: data, Text: line + ")\n"})
	if r.observe != nil {
		r.observe(Edge{From: from.Current, To: next.Current, Trigger: e.Type, Label: edgeLabel(e, next)})
	}
	loop.CrashHook()
	return nil
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

// syncMarks makes tasks.md agree with ralph's records: a mark an agent
// changed is put back (ralph owns the marks), and a task an agent added to
// the file directly is adopted as to do.
func (r *Runner) syncMarks() error {
	data, err := os.ReadFile(tasksPath(r.Dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ts, err := tasks.ParseTasksMD(tasksPath(r.Dir), data)
	if err != nil {
		return fmt.Errorf("%w (an agent may have broken the file: fix it by hand, then ralph run --resume)", err)
	}
	out := data
	for _, t := range ts {
		rec := r.prog.Task(t.ID)
		if rec == nil {
			r.prog.Tasks = append(r.prog.Tasks, TaskRecord{ID: t.ID, Mark: tasks.MarkTodo})
			rec = r.prog.Task(t.ID)
		}
		if t.Mark != rec.Mark {
			r.say(report.KindWarning, map[string]any{"task_id": t.ID, "mark": string(rec.Mark), "agent_mark": string(t.Mark)},
				"ralph: %s is %s in ralph's records; putting back the %s an agent wrote", t.ID, rec.Mark, t.Mark)
			if out, err = tasks.SetTaskMark(tasksPath(r.Dir), out, t.ID, rec.Mark); err != nil {
				return err
			}
		}
	}
	if string(out) == string(data) {
		return nil
	}
	return store.WriteFileAtomic(tasksPath(r.Dir), out, 0o644)
}

func (r *Runner) setMark(id string, m tasks.Mark) error {
	t := r.prog.Task(id)
	if t == nil {
		return nil
	}
	t.Mark = m
	data, err := os.ReadFile(tasksPath(r.Dir))
	if err != nil {
		return err
	}
	out, err := tasks.SetTaskMark(tasksPath(r.Dir), data, id, m)
	if err != nil {
		return err
	}
	return store.WriteFileAtomic(tasksPath(r.Dir), out, 0o644)
}

// addTasks appends discovered tasks to tasks.md and progress.md, skipping
// titles that are already there.
func (r *Runner) addTasks(add []role.NewTask) ([]string, error) {
	if len(add) == 0 {
		return nil, nil
	}
	data, _ := os.ReadFile(tasksPath(r.Dir))
	existing, err := tasks.ParseTasksMD(tasksPath(r.Dir), data)
	if err != nil {
		return nil, err
	}
	var novel []role.NewTask
	for _, nt := range add {
		if !hasTitle(existing, nt.Title) {
			novel = append(novel, nt)
		}
	}
	add = r.capTasks(novel, r.maxTasks()-len(existing))
	var fresh []tasks.SessionTask
	var ids []string
	for _, nt := range add {
		if hasTitle(existing, nt.Title) {
			continue
		}
		t := tasks.SessionTask{ID: tasks.NextTaskID(existing), Title: nt.Title, Mark: tasks.MarkTodo, Criteria: nt.Criteria}
		existing = append(existing, t)
		fresh = append(fresh, t)
		ids = append(ids, t.ID)
		r.prog.Tasks = append(r.prog.Tasks, TaskRecord{ID: t.ID, Mark: tasks.MarkTodo})
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if len(data) == 0 {
		data = tasks.RenderTasksMD(text.OneLine(r.prog.Title), nil)
	}
	r.say(report.KindNote, map[string]any{"added": ids}, "ralph: added %s to %s", strings.Join(ids, ", "), r.WS.Rel(tasksPath(r.Dir)))
	return ids, store.WriteFileAtomic(tasksPath(r.Dir), tasks.AppendTasks(data, fresh), 0o644)
}

func hasTitle(ts []tasks.SessionTask, title string) bool {
	for _, t := range ts {
		if strings.EqualFold(strings.TrimSpace(t.Title), strings.TrimSpace(title)) {
			return true
		}
	}
	return false
}

// sessionTasks reads tasks.md.
func (r *Runner) sessionTasks() ([]tasks.SessionTask, error) {
	data, err := os.ReadFile(tasksPath(r.Dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return tasks.ParseTasksMD(tasksPath(r.Dir), data)
}

// vars are the prompt variables every role gets.
func (r *Runner) vars(resultRole string) map[string]string {
	return map[string]string{
		"REPO_ROOT":     r.WS.Root,
		"SESSION_ID":    r.prog.State.SessionID,
		"SESSION_DIR":   r.WS.Rel(r.Dir),
		"REQUEST":       Request(r.Dir),
		"PLAN_PATH":     r.WS.Rel(planPath(r.Dir)),
		"TASKS_PATH":    r.WS.Rel(tasksPath(r.Dir)),
		"PROGRESS_PATH": r.WS.Rel(ProgressPath(r.Dir)),
		"RESULT_FORMAT": role.ResultFormat(resultRole),
	}
}

// ask renders kind's template, runs the role and parses its result. A
// malformed result is asked for once more; a second malformed one returns
// ok=false with the parse error.
func (r *Runner) ask(ctx context.Context, kind prompt.Kind, roleName string, extra map[string]string) (res role.Result, ok bool, why string, err error) {
	tpl, err := prompt.Load(kind, r.WS.PromptsDir())
	if err != nil {
		return res, false, "", err
	}
	vars := r.vars(roleName)
	for k, v := range extra {
		vars[k] = v
	}
	text, err := tpl.Render(vars)
	if err != nil {
		return res, false, "", err
	}
	final, err := r.invoke(ctx, roleName, text)
	if err != nil {
		return res, false, "", err
	}
	res, perr := role.ParseResult(roleName, final)
	if perr == nil {
		return res, true, "", nil
	}
	r.say(report.KindWarning, map[string]any{"role": roleName, "error": perr.Error()}, "ralph: the %s gave no valid result (%v); asking again", roleName, perr)
	final, err = r.invoke(ctx, roleName, text+"\n\n"+role.ResultReaskPrompt(roleName, perr))
	if err != nil {
		return res, false, "", err
	}
	res, perr = role.ParseResult(roleName, final)
	if perr != nil {
		return res, false, perr.Error(), nil
	}
	return res, true, "", nil
}

// minLimitWait is the shortest wait for a usage limit, and maxLimitWaits
// the most limits one role run sits out in a row.
const (
	minLimitWait  = time.Minute
	maxLimitWaits = 5
)

// invoke runs a role, retrying failed runs with exponential backoff and
// sitting out short usage limits, its own and those the workspace's
// shared cooldowns record for its agent.
func (r *Runner) invoke(ctx context.Context, roleName, text string) (string, error) {
	wait := r.Backoff
	if wait <= 0 {
		wait = 5 * time.Second
	}
	limits := 0
	for try := 0; ; try++ {
		if why := r.budgetExceeded(); why != "" {
			return "", &BudgetError{Why: why}
		}
		if err := r.awaitCooldown(ctx, roleName); err != nil {
			return "", err
		}
		name := fmt.Sprintf("%03d-%s", r.nextRunNumber(), roleName)
		token := agent.NewToken()
		if err := r.agentFile().Save(0, token); err != nil {
			return "", err
		}
		final, err := r.Invoker.Invoke(ctx, Call{Role: roleName, Prompt: redact.Default().Redact(text), Name: name, Token: token,
			OnStart: func(pgid int) { _ = r.agentFile().Save(pgid, token) }, OnUsage: r.addUsage})
		r.agentFile().Clear()
		if err == nil {
			return final, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		var envErr *agent.EnvError
		if errors.As(err, &envErr) {
			// The agent cannot run at all: asking again cannot help,
			// and the task must not pay for it.
			return "", fmt.Errorf("%w; the session is saved: resume it with ralph run --resume", err)
		}
		var le *LimitError
		if errors.As(err, &le) {
			if !le.ResetsAt.IsZero() {
				// The limit is the account's: every run of the workspace
				// leaves the agent alone until it resets.
				_ = r.cooldowns().Set(le.Agent, le.ResetsAt, le.Message)
			}
			if le.ResetsAt.IsZero() || le.ResetsAt.Sub(r.now()) > r.MaxLimitWait {
				return "", fmt.Errorf("%w; the session is saved: resume it with ralph run --resume once the limit resets", err)
			}
			// A reset time already past (a stale message, a skewed clock)
			// still waits a little, and an agent that keeps reporting
			// limits stops the session rather than being asked forever.
			limits++
			if limits > maxLimitWaits {
				return "", fmt.Errorf("%w (%d usage limits in a row); the session is saved: resume it with ralph run --resume later", err, limits-1)
			}
			d := max(le.ResetsAt.Sub(r.now()), minLimitWait)
			r.say(report.KindLimit, map[string]any{"role": roleName, "agent": le.Agent, "resets_at": le.ResetsAt.UTC(), "wait_seconds": d.Seconds()},
				"ralph: %v; waiting %s", err, d.Round(time.Second))
			if err := r.wait(ctx, d, "usage limit of "+le.Agent); err != nil {
				return "", err
			}
			continue
		}
		if try >= r.MaxAgentRetries {
			return "", fmt.Errorf("the %s failed %s, last: %w; the session is saved: resume it with ralph run --resume", roleName, words.Count(try+1, "time", "times"), err)
		}
		r.say(report.KindWarning, map[string]any{"role": roleName, "error": err.Error(), "retry": try + 1, "max_retries": r.MaxAgentRetries},
			"ralph: the %s run failed (%v); retrying in %s (%d/%d)", roleName, err, wait, try+1, r.MaxAgentRetries)
		if err := r.wait(ctx, wait, "retry of the "+roleName); err != nil {
			return "", err
		}
		wait *= 2
	}
}

func (r *Runner) cooldowns() *runkit.Cooldowns { return runkit.OpenCooldowns(r.WS.Dir()) }

// awaitCooldown is the shared cooldown of the role's agent, before it is
// asked: a limit it hit in another run (the loop's, another session's)
// resting until within MaxLimitWait is waited out; a longer one stops the
// session as the agent's own long limit does.
func (r *Runner) awaitCooldown(ctx context.Context, roleName string) error {
	name := r.Invoker.Agent(roleName)
	if name == "" {
		return nil
	}
	rests, err := r.cooldowns().All(r.now())
	if err != nil {
		return err
	}
	rest, ok := rests[name]
	if !ok {
		return nil
	}
	le := &LimitError{Agent: name, ResetsAt: rest.Until, Message: text.OrNone(rest.Why, "recorded in "+r.WS.Rel(r.cooldowns().Path()))}
	left := rest.Until.Sub(r.now())
	if left > r.MaxLimitWait {
		return fmt.Errorf("%w; the session is saved: resume it with ralph run --resume once the limit resets", le)
	}
	r.say(report.KindLimit, map[string]any{"role": roleName, "agent": name, "resets_at": rest.Until.UTC(), "wait_seconds": left.Seconds()},
		"ralph: %v; waiting %s", le, left.Round(time.Second))
	return r.wait(ctx, left, "usage limit of "+name)
}

// wait waits d through the clock. The line that starts a wait says how
// long it is; a long one then shows, as wait events, that it is alive.
func (r *Runner) wait(ctx context.Context, d time.Duration, what string) error {
	until, first := r.now().Add(d), true
	return r.clock().Wait(ctx, d, func(left time.Duration) {
		if first {
			first = false
			return
		}
		r.say(report.KindWait, map[string]any{"waiting_for": what, "left_seconds": left.Round(time.Second).Seconds()},
			"  … %s: %s left (until %s)", what, left.Round(time.Second), until.Local().Format("15:04:05"))
	})
}

// agentPGIDFile holds the process group of the role run in progress.
const agentPGIDFile = "agent.pgid"

// agentFile records the role run in progress: its token before the agent
// starts, its process group once it runs. A crash at any instant after
// that leaves what finds the agent.
func (r *Runner) agentFile() runkit.AgentFile { return runkit.AgentFile(r.path(agentPGIDFile)) }

func (r *Runner) addUsage(tokens int64, cost float64) {
	r.prog.Tokens += tokens
	r.prog.CostUSD += cost
}

// reportLeftoverAgent says what Run stopped first: a role run still
// recorded (pgid, found) was cut short by a crash of ralph, which does not
// stop the agent; one still working in the repository would race the
// resumed session, so Run stopped it (st), and the cut-short run is noted
// in the task's report.
func (r *Runner) reportLeftoverAgent(pgid int, st proc.Stopped, found bool) {
	if !found {
		return
	}
	if st.Any() {
		g := pgid
		if len(st.Groups) > 0 {
			g = st.Groups[0]
		}
		r.say(report.KindNote, map[string]any{"pgid": g}, "ralph: stopped the agent the killed session left running (process group %d)", g)
	}
	for _, p := range st.Escaped {
		r.say(report.KindNote, map[string]any{"process": p.String()}, "ralph: stopped %s, which had left the agent's process group", p)
	}
	if s := r.prog.State; s.CurrentTaskID != "" && (s.Resumes() == Executing || s.Resumes() == Reviewing) {
		who := "Executor"
		if s.Resumes() == Reviewing {
			who = "Review"
		}
		r.report(s.CurrentTaskID, s.CurrentAttemptNumber, who+" (interrupted)", "ralph stopped during this run; it is run again.")
	}
}

// nextRunNumber numbers role runs across resumes by counting the logs
// already in the folder.
func (r *Runner) nextRunNumber() int {
	entries, _ := os.ReadDir(filepath.Join(r.Dir, "logs"))
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".prompt.md") {
			n++
		}
	}
	return n + 1
}

// plan is InvokePlanner: the planner, unless questions wait for a person
// (the questioner, InvokeQuestioner, runs before it when a Q&A cycle is
// pending).
func (r *Runner) plan(ctx context.Context) error {
	s := r.prog.State
	if open, err := r.openQuestions(); err != nil {
		return err
	} else if len(open) > 0 {
		return r.waitForAnswers(open)
	}
	feedback := strings.Join(s.Blockers, "\n")
	if feedback == "" {
		feedback = "(none)"
	}
	res, ok, why, err := r.ask(ctx, prompt.Planner, role.Planner, map[string]string{
		"MODE": s.PlannerMode, "QA": r.qaText(), "FEEDBACK": feedback,
	})
	if err != nil {
		return err
	}
	if !ok {
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.Planner, Reason: why}, "invalid: "+why)
	}
	detail := res.Status
	switch res.Status {
	case role.StatusNeedsQACycle:
		if err := appendQA(r.Dir, fmt.Sprintf("## Q&A cycle %d: the planner asks\n\n%s\n", s.QACycleCount+1, bullets(res.Questions))); err != nil {
			return err
		}
		detail += ": " + strings.Join(res.Questions, " | ")
	case role.StatusCompleted:
		if err := r.adoptPlan(res.Tasks); err != nil {
			return err
		}
		if err := r.ensurePlan(res.Summary); err != nil {
			return err
		}
	case role.StatusBlocked:
		detail += ": " + strings.Join(res.Blockers, "; ")
		r.prog.State.Blockers = append(r.prog.State.Blockers, res.Blockers...)
	}
	return r.fire(ctx, Event{Type: PlannerCompleted, Status: res.Status, HasTasks: len(r.prog.Tasks) > 0,
		HasUncompletedTasks: r.prog.HasUncompleted(), Reason: strings.Join(res.Blockers, "; ")}, detail)
}

// adoptPlan makes the planner's task list the session's: done tasks stay,
// listed tasks are kept or added, to-do tasks the planner dropped go. A
// planner that returned no tasks may have written tasks.md itself.
func (r *Runner) adoptPlan(planned []role.NewTask) error {
	current, err := r.sessionTasks()
	if err != nil {
		return err
	}
	if len(planned) == 0 {
		// The planner wrote tasks.md itself: ralph keeps its own marks.
		for _, t := range current {
			if r.prog.Task(t.ID) == nil {
				r.prog.Tasks = append(r.prog.Tasks, TaskRecord{ID: t.ID, Mark: tasks.MarkTodo})
			}
		}
		return r.rewriteTasks(current)
	}
	var next []tasks.SessionTask
	for _, t := range current {
		rec := r.prog.Task(t.ID)
		if rec != nil && rec.Mark == tasks.MarkDone {
			next = append(next, t)
		}
	}
	var novel []role.NewTask
	for _, nt := range planned {
		if !hasTitle(next, nt.Title) {
			novel = append(novel, nt)
		}
	}
	planned = r.capTasks(novel, r.maxTasks()-len(next))
	for _, nt := range planned {
		if hasTitle(next, nt.Title) {
			continue
		}
		id := ""
		for _, t := range current {
			if strings.EqualFold(strings.TrimSpace(t.Title), strings.TrimSpace(nt.Title)) {
				id = t.ID
			}
		}
		if id == "" {
			id = tasks.NextTaskID(append(append([]tasks.SessionTask{}, current...), next...))
		}
		next = append(next, tasks.SessionTask{ID: id, Title: nt.Title, Criteria: nt.Criteria, Mark: tasks.MarkTodo})
	}
	var recs []TaskRecord
	for _, t := range next {
		rec := r.prog.Task(t.ID)
		if rec == nil {
			rec = &TaskRecord{ID: t.ID, Mark: tasks.MarkTodo}
		}
		recs = append(recs, *rec)
	}
	r.prog.Tasks = recs
	return r.rewriteTasks(next)
}

// ensurePlan writes plan.md from the planner's summary and the task list
// when the planner did not write it itself.
func (r *Runner) ensurePlan(summary string) error {
	if _, err := os.Stat(planPath(r.Dir)); err == nil {
		return nil
	}
	ts, err := r.sessionTasks()
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Plan: %s\n\n%s\n\n## Tasks\n\n", text.OneLine(r.prog.Title), text.OrNone(strings.TrimSpace(summary), "(none)"))
	for _, t := range ts {
		fmt.Fprintf(&b, "- %s: %s\n", t.ID, t.Title)
	}
	return store.WriteFileAtomic(planPath(r.Dir), []byte(b.String()), 0o644)
}

// rewriteTasks writes tasks.md with ralph's marks.
func (r *Runner) rewriteTasks(ts []tasks.SessionTask) error {
	for i := range ts {
		if rec := r.prog.Task(ts[i].ID); rec != nil {
			ts[i].Mark = rec.Mark
		}
	}
	return store.WriteFileAtomic(tasksPath(r.Dir), tasks.RenderTasksMD(text.OneLine(r.prog.Title), ts), 0o644)
}

// questions is InvokeQuestioner: the questioner on the planner's open
// questions. Its
// answers go to qa.md; questions only a person can answer are queued.
func (r *Runner) questions(ctx context.Context) error {
	res, ok, why, err := r.ask(ctx, prompt.Questioner, role.Questioner, map[string]string{"QUESTIONS": r.lastQuestions()})
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("\n### The questioner answers\n\n")
	if !ok {
		fmt.Fprintf(&b, "(no valid answer: %s)\n", why)
	}
	for _, a := range res.Answers {
		fmt.Fprintf(&b, "- Q: %s\n  A: %s\n", text.OneLine(a.Question), text.OneLine(a.Answer))
	}
	if len(res.HumanQuestions) > 0 {
		added, err := AddQuestions(r.Dir, role.Questioner, res.HumanQuestions, r.now())
		if err != nil {
			return err
		}
		for _, q := range added {
			fmt.Fprintf(&b, "- Q (for a person, %s): %s\n", q.ID, text.OneLine(q.Text))
		}
	}
	if err := appendQA(r.Dir, b.String()+"\n"); err != nil {
		return err
	}
	r.prog.State.PendingQA = false
	return r.save()
}

func (r *Runner) openQuestions() ([]Question, error) {
	qs, err := LoadQuestions(r.Dir)
	return OpenQuestions(qs), err
}

func (r *Runner) waitForAnswers(open []Question) error {
	var b strings.Builder
	ids := make([]string, 0, len(open))
	fmt.Fprintf(&b, "ralph: session %s waits for a person to answer:\n", r.prog.State.SessionID)
	for _, q := range open {
		fmt.Fprintf(&b, "  %s  %s\n", q.ID, q.Text)
		ids = append(ids, q.ID)
	}
	fmt.Fprintf(&b, "answer with: ralph answer %s \"...\"   then: ralph run --resume\n", open[0].ID)
	r.emit(report.Event{Kind: report.KindWait, Text: b.String(), Data: map[string]any{"questions": ids}})
	return &stopErr{trigger: WaitingForAnswers, detail: strings.Join(ids, ", "), err: ErrWaitingForAnswers}
}

// qaText is everything asked and answered so far, human answers included.
func (r *Runner) qaText() string {
	b, _ := os.ReadFile(qaPath(r.Dir))
	body := strings.TrimSpace(string(b))
	qs, _ := LoadQuestions(r.Dir)
	var answered []string
	for _, q := range qs {
		if !q.Open() {
			answered = append(answered, fmt.Sprintf("- Q (%s): %s\n  A (from a person): %s", q.ID, text.OneLine(q.Text), text.OneLine(q.Answer)))
		}
	}
	if len(answered) > 0 {
		body += "\n\n### Answers from a person\n\n" + strings.Join(answered, "\n")
	}
	if strings.TrimSpace(body) == "" {
		return "(none)"
	}
	return body
}

// lastQuestions is the planner's most recent list of questions in qa.md.
func (r *Runner) lastQuestions() string {
	b, _ := os.ReadFile(qaPath(r.Dir))
	body := string(b)
	if i := strings.LastIndex(body, "## Q&A cycle"); i >= 0 {
		body = body[i:]
		if j := strings.Index(body, "\n### "); j >= 0 {
			body = body[:j]
		}
	}
	return strings.TrimSpace(body)
}

func appendQA(dir, text string) error { return store.AppendFile(qaPath(dir), []byte(text)) }

func bullets(items []string) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "- %s\n", text.OneLine(it))
	}
	return b.String()
}

// selectTask is SelectTask: the first task not done, in the order of
// tasks.md, or none left.
func (r *Runner) selectTask(ctx context.Context) error {
	ts, err := r.sessionTasks()
	if err != nil {
		return err
	}
	for _, t := range ts {
		rec := r.prog.Task(t.ID)
		if rec != nil && rec.Mark != tasks.MarkDone {
			return r.fire(ctx, Event{Type: TaskSelected, TaskID: t.ID, Attempt: rec.Failures + 1}, text.OneLine(t.Title))
		}
	}
	return r.fire(ctx, Event{Type: NoTasksRemaining}, "")
}

// execute is InvokeExecutor: the executor on the current task.
func (r *Runner) execute(ctx context.Context) error {
	s := r.prog.State
	ts, err := r.sessionTasks()
	if err != nil {
		return err
	}
	task, ok := findTask(ts, s.CurrentTaskID)
	if !ok {
		return r.fire(ctx, Event{Type: CriticalError, Reason: "task " + s.CurrentTaskID + " is no longer in tasks.md"}, "")
	}
	head, err := r.git().Head(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	if r.prog.TaskBase == "" {
		// A token left by a commit that failed must not be readable by
		// the next executor, which could copy it.
		r.prog.TaskBase, r.prog.CommitToken = head, ""
		if err := r.save(); err != nil {
			return err
		}
	}
	res, ok, why, err := r.ask(ctx, prompt.Executor, role.Executor, map[string]string{
		"TASK_ID": task.ID, "TASK_TITLE": task.Title, "TASK_CRITERIA": criteriaText(task),
		"ATTEMPT": strconv.Itoa(s.CurrentAttemptNumber), "MAX_ATTEMPTS": strconv.Itoa(r.Policy.MaxTaskAttempts),
		"FEEDBACK": r.feedback(task.ID), "QUALITY_GATES": check.Gates(r.Checks),
	})
	if err != nil {
		return err
	}
	if !ok {
		r.report(task.ID, s.CurrentAttemptNumber, "Executor", "no valid result: "+why)
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.Executor, Reason: why}, "invalid: "+why)
	}
	r.report(task.ID, s.CurrentAttemptNumber, "Executor ("+res.Status+")", res.Summary+blockersText(res.Blockers))
	if res.NewRequirements && res.Status != role.StatusBlocked {
		r.prog.State.Blockers = append(r.prog.State.Blockers, "new requirements found while doing "+task.ID+": "+res.Summary)
		r.prog.TaskBase = ""
		return r.fire(ctx, Event{Type: NewRequirements, NewTasks: res.NewTasks}, "new requirements: "+res.Summary)
	}
	if res.Status == role.StatusBlocked {
		r.prog.TaskBase = ""
	}
	return r.fire(ctx, Event{Type: ExecutorCompleted, Status: res.Status, NewTasks: res.NewTasks,
		Reason: task.ID + ": " + strings.Join(res.Blockers, "; ")}, res.Status+detailSuffix(res.Blockers))
}

func findTask(ts []tasks.SessionTask, id string) (tasks.SessionTask, bool) {
	for _, t := range ts {
		if t.ID == id {
			return t, true
		}
	}
	return tasks.SessionTask{}, false
}

func criteriaText(t tasks.SessionTask) string {
	if len(t.Criteria) == 0 {
		return "(none stated: the title is the criterion)"
	}
	return bullets(t.Criteria)
}

// lastLine is the last line a failed check printed, for a reason that
// stays on one line (the next attempt gets check.Feedback).
func lastLine(res check.Result) string {
	if l := check.LastLines(res.Output, 1); len(l) > 0 {
		return ": " + text.Clip(strings.TrimSpace(l[0]), 200)
	}
	return ""
}

func blockersText(bs []string) string {
	if len(bs) == 0 {
		return ""
	}
	return "\n\nBlockers:\n" + bullets(bs)
}

func detailSuffix(bs []string) string {
	if len(bs) == 0 {
		return ""
	}
	return ": " + strings.Join(bs, "; ")
}

// report appends one section to the task's report: the history of its
// attempts, which the next executor reads as feedback.
func (r *Runner) report(task string, attempt int, who, text string) {
	p := reportPath(r.Dir, task)
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	section := fmt.Sprintf("## Attempt %d: %s\n\n%s\n\n", attempt, who, strings.TrimSpace(text))
	_ = store.AppendFile(p, []byte(section))
}

// feedback is what the previous attempts at a task were told.
func (r *Runner) feedback(task string) string {
	b, err := os.ReadFile(reportPath(r.Dir, task))
	if err != nil || len(b) == 0 {
		return "(first attempt)"
	}
	return "Earlier attempts at this task (" + r.WS.Rel(reportPath(r.Dir, task)) + "):\n\n" + string(b)
}

// review is InvokeReviewer: ralph's checks, then the reviewer. A
// Qualified verdict's transition commits the task (CommitTask).
func (r *Runner) review(ctx context.Context) error {
	s := r.prog.State
	bg := context.WithoutCancel(ctx)
	// A crash after ralph's commit but before progress.md recorded it:
	// the commit carries the token saved just before it was made. The
	// task trailers alone prove nothing: an executor can copy them.
	if _, ok := runkit.Committed(bg, r.git(), r.prog.CommitToken); ok {
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictQualified}, "Qualified")
	}
	ts, err := r.sessionTasks()
	if err != nil {
		return err
	}
	task, ok := findTask(ts, s.CurrentTaskID)
	if !ok {
		return r.fire(ctx, Event{Type: CriticalError, Reason: "task " + s.CurrentTaskID + " is no longer in tasks.md"}, "")
	}
	results, passed := r.checker().RunAll(ctx, r.WS.Root, r.Checks)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	checks := checksText(results)
	if !passed {
		last := results[len(results)-1]
		reason := fmt.Sprintf("ralph's check %q failed (exit %d)%s", last.Check.Name, last.ExitCode, lastLine(last))
		r.report(task.ID, s.CurrentAttemptNumber, "Review (Failed by ralph's checks)", reason+"\n\n"+check.Feedback(last))
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, Reason: reason}, "Failed: "+reason)
	}
	// The checks pass: with the executor's own tests, if it changed them.
	// They must pass with the start's too, or the reviewer would judge a
	// diff whose tests were bent to pass.
	if reason, feedback, err := r.startTestsHold(ctx); err != nil {
		return err
	} else if reason != "" {
		r.report(task.ID, s.CurrentAttemptNumber, "Review (Failed by ralph's checks with the start's tests)", reason+"\n\n"+feedback)
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, Reason: reason}, "Failed: "+reason)
	}
	diff, err := r.git().Diff(bg, r.prog.TaskBase, false, 60_000)
	if err != nil {
		return err
	}
	res, ok, why, err := r.ask(ctx, prompt.SessionReview, role.Reviewer, map[string]string{
		"TASK_ID": task.ID, "TASK_TITLE": task.Title, "TASK_CRITERIA": criteriaText(task),
		"ATTEMPT": strconv.Itoa(s.CurrentAttemptNumber), "DIFF": text.OrNone(diff, "(none)"), "CHECKS": checks,
		"EXECUTOR_SUMMARY": r.lastSection(task.ID),
	})
	if err != nil {
		return err
	}
	if !ok {
		r.report(task.ID, s.CurrentAttemptNumber, "Review", "no valid verdict: "+why)
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.Reviewer, Reason: "reviewer gave no verdict: " + why}, "invalid: "+why)
	}
	r.report(task.ID, s.CurrentAttemptNumber, "Review ("+res.Verdict+")", strings.TrimSpace(res.Summary+"\n\n"+bullets(res.Reasons)))
	if res.Verdict == role.VerdictFailed {
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, NewTasks: res.NewTasks,
			Reason: strings.Join(res.Reasons, "; ")}, "Failed: "+strings.Join(res.Reasons, "; "))
	}
	return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictQualified, NewTasks: res.NewTasks}, "Qualified")
}

// commitTask is CommitTask: ralph's commit of the task's work, made before
// the Qualified transition is recorded. The token saved with the session
// still in Reviewing is in the commit, so that a crash in between is
// recognised on resume and the work is never committed twice. A task that
// changed nothing has no commit.
func (r *Runner) commitTask(ctx context.Context, t transition) error {
	ctx = context.WithoutCancel(ctx)
	hash, err := r.taskCommit(ctx, t)
	if err != nil {
		return err
	}
	if rec := r.prog.Task(t.task); rec != nil {
		rec.Commit = shortHash(hash)
	}
	r.prog.TaskBase = ""
	return nil
}

func (r *Runner) taskCommit(ctx context.Context, t transition) (string, error) {
	if hash, ok := runkit.Committed(ctx, r.git(), r.prog.CommitToken); ok {
		return hash, nil
	}
	snap, err := r.git().Snapshot(ctx)
	if err != nil {
		return "", err
	}
	if snap.Clean() {
		// The executor committed the work itself: its commit is the
		// task's. Nothing at all since the task began: no commit.
		if snap.Head != r.prog.TaskBase {
			return snap.Head, nil
		}
		return "", nil
	}
	ts, err := r.sessionTasks()
	if err != nil {
		return "", err
	}
	task, ok := findTask(ts, t.task)
	if !ok {
		return "", fmt.Errorf("task %s is no longer in %s: ralph cannot name its commit", t.task, r.WS.Rel(tasksPath(r.Dir)))
	}
	msg := runkit.Message{
		Subject: fmt.Sprintf("%s: %s", task.ID, text.Clip(text.OneLine(task.Title), 60)),
		Trailers: []runkit.Trailer{
			{Key: "Ralph-Session", Value: t.from.SessionID},
			{Key: "Ralph-Task", Value: task.ID},
			{Key: "Ralph-Attempt", Value: strconv.Itoa(t.from.CurrentAttemptNumber)},
		},
	}
	return runkit.Commit(ctx, r.git(), msg, func(token string) error {
		r.prog.CommitToken = token
		return r.saveAt(t.from)
	})
}

func (r *Runner) lastSection(task string) string {
	b, _ := os.ReadFile(reportPath(r.Dir, task))
	body := string(b)
	if i := strings.LastIndex(body, "## Attempt"); i >= 0 {
		body = body[i:]
	}
	return text.OrNone(strings.TrimSpace(body), "(none)")
}

func checksText(results []check.Result) string {
	if len(results) == 0 {
		return "(no checks configured)"
	}
	var b strings.Builder
	for _, res := range results {
		mark := "passed"
		if !res.Passed() {
			mark = fmt.Sprintf("FAILED (exit %d)", res.ExitCode)
		}
		fmt.Fprintf(&b, "- %s: %s in %s\n", res.Check.Name, mark, res.Duration.Round(time.Millisecond))
	}
	return b.String()
}

// goalCheck is RunGoalCheck: a holistic pass over the request and the diff
// since the session's baseline.
func (r *Runner) goalCheck(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	stat, err := r.git().Diff(bg, r.prog.Baseline, true, 20_000)
	if err != nil {
		return err
	}
	tb, _ := os.ReadFile(tasksPath(r.Dir))
	res, ok, why, err := r.ask(ctx, prompt.GoalCheck, role.GoalCheck, map[string]string{
		"TASKS": text.OrNone(string(tb), "(none)"), "DIFF_STAT": text.OrNone(stat, "(none)"), "BASELINE": orDash(r.prog.Baseline),
	})
	if err != nil {
		return err
	}
	if !ok {
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.GoalCheck, Reason: why}, "invalid: "+why)
	}
	if res.Status == role.StatusPassed {
		return r.fire(ctx, Event{Type: HolisticCheckPassed}, "passed")
	}
	reason := strings.Join(res.Reasons, "; ")
	r.prog.State.Blockers = append(r.prog.State.Blockers, "goal check: "+reason)
	return r.fire(ctx, Event{Type: HolisticCheckFailed, NewTasks: res.NewTasks, Reason: reason}, "failed: "+reason)
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
