package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/thread"
)

// testThreadCmd opens a workspace in a fresh repository with one quick-mode
// thread in phase p, saved, as a thread command with --yes set to yes
// would. Tests that change tc.env.IO call tc.use again, so that the runner
// reports to the new writers.
func testThreadCmd(t *testing.T, p thread.Phase, yes bool) *threadCmd {
	t.Helper()
	dir := newTestRepo(t)
	if err := os.WriteFile(dir+"/README.md", []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	env, _, _ := testEnv(dir, nil, false)
	ws, a, err := openWorkspace(context.Background(), env)
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
	tc := &threadCmd{env: env, opts: &ThreadOptions{Env: env, Yes: yes}, ctx: context.Background(), ws: ws, app: a, dir: ws.Dir()}
	tc.use(th)
	return tc
}

// TestThreadRevisePromptsOnTerminal: `ralph thread revise` asks for the
// reset on a terminal and "no" changes nothing.
func TestThreadRevisePromptsOnTerminal(t *testing.T) {
	tc := testThreadCmd(t, thread.PhasePendingReview, false)
	var out bytes.Buffer
	tc.env.IO = IO{In: strings.NewReader("n\n"), Out: &out, Err: &out, InTerminal: true}
	tc.opts.Env = tc.env
	tc.use(tc.r.Thread())
	err := tc.runVerb("revise", "")
	if err == nil || !strings.Contains(out.String(), "This will reset changes. Continue? [y/N]") {
		t.Fatalf("want the question and a refusal, got %v\n%s", err, out.String())
	}
	if code := exitCode(err); code != ExitFailure || err.Error() != "not reset, nothing changed: confirm with --yes (or answer y on a terminal)" {
		t.Fatalf("exit %d: %v", code, err)
	}
	if l, _ := thread.Load(tc.dir, "t1"); l.Phase.Type != thread.PhasePendingReview {
		t.Fatalf("phase %s after a refused reset", l.Phase.Type)
	}
	tc.env.IO.In = strings.NewReader("y\n")
	if err := tc.runVerb("revise", ""); err != nil {
		t.Fatal(err)
	}
	if p := tc.r.Thread().Phase.Type; p != thread.PhaseDrafting {
		t.Fatalf("phase %s after yes", p)
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
	r = run(t, dir, nil, false, "thread", "approve")
	if r.code != ExitFailure || !strings.Contains(r.err, "thread a1 is Drafting, which does not accept `approve`; allowed in Drafting:") {
		t.Fatalf("%v", r)
	}
	r = run(t, dir, nil, false, "thread", "switch", "zz")
	if r.code != ExitUsage || !strings.Contains(r.err, `no thread "zz"`) {
		t.Fatalf("%v", r)
	}
	_ = time.Second
}

// TestThreadErrorsExitCodes: the thread package's typed errors map to
// the documented exit codes, wrapped or not.
func TestThreadErrorsExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		code int
	}{
		{thread.ErrInterrupted, ExitInterrupted},
		{&thread.UsageError{Err: os.ErrInvalid}, ExitUsage},
		{&thread.WrongCommandError{ID: "a", Phase: thread.PhaseDrafting, Command: "approve"}, ExitFailure},
		{thread.ErrResetDeclined, ExitFailure},
	} {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("%T %v: exit %d, want %d", c.err, c.err, got, c.code)
		}
	}
}
