package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/workspace"
)

// newThreadCtx opens a workspace in a fresh repository with one thread in
// phase p, saved.
func newThreadCtx(t *testing.T, p thread.Phase, yes bool) *threadCtx {
	t.Helper()
	dir := newTestRepo(t)
	if err := os.WriteFile(dir+"/README.md", []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	env, _, _ := testEnv(dir, nil, false)
	ws, err := workspace.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.EnsureStateFiles(testNow); err != nil {
		t.Fatal(err)
	}
	th, err := thread.New("t1", "title", thread.ModeQuick, testNow)
	if err != nil {
		t.Fatal(err)
	}
	th.Phase = thread.PhaseState{Type: p}
	head := strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))
	th.Baseline = &thread.Baseline{Branch: "master", CommitSHA: head, CapturedAt: testNow}
	if p == thread.PhaseStuck {
		th.Stuck = &thread.StuckInfo{SpecVersion: 1, Iterations: 2}
	}
	if err := thread.Save(ws.Dir(), &th); err != nil {
		t.Fatal(err)
	}
	return &threadCtx{env: env, opts: &ThreadOptions{Env: env, Yes: yes}, ctx: context.Background(), ws: ws, dir: ws.Dir(), t: th}
}

// TestThreadCheckpointsRefuseEveryOtherRoute tries to pass each of the four
// human checkpoints through every route that is not a human command: agent
// output, ralph itself, a timer, a flag and quick mode, with --yes set
// and with the runner's automatic advancing. Each is refused and the
// thread on disk does not change.
func TestThreadCheckpointsRefuseEveryOtherRoute(t *testing.T) {
	gates := []struct {
		phase thread.Phase
		verbs []thread.Verb
	}{
		{thread.PhaseDrafting, []thread.Verb{thread.VerbFinalize}},
		{thread.PhaseAssessing, []thread.Verb{thread.VerbFinalize}},
		{thread.PhaseStuck, []thread.Verb{thread.VerbReviseSpec, thread.VerbReconfigure, thread.VerbAssist, thread.VerbAbandon}},
		{thread.PhasePendingReview, []thread.Verb{thread.VerbApprove}},
		{thread.PhaseReadyToCommit, []thread.Verb{thread.VerbCommit}},
	}
	others := []thread.Source{thread.SourceAgent, thread.SourceSystem, thread.SourceTimer, thread.SourceFlag, thread.SourceQuick}
	for _, g := range gates {
		tc := newThreadCtx(t, g.phase, true)
		before, err := os.ReadFile(thread.Path(tc.dir, "t1"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range g.verbs {
			for _, src := range others {
				err := tc.apply(thread.Event{Verb: v, Source: src}, string(v))
				if !errors.Is(err, thread.ErrHumanRequired) {
					t.Errorf("%s %s from %s: want a human-required refusal, got %v", g.phase, v, src, err)
				}
			}
		}
		// The runner's own advancing, in quick mode, stops at the gate.
		if err := tc.drive(); err != nil {
			t.Errorf("%s: drive: %v", g.phase, err)
		}
		after, _ := os.ReadFile(thread.Path(tc.dir, "t1"))
		if !bytes.Equal(before, after) || tc.t.Phase.Type != g.phase {
			t.Errorf("%s: the thread changed without a human command:\n%s\n---\n%s", g.phase, before, after)
		}
	}
}

// TestThreadRevisePromptsOnTerminal: the reset is asked for and "no"
// changes nothing.
func TestThreadRevisePromptsOnTerminal(t *testing.T) {
	tc := newThreadCtx(t, thread.PhasePendingReview, false)
	var out bytes.Buffer
	tc.env.IO = IO{In: strings.NewReader("n\n"), Out: &out, Err: &out, InTerminal: true}
	tc.opts.Env = tc.env
	err := tc.apply(thread.Event{Verb: thread.VerbReviseSpec, Source: thread.SourceHuman}, "revise")
	if err == nil || !strings.Contains(out.String(), "This will reset changes. Continue? [y/N]") {
		t.Fatalf("want the question and a refusal, got %v\n%s", err, out.String())
	}
	if l, _ := thread.Load(tc.dir, "t1"); l.Phase.Type != thread.PhasePendingReview {
		t.Fatalf("phase %s after a refused reset", l.Phase.Type)
	}
	tc.env.IO.In = strings.NewReader("y\n")
	if err := tc.apply(thread.Event{Verb: thread.VerbReviseSpec, Source: thread.SourceHuman}, "revise"); err != nil {
		t.Fatal(err)
	}
	if tc.t.Phase.Type != thread.PhaseDrafting {
		t.Fatalf("phase %s after yes", tc.t.Phase.Type)
	}
}

func TestThreadCommandsWithoutThread(t *testing.T) {
	dir := newTestRepo(t)
	r := run(t, dir, nil, false, "thread", "show")
	if r.code != ExitUsage || !strings.Contains(r.err, "no active thread") {
		t.Fatalf("%v", r)
	}
	r = run(t, dir, nil, false, "thread", "new")
	if r.code != ExitUsage || !strings.Contains(r.err, "thread new needs a title") {
		t.Fatalf("%v", r)
	}
	r = run(t, dir, nil, false, "diagram", "nope")
	if r.code != ExitUsage || !strings.Contains(r.err, "ralph diagram thread") {
		t.Fatalf("%v", r)
	}
	r = run(t, dir, nil, false, "thread", "new", "--id", "a1", "T")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	r = run(t, dir, nil, false, "thread", "approve", "--yes")
	if r.code != ExitFailure || !strings.Contains(r.err, "thread a1 is Drafting, which does not accept `approve`; allowed in Drafting:") {
		t.Fatalf("%v", r)
	}
	r = run(t, dir, nil, false, "thread", "switch", "zz")
	if r.code != ExitUsage || !strings.Contains(r.err, `no thread "zz"`) {
		t.Fatalf("%v", r)
	}
	_ = time.Second
}
