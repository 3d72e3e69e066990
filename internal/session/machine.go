// Package session is seed 002's orchestrator: a session turns one request
// into a plan, a task list and reviewed commits through four roles, planner,
// questioner, executor and reviewer, each an agent run whose structured
// result ralph parses and acts on.
//
// The package has three parts: a pure machine (Next) over the seed's six
// states, the session folder (plan.md, tasks.md, progress.md, reports,
// questions, the transition log), and a runner that performs the machine's
// actions. progress.md is the session's truth: it is rewritten atomically at
// every transition, so a killed session resumes at the same state with the
// same counters and never repeats a finished task.
package session

import (
	"fmt"

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
)

// States lists every state in the seed's order.
var States = []State{Initializing, Planning, Executing, Reviewing, Complete, Failed}

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
)

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
	// NewTasks counts tasks a role discovered (reviewer, executor, goal
	// check); they are added to tasks.md and progress.md.
	NewTasks int
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
}

// Final reports whether the session has ended.
func (s OrchestratorState) Final() bool { return s.Done || s.Current == Failed }

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

// Action is a side effect the runner performs for a transition.
type Action string

// The actions.
const (
	InvokePlanner    Action = "invoke_planner"    // in PlannerMode
	InvokeQuestioner Action = "invoke_questioner" // then the planner in QA_COORDINATE
	SelectTask       Action = "select_task"
	InvokeExecutor   Action = "invoke_executor"
	InvokeReviewer   Action = "invoke_reviewer"
	MarkInReview     Action = "mark_in_review" // [ ] -> [P]
	MarkDone         Action = "mark_done"      // [P] -> [x], after ralph's commit
	MarkRework       Action = "mark_rework"    // [P] -> [ ], rework counter +1
	AddTasks         Action = "add_tasks"      // to tasks.md and progress.md
	RunGoalCheck     Action = "run_goal_check"
	ReturnSummary    Action = "return_summary"
	LogBlockers      Action = "log_blockers"
	PromptUser       Action = "prompt_user"
)

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
	if s.Final() {
		return s, nil, &IllegalError{From: s.Current, Event: e.Type}
	}
	if e.Type == CriticalError {
		return fail(s, e.Reason), []Action{LogBlockers, PromptUser}, nil
	}
	illegal := func() (OrchestratorState, []Action, error) {
		return s, nil, &IllegalError{From: s.Current, Event: e.Type}
	}
	n := s
	switch s.Current {
	case Initializing:
		if e.Type != SessionResolved {
			return illegal()
		}
		switch {
		case !e.NewSession && resumable(e.ResumeAt):
			n.Current = e.ResumeAt
			return n, nil, nil
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
		case NewRequirements:
			n.PlannerMode = role.ModeUpdate
			return n, []Action{InvokePlanner}, nil
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
				acts := []Action{MarkInReview, InvokeReviewer}
				if e.NewTasks > 0 {
					acts = append(acts, AddTasks)
				}
				return n, acts, nil
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
		var acts []Action
		switch e.Verdict {
		case role.VerdictQualified:
			n.Current, n.CurrentTaskID, n.CurrentAttemptNumber = Executing, "", 0
			acts = []Action{MarkDone}
		case role.VerdictFailed:
			var err error
			n, acts, err = rework(n, p, e.Reason)
			if err != nil || n.Current == Failed {
				return n, acts, err
			}
		default:
			return illegal()
		}
		if e.NewTasks > 0 {
			acts = append(acts, AddTasks)
		}
		return n, append(acts, SelectTask), nil

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
// incremented, or fails the session when the policy allows no more
// attempts.
func rework(n OrchestratorState, p Policy, reason string) (OrchestratorState, []Action, error) {
	if !p.ShouldRetryTask(n.CurrentAttemptNumber) {
		task := n.CurrentTaskID
		return fail(n, fmt.Sprintf("task %s failed %d times: %s", task, n.CurrentAttemptNumber, reason)), []Action{MarkRework, LogBlockers, PromptUser}, nil
	}
	n.Current = Executing
	n.CurrentAttemptNumber++
	return n, []Action{MarkRework}, nil
}

// replan goes back to Planning (UPDATE) from Executing. The task is
// released: after planning it is selected again, with its next attempt
// number, if the new plan still has it.
func replan(n OrchestratorState, e Event) (OrchestratorState, []Action, error) {
	n.Current, n.PlannerMode = Planning, role.ModeUpdate
	n.CurrentTaskID, n.CurrentAttemptNumber = "", 0
	acts := []Action{MarkRework}
	if e.NewTasks > 0 {
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
