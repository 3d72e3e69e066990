// Package machine is a state machine held as data: a table of rows, each
// one transition (in a state, on an event, when a named guard holds, to a
// state, with the actions the runner performs), the lookup that picks a
// row, and the Mermaid diagram drawn from rows (mermaid.go).
//
// It knows nothing of any one machine. What a row does to a machine's own
// data (a retry counter, a reason) the machine keeps in the row's With
// field or in its own Next around the lookup, and what a guard means it
// answers when asked. It imports nothing of ralph's, so that every machine
// (the loop, the thread, the session, a parallel build's task) and the
// runner kernel above them can use it.
package machine

import (
	"fmt"
	"slices"
)

// Guard names a condition on the machine's data or the event that chooses
// between rows of one state and event. The empty guard always holds.
type Guard string

// Row is one transition of a table. S is the machine's state, E its event
// (trigger), A its action, and X whatever the machine keeps about a row
// besides (struct{} when nothing).
type Row[S, E ~string, A, X any] struct {
	From  S
	On    E
	Guard Guard
	To    S
	// Do are the actions the runner performs for the transition, in order.
	Do []A
	// Label is the edge's wording in the diagram.
	Label string
	With  X
}

// Table is a machine's transitions. Rows of one state and event are tried
// in table order: the first whose guard holds is taken, so a guarded row
// comes before the row without a guard that takes what is left.
type Table[S, E ~string, A, X any] []Row[S, E, A, X]

// Next returns the row that on takes from, asking holds about each guard
// of the candidate rows in order; ok is false when no row takes it.
func (t Table[S, E, A, X]) Next(from S, on E, holds func(Guard) bool) (row Row[S, E, A, X], ok bool) {
	for _, r := range t {
		if r.From == from && r.On == on && (r.Guard == "" || holds(r.Guard)) {
			return r, true
		}
	}
	return row, false
}

// Events lists the events from takes, each once, in table order.
func (t Table[S, E, A, X]) Events(from S) []E {
	var out []E
	for _, r := range t {
		if r.From == from && !slices.Contains(out, r.On) {
			out = append(out, r.On)
		}
	}
	return out
}

// Guards lists every guard the table names, each once, in table order: the
// machine must answer for each of them.
func (t Table[S, E, A, X]) Guards() []Guard {
	var out []Guard
	for _, r := range t {
		if r.Guard != "" && !slices.Contains(out, r.Guard) {
			out = append(out, r.Guard)
		}
	}
	return out
}

// Duplicates describes the rows that can never be taken because an
// earlier row has their state, event and guard, or their state and event
// and no guard at all. A table without them defines every (state, event,
// guard) once.
func (t Table[S, E, A, X]) Duplicates() []string {
	var out []string
	for i, r := range t {
		for _, q := range t[:i] {
			if q.From != r.From || q.On != r.On {
				continue
			}
			if q.Guard == r.Guard || q.Guard == "" {
				out = append(out, fmt.Sprintf("%s on %s [%s] -> %s: row %d already takes it (-> %s)", r.From, r.On, r.Guard, r.To, i, q.To))
				break
			}
		}
	}
	return out
}

// Unreachable lists the states, of states, that no chain of rows reaches
// from start.
func (t Table[S, E, A, X]) Unreachable(start S, states []S) []S {
	reached := map[S]bool{start: true}
	for grew := true; grew; {
		grew = false
		for _, r := range t {
			if reached[r.From] && !reached[r.To] {
				reached[r.To], grew = true, true
			}
		}
	}
	var out []S
	for _, s := range states {
		if !reached[s] {
			out = append(out, s)
		}
	}
	return out
}

// Arrows is the table as diagram arrows, one a row, in table order.
func (t Table[S, E, A, X]) Arrows() []Arrow {
	out := make([]Arrow, 0, len(t))
	for _, r := range t {
		out = append(out, Arrow{From: string(r.From), To: string(r.To), Label: r.Label})
	}
	return out
}
