package session

import (
	"testing"

	"github.com/ralphloop/ralph/internal/role"
)

// explore calls f with every transition Next makes from a set of states
// and events that reaches every edge (the diagram was once drawn from it),
// and the actions it returns.
func explore(f func(s OrchestratorState, e Event, n OrchestratorState, acts []Action)) {
	exploreWith(Next, f)
}

// exploreWith is explore over the machine next.
func exploreWith(next func(OrchestratorState, Event, Policy) (OrchestratorState, []Action, error), f func(s OrchestratorState, e Event, n OrchestratorState, acts []Action)) {
	p := Policy{}.WithDefaults()
	var starts []OrchestratorState
	for _, st := range States {
		for _, in := range []State{"", Planning, Executing, Reviewing, Complete} {
			if (st == Stopped) != (in != "") {
				continue
			}
			for _, atLimit := range []bool{false, true} {
				for _, pendingQA := range []bool{false, true} {
					s := OrchestratorState{Current: st, StoppedIn: in, CurrentTaskID: "task-1", CurrentAttemptNumber: 1, PendingQA: pendingQA}
					if atLimit {
						s.CurrentAttemptNumber = p.MaxTaskAttempts
						s.QACycleCount = p.MaxQACycles
						s.PlanningRetries = p.MaxPlanningRetries
						s.GoalChecks = p.MaxGoalChecks - 1
					}
					starts = append(starts, s)
				}
			}
		}
	}
	var events []Event
	triggers := []Trigger{SessionResolved, CriticalError, PlannerCompleted, NewRequirements, TaskSelected,
		NoTasksRemaining, ExecutorCompleted, ReviewerCompleted, HolisticCheckPassed, HolisticCheckFailed, InvalidResponse, Resumed}
	for _, tr := range append(triggers, StopTriggers...) {
		for _, status := range []string{"", role.StatusCompleted, role.StatusNeedsQACycle, role.StatusBlocked} {
			for _, verdict := range []string{"", role.VerdictQualified, role.VerdictFailed} {
				for _, tasks := range []int{0, 1, 2} { // none; all done; some left
					for _, fresh := range []bool{false, true} {
						for _, resume := range []State{"", Planning, Executing, Reviewing, Complete} {
							for _, attempt := range []int{1, p.MaxTaskAttempts + 1} {
								for _, found := range [][]role.NewTask{nil, {{Title: "more"}}} {
									events = append(events, Event{Type: tr, Status: status, Verdict: verdict,
										HasTasks: tasks > 0, HasUncompletedTasks: tasks == 2, NewSession: fresh,
										ResumeAt: resume, TaskID: "task-1", Attempt: attempt, NewTasks: found})
								}
							}
						}
					}
				}
			}
		}
	}
	for _, s := range starts {
		for _, e := range events {
			n, acts, err := next(s, e, p)
			if err == nil {
				f(s, e, n, acts)
			}
		}
	}
}

// TestEdgesAreTheOnesTheSwitchReached: the diagram was drawn from the
// edges the switch made in the exploration; the table's edges, from which
// it is drawn now, are the same set.
func TestEdgesAreTheOnesTheSwitchReached(t *testing.T) {
	reached := map[Edge]bool{}
	exploreWith(switchNext, func(s OrchestratorState, e Event, n OrchestratorState, _ []Action) {
		reached[Edge{From: s.Current, To: n.Current, Trigger: e.Type, Label: edgeLabel(e, n)}] = true
	})
	table := map[Edge]bool{}
	for _, e := range Edges() {
		table[e] = true
		if !reached[e] {
			t.Errorf("the table has %s -%s-> %s (%s), which the switch never made", e.From, e.Trigger, e.To, e.Label)
		}
	}
	for e := range reached {
		if !table[e] {
			t.Errorf("the switch made %s -%s-> %s (%s), which the table lacks", e.From, e.Trigger, e.To, e.Label)
		}
	}
}
