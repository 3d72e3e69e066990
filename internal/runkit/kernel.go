package runkit

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/internal/report"
)

// Step is one transition a Kernel takes. The actions that go with it may
// still fill in To before it is saved (a thread's spec version).
type Step[S, V, A any] struct {
	From, To S
	Event    V
	Actions  []A
}

// Kernel is the transition protocol of every runner (loop, session,
// thread), written once: the machine's step, the actions that go with the
// transition (undone when one fails or the save does), the save, the crash
// point, the journal line, then what the step means. The work of the state
// entered is the runner's: it performs it and takes the event it comes to.
// A transition whose save may wait (Defer) waits in memory with the lines
// said after it, and the next save records them all in one atomic write:
// the loop's economy of fsyncs per iteration.
type Kernel[S, V any, A comparable] struct {
	State func() S
	Next  func(S, V) (S, []A, error)
	// Begin (optional) makes the runner's data take the step, ahead of
	// the actions, and returns how to put it back (nil: no need).
	Begin func(*Step[S, V, A]) (undo func())
	// Record performs the actions that go with the transition, ahead of
	// the save; the others (the work of the state entered) it lacks.
	Record map[A]func(context.Context, *Step[S, V, A]) error
	// Event is the step's line in the journal.
	Event func(*Step[S, V, A]) report.Event
	// Store saves the runner's state, which records steps with their
	// lines as stamped (none for a save of its own): a kill before the
	// journal has them is repaired from it on resume.
	Store func(steps []*Step[S, V, A], stamped []report.Event) error
	// Saved names the crash point right after the save; a runner with one
	// counts each saved transition for RALPH_TEST_CRASH_AFTER (CrashHook).
	Saved string
	// Log (optional) appends to a log of the runner's own after the crash
	// point, ahead of the journal (a session's transitions.jsonl).
	Log func(*Step[S, V, A]) error
	// After (optional) says what the saved step means; an error (the
	// journal's) stops the run.
	After func(*Step[S, V, A]) error
	// Defer (optional) reports whether the step's save may wait for the
	// next one.
	Defer   func(*Step[S, V, A]) bool
	Emitter *report.Emitter // nil tells no one

	// waiting are the transitions (step set) that wait for the next save
	// and the lines said since the first of them, in order.
	waiting []queued[S, V, A]
}

type queued[S, V, A any] struct {
	ev   report.Event
	step *Step[S, V, A]
}

// Take raises v: Next, the actions with the transition, then the save,
// unless it may wait. A failure before the save leaves the runner's data
// as it was.
func (k *Kernel[S, V, A]) Take(ctx context.Context, v V) (*Step[S, V, A], error) {
	from := k.State()
	to, acts, err := k.Next(from, v)
	if err != nil {
		return nil, err
	}
	st := &Step[S, V, A]{From: from, To: to, Event: v, Actions: acts}
	undo := func() {}
	if u := call(k.Begin, st); u != nil {
		undo = u
	}
	for _, a := range acts {
		if r := k.Record[a]; r != nil {
			if err := r(ctx, st); err != nil {
				undo()
				return nil, err
			}
		}
	}
	k.waiting = append(k.waiting, queued[S, V, A]{ev: k.Event(st), step: st})
	if k.Defer != nil && k.Defer(st) {
		return st, nil
	}
	if saved, err := k.save(); err != nil {
		if !saved {
			undo()
		}
		return nil, err
	}
	return st, nil
}

// call calls f when there is one.
func call[T, R any](f func(T) R, t T) (r R) {
	if f != nil {
		r = f(t)
	}
	return r
}

// Stop takes the stop edge v for err, even when ctx is cancelled, so that
// the state on disk and the journal say why the run stopped and the next
// run resumes from it; from a state the machine cannot stop in, nothing.
// It returns err, which is what the caller is told.
func (k *Kernel[S, V, A]) Stop(ctx context.Context, v V, err error) error {
	if _, _, refused := k.Next(k.State(), v); refused != nil {
		return err
	}
	if _, serr := k.Take(context.WithoutCancel(ctx), v); serr != nil {
		// The state on disk is the one before, which resumes as well.
		return fmt.Errorf("%w (and the stop could not be saved: %w)", err, serr)
	}
	return err
}

// Say emits ev, or queues it after the transitions that wait for the next
// save: a line said in a state comes after the transition into it.
func (k *Kernel[S, V, A]) Say(ev report.Event) {
	if len(k.waiting) > 0 {
		k.waiting = append(k.waiting, queued[S, V, A]{ev: ev})
	} else if k.Emitter != nil {
		k.Emitter.Emit(ev)
	}
}

// Waiting reports whether transitions wait for the next save.
func (k *Kernel[S, V, A]) Waiting() bool { return len(k.waiting) > 0 }

// Save saves the runner's state with the transitions that wait, if any:
// every save of a runner that defers goes through it, so that no save
// writes a state whose transitions the journal lacks.
func (k *Kernel[S, V, A]) Save() error {
	_, err := k.save()
	return err
}

// Close saves what still waits when the run returns without a last save.
// The lines said are shown even when the save fails; the state on disk is
// then the one before those transitions, which resumes as well.
func (k *Kernel[S, V, A]) Close() {
	batch := k.waiting
	if len(batch) == 0 || k.Save() == nil || k.Emitter == nil {
		return
	}
	for _, q := range batch {
		if q.step == nil {
			k.Emitter.Emit(q.ev)
		}
	}
}

// save stores the state with the waiting transitions, then journals them
// and the lines: the state records the transitions before the journal
// does. saved says whether the state was written.
func (k *Kernel[S, V, A]) save() (saved bool, err error) {
	batch := k.waiting
	k.waiting = nil
	if len(batch) == 0 {
		return false, k.Store(nil, nil)
	}
	var steps []*Step[S, V, A]
	evs := make([]report.Event, len(batch))
	for i, q := range batch {
		if evs[i] = q.ev; q.step != nil {
			steps = append(steps, q.step)
		}
	}
	persist := func(stamped []report.Event) error {
		var ts []report.Event
		for i, q := range batch {
			if q.step != nil {
				ts = append(ts, stamped[i])
			}
		}
		if err := k.Store(steps, ts); err != nil {
			return err
		}
		saved = true
		CrashPoint(k.Saved)
		for _, st := range steps {
			if err := call(k.Log, st); err != nil {
				return err
			}
		}
		return nil
	}
	if k.Emitter == nil {
		err = persist(evs)
	} else {
		_, err = k.Emitter.EmitAllAfter(evs, persist)
	}
	for _, st := range steps {
		if err == nil {
			err = call(k.After, st)
		}
		if err == nil && k.Saved != "" {
			CrashHook()
		}
	}
	return saved, err
}
