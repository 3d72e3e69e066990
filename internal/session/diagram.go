package session

import (
	"sort"

	"github.com/ralphloop/ralph/internal/machine"
	"github.com/ralphloop/ralph/internal/role"
)

// Edge is one transition Next can make, labelled with its trigger and the
// status or verdict that selects it.
type Edge struct {
	From, To State
	Trigger  Trigger
	Label    string
}

// Edges returns the distinct edges of Table, sorted by the states they
// leave and enter, then by label. Rows that differ only in what they do
// on the way (a guard on the tasks found) are one edge.
func Edges() []Edge {
	seen := map[Edge]bool{}
	var out []Edge
	for _, r := range Table {
		e := Edge{From: r.From, To: r.To, Trigger: r.On, Label: r.Label}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
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

// edgeLabel is the label of the edge a transition took, as the table
// labels its rows; the runner reports its steps with it.
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
	arrows := []machine.Arrow{{From: machine.Pseudo, To: string(Initializing), Label: `ralph run "request"`}}
	for _, e := range Edges() {
		arrows = append(arrows, machine.Arrow{From: string(e.From), To: string(e.To), Label: e.Label})
	}
	arrows = machine.Joined(arrows)
	arrows = append(arrows,
		machine.Arrow{From: string(Complete), To: machine.Pseudo, Label: "goal check passed"},
		machine.Arrow{From: string(Failed), To: machine.Pseudo},
		machine.Arrow{From: string(Stopped), To: machine.Pseudo, Label: "until ralph run --resume"})
	return machine.Mermaid(arrows)
}
