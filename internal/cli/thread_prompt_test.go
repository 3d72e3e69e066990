package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/thread"
)

// stuckOnTerminal is a Stuck thread whose standard input is a terminal
// that answers with the given lines.
func stuckOnTerminal(t *testing.T, mode thread.Mode, answers string) (*threadCmd, *bytes.Buffer) {
	t.Helper()
	tc := testThreadCmd(t, thread.PhaseStuck, false)
	th := tc.r.Thread()
	if mode != th.Mode {
		th.Mode = mode
		if err := thread.Save(tc.dir, &th); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	tc.env.IO = IO{In: strings.NewReader(answers), Out: &out, Err: &out, InTerminal: true}
	tc.opts.Env = tc.env
	tc.use(th)
	if err := os.WriteFile(filepath.Join(thread.Dir(tc.dir, th.ID), "stuck_reason.txt"), []byte("3 iterations without progress\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return tc, &out
}

func phaseOnDisk(t *testing.T, tc *threadCmd) thread.Phase {
	t.Helper()
	l, err := thread.Load(tc.dir, tc.r.Thread().ID)
	if err != nil {
		t.Fatal(err)
	}
	return l.Phase.Type
}

func wantNeedsHuman(t *testing.T, err error) {
	t.Helper()
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitNeedsHuman {
		t.Fatalf("want exit %d (needs a person), got %v", ExitNeedsHuman, err)
	}
}

// TestStuckPromptOnTerminal drives the Stuck menu as a person at a terminal
// would: every choice, and the reset question that R leads to.
func TestStuckPromptOnTerminal(t *testing.T) {
	t.Run("finish asks on a terminal only", func(t *testing.T) {
		tc, out := stuckOnTerminal(t, thread.ModeQuick, "\n")
		wantNeedsHuman(t, tc.finish())
		if !strings.Contains(out.String(), "choose [R/C/M/A/D] (empty to decide later): ") {
			t.Fatalf("no menu question:\n%s", out)
		}
		tc.env.IO.InTerminal = false
		out.Reset()
		wantNeedsHuman(t, tc.finish())
		if strings.Contains(out.String(), "choose [R/C/M/A/D]") {
			t.Fatalf("asked without a terminal:\n%s", out)
		}
	})
	t.Run("D shows the diagnosis and asks again; empty decides later", func(t *testing.T) {
		tc, out := stuckOnTerminal(t, thread.ModeQuick, "d\nx\n\n")
		wantNeedsHuman(t, tc.stuckPrompt())
		o := out.String()
		if !strings.Contains(o, "thread t1 is stuck: 3 iterations without progress") || !strings.Contains(o, "spec attempted: v1") {
			t.Fatalf("no diagnosis:\n%s", o)
		}
		if n := strings.Count(o, "choose [R/C/M/A/D]"); n != 3 {
			t.Fatalf("asked %d times, want 3 (D, an unknown answer, empty):\n%s", n, o)
		}
		if p := phaseOnDisk(t, tc); p != thread.PhaseStuck {
			t.Fatalf("phase %s", p)
		}
	})
	t.Run("A abandons", func(t *testing.T) {
		tc, out := stuckOnTerminal(t, thread.ModeQuick, "a\n")
		if err := tc.stuckPrompt(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if p := phaseOnDisk(t, tc); p != thread.PhaseAbandoned {
			t.Fatalf("phase %s\n%s", p, out)
		}
	})
	t.Run("R asks before the reset; n keeps the thread stuck", func(t *testing.T) {
		tc, out := stuckOnTerminal(t, thread.ModeQuick, "R\nn\n")
		tc.opts.Yes = true // the menu asks even after --yes
		err := tc.stuckPrompt()
		if err == nil || !strings.Contains(out.String(), "This will reset changes. Continue? [y/N]") {
			t.Fatalf("want the reset question and a refusal, got %v\n%s", err, out)
		}
		if p := phaseOnDisk(t, tc); p != thread.PhaseStuck {
			t.Fatalf("phase %s after no", p)
		}
	})
	t.Run("R then y resets and drafts", func(t *testing.T) {
		tc, out := stuckOnTerminal(t, thread.ModeQuick, "r\ny\n")
		if err := tc.stuckPrompt(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out.String(), "This will reset changes. Continue? [y/N]") {
			t.Fatalf("no reset question:\n%s", out)
		}
		if p := phaseOnDisk(t, tc); p != thread.PhaseDrafting {
			t.Fatalf("phase %s after yes\n%s", p, out)
		}
	})
	t.Run("C reconfigures", func(t *testing.T) {
		tc, out := stuckOnTerminal(t, thread.ModeMethodical, "c\n")
		if err := tc.stuckPrompt(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if p := phaseOnDisk(t, tc); p != thread.PhaseConfiguring {
			t.Fatalf("phase %s\n%s", p, out)
		}
		if !strings.Contains(out.String(), "Stuck → Configuring") {
			t.Fatalf("no transition shown:\n%s", out)
		}
	})
	t.Run("M waits for the edits, then runs again", func(t *testing.T) {
		// The only agent is cooling down for hours: the run goes straight
		// back to Stuck (all agents exhausted) and the menu asks again.
		tc, out := stuckOnTerminal(t, thread.ModeMethodical, "m\n\n")
		v, err := thread.AddSpec(tc.dir, "t1", []byte("# S\n\nPromise: COMPLETE\n\n### [ ] US-001: A\n- [ ] a\n"))
		if err != nil {
			t.Fatal(err)
		}
		th := tc.r.Thread()
		th.SpecVersion = v
		if err := thread.Save(tc.dir, &th); err != nil {
			t.Fatal(err)
		}
		tc.use(th)
		conf := thread.RunConfig{SchemaVersion: thread.RunConfigVersion, Agents: []string{"fake"}, MaxIterations: 5}
		if err := store.WriteJSON(filepath.Join(thread.Dir(tc.dir, "t1"), "config.json"), conf); err != nil {
			t.Fatal(err)
		}
		st := &loop.LoopState{SchemaVersion: loop.StateSchemaVersion, RunID: "run-1", Machine: loop.Machine{State: loop.StateExit}, Finished: true}
		if err := store.WriteJSON(loop.HomeOf(tc.ws).StatePath(), st); err != nil {
			t.Fatal(err)
		}
		// The rest is in the workspace's shared record, where every run
		// reads it. It is hours past the test clock and the real one: the
		// record drops rests long past by the real clock.
		if err := loop.HomeOf(tc.ws).Cooldowns().Set("fake", time.Now().Add(5*time.Hour), "5-hour limit"); err != nil {
			t.Fatal(err)
		}
		wantNeedsHuman(t, tc.stuckPrompt())
		o := out.String()
		for _, w := range []string{"edit the files, then press Enter to run the loop again: ", "Stuck → Running", "Running → Stuck", "why: all agents exhausted"} {
			if !strings.Contains(o, w) {
				t.Fatalf("missing %q:\n%s", w, o)
			}
		}
		if n := strings.Count(o, "choose [R/C/M/A/D]"); n != 2 {
			t.Fatalf("asked %d times, want 2:\n%s", n, o)
		}
		if p := phaseOnDisk(t, tc); p != thread.PhaseStuck {
			t.Fatalf("phase %s", p)
		}
	})
}

// TestIsTerminal: a character device that is no terminal (/dev/null), a
// pipe and a file are not terminals.
func TestIsTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if fi, _ := null.Stat(); fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("%s is not a character device here", os.DevNull)
	}
	if isTerminal(null) {
		t.Errorf("%s is not a terminal", os.DevNull)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(r) {
		t.Error("a pipe is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a file is not a terminal")
	}
}
