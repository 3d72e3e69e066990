package runkit

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/internal/report"
)

// Step is one transition a Kernel takes: the machine's state before and
// after, the event that caused it and the actions the machine returned.
// The actions that go with the transition may still fill in To before it
// is saved (a thread's spec version, a task's failure count).
type Step[S, V, A any] struct {
	From, To S
	Event    V
	Actions  []A
}

// Kernel is the transition protocol every runner (loop, session, thread)
// follows, written once: the machine's step, the actions that go with the
// transition (undone when one fails or the save does), the save, the crash
// point, the journal line, and what is said once the state is on disk. The
// work of the state entered is the runner's: it performs it and takes the
// event it comes to.
//
// A transition whose save may wait (Defer) is kept in memory with the
// lines said after it, and the next save records all of them at once, in
// one atomic write: the loop's economy of fsyncs per iteration.
type Kernel[S, V any, A comparable] struct {
	// State is where the machine is; Next its pure step.
	State func() S
	Next  func(S, V) (S, []A, error)
	// Begin, when set, makes the runner's data take the step ahead of the
	// actions that go with it, and returns how to put it back (nil: no
	// need) when one of them fails or the save does.
	Begin func(*Step[S, V, A]) (undo func())
	// Record performs action a when it goes with the transition, ahead of
	// the save; an action it has no part in returns nil.
	Record func(ctx context.Context, st *Step[S, V, A], a A) error
	// Event is the transition's line in the journal.
	Event func(*Step[S, V, A]) report.Event
	// Store saves the runner's state, which records steps, with their
	// events as the emitter stamped them (none for a save of its own), so
	// that a kill before the journal has them is repaired on resume.
	Store func(steps []*Step[S, V, A], stamped []report.Event) error
	// Saved names the crash point right after the save ("" none), and Log
	// (nil: none) writes a log of the runner's own after it, ahead of the
	// journal (a session's transitions.jsonl).
	Saved string
	Log   func(*Step[S, V, A]) error
	// After, once the step is saved and journaled, says what it means. An
	// error (the journal's own) stops the run.
	After func(*Step[S, V, A]) error
	// Counted makes every saved transition count for
	// RALPH_TEST_CRASH_AFTER (CrashHook).
	Counted bool
	// Defer, when set, reports whether the step's save may wait for the
	// next one (the next Take that does not wait, or Save).
	Defer func(*Step[S, V, A]) bool
	// Emitter stamps the journal lines and hands them to the sinks; nil
	// tells no one.
	Emitter *report.Emitter

	// waiting is what waits for the next save: transitions (step set) and
	// the lines said since the first of them, in their order.
	waiting []queued[S, V, A]
}

type queued[S, V, A any] struct {
	ev   report.Event
	step *Step[S, V, A]
}

// Take raises v: the machine's step, the actions that go with it, then
// the save, the crash point and the journal, unless the save may wait.
// A failure before the save leaves the runner's data as it was.
func (k *Kernel[S, V, A]) Take(ctx context.Context, v V) (*Step[S, V, A], error) {
	from := k.State()
	to, acts, err := k.Next(from, v)
	if err != nil {
		return nil, err
	}
	st := &Step[S, V, A]{From: from, To: to, Event: v, Actions: acts}
	undo := func() {}
	if k.Begin != nil {
		if u := k.Begin(st); u != nil {
			undo = u
		}
	}
	for _, a := range acts {
		if k.Record == nil {
			break
		}
		if err := k.Record(ctx, st, a); err != nil {
			undo()
			return nil, err
		}
	}
	k.waiting = append(k.waiting, queued[S, V, A]{ev: k.Event(st), step: st})
	if k.Defer != nil && k.Defer(st) {
		return st, nil
	}
	batch := k.waiting
	k.waiting = nil
	if saved, err := k.persist(batch); err != nil {
		if !saved {
			undo()
		}
		return nil, err
	}
	return st, nil
}

// Stop takes the stop edge v for err, even when ctx is cancelled, so that
// the state on disk and the journal say why the run stopped and the next
// run resumes from it. From a state the machine cannot stop in it records
// nothing. It returns err, which is what the caller is told.
func (k *Kernel[S, V, A]) Stop(ctx context.Context, v V, err error) error {
	if _, _, refused := k.Next(k.State(), v); refused != nil {
		return err
	}
	if _, serr := k.Take(context.WithoutCancel(ctx), v); serr != nil {
		// The state on disk is still the one before the stop, which
		// resumes just the same.
		return fmt.Errorf("%w (and the stop could not be saved: %w)", err, serr)
	}
	return err
}

// Say emits ev, or queues it after the transitions that wait for the next
// save: a line said in a state comes after the transition into it.
func (k *Kernel[S, V, A]) Say(ev report.Event) {
	switch {
	case len(k.waiting) > 0:
		k.waiting = append(k.waiting, queued[S, V, A]{ev: ev})
	case k.Emitter != nil:
		k.Emitter.Emit(ev)
	}
}

// Waiting reports whether transitions wait for the next save.
func (k *Kernel[S, V, A]) Waiting() bool { return len(k.waiting) > 0 }

// Save saves the runner's state: with the transitions that wait, if any,
// else on its own. Every save of a runner whose transitions may wait goes
// through it, so that no save writes a state whose transitions the
// journal lacks.
func (k *Kernel[S, V, A]) Save() error {
	batch := k.waiting
	k.waiting = nil
	_, err := k.persist(batch)
	return err
}

// Flush saves the transitions that wait, if any.
func (k *Kernel[S, V, A]) Flush() error {
	if len(k.waiting) == 0 {
		return nil
	}
	return k.Save()
}

// Close saves what still waits when the run returns without a last save
// (an error on the way): the lines said are shown even when the save
// fails, and the state on disk is then the one before those transitions,
// which resumes just the same.
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

// persist saves the state with batch's transitions, then journals the
// batch: the state records the transitions before the journal gets them.
// saved says whether the state was written.
func (k *Kernel[S, V, A]) persist(batch []queued[S, V, A]) (saved bool, err error) {
	if len(batch) == 0 {
		return false, k.Store(nil, nil)
	}
	var steps []*Step[S, V, A]
	evs := make([]report.Event, len(batch))
	for i, q := range batch {
		evs[i] = q.ev
		if q.step != nil {
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
		if k.Saved != "" {
			CrashPoint(k.Saved)
		}
		for _, st := range steps {
			if k.Log == nil {
				break
			}
			if err := k.Log(st); err != nil {
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
	if err != nil {
		return saved, err
	}
	for _, st := range steps {
		if k.After != nil {
			if err := k.After(st); err != nil {
				return true, err
			}
		}
		if k.Counted {
			CrashHook()
		}
	}
	return true, nil
}
