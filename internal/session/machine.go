// Package session is seed 002's orchestrator: a session turns one request
// into a plan, a task list and reviewed commits through four roles, planner,
// questioner, executor and reviewer, each an agent run whose structured
// result ralph parses and acts on.
//
// The package has three parts: a pure machine (Next) over the seed's six
// states plus Stopped, where a run that ends before the session does
// leaves it; the session folder (plan.md, tasks.md, progress.md, reports,
// questions, the transition log); and a runner that performs the machine's
// actions through its ports. progress.md is the session's truth: it is
// rewritten atomically at every transition, so a stopped or killed session
// resumes at the same state with the same counters and never repeats a
// finished task.
package session

import (
	"fmt"
	"slices"

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

// EntryActions is what a session entering or resuming in s does first:
// the role of its state. A resume (after a crash or from Stopped) has no
// other record of it.
func EntryActions(s OrchestratorState) []Action {
	switch s.Current {
	case Planning:
		if s.PendingQA {
			return []Action{InvokeQuestioner, InvokePlanner}
		}
		return []Action{InvokePlanner}
	case Executing:
		if s.CurrentTaskID == "" {
			return []Action{SelectTask}
		}
		return []Action{InvokeExecutor}
	case Reviewing:
		return []Action{InvokeReviewer}
	case Complete:
		if !s.Done {
			return []Action{RunGoalCheck}
		}
	}
	return nil
}

// IllegalError is an event that has no transition from the current state.
type IllegalError struct {
	From  State
	Event Trigger
}

func (e *IllegalError) Error() string {
	return fmt.Sprintf("no transition from %s on %s", e.From, e.Event)
}

// Next is the pure transition function. It never performs a side effect;
// it returns the next state and what the runner must do. An event that the
// current state does not accept is an *IllegalError and leaves s unchanged.
func Next(s OrchestratorState, e Event, p Policy) (OrchestratorState, []Action, error) {
	p = p.WithDefaults()
	illegal := func() (OrchestratorState, []Action, error) {
		return s, nil, &IllegalError{From: s.Current, Event: e.Type}
	}
	if s.Final() {
		return illegal()
	}
	n := s
	switch {
	case s.Current == Stopped:
		// Only a resume leaves Stopped, back to where the session was.
		if e.Type != Resumed || !resumable(s.StoppedIn) {
			return illegal()
		}
		n.Current, n.StoppedIn = s.StoppedIn, ""
		return n, EntryActions(n), nil
	case e.Type.Stops():
		// A run can stop wherever a role runs; questions for a person
		// come up only while planning.
		if !resumable(s.Current) || (e.Type == WaitingForAnswers && s.Current != Planning) {
			return illegal()
		}
		n.Current, n.StoppedIn = Stopped, s.Current
		return n, nil, nil
	case e.Type == CriticalError:
		// Ralph finds a critical error while setting the session up (its
		// request is gone) or at a task (it is gone from tasks.md).
		if s.Current != Initializing && s.Current != Executing && s.Current != Reviewing {
			return illegal()
		}
		return fail(s, e.Reason), []Action{LogBlockers, PromptUser}, nil
	}
	switch s.Current {
	case Initializing:
		if e.Type != SessionResolved {
			return illegal()
		}
		switch {
		case !e.NewSession && resumable(e.ResumeAt):
			n.Current = e.ResumeAt
			return n, EntryActions(n), nil
		case e.NewSession || !e.HasTasks:
			n.Current, n.PlannerMode = Planning, role.ModeInitialize
			if !e.NewSession {
				// A resumed session that never got a plan plans again.
				n.PlannerMode = role.ModeUpdate
			}
			return n, []Action{InvokePlanner}, nil
		case e.HasUncompletedTasks:
			n.Current = Executing
			return n, []Action{SelectTask}, nil
		default:
			n.Current = Complete
			return n, []Action{RunGoalCheck}, nil
		}

	case Planning:
		switch e.Type {
		case PlannerCompleted:
			switch e.Status {
			case role.StatusNeedsQACycle:
				if !p.ShouldContinueQA(s.QACycleCount) {
					return fail(n, fmt.Sprintf("the planner still needs answers after %d Q&A cycles", s.QACycleCount)), []Action{LogBlockers, PromptUser}, nil
				}
				n.QACycleCount++
				n.PendingQA, n.PlannerMode = true, role.ModeQACoordinate
				return n, []Action{InvokeQuestioner, InvokePlanner}, nil
			case role.StatusCompleted:
				if !e.HasUncompletedTasks {
					return planningRetry(n, p, "the planner completed without any task to do")
				}
				n.Current, n.PendingQA, n.Blockers = Executing, false, nil
				return n, []Action{SelectTask}, nil
			case role.StatusBlocked:
				return fail(n, "planner blocked: "+e.Reason), []Action{LogBlockers, PromptUser}, nil
			}
			return illegal()
		case InvalidResponse:
			return planningRetry(n, p, "the "+e.Role+" gave no valid result")
		}
		return illegal()

	case Executing:
		switch e.Type {
		case NoTasksRemaining:
			n.Current, n.CurrentTaskID, n.CurrentAttemptNumber = Complete, "", 0
			return n, []Action{RunGoalCheck}, nil
		case TaskSelected:
			if e.TaskID == "" || e.Attempt < 1 {
				return illegal()
			}
			if e.Attempt > p.MaxTaskAttempts {
				return fail(n, fmt.Sprintf("task %s failed %d times", e.TaskID, e.Attempt-1)), []Action{LogBlockers, PromptUser}, nil
			}
			n.CurrentTaskID, n.CurrentAttemptNumber = e.TaskID, e.Attempt
			return n, []Action{InvokeExecutor}, nil
		case ExecutorCompleted:
			if s.CurrentTaskID == "" {
				return illegal()
			}
			switch e.Status {
			case role.StatusCompleted:
				n.Current = Reviewing
				acts := []Action{MarkInReview}
				if len(e.NewTasks) > 0 {
					acts = append(acts, AddTasks)
				}
				return n, append(acts, InvokeReviewer), nil
			case role.StatusBlocked:
				// The attempt is spent; the planner adds corrective tasks.
				n.Blockers = append(append([]string{}, s.Blockers...), e.Reason)
				return replan(n, e)
			}
			return illegal()
		case InvalidResponse:
			if s.CurrentTaskID == "" {
				return illegal()
			}
			return rework(n, p, e.Reason)
		case NewRequirements:
			return replan(n, e)
		}
		return illegal()

	case Reviewing:
		if e.Type == InvalidResponse {
			return rework(n, p, e.Reason)
		}
		if e.Type != ReviewerCompleted {
			return illegal()
		}
		switch e.Verdict {
		case role.VerdictQualified:
			n.Current, n.CurrentTaskID, n.CurrentAttemptNumber = Executing, "", 0
			acts := []Action{CommitTask, MarkDone}
			if len(e.NewTasks) > 0 {
				acts = append(acts, AddTasks)
			}
			return n, append(acts, SelectTask), nil
		case role.VerdictFailed:
			n, acts, err := rework(n, p, e.Reason)
			if n.Current == Executing && len(e.NewTasks) > 0 {
				// The tasks the reviewer found join the list before the
				// task's next attempt.
				acts = slices.Insert(acts, len(acts)-1, AddTasks)
			}
			return n, acts, err
		}
		return illegal()

	case Complete:
		switch e.Type {
		case HolisticCheckPassed:
			n.Done = true
			return n, []Action{ReturnSummary}, nil
		case HolisticCheckFailed:
			n.GoalChecks++
			if n.GoalChecks >= p.MaxGoalChecks {
				return fail(n, fmt.Sprintf("the holistic goal check failed %d times: %s", n.GoalChecks, e.Reason)), []Action{LogBlockers, PromptUser}, nil
			}
			n.Current, n.PlannerMode = Planning, role.ModeUpdate
			return n, []Action{AddTasks, InvokePlanner}, nil
		case InvalidResponse:
			n.GoalChecks++
			if n.GoalChecks >= p.MaxGoalChecks {
				return fail(n, "the goal check gave no valid result"), []Action{LogBlockers, PromptUser}, nil
			}
			return n, []Action{RunGoalCheck}, nil
		}
		return illegal()
	}
	return illegal()
}

// resumable reports whether a session saved in st continues there.
func resumable(st State) bool {
	return st == Planning || st == Executing || st == Reviewing || st == Complete
}

// rework sends the current task back to [ ] with its attempt number
// incremented, for the executor to try again at once, or fails the
// session when the policy allows no more attempts.
func rework(n OrchestratorState, p Policy, reason string) (OrchestratorState, []Action, error) {
	if !p.ShouldRetryTask(n.CurrentAttemptNumber) {
		task := n.CurrentTaskID
		return fail(n, fmt.Sprintf("task %s failed %d times: %s", task, n.CurrentAttemptNumber, reason)), []Action{MarkRework, LogBlockers, PromptUser}, nil
	}
	n.Current = Executing
	n.CurrentAttemptNumber++
	return n, []Action{MarkRework, InvokeExecutor}, nil
}

// replan goes back to Planning (UPDATE) from Executing. The task is
// released: after planning it is selected again, with its next attempt
// number, if the new plan still has it.
func replan(n OrchestratorState, e Event) (OrchestratorState, []Action, error) {
	n.Current, n.PlannerMode = Planning, role.ModeUpdate
	n.CurrentTaskID, n.CurrentAttemptNumber = "", 0
	acts := []Action{MarkRework}
	if len(e.NewTasks) > 0 {
		acts = append(acts, AddTasks)
	}
	return n, append(acts, InvokePlanner), nil
}

func planningRetry(n OrchestratorState, p Policy, reason string) (OrchestratorState, []Action, error) {
	if n.PlanningRetries >= p.MaxPlanningRetries {
		return fail(n, fmt.Sprintf("%s (after %d planning retries)", reason, n.PlanningRetries)), []Action{LogBlockers, PromptUser}, nil
	}
	n.PlanningRetries++
	return n, []Action{InvokePlanner}, nil
}

func fail(n OrchestratorState, reason string) OrchestratorState {
	n.Current, n.Reason = Failed, reason
	return n
}
