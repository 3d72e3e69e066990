package session

import (
	"fmt"
	"slices"

	"github.com/ralphloop/ralph/internal/role"
)

// switchNext is the session machine as it was before it was a table: a
// switch over the state and the event. It is kept as the reference the
// table is tested against (table_test.go).
func switchNext(s OrchestratorState, e Event, p Policy) (OrchestratorState, []Action, error) {
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
