package session

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ralphloop/ralph/internal/role"
)

// Edge is one transition Next can make, labelled with its trigger and the
// status or verdict that selects it.
type Edge struct {
	From, To State
	Trigger  Trigger
	Label    string
}

// Edges explores Next from every state with every trigger and the event
// fields that change its outcome, counters at and below their limits, and
// returns the distinct edges sorted. It is generated from the code, so the
// diagram cannot drift from the machine.
func Edges() []Edge {
	seen := map[Edge]bool{}
	explore(func(s OrchestratorState, e Event, n OrchestratorState, _ []Action) {
		seen[Edge{From: s.Current, To: n.Current, Trigger: e.Type, Label: edgeLabel(e, n)}] = true
	})
	out := make([]Edge, 0, len(seen))
	for e := range seen {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.From != b.From {
			return stateIndex(a.From) < stateIndex(b.From)
		}
		if a.To != b.To {
			return stateIndex(a.To) < stateIndex(b.To)
		}
		return a.Label < b.Label
	})
	return out
}

// explore calls f with every transition Next makes from the states and
// events Edges explores, and the actions it returns.
func explore(f func(s OrchestratorState, e Event, n OrchestratorState, acts []Action)) {
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
			n, acts, err := Next(s, e, p)
			if err == nil {
				f(s, e, n, acts)
			}
		}
	}
}

func edgeLabel(e Event, n OrchestratorState) string {
	l := string(e.Type)
	switch {
	case e.Type == SessionResolved && e.NewSession:
		l += " (new)"
	case e.Type == SessionResolved:
		l += " (resume)"
	case e.Type == PlannerCompleted || e.Type == ExecutorCompleted:
		l += " (" + e.Status + ")"
	case e.Type == ReviewerCompleted:
		l += " (" + e.Verdict + ")"
	}
	// Every way into Failed but a critical error and a blocked planner
	// is a retry limit reached. The test is on what selects the edge, not
	// on event fields the trigger ignores.
	if n.Current == Failed && e.Type != CriticalError && (e.Type != PlannerCompleted || e.Status != role.StatusBlocked) {
		l += ", limit reached"
	}
	if n.Done {
		l += ", done"
	}
	return l
}

func stateIndex(s State) int {
	for i, x := range States {
		if x == s {
			return i
		}
	}
	return len(States)
}

// Mermaid renders Edges as a mermaid state diagram (`ralph diagram
// session`); labels of one (from, to) pair are joined.
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s: ralph run \"request\"\n", Initializing)
	type pair struct{ from, to State }
	var order []pair
	labels := map[pair][]string{}
	for _, e := range Edges() {
		k := pair{e.From, e.To}
		if _, ok := labels[k]; !ok {
			order = append(order, k)
		}
		labels[k] = append(labels[k], e.Label)
	}
	for _, k := range order {
		fmt.Fprintf(&b, "    %s --> %s: %s\n", k.from, k.to, strings.Join(labels[k], " / "))
	}
	b.WriteString("    Complete --> [*]: goal check passed\n    Failed --> [*]\n    Stopped --> [*]: until ralph run --resume\n")
	return b.String()
}
