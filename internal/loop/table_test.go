package loop

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// switchNext is the loop machine's Next as it was before the table was a
// machine.Table: it looked the rows up itself and chose among them in a
// switch. It is kept as the reference the table's Next is tested against.
func switchNext(m Machine, ev Event) (Machine, []Action, error) {
	max := m.MaxRetries
	if max <= 0 {
		max = DefaultMaxRetries
	}
	var candidates []Transition
	for _, t := range Table {
		if t.From == m.State && t.On == ev.Trigger {
			candidates = append(candidates, t)
		}
	}
	if len(candidates) == 0 {
		return m, nil, fmt.Errorf("%w: %s on %s", ErrNoTransition, m.State, ev.Trigger)
	}
	next := m
	var actions []Action
	var chosen Transition
	switch ev.Trigger {
	case TrigResumed:
		// Several rows leave STOPPED on resumed; the machine remembers
		// which one is its way back.
		for _, t := range candidates {
			if t.To == m.StoppedIn {
				chosen = t
			}
		}
		if chosen.To == "" {
			return m, nil, fmt.Errorf("%w: %s on %s back to %q", ErrNoTransition, m.State, ev.Trigger, m.StoppedIn)
		}
		next.StoppedIn = ""
	case TrigImplementFailed, TrigTestsFailed, TrigACsFailed:
		next.RetryCount = m.RetryCount + 1
		guard := GuardRetriesLeft
		if next.RetryCount >= max {
			guard = GuardRetriesExhausted
		}
		for _, t := range candidates {
			if t.Guard == guard {
				chosen = t
			}
		}
		actions = append(actions, ActRecordFailure)
		if guard == GuardRetriesLeft {
			actions = append(actions, ActRecordFeedback)
		}
	default:
		chosen = candidates[0]
	}
	switch ev.Trigger {
	case TrigTaskSelected:
		next.TaskID = ev.TaskID
		next.RetryCount = ev.RetryCount
	case TrigContextExhausted:
		next.Partial = true
		actions = append(actions, ActCommitPartial)
	case TrigUnresolvable, TrigRunnerMissing, TrigCommitFailed:
		actions = append(actions, ActRecordFailure)
	}
	// Stopping and resuming change nothing about the task: a task resumed
	// in BLOCKER was marked blocked before the stop, and its blocker is
	// logged, which ends the task, only after the resume.
	if chosen.To == StateBlocker && m.State != StateStopped {
		actions = append(actions, ActMarkBlocked)
	}
	if (m.State == StateCommit && ev.Trigger == TrigCommitted) || (m.State == StateBlocker && ev.Trigger == TrigBlockerLogged) {
		// A landed commit or a logged blocker ends the task: the next one
		// starts with its own count. A failed commit does not: BLOCKER
		// still needs to know whose work it is, and it is no success.
		next.TaskID, next.RetryCount, next.Partial = "", 0, false
		if m.State == StateCommit && !m.Partial {
			actions = append(actions, ActResetRetries)
		}
	}
	if ev.Trigger == TrigCommitFailed {
		next.RetryCount = m.RetryCount + 1
		next.Partial = false
	}
	if chosen.To == StateStopped {
		next.StoppedIn = m.State
	}
	next.State = chosen.To
	// Going back to IMPLEMENT after a stop continues the iteration that
	// stopped; the resumed run decides whether it was cut short.
	if next.State == StateImplement && m.State != StateStopped {
		next.Iteration++
	}
	return next, append(actions, EntryAction(next.State)), nil
}

// everyTrigger is every trigger the machine knows.
var everyTrigger = append(slices.Clone(allTriggers), TrigNeedsReview)

// machines is every machine state Next can be asked about: each state,
// retry counts on both sides of each limit, every place a stop can have
// been in, a partial commit or not.
func machines() []Machine {
	var out []Machine
	for _, s := range States {
		for _, in := range append([]State{""}, States...) {
			for _, max := range []int{0, 1, 2, 3} {
				for retries := range 4 {
					for _, partial := range []bool{false, true} {
						out = append(out, Machine{State: s, TaskID: "US-001", RetryCount: retries, MaxRetries: max,
							Iteration: 3, Partial: partial, StoppedIn: in})
					}
				}
			}
		}
	}
	return out
}

// TestEveryRowGivesWhatTheSwitchGave walks the table: every row is taken
// from some machine, and wherever it is, the switch made the same
// transition with the same actions. Next agrees with the switch on every
// other pair too, refusals included, with the same error.
func TestEveryRowGivesWhatTheSwitchGave(t *testing.T) {
	taken := make([]int, len(Table))
	for _, m := range machines() {
		for _, trig := range everyTrigger {
			ev := Event{Trigger: trig, TaskID: "US-002", RetryCount: 1}
			got, acts, err := Next(m, ev)
			want, wantActs, wantErr := switchNext(m, ev)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) || !slices.Equal(acts, wantActs) {
				t.Fatalf("%+v on %s: %+v %v %v; the switch: %+v %v %v", m, trig, got, acts, err, want, wantActs, wantErr)
			}
			if err != nil {
				continue
			}
			// The row taken is the one whose guard the outcome shows: a
			// retry left records feedback for the next attempt.
			feedback := slices.Contains(acts, ActRecordFeedback)
			for i, r := range Table {
				held := r.Guard == GuardNone || r.Guard == stoppedIn(m.StoppedIn) ||
					(r.Guard == GuardRetriesLeft && feedback) || (r.Guard == GuardRetriesExhausted && !feedback)
				if r.From == m.State && r.On == trig && held {
					if r.To != got.State {
						t.Fatalf("%+v on %s went to %s; its row %d says %s", m, trig, got.State, i, r.To)
					}
					taken[i]++
					break
				}
			}
		}
	}
	for i, n := range taken {
		if n == 0 {
			r := Table[i]
			t.Errorf("row %d (%s -%s [%s]-> %s) was never taken", i, r.From, r.On, r.Guard, r.To)
		}
	}
}

// TestTableIsWellFormed: every state is reached from INIT, and no
// (state, trigger, guard) is defined twice or behind a row that takes
// every event.
func TestTableIsWellFormed(t *testing.T) {
	if u := Table.Unreachable(StateInit, States); u != nil {
		t.Errorf("states no row reaches from INIT: %v", u)
	}
	if d := Table.Duplicates(); d != nil {
		t.Errorf("rows defined twice:\n%s", strings.Join(d, "\n"))
	}
}
