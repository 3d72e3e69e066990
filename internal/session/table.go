package session

import (
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/machine"
	"github.com/ralphloop/ralph/internal/role"
)

// Effect is what a row does to the session's data besides moving it to
// the row's state: counters, the planner's mode, the task in hand, why it
// failed. n has already moved; its other fields are as before the
// transition.
type Effect func(n *OrchestratorState, e Event)

// Row is one transition of the session machine.
type Row = machine.Row[State, Trigger, Action, Effect]

// Table is the session machine, as data. Rows of one state and trigger
// are tried in order, the first whose guard holds is taken; a guard is a
// list of conditions (guards) joined by ", ", all of which must hold. The
// labels are the diagram's (`ralph diagram session`): the trigger, the
// status or verdict that selects the row, and ", limit reached" on a
// retry limit that fails the session.
var Table = machine.Table[State, Trigger, Action, Effect](append([]Row{
	// Setting the session up: a resumed session goes back to the state
	// progress.md recorded, with its role; a new one, or one that never
	// got a plan, plans.
	{From: Initializing, On: SessionResolved, Guard: "resumed in Planning, questions pending", To: Planning, Do: []Action{InvokeQuestioner, InvokePlanner}, Label: "session_resolved (resume)"},
	{From: Initializing, On: SessionResolved, Guard: "resumed in Planning", To: Planning, Do: []Action{InvokePlanner}, Label: "session_resolved (resume)"},
	{From: Initializing, On: SessionResolved, Guard: "resumed in Executing, between tasks", To: Executing, Do: []Action{SelectTask}, Label: "session_resolved (resume)"},
	{From: Initializing, On: SessionResolved, Guard: "resumed in Executing", To: Executing, Do: []Action{InvokeExecutor}, Label: "session_resolved (resume)"},
	{From: Initializing, On: SessionResolved, Guard: "resumed in Reviewing", To: Reviewing, Do: []Action{InvokeReviewer}, Label: "session_resolved (resume)"},
	{From: Initializing, On: SessionResolved, Guard: "resumed in Complete", To: Complete, Do: []Action{RunGoalCheck}, Label: "session_resolved (resume)"},
	{From: Initializing, On: SessionResolved, Guard: "new session", To: Planning, Do: []Action{InvokePlanner}, Label: "session_resolved (new)", With: plannerMode(role.ModeInitialize)},
	{From: Initializing, On: SessionResolved, Guard: "no tasks", To: Planning, Do: []Action{InvokePlanner}, Label: "session_resolved (resume)", With: plannerMode(role.ModeUpdate)},
	{From: Initializing, On: SessionResolved, Guard: "tasks left", To: Executing, Do: []Action{SelectTask}, Label: "session_resolved (resume)"},
	{From: Initializing, On: SessionResolved, To: Complete, Do: []Action{RunGoalCheck}, Label: "session_resolved (resume)"},

	// Planning.
	{From: Planning, On: PlannerCompleted, Guard: "status needs_qa_cycle, Q&A cycles used up", To: Failed, Do: failActions, Label: "planner_completed (needs_qa_cycle), limit reached",
		With: failure(func(n *OrchestratorState, _ Event) string {
			return fmt.Sprintf("the planner still needs answers after %d Q&A cycles", n.QACycleCount)
		})},
	{From: Planning, On: PlannerCompleted, Guard: "status needs_qa_cycle", To: Planning, Do: []Action{InvokeQuestioner, InvokePlanner}, Label: "planner_completed (needs_qa_cycle)",
		With: func(n *OrchestratorState, _ Event) {
			n.QACycleCount++
			n.PendingQA, n.PlannerMode = true, role.ModeQACoordinate
		}},
	{From: Planning, On: PlannerCompleted, Guard: "status completed, nothing left, planning retries used up", To: Failed, Do: failActions, Label: "planner_completed (completed), limit reached",
		With: planningFailure("the planner completed without any task to do")},
	{From: Planning, On: PlannerCompleted, Guard: "status completed, nothing left", To: Planning, Do: []Action{InvokePlanner}, Label: "planner_completed (completed)", With: anotherPlan},
	{From: Planning, On: PlannerCompleted, Guard: "status completed", To: Executing, Do: []Action{SelectTask}, Label: "planner_completed (completed)",
		With: func(n *OrchestratorState, _ Event) { n.PendingQA, n.Blockers = false, nil }},
	{From: Planning, On: PlannerCompleted, Guard: "status blocked", To: Failed, Do: failActions, Label: "planner_completed (blocked)",
		With: failure(func(_ *OrchestratorState, e Event) string { return "planner blocked: " + e.Reason })},
	{From: Planning, On: InvalidResponse, Guard: "planning retries used up", To: Failed, Do: failActions, Label: "invalid_response, limit reached",
		With: func(n *OrchestratorState, e Event) { planningFailure("the "+e.Role+" gave no valid result")(n, e) }},
	{From: Planning, On: InvalidResponse, To: Planning, Do: []Action{InvokePlanner}, Label: "invalid_response", With: anotherPlan},

	// Executing: select a task, run the executor on it, and send it to
	// review, back to the planner or, after its attempts, fail.
	{From: Executing, On: NoTasksRemaining, To: Complete, Do: []Action{RunGoalCheck}, Label: "no_tasks_remaining", With: dropTask},
	{From: Executing, On: TaskSelected, Guard: "a task named, past its attempts", To: Failed, Do: failActions, Label: "task_selected, limit reached",
		With: failure(func(_ *OrchestratorState, e Event) string {
			return fmt.Sprintf("task %s failed %d times", e.TaskID, e.Attempt-1)
		})},
	{From: Executing, On: TaskSelected, Guard: "a task named", To: Executing, Do: []Action{InvokeExecutor}, Label: "task_selected",
		With: func(n *OrchestratorState, e Event) { n.CurrentTaskID, n.CurrentAttemptNumber = e.TaskID, e.Attempt }},
	{From: Executing, On: ExecutorCompleted, Guard: "task in hand, status completed, tasks found", To: Reviewing, Do: []Action{MarkInReview, AddTasks, InvokeReviewer}, Label: "executor_completed (completed)"},
	{From: Executing, On: ExecutorCompleted, Guard: "task in hand, status completed", To: Reviewing, Do: []Action{MarkInReview, InvokeReviewer}, Label: "executor_completed (completed)"},
	// A blocked attempt is spent; the planner adds corrective tasks.
	{From: Executing, On: ExecutorCompleted, Guard: "task in hand, status blocked, tasks found", To: Planning, Do: []Action{MarkRework, AddTasks, InvokePlanner}, Label: "executor_completed (blocked)", With: blockedReplan},
	{From: Executing, On: ExecutorCompleted, Guard: "task in hand, status blocked", To: Planning, Do: []Action{MarkRework, InvokePlanner}, Label: "executor_completed (blocked)", With: blockedReplan},
	{From: Executing, On: InvalidResponse, Guard: "task in hand, attempts used up", To: Failed, Do: reworkFailActions, Label: "invalid_response, limit reached", With: reworkFailure},
	{From: Executing, On: InvalidResponse, Guard: "task in hand", To: Executing, Do: []Action{MarkRework, InvokeExecutor}, Label: "invalid_response", With: nextAttempt},
	{From: Executing, On: NewRequirements, Guard: "tasks found", To: Planning, Do: []Action{MarkRework, AddTasks, InvokePlanner}, Label: "new_requirements", With: backToPlanning},
	{From: Executing, On: NewRequirements, To: Planning, Do: []Action{MarkRework, InvokePlanner}, Label: "new_requirements", With: backToPlanning},

	// Reviewing: a Qualified task is committed and done, a Failed one goes
	// back to the executor with its next attempt; the tasks the reviewer
	// found join the list before either.
	{From: Reviewing, On: InvalidResponse, Guard: "attempts used up", To: Failed, Do: reworkFailActions, Label: "invalid_response, limit reached", With: reworkFailure},
	{From: Reviewing, On: InvalidResponse, To: Executing, Do: []Action{MarkRework, InvokeExecutor}, Label: "invalid_response", With: nextAttempt},
	{From: Reviewing, On: ReviewerCompleted, Guard: "verdict Qualified, tasks found", To: Executing, Do: []Action{CommitTask, MarkDone, AddTasks, SelectTask}, Label: "reviewer_completed (Qualified)", With: dropTask},
	{From: Reviewing, On: ReviewerCompleted, Guard: "verdict Qualified", To: Executing, Do: []Action{CommitTask, MarkDone, SelectTask}, Label: "reviewer_completed (Qualified)", With: dropTask},
	{From: Reviewing, On: ReviewerCompleted, Guard: "verdict Failed, attempts used up", To: Failed, Do: reworkFailActions, Label: "reviewer_completed (Failed), limit reached", With: reworkFailure},
	{From: Reviewing, On: ReviewerCompleted, Guard: "verdict Failed, tasks found", To: Executing, Do: []Action{MarkRework, AddTasks, InvokeExecutor}, Label: "reviewer_completed (Failed)", With: nextAttempt},
	{From: Reviewing, On: ReviewerCompleted, Guard: "verdict Failed", To: Executing, Do: []Action{MarkRework, InvokeExecutor}, Label: "reviewer_completed (Failed)", With: nextAttempt},

	// Complete: only a passed goal check ends the session; a failed one
	// plans again, until the goal checks are used up.
	{From: Complete, On: HolisticCheckPassed, To: Complete, Do: []Action{ReturnSummary}, Label: "holistic_check_passed, done",
		With: func(n *OrchestratorState, _ Event) { n.Done = true }},
	{From: Complete, On: HolisticCheckFailed, Guard: "goal checks used up", To: Failed, Do: failActions, Label: "holistic_check_failed, limit reached",
		With: func(n *OrchestratorState, e Event) {
			n.GoalChecks++
			n.Reason = fmt.Sprintf("the holistic goal check failed %d times: %s", n.GoalChecks, e.Reason)
		}},
	{From: Complete, On: HolisticCheckFailed, To: Planning, Do: []Action{AddTasks, InvokePlanner}, Label: "holistic_check_failed",
		With: func(n *OrchestratorState, _ Event) { n.GoalChecks++; n.PlannerMode = role.ModeUpdate }},
	{From: Complete, On: InvalidResponse, Guard: "goal checks used up", To: Failed, Do: failActions, Label: "invalid_response, limit reached",
		With: func(n *OrchestratorState, _ Event) { n.GoalChecks++; n.Reason = "the goal check gave no valid result" }},
	{From: Complete, On: InvalidResponse, To: Complete, Do: []Action{RunGoalCheck}, Label: "invalid_response",
		With: func(n *OrchestratorState, _ Event) { n.GoalChecks++ }},

	// Ralph finds a critical error while setting the session up (its
	// request is gone) or at a task (it is gone from tasks.md).
	{From: Initializing, On: CriticalError, To: Failed, Do: failActions, Label: "error", With: criticalError},
	{From: Executing, On: CriticalError, To: Failed, Do: failActions, Label: "error", With: criticalError},
	{From: Reviewing, On: CriticalError, To: Failed, Do: failActions, Label: "error", With: criticalError},

	// Only a resume leaves Stopped, back to where the session was, with
	// the role of that state.
	{From: Stopped, On: Resumed, Guard: "stopped in Planning, questions pending", To: Planning, Do: []Action{InvokeQuestioner, InvokePlanner}, Label: "resumed"},
	{From: Stopped, On: Resumed, Guard: "stopped in Planning", To: Planning, Do: []Action{InvokePlanner}, Label: "resumed"},
	{From: Stopped, On: Resumed, Guard: "stopped in Executing, between tasks", To: Executing, Do: []Action{SelectTask}, Label: "resumed"},
	{From: Stopped, On: Resumed, Guard: "stopped in Executing", To: Executing, Do: []Action{InvokeExecutor}, Label: "resumed"},
	{From: Stopped, On: Resumed, Guard: "stopped in Reviewing", To: Reviewing, Do: []Action{InvokeReviewer}, Label: "resumed"},
	{From: Stopped, On: Resumed, Guard: "stopped in Complete", To: Complete, Do: []Action{RunGoalCheck}, Label: "resumed"},
}, stopRows()...))

// stopRows are the ways a run stops before the session ends: from every
// state where a role runs, with every stop trigger; questions for a person
// come up only while planning.
func stopRows() []Row {
	var rows []Row
	for _, from := range []State{Planning, Executing, Reviewing, Complete} {
		for _, t := range StopTriggers {
			if t == WaitingForAnswers && from != Planning {
				continue
			}
			rows = append(rows, Row{From: from, On: t, To: Stopped, Label: string(t)})
		}
	}
	return rows
}

// guards are the conditions a row's guard is made of. Each reads the
// state before the transition, the event and the retry policy.
var guards = map[string]func(s OrchestratorState, e Event, p Policy) bool{
	"new session":  func(_ OrchestratorState, e Event, _ Policy) bool { return e.NewSession },
	"no tasks":     func(_ OrchestratorState, e Event, _ Policy) bool { return !e.HasTasks },
	"tasks left":   func(_ OrchestratorState, e Event, _ Policy) bool { return e.HasUncompletedTasks },
	"nothing left": func(_ OrchestratorState, e Event, _ Policy) bool { return !e.HasUncompletedTasks },
	"tasks found":  func(_ OrchestratorState, e Event, _ Policy) bool { return len(e.NewTasks) > 0 },
	"a task named": func(_ OrchestratorState, e Event, _ Policy) bool { return e.TaskID != "" && e.Attempt >= 1 },
	"past its attempts": func(_ OrchestratorState, e Event, p Policy) bool {
		return e.Attempt > p.MaxTaskAttempts
	},
	"status needs_qa_cycle": func(_ OrchestratorState, e Event, _ Policy) bool { return e.Status == role.StatusNeedsQACycle },
	"status completed":      func(_ OrchestratorState, e Event, _ Policy) bool { return e.Status == role.StatusCompleted },
	"status blocked":        func(_ OrchestratorState, e Event, _ Policy) bool { return e.Status == role.StatusBlocked },
	"verdict Qualified":     func(_ OrchestratorState, e Event, _ Policy) bool { return e.Verdict == role.VerdictQualified },
	"verdict Failed":        func(_ OrchestratorState, e Event, _ Policy) bool { return e.Verdict == role.VerdictFailed },
	"questions pending":     func(s OrchestratorState, _ Event, _ Policy) bool { return s.PendingQA },
	"task in hand":          func(s OrchestratorState, _ Event, _ Policy) bool { return s.CurrentTaskID != "" },
	"between tasks":         func(s OrchestratorState, _ Event, _ Policy) bool { return s.CurrentTaskID == "" },
	"Q&A cycles used up":    func(s OrchestratorState, _ Event, p Policy) bool { return !p.ShouldContinueQA(s.QACycleCount) },
	"planning retries used up": func(s OrchestratorState, _ Event, p Policy) bool {
		return s.PlanningRetries >= p.MaxPlanningRetries
	},
	"attempts used up": func(s OrchestratorState, _ Event, p Policy) bool {
		return !p.ShouldRetryTask(s.CurrentAttemptNumber)
	},
	// The check that fails is the one that reaches the limit.
	"goal checks used up": func(s OrchestratorState, _ Event, p Policy) bool { return s.GoalChecks+1 >= p.MaxGoalChecks },
}

func init() {
	// Where a session resumes: from the record progress.md keeps (a new
	// session has none), or from where it stopped.
	for _, st := range []State{Planning, Executing, Reviewing, Complete} {
		guards["resumed in "+string(st)] = func(_ OrchestratorState, e Event, _ Policy) bool { return !e.NewSession && e.ResumeAt == st }
		guards["stopped in "+string(st)] = func(s OrchestratorState, _ Event, _ Policy) bool { return s.StoppedIn == st }
	}
}

// holds reports whether every condition of guard g holds.
func holds(g machine.Guard, s OrchestratorState, e Event, p Policy) bool {
	for _, c := range strings.Split(string(g), ", ") {
		if !guards[c](s, e, p) {
			return false
		}
	}
	return true
}

var (
	failActions       = []Action{LogBlockers, PromptUser}
	reworkFailActions = []Action{MarkRework, LogBlockers, PromptUser}
)

func failure(reason func(n *OrchestratorState, e Event) string) Effect {
	return func(n *OrchestratorState, e Event) { n.Reason = reason(n, e) }
}

func criticalError(n *OrchestratorState, e Event) { n.Reason = e.Reason }

func plannerMode(mode string) Effect {
	return func(n *OrchestratorState, _ Event) { n.PlannerMode = mode }
}

func anotherPlan(n *OrchestratorState, _ Event) { n.PlanningRetries++ }

func planningFailure(reason string) Effect {
	return failure(func(n *OrchestratorState, _ Event) string {
		return fmt.Sprintf("%s (after %d planning retries)", reason, n.PlanningRetries)
	})
}

func dropTask(n *OrchestratorState, _ Event) { n.CurrentTaskID, n.CurrentAttemptNumber = "", 0 }

// backToPlanning goes back to Planning (UPDATE) from Executing. The task
// is released: after planning it is selected again, with its next attempt
// number, if the new plan still has it.
func backToPlanning(n *OrchestratorState, e Event) {
	n.PlannerMode = role.ModeUpdate
	dropTask(n, e)
}

func blockedReplan(n *OrchestratorState, e Event) {
	n.Blockers = append(append([]string{}, n.Blockers...), e.Reason)
	backToPlanning(n, e)
}

// nextAttempt sends the task in hand back to the executor at once with
// its attempt number incremented.
func nextAttempt(n *OrchestratorState, _ Event) { n.CurrentAttemptNumber++ }

func reworkFailure(n *OrchestratorState, e Event) {
	n.Reason = fmt.Sprintf("task %s failed %d times: %s", n.CurrentTaskID, n.CurrentAttemptNumber, e.Reason)
}
