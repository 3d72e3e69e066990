package runkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/report"
)

// toy is a machine for the kernel's tests: a counter that "go" moves on by
// one, "stop" sends to -1 and that refuses anything from -1 but "resume".
// Every transition carries the action "rec" (performed before the save)
// and "say" (after it).
type toy struct {
	k     Kernel[int, string, string]
	state int
	// kept is what the runner's own data holds besides the state; undo
	// puts it back.
	kept   []string
	trace  []string
	failOn string // the action or "store" that fails
	saved  []int  // the states written, in order
	lines  []report.Event
}

func (s *toy) Emit(ev report.Event) {
	s.lines = append(s.lines, ev)
	s.trace = append(s.trace, "journal "+ev.Text)
}

func newToy(t *testing.T) *toy {
	s := &toy{}
	s.k = Kernel[int, string, string]{
		State: func() int { return s.state },
		Next: func(n int, v string) (int, []string, error) {
			switch {
			case n < 0 && v == "resume":
				return 0, []string{"rec", "say"}, nil
			case n < 0:
				return n, nil, fmt.Errorf("no %s from stopped", v)
			case v == "stop":
				return -1, []string{"rec", "say"}, nil
			}
			return n + 1, []string{"rec", "say"}, nil
		},
		Begin: func(st *Step[int, string, string]) func() {
			before := slices.Clone(s.kept)
			s.state = st.To
			return func() { s.state, s.kept = st.From, before }
		},
		Record: map[string]func(context.Context, *Step[int, string, string]) error{"rec": func(_ context.Context, st *Step[int, string, string]) error {
			s.kept = append(s.kept, st.Event)
			s.trace = append(s.trace, "record "+st.Event)
			if s.failOn == st.Event {
				return errors.New("record failed")
			}
			return nil
		}},
		Event: func(st *Step[int, string, string]) report.Event {
			return report.Event{Kind: report.KindTransition, Text: fmt.Sprintf("%d->%d", st.From, st.To)}
		},
		Store: func(steps []*Step[int, string, string], stamped []report.Event) error {
			if s.failOn == "store" {
				return errors.New("disk full")
			}
			var seqs []string
			for _, e := range stamped {
				seqs = append(seqs, fmt.Sprint(e.Seq))
			}
			s.saved = append(s.saved, s.state)
			s.trace = append(s.trace, fmt.Sprintf("save %d with %d transitions [%s]", s.state, len(steps), strings.Join(seqs, " ")))
			return nil
		},
		After: func(st *Step[int, string, string]) error {
			s.trace = append(s.trace, "after "+st.Event)
			return nil
		},
	}
	s.k.Emitter = report.NewEmitter("toy", "r1", 0, nil, s)
	return s
}

// A transition is recorded, saved, journaled and reported in that order,
// and the state saved records the transition with its journal seq.
func TestKernelOrdersRecordSaveJournalAfter(t *testing.T) {
	s := newToy(t)
	st, err := s.k.Take(context.Background(), "go")
	if err != nil || st.From != 0 || st.To != 1 || s.state != 1 {
		t.Fatalf("take: %+v, %v, state %d", st, err, s.state)
	}
	want := []string{"record go", "save 1 with 1 transitions [1]", "journal 0->1", "after go"}
	if !slices.Equal(s.trace, want) {
		t.Fatalf("order:\n got %q\nwant %q", s.trace, want)
	}
}

// A record action that fails, or a save that fails, leaves the runner's
// data as it was and journals nothing.
func TestKernelUndoesAFailedRecordOrSave(t *testing.T) {
	for _, fail := range []string{"go", "store"} {
		s := newToy(t)
		s.kept = []string{"earlier"}
		s.failOn = fail
		if _, err := s.k.Take(context.Background(), "go"); err == nil {
			t.Fatalf("%s: the failure was not returned", fail)
		}
		if s.state != 0 || !slices.Equal(s.kept, []string{"earlier"}) {
			t.Errorf("%s: state %d, kept %q after the failure; want 0 and what was there", fail, s.state, s.kept)
		}
		if len(s.lines) != 0 || len(s.saved) != 0 {
			t.Errorf("%s: journaled %v, saved %v", fail, s.lines, s.saved)
		}
	}
}

// Transitions whose save may wait are saved with the next one that does
// not, in one write, and the lines said in between are journaled after
// the transition they follow; Save and Close write what waits.
func TestKernelBatchesTransitionsThatMayWait(t *testing.T) {
	s := newToy(t)
	s.k.Defer = func(st *Step[int, string, string]) bool { return st.To%3 != 0 }
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.k.Take(ctx, "go"); err != nil {
			t.Fatal(err)
		}
		s.k.Say(report.Event{Kind: report.KindNote, Text: fmt.Sprintf("line %d", i+1)})
	}
	want := []string{"record go", "record go", "record go",
		"save 3 with 3 transitions [1 3 5]",
		"journal 0->1", "journal line 1", "journal 1->2", "journal line 2", "journal 2->3",
		"after go", "after go", "after go", "journal line 3"}
	if !slices.Equal(s.trace, want) {
		t.Fatalf("batch:\n got %q\nwant %q", s.trace, want)
	}
	if _, err := s.k.Take(ctx, "go"); err != nil || !s.k.Waiting() {
		t.Fatalf("a transition into 4 should wait: %v", err)
	}
	if err := s.k.Save(); err != nil || s.k.Waiting() || s.saved[len(s.saved)-1] != 4 {
		t.Fatalf("Save left %v waiting, saved %v: %v", s.k.Waiting(), s.saved, err)
	}
	// A run that ends on an error shows what it said even when its last
	// save fails.
	s.k.Take(ctx, "go")
	s.k.Say(report.Event{Kind: report.KindNote, Text: "last words"})
	s.failOn = "store"
	s.k.Close()
	if last := s.trace[len(s.trace)-1]; last != "journal last words" {
		t.Errorf("Close did not show the line said: %q", s.trace)
	}
}

// The stop edge is taken from wherever the run is, with ctx cancelled,
// and the caller gets the error that stopped the run; a state the machine
// cannot stop in records nothing.
func TestKernelStopEdge(t *testing.T) {
	s := newToy(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var gotCtx error
	s.k.Record["rec"] = func(ctx context.Context, _ *Step[int, string, string]) error {
		gotCtx = ctx.Err()
		return nil
	}
	why := errors.New("interrupted")
	if err := s.k.Stop(ctx, "stop", why); err != why {
		t.Fatalf("Stop returned %v, want the cause", err)
	}
	if s.state != -1 || len(s.saved) != 1 || gotCtx != nil {
		t.Fatalf("state %d, saved %v, record's ctx %v: the stop was not taken as a transition", s.state, s.saved, gotCtx)
	}
	if err := s.k.Stop(ctx, "stop", why); err != why || len(s.saved) != 1 {
		t.Fatalf("a second stop from stopped: %v, saved %v", err, s.saved)
	}
	s.failOn = "store"
	s.state = 2
	if err := s.k.Stop(ctx, "stop", why); !errors.Is(err, why) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a stop that could not be saved: %v", err)
	}
	if s.state != 2 {
		t.Fatalf("state %d after a failed stop, want 2", s.state)
	}
}

// The crash point comes right after the save and before the journal, and
// every saved transition of a kernel with one counts for
// RALPH_TEST_CRASH_AFTER: a child test process takes transitions under
// each hook and is killed where the hook says.
func TestKernelCrashPoints(t *testing.T) {
	if dir := os.Getenv("KERNEL_CRASH_DIR"); dir != "" {
		s := newToy(t)
		s.k.Saved = "toy-saved"
		store := s.k.Store
		s.k.Store = func(steps []*Step[int, string, string], stamped []report.Event) error {
			os.WriteFile(filepath.Join(dir, "state"), fmt.Appendf(nil, "%d", s.state), 0o644)
			return store(steps, stamped)
		}
		s.k.Emitter = report.NewEmitter("toy", "r1", 0, nil, &report.Journal{Path: filepath.Join(dir, "journal")})
		for range 3 {
			s.k.Take(context.Background(), "go")
		}
		return
	}
	for _, c := range []struct{ env, state, journal string }{
		{"RALPH_TEST_CRASH_AT=toy-saved", "1", ""},       // saved, not journaled
		{"RALPH_TEST_CRASH_AT=toy-saved@2", "2", "0->1"}, // the second time
		{"RALPH_TEST_CRASH_AFTER=2", "2", "0->1 1->2"},   // after the second transition's journal
	} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestKernelCrashPoints$")
		cmd.Env = append(os.Environ(), "KERNEL_CRASH_DIR="+dir, c.env)
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != -1 {
			t.Fatalf("%s: the child was not killed: %v", c.env, err)
		}
		state, _ := os.ReadFile(filepath.Join(dir, "state"))
		var texts []string
		(&report.JournalReader{Path: filepath.Join(dir, "journal")}).Scan(func(e report.Event) error {
			texts = append(texts, e.Text)
			return nil
		})
		if string(state) != c.state || strings.Join(texts, " ") != c.journal {
			t.Errorf("%s: state %q, journal %q; want %q and %q", c.env, state, texts, c.state, c.journal)
		}
	}
}
