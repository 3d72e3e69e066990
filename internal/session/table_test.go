package session

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/machine"
	"github.com/ralphloop/ralph/internal/role"
)

// The session machine was a switch before it was a table: the table must
// make every transition the switch (switch_test.go) made, and refuse what
// it refused.
var (
	tableMachine  = Next
	switchMachine = switchNext
)

var allTriggers = append([]Trigger{SessionResolved, CriticalError, PlannerCompleted, NewRequirements, TaskSelected,
	NoTasksRemaining, ExecutorCompleted, ReviewerCompleted, HolisticCheckPassed, HolisticCheckFailed, InvalidResponse, Resumed},
	StopTriggers...)

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// sample draws a state, an event and a policy, every field independently
// from values on both sides of what the machine tests, including ones it
// refuses (no task, attempt 0, an unknown status). An empty from or on
// draws that too.
func sample(r *rand.Rand, from State, on Trigger) (OrchestratorState, Event, Policy) {
	if from == "" {
		from = pick(r, States...)
	}
	if on == "" {
		on = pick(r, allTriggers...)
	}
	anyState := append([]State{""}, States...)
	s := OrchestratorState{
		Current:              from,
		StoppedIn:            pick(r, anyState...),
		CurrentTaskID:        pick(r, "", "task-1"),
		CurrentAttemptNumber: r.IntN(5),
		Blockers:             pick(r, []string(nil), []string{"earlier"}),
		QACycleCount:         r.IntN(5),
		PlanningRetries:      r.IntN(4),
		GoalChecks:           r.IntN(4),
		PlannerMode:          pick(r, "", role.ModeUpdate),
		PendingQA:            r.IntN(2) == 0,
		Done:                 r.IntN(8) == 0,
	}
	e := Event{
		Type:                on,
		NewSession:          r.IntN(2) == 0,
		ResumeAt:            pick(r, anyState...),
		HasTasks:            r.IntN(2) == 0,
		HasUncompletedTasks: r.IntN(2) == 0,
		Status:              pick(r, "", role.StatusCompleted, role.StatusNeedsQACycle, role.StatusBlocked, "unknown"),
		Verdict:             pick(r, "", role.VerdictQualified, role.VerdictFailed, "ok"),
		Role:                pick(r, "planner", "questioner"),
		TaskID:              pick(r, "", "task-2"),
		Attempt:             r.IntN(6),
		NewTasks:            pick(r, []role.NewTask(nil), []role.NewTask{{Title: "more"}}),
		Reason:              "why",
	}
	p := pick(r, Policy{}, Policy{MaxTaskAttempts: 1, MaxQACycles: 1, MaxPlanningRetries: 1, MaxGoalChecks: 1},
		Policy{MaxTaskAttempts: 4, MaxQACycles: 2, MaxPlanningRetries: 3, MaxGoalChecks: 2})
	return s, e, p
}

// disagreement says how the table's transition differs from the
// switch's, or "" when it does not.
func disagreement(s OrchestratorState, e Event, p Policy) string {
	tn, ta, terr := tableMachine(s, e, p)
	sn, sa, serr := switchMachine(s, e, p)
	switch {
	case !reflect.DeepEqual(terr, serr):
		return fmt.Sprintf("error %v, the switch's %v", terr, serr)
	case !reflect.DeepEqual(tn, sn):
		return fmt.Sprintf("state %+v,\nthe switch's %+v", tn, sn)
	case !reflect.DeepEqual(ta, sa):
		return fmt.Sprintf("actions %v, the switch's %v", ta, sa)
	}
	return ""
}

// TestEveryRowGivesWhatTheSwitchGave walks the table: for each row it
// draws states and events from the row's state with the row's trigger
// until the row is taken, and every time it is, the switch must have made
// the same transition: the same next state and data, the same actions.
// A row that is never taken is a row the switch never had.
func TestEveryRowGivesWhatTheSwitchGave(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 4))
	for i, row := range Table {
		taken := 0
		for range 3000 {
			s, e, p := sample(r, row.From, row.On)
			got, ok := Table.Next(s.Current, e.Type, func(g machine.Guard) bool { return holds(g, s, e, p.WithDefaults()) })
			if !ok || got.Guard != row.Guard || s.Final() {
				continue
			}
			taken++
			if d := disagreement(s, e, p); d != "" {
				t.Fatalf("row %d (%s -%s [%s]-> %s) from %+v on %+v: %s", i, row.From, row.On, row.Guard, row.To, s, e, d)
			}
			if sn, sa, _ := switchMachine(s, e, p); sn.Current != row.To || !slices.Equal(sa, row.Do) {
				t.Fatalf("row %d (%s -%s [%s]-> %s %v): the switch went to %s with %v", i, row.From, row.On, row.Guard, row.To, row.Do, sn.Current, sa)
			}
		}
		if taken == 0 {
			t.Errorf("row %d (%s -%s [%s]-> %s) was never taken", i, row.From, row.On, row.Guard, row.To)
		}
	}
}

// TestTableAgreesWithTheSwitch draws states and events from anywhere,
// including the ones the machine refuses, and compares the two machines.
func TestTableAgreesWithTheSwitch(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 2))
	refused := 0
	for range 200_000 {
		s, e, p := sample(r, "", "")
		if d := disagreement(s, e, p); d != "" {
			t.Fatalf("from %+v on %+v: %s", s, e, d)
		}
		var illegal *IllegalError
		if _, _, err := tableMachine(s, e, p); errors.As(err, &illegal) {
			refused++
		}
	}
	if refused == 0 || refused == 200_000 {
		t.Errorf("%d of 200000 refused: the sample does not reach both sides", refused)
	}
}

// TestTableIsWellFormed: every state is reached from Initializing, no
// (state, trigger, guard) is defined twice or behind a row that takes
// every event, and every condition a guard names has a meaning.
func TestTableIsWellFormed(t *testing.T) {
	if u := Table.Unreachable(Initializing, States); u != nil {
		t.Errorf("states no row reaches from %s: %v", Initializing, u)
	}
	if d := Table.Duplicates(); d != nil {
		t.Errorf("rows defined twice:\n%s", strings.Join(d, "\n"))
	}
	for _, g := range Table.Guards() {
		for _, c := range strings.Split(string(g), ", ") {
			if guards[c] == nil {
				t.Errorf("guard %q: no condition %q", g, c)
			}
		}
	}
	for _, row := range Table {
		if !slices.Contains(States, row.From) || !slices.Contains(States, row.To) || !slices.Contains(allTriggers, row.On) {
			t.Errorf("row %s -%s-> %s names a state or trigger the machine does not have", row.From, row.On, row.To)
		}
	}
}

// TestMermaidIsTheDiagramOfTheSwitch: the diagram drawn from the table
// is, byte for byte, the one drawn from the switch before it became a
// table (the README shows it).
func TestMermaidIsTheDiagramOfTheSwitch(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "diagram.mmd"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Mermaid(); got != string(want) {
		t.Errorf("ralph diagram session:\n%s\nwant:\n%s", got, want)
	}
}
