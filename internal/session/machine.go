// Package session is seed 002's orchestrator: a session turns one request
// into a plan, a task list and reviewed commits through four roles, planner,
// questioner, executor and reviewer, each an agent run whose structured
// result ralph parses and acts on.
//
// The package has three parts: a pure machine (Table, read by Next) over
// the seed's six states plus Stopped, where a run that ends before the
// session does leaves it; the session folder (plan.md, tasks.md,
// progress.md, reports, questions, the transition log); and a runner that
// performs the machine's actions through its ports. progress.md is the
// session's truth: it is rewritten atomically at every transition, so a
// stopped or killed session resumes at the same state with the same
// counters and never repeats a finished task.
package session

import (
	"fmt"
	"slices"

	"github.com/ralphloop/ralph/internal/machine"
	"github.com/ralphloop/ralph/internal/role"
)

// State is a state of the orchestrator (seed 002).
type State string

// The states. Complete is not final by itself: it runs the holistic goal
// check, and only a passed check ends the session (Done is set).
const (
	Initializing State = "Initializing"
	Planning     State = "Planning"
	Executing    State = "Executing"
	Reviewing    State = "Reviewing"
	Complete     State = "Complete"
	Failed       State = "Failed"
	// Stopped is ralph's, not the seed's: a run of the session ended
	// before the session did (the budget, a usage limit, an agent that
	// cannot run, an interrupt, an unexpected error, questions for a
	// person). It is not final: StoppedIn remembers where the session
	// was, and `ralph run --resume` takes the resumed edge back there.
	Stopped State = "Stopped"
)

// States lists every state in the seed's order, then ralph's Stopped.
var States = []State{Initializing, Planning, Executing, Reviewing, Complete, Failed, Stopped}

// Trigger names what happened; it is the "trigger" of a transition log line.
type Trigger string

// The triggers, named as in the seed's pseudocode where it names them.
const (
	SessionResolved     Trigger = "session_resolved"
	CriticalError       Trigger = "error"
	PlannerCompleted    Trigger = "planner_completed"
	NewRequirements     Trigger = "new_requirements"
	TaskSelected        Trigger = "task_selected"
	NoTasksRemaining    Trigger = "no_tasks_remaining"
	ExecutorCompleted   Trigger = "executor_completed"
	ReviewerCompleted   Trigger = "reviewer_completed"
	HolisticCheckPassed Trigger = "holistic_check_passed"
	HolisticCheckFailed Trigger = "holistic_check_failed"
	// InvalidResponse is a role whose result stayed malformed after being
	// asked again; it counts as that role's failure.
	InvalidResponse Trigger = "invalid_response"

	// The ways a run of the session ends before the session does; each
	// leads to Stopped from the state the session was in.
	//
	// BudgetExhausted: a [budget] limit was reached before a role run.
	BudgetExhausted Trigger = "budget_exhausted"
	// UsageLimit: a role's agent is at a usage limit that resets later
	// than the session waits in place, or keeps reporting limits.
	UsageLimit Trigger = "usage_limit"
	// AgentCannotRun: a role's agent cannot run at all (not installed,
	// not logged in, bad flags): the environment's failure, no attempt.
	AgentCannotRun Trigger = "agent_cannot_run"
	// Interrupted: the person stopped ralph (Ctrl-C, SIGTERM).
	Interrupted Trigger = "interrupted"
	// UnexpectedError: anything else that stops the run (a role run that
	// failed every retry, git or a file that could not be written). The
	// seed's "error" trigger is a critical error, which fails the session;
	// this one only stops the run.
	UnexpectedError Trigger = "unexpected_error"
	// WaitingForAnswers: the questioner queued questions only a person
	// can answer (ralph answer).
	WaitingForAnswers Trigger = "waiting_for_answers"
	// Resumed leaves Stopped for the state the session stopped in.
	Resumed Trigger = "resumed"
)

// StopTriggers are the triggers that lead to Stopped.
var StopTriggers = []Trigger{BudgetExhausted, UsageLimit, AgentCannotRun, Interrupted, UnexpectedError, WaitingForAnswers}

// Stops reports whether t ends a run of the session in Stopped.
func (t Trigger) Stops() bool {
	for _, s := range StopTriggers {
		if t == s {
			return true
		}
	}
	return false
}

// Event is the input of Next.
type Event struct {
	Type Trigger
	// NewSession (session_resolved) tells a new session from a resumed one.
	NewSession bool
	// ResumeAt is the state progress.md recorded for a resumed session;
	// the session continues there with its counters. Empty means decide
	// from the tasks alone.
	ResumeAt State
	// HasTasks and HasUncompletedTasks describe tasks.md on resume, and
	// after planning.
	HasTasks            bool
	HasUncompletedTasks bool
	// Status is the planner's or executor's status; Verdict the reviewer's.
	Status  string
	Verdict string
	// Role names the role of an invalid_response.
	Role string
	// TaskID and Attempt come with task_selected.
	TaskID  string
	Attempt int
	// NewTasks are tasks a role discovered (reviewer, executor, goal
	// check); they are added to tasks.md and progress.md.
	NewTasks []role.NewTask
	// Reason says why, for blocked, failed and error events.
	Reason string
	// Detail is the transition's wording in the journal; Next never reads
	// it.
	Detail string
}

// OrchestratorState is the seed's state data model plus the counters its
// retry policy needs. It is a value: Next returns a new one.
type OrchestratorState struct {
	Current     State
	SessionID   string
	SessionPath string
	// CurrentTaskID is the task being executed or reviewed; "" between
	// tasks.
	CurrentTaskID string
	// CurrentAttemptNumber is the attempt at the current task, from 1.
	CurrentAttemptNumber int
	Blockers             []string
	QACycleCount         int
	PlanningRetries      int
	// GoalChecks counts the holistic checks that failed.
	GoalChecks int
	// PlannerMode is the mode of the next planner run in Planning.
	PlannerMode string
	// PendingQA is set when the planner asked for a Q&A cycle that has not
	// run yet: the questioner runs before the next planner run.
	PendingQA bool
	// Done is set when the holistic check passed: the session succeeded.
	Done bool
	// Reason says why the session Failed.
	Reason string
	// StoppedIn is the state a Stopped session resumes in.
	StoppedIn State
}

// Final reports whether the session has ended.
func (s OrchestratorState) Final() bool { return s.Done || s.Current == Failed }

// Resumes is the state the session is in for a person: where a Stopped
// session stopped (and resumes), else the current state.
func (s OrchestratorState) Resumes() State {
	if s.Current == Stopped && s.StoppedIn != "" {
		return s.StoppedIn
	}
	return s.Current
}

// Policy is the retry policy (seed 002's RetryPolicy). Zero fields take
// the seed's defaults.
type Policy struct {
	MaxTaskAttempts    int
	MaxQACycles        int
	MaxPlanningRetries int
	MaxGoalChecks      int
}

// The seed's defaults; MaxGoalChecks is ralph's, so that a goal check that
// never passes cannot re-plan forever.
const (
	DefaultMaxTaskAttempts    = 3
	DefaultMaxQACycles        = 3
	DefaultMaxPlanningRetries = 2
	DefaultMaxGoalChecks      = 3
)

// WithDefaults fills zero fields.
func (p Policy) WithDefaults() Policy {
	if p.MaxTaskAttempts <= 0 {
		p.MaxTaskAttempts = DefaultMaxTaskAttempts
	}
	if p.MaxQACycles <= 0 {
		p.MaxQACycles = DefaultMaxQACycles
	}
	if p.MaxPlanningRetries <= 0 {
		p.MaxPlanningRetries = DefaultMaxPlanningRetries
	}
	if p.MaxGoalChecks <= 0 {
		p.MaxGoalChecks = DefaultMaxGoalChecks
	}
	return p
}

// ShouldRetryTask reports whether a task may have attempt number n+1 after
// attempt n failed.
func (p Policy) ShouldRetryTask(attempt int) bool { return attempt < p.MaxTaskAttempts }

// ShouldContinueQA reports whether Q&A cycle number n+1 may run after n.
func (p Policy) ShouldContinueQA(cycles int) bool { return cycles < p.MaxQACycles }

// Action is a side effect the runner performs for a transition. Next
// returns them in the order they are performed. The runner performs the
// changes to ralph's records (Records) while it makes the transition,
// before progress.md records it; the others after, and the last of those
// leads to the next event.
type Action string

// The actions.
const (
	InvokePlanner    Action = "invoke_planner"    // in PlannerMode
	InvokeQuestioner Action = "invoke_questioner" // then the planner in QA_COORDINATE
	SelectTask       Action = "select_task"
	InvokeExecutor   Action = "invoke_executor"
	InvokeReviewer   Action = "invoke_reviewer" // ralph's checks, then the reviewer
	CommitTask       Action = "commit_task"     // ralph's commit of a Qualified task
	MarkInReview     Action = "mark_in_review"  // [ ] -> [P]
	MarkDone         Action = "mark_done"       // [P] -> [x], after ralph's commit
	MarkRework       Action = "mark_rework"     // [P] -> [ ], rework counter +1
	AddTasks         Action = "add_tasks"       // to tasks.md and progress.md
	RunGoalCheck     Action = "run_goal_check"
	ReturnSummary    Action = "return_summary"
	LogBlockers      Action = "log_blockers"
	PromptUser       Action = "prompt_user"
)

// Records reports whether a changes ralph's records of the session (its
// commits, marks and task list). The transition that returns it makes the
// change before progress.md records the transition: a crash in between
// repeats the transition, and the commit it may have made already is
// recognised by its token.
func (a Action) Records() bool {
	switch a {
	case CommitTask, MarkInReview, MarkDone, MarkRework, AddTasks:
		return true
	}
	return false
}

// IllegalError is an event that has no transition from the current state.
type IllegalError struct {
	From  State
	Event Trigger
}

func (e *IllegalError) Error() string {
	return fmt.Sprintf("no transition from %s on %s", e.From, e.Event)
}

// Next is the pure transition function over Table. It never performs a
// side effect; it returns the next state and what the runner must do. An
// event that the current state does not accept is an *IllegalError and
// leaves s unchanged; a session that has ended accepts nothing.
func Next(s OrchestratorState, e Event, p Policy) (OrchestratorState, []Action, error) {
	p = p.WithDefaults()
	if s.Final() {
		return s, nil, &IllegalError{From: s.Current, Event: e.Type}
	}
	row, ok := Table.Next(s.Current, e.Type, func(g machine.Guard) bool { return holds(g, s, e, p) })
	if !ok {
		return s, nil, &IllegalError{From: s.Current, Event: e.Type}
	}
	n := s
	n.Current = row.To
	switch {
	case row.To == Stopped:
		n.StoppedIn = s.Current
	case s.Current == Stopped:
		n.StoppedIn = ""
	}
	if row.With != nil {
		row.With(&n, e)
	}
	return n, slices.Clone(row.Do), nil
}

// resumable reports whether a session saved in st continues there.
func resumable(st State) bool {
	return st == Planning || st == Executing || st == Reviewing || st == Complete
}
