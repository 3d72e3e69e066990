package landing

import (
	"fmt"
	"strings"
	"testing"
)

// wfEvents is every event the task machine knows.
var wfEvents = []TaskEvent{Dispatched, Prepared, Verified, Failed, Limited, Cooled, HostLost, Taken, Integrated, Conflicted, Exhausted, BlockedBy, Unblocked, Stopped}

// Every edge of the table is reachable from ready, every state but landed
// has a way on, and Next follows the table.
func TestMachineEdgesReachable(t *testing.T) {
	edges := Edges()
	reached := map[TaskState]bool{Ready: true}
	for grew := true; grew; {
		grew = false
		for _, e := range edges {
			if reached[e.From] && !reached[e.To] {
				reached[e.To], grew = true, true
			}
		}
	}
	for _, e := range edges {
		if !reached[e.From] {
			t.Errorf("edge %s --%s--> %s starts in a state no task reaches", e.From, e.Event, e.To)
		}
		to, act, err := Next(e.From, e.Event)
		if err != nil || to != e.To || act != e.Action {
			t.Errorf("Next(%s, %s) = %s, %q, %v; the table says %s, %q", e.From, e.Event, to, act, err, e.To, e.Action)
		}
	}
	for _, s := range TaskStates {
		if !reached[s] {
			t.Errorf("no task ever reaches %s", s)
		}
		if out := Allowed(s); len(out) == 0 && s != Landed {
			t.Errorf("a %s task can never move on", s)
		}
	}
	if out := Allowed(Landed); len(out) != 0 {
		t.Errorf("a landed task can still take %v: landing is final", out)
	}
	// Only the person's edges are the people's commands.
	for _, e := range edges {
		human := e.Event == BlockedBy || e.Event == Unblocked
		if e.Human != human {
			t.Errorf("edge %s --%s--> %s: human %v", e.From, e.Event, e.To, e.Human)
		}
	}
}

// A pair the table lacks is refused, leaves the state, and says what the
// state can take.
func TestMachineRefusesPairsNotInTheTable(t *testing.T) {
	in := map[string]bool{}
	for _, e := range Edges() {
		in[string(e.From)+"/"+string(e.Event)] = true
	}
	refused := 0
	for _, s := range TaskStates {
		for _, ev := range wfEvents {
			if in[string(s)+"/"+string(ev)] {
				continue
			}
			to, act, err := Next(s, ev)
			if err == nil {
				t.Errorf("Next(%s, %s) = %s, want refused", s, ev, to)
				continue
			}
			refused++
			if to != s || act != ActNone {
				t.Errorf("refused Next(%s, %s) moved to %s with action %q", s, ev, to, act)
			}
			for _, ok := range Allowed(s) {
				if !strings.Contains(err.Error(), ok) {
					t.Errorf("refusal %q does not list %q, which %s takes", err, ok, s)
				}
			}
		}
	}
	if refused == 0 {
		t.Fatal("no pair was refused")
	}
	// Edges is a copy: changing it changes nothing.
	e := Edges()
	e[0].To = Landed
	if to, _, _ := Next(e[0].From, e[0].Event); to == Landed {
		t.Error("Edges returned the table itself")
	}
}

// The diagram is generated from the table: every edge is in it.
func TestMachineMermaidHasEveryEdge(t *testing.T) {
	m := Mermaid()
	if !strings.HasPrefix(m, "stateDiagram-v2\n") {
		t.Errorf("not a Mermaid state diagram:\n%s", m)
	}
	for _, e := range Edges() {
		line := fmt.Sprintf("    %s --> %s: %s", e.From, e.To, e.Event)
		if e.Action != ActNone {
			line += " / " + string(e.Action)
		}
		if e.Human {
			line += " (person)"
		}
		if !strings.Contains(m, line+"\n") {
			t.Errorf("the diagram lacks %q", line)
		}
	}
	if got, want := strings.Count(m, "-->"), len(Edges())+2; got != want {
		t.Errorf("the diagram has %d arrows, want %d (the table's and start and end)", got, want)
	}
}

// Edges returns the table as TaskEdges, for tests and the diagram.
func Edges() []TaskEdge {
	out := make([]TaskEdge, 0, len(taskTable))
	for _, r := range taskTable {
		e := TaskEdge{From: r.From, Event: r.On, To: r.To, Human: r.With}
		if len(r.Do) > 0 {
			e.Action = r.Do[0]
		}
		out = append(out, e)
	}
	return out
}
