package machine

import (
	"slices"
	"testing"
)

type (
	state  string
	event  string
	action string
)

// door is a small machine: a locked door opens only with the key.
var door = Table[state, event, action, struct{}]{
	{From: "closed", On: "push", Guard: "locked", To: "closed", Label: "push (locked)"},
	{From: "closed", On: "push", To: "open", Do: []action{"swing"}, Label: "push"},
	{From: "open", On: "pull", To: "closed", Do: []action{"swing", "click"}, Label: "pull"},
}

func TestNextTakesTheFirstRowWhoseGuardHolds(t *testing.T) {
	locked := func(g Guard) bool { return g == "locked" }
	unlocked := func(Guard) bool { return false }
	if r, ok := door.Next("closed", "push", locked); !ok || r.To != "closed" || r.Do != nil {
		t.Errorf("a locked door pushed: %+v, %v; want it closed, nothing done", r, ok)
	}
	if r, ok := door.Next("closed", "push", unlocked); !ok || r.To != "open" || !slices.Equal(r.Do, []action{"swing"}) {
		t.Errorf("an unlocked door pushed: %+v, %v; want it open, swung", r, ok)
	}
	asked := 0
	door.Next("open", "pull", func(Guard) bool { asked++; return false })
	if asked != 0 {
		t.Errorf("a row without a guard asked about guards %d times", asked)
	}
	if r, ok := door.Next("open", "push", locked); ok {
		t.Errorf("an open door took a push: %+v", r)
	}
}

func TestEventsAndGuardsAreListedOnceInTableOrder(t *testing.T) {
	if got := door.Events("closed"); !slices.Equal(got, []event{"push"}) {
		t.Errorf("closed takes %v", got)
	}
	if got := door.Events("ajar"); got != nil {
		t.Errorf("a state without rows takes %v", got)
	}
	if got := door.Guards(); !slices.Equal(got, []Guard{"locked"}) {
		t.Errorf("guards %v", got)
	}
}

func TestDuplicatesFindsRowsThatCanNeverBeTaken(t *testing.T) {
	if d := door.Duplicates(); d != nil {
		t.Fatalf("door has duplicates: %q", d)
	}
	twice := append(slices.Clone(door), door[0])
	shadowed := append(slices.Clone(door), Row[state, event, action, struct{}]{From: "open", On: "pull", Guard: "stuck", To: "open"})
	for name, tab := range map[string]Table[state, event, action, struct{}]{"same guard": twice, "after a row without guard": shadowed} {
		if d := tab.Duplicates(); len(d) != 1 {
			t.Errorf("%s: duplicates %q, want one", name, d)
		}
	}
}

func TestUnreachableNamesStatesNoRowLeadsTo(t *testing.T) {
	if u := door.Unreachable("closed", []state{"closed", "open"}); u != nil {
		t.Errorf("door: unreachable %v", u)
	}
	if u := door.Unreachable("closed", []state{"closed", "open", "ajar"}); !slices.Equal(u, []state{"ajar"}) {
		t.Errorf("unreachable %v, want ajar", u)
	}
	if u := door[2:].Unreachable("closed", []state{"closed", "open"}); !slices.Equal(u, []state{"open"}) {
		t.Errorf("with no row out of closed: unreachable %v, want open", u)
	}
}

func TestMermaidWritesOneArrowALine(t *testing.T) {
	arrows := append([]Arrow{{From: Pseudo, To: "closed"}}, door.Arrows()...)
	arrows = append(arrows, Arrow{From: "open", To: Pseudo, Label: "walked through"})
	want := "stateDiagram-v2\n" +
		"    [*] --> closed\n" +
		"    closed --> closed: push (locked)\n" +
		"    closed --> open: push\n" +
		"    open --> closed: pull\n" +
		"    open --> [*]: walked through\n"
	if got := Mermaid(arrows); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestJoinedMergesArrowsBetweenTheSameStates(t *testing.T) {
	got := Joined([]Arrow{{"a", "b", "x"}, {"a", "c", "y"}, {"a", "b", "z"}, {"b", "a", "w"}})
	want := []Arrow{{"a", "b", "x / z"}, {"a", "c", "y"}, {"b", "a", "w"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
