package thread

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/worktree"
)

// toWorktree makes the rig's thread one that works in its own worktree,
// made from its baseline, as `ralph thread start --worktree` leaves it,
// and returns the worktree's folder.
func (g *rig) toWorktree() string {
	g.t.Helper()
	th := g.r.Thread()
	th.Worktree = WorktreePath(g.r.ws.Root, "", th.ID)
	th.Branch = BranchName(th.ID)
	if err := Save(g.r.dir, &th); err != nil {
		g.t.Fatal(err)
	}
	g.r.t = th
	if err := g.r.openWorktree(th.Worktree, th.Branch, th.Baseline.CommitSHA); err != nil {
		g.t.Fatal(err)
	}
	return th.Worktree
}

// toBranch checks the rig's thread's branch out in the checkout, as a
// thread started without --worktree has it.
func (g *rig) toBranch() {
	g.t.Helper()
	th := g.r.Thread()
	th.Branch = BranchName(th.ID)
	if err := Save(g.r.dir, &th); err != nil {
		g.t.Fatal(err)
	}
	g.r.t = th
	gitT(g.t, g.r.ws.Root, "checkout", "-q", "-b", th.Branch)
}

// saveOther saves another thread, id, in phase p, working in wt ("" for
// the checkout).
func (g *rig) saveOther(id string, p Phase, wt string) {
	g.t.Helper()
	o, err := New(id, "other", ModeQuick, runnerNow)
	if err != nil {
		g.t.Fatal(err)
	}
	o.Phase, o.Worktree = PhaseState{Type: p}, wt
	if wt != "" {
		o.Branch = BranchName(id)
	}
	if err := Save(g.r.dir, &o); err != nil {
		g.t.Fatal(err)
	}
}

func conflicts(fails []string) []string {
	var out []string
	for _, f := range fails {
		if strings.HasPrefix(f, "conflict:") {
			out = append(out, f)
		}
	}
	return out
}

// TestPreflightConflictsOnlyInOneWorkTree: preflight refuses a thread
// while another is at work (Running or Verifying) in the same work tree,
// and only then: threads in worktrees of their own run beside each other
// and beside one in the checkout.
func TestPreflightConflictsOnlyInOneWorkTree(t *testing.T) {
	cases := []struct {
		name string
		// mine: this thread works in its own worktree.
		mine bool
		// other is the other thread's phase and work tree: "" the
		// checkout, "own" a worktree of its own, "same" this thread's.
		phase Phase
		other string
		want  string
	}{
		{name: "both in the checkout", phase: PhaseRunning,
			want: "conflict: thread t2 is Running in this work tree: pause, finish or abandon it first"},
		{name: "the other verifying in the checkout", phase: PhaseVerifying,
			want: "conflict: thread t2 is Verifying in this work tree: pause, finish or abandon it first"},
		{name: "the other paused in the checkout", phase: PhasePaused},
		{name: "this one in its worktree", mine: true, phase: PhaseRunning},
		{name: "the other in its worktree", phase: PhaseRunning, other: "own"},
		{name: "each in its own worktree", mine: true, phase: PhaseRunning, other: "own"},
		{name: "both in one worktree", mine: true, phase: PhaseRunning, other: "same",
			want: "conflict: thread t2 is Running in this work tree: pause, finish or abandon it first"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, PhasePreflight, ModeQuick, nil)
			if c.mine {
				g.toWorktree()
			} else {
				g.toBranch()
			}
			switch c.other {
			case "":
				g.saveOther("t2", c.phase, "")
			case "own":
				g.saveOther("t2", c.phase, WorktreePath(g.r.ws.Root, "", "t2"))
			case "same":
				g.saveOther("t2", c.phase, g.r.Thread().Worktree)
			}
			fails := g.r.preflightFailures()
			got := conflicts(fails)
			if c.want == "" && len(fails) > 0 || c.want != "" && (len(got) != 1 || got[0] != c.want || len(fails) != 1) {
				t.Fatalf("preflight failures %q, want only %q", fails, c.want)
			}
		})
	}
}

// TestPreflightSeesTheLockOfItsWorkTree: a ralph running in the checkout
// (a build holds .ralph/lock) conflicts with a thread there, not with a
// thread in its own worktree.
func TestPreflightSeesTheLockOfItsWorkTree(t *testing.T) {
	for _, mine := range []bool{false, true} {
		g := newRig(t, PhasePreflight, ModeQuick, nil)
		if mine {
			g.toWorktree()
		} else {
			g.toBranch()
		}
		l, err := store.TryLock(g.r.ws.LockPath(), "ralph build")
		if err != nil {
			t.Fatal(err)
		}
		got := conflicts(g.r.preflightFailures())
		l.Unlock()
		if mine && len(got) > 0 {
			t.Errorf("in its own worktree: %q, want no conflict with a build in the checkout", got)
		}
		if !mine && (len(got) != 1 || !strings.HasPrefix(got[0], "conflict: another ralph is running in this work tree (")) {
			t.Errorf("in the checkout: %q, want the build named", got)
		}
	}
}

// TestWorktreeThreadWorksInItsWorktree: with --worktree, implementation
// makes the thread's worktree outside the repository on its branch, marked
// as ralph's; the loop runs there with a home of its own beside the
// thread's records, the checks run there, and the checkout stays on its
// branch, untouched.
func TestWorktreeThreadWorksInItsWorktree(t *testing.T) {
	g := newRig(t, PhaseFinalized, ModeQuick, nil)
	g.r.opts.Worktree = true
	g.loop.steps = []loopStep{{outcome: loop.OutcomeComplete, iterations: 1, done: true}}
	g.checks.pass["check-hello"] = true
	if err := g.r.drive(); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	g.wantSteps(
		"Finalized -implement-> Preflight",
		"Preflight -checks_pass-> Configuring",
		"Configuring -start-> Running",
		"Running -claim_done-> Verifying",
		"Verifying -criteria_passed-> Implemented",
		"Implemented -submit-> PendingReview")
	root := g.r.ws.Root
	wt := WorktreePath(root, "", "t1")
	if th, _ := Load(g.r.dir, "t1"); th.Worktree != wt || th.Branch != BranchName("t1") {
		t.Fatalf("thread records worktree %q on %q, want %q on ralph/t1", th.Worktree, th.Branch, wt)
	}
	if rel, err := filepath.Rel(root, wt); err != nil || !strings.HasPrefix(rel, "..") {
		t.Errorf("worktree %s is inside the repository %s", wt, root)
	}
	if !worktree.IsInside(wt) {
		t.Errorf("worktree %s is not marked as ralph's", wt)
	}
	if b := strings.TrimSpace(gitT(t, wt, "symbolic-ref", "--short", "HEAD")); b != "ralph/t1" {
		t.Errorf("worktree on %s, want ralph/t1", b)
	}
	if b := strings.TrimSpace(gitT(t, root, "symbolic-ref", "--short", "HEAD")); b != "master" {
		t.Errorf("checkout on %s, want it left on master", b)
	}
	if st := gitT(t, root, "status", "--porcelain", "--", ".", ":(exclude).ralph"); st != "" {
		t.Errorf("checkout changed:\n%s", st)
	}
	if len(g.loop.roots) != 1 || g.loop.roots[0] != wt {
		t.Fatalf("loop ran in %q, want %s", g.loop.roots, wt)
	}
	o := g.loop.opts[0]
	if want := filepath.Join(g.r.dir, "threads", "t1", "loop"); o.Home != want || o.SharedHome != g.r.dir {
		t.Errorf("loop home %q shared %q, want %q and the checkout's %q", o.Home, o.SharedHome, want, g.r.dir)
	}
	if want := filepath.Join(wt, ".ralph", "threads", "t1", "prd.md"); o.PRDPath != want || o.Source == nil || o.Source.Path() != want {
		t.Errorf("loop PRD %q, want the copy in the worktree %q", o.PRDPath, want)
	}
	for _, d := range g.checks.dirs {
		if d != wt {
			t.Errorf("a check ran in %s, want the worktree", d)
		}
	}
	if ev := g.r.Evidence(); ev == nil || !ev.Passed {
		t.Errorf("evidence %+v: the promise is read from the loop's own home", ev)
	}
}

// TestCheckoutThreadWaitsForTheOneRunningThere: a thread about to check
// its branch out in the checkout, while another thread's loop works
// there, is refused before anything moves, and told about --worktree,
// with which it goes ahead.
func TestCheckoutThreadWaitsForTheOneRunningThere(t *testing.T) {
	g := newRig(t, PhaseFinalized, ModeQuick, nil)
	g.saveOther("t2", PhaseRunning, "")
	err := g.r.drive()
	if err == nil || !strings.Contains(err.Error(), "thread t2 is Running in your checkout, and thread t1 would check out its branch ralph/t1 there: start it with --worktree") {
		t.Fatalf("err %v, want the refusal\n%s", err, g.out)
	}
	g.wantSteps()
	if g.phase() != PhaseFinalized {
		t.Errorf("phase %s, want Finalized", g.phase())
	}
	if b := strings.TrimSpace(gitT(t, g.r.ws.Root, "symbolic-ref", "--short", "HEAD")); b != "master" {
		t.Errorf("checkout on %s, want master", b)
	}

	g.r.opts.Worktree = true
	g.loop.steps = []loopStep{{outcome: loop.OutcomeComplete, iterations: 1, done: true}}
	g.checks.pass["check-hello"] = true
	if err := g.r.drive(); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	if g.phase() != PhasePendingReview {
		t.Fatalf("phase %s with --worktree\n%s", g.phase(), g.out)
	}
}

// TestWorktreeIsChosenWhenImplementationBegins: --worktree on a thread
// whose branch is already checked out in the checkout is refused, with
// what to do, and changes nothing.
func TestWorktreeIsChosenWhenImplementationBegins(t *testing.T) {
	g := newRig(t, PhaseConfiguring, ModeMethodical, nil)
	g.toBranch()
	g.r.opts.Worktree = true
	err := g.r.Do("start", "", nil)
	var ue *errs.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "thread t1 works in your checkout already, on its branch ralph/t1: --worktree applies when implementation begins") {
		t.Fatalf("err %v, want a usage error saying when --worktree applies", err)
	}
	if th, _ := Load(g.r.dir, "t1"); th.Phase.Type != PhaseConfiguring || th.Worktree != "" {
		t.Errorf("thread %+v changed", th)
	}
	if _, err := os.Stat(WorktreePath(g.r.ws.Root, "", "t1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a worktree was made: %v", err)
	}
}

// TestWorktreeThreadResetRemovesItsWorktree: revise from review resets a
// worktree thread by removing its worktree (its uncommitted work kept on
// the thread's ref) and its branch; the checkout is not touched.
func TestWorktreeThreadResetRemovesItsWorktree(t *testing.T) {
	g := newRig(t, PhasePendingReview, ModeQuick, func(string) bool { return true })
	wt := g.toWorktree()
	if err := os.WriteFile(filepath.Join(wt, "half.txt"), []byte("half\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.r.apply(Event{Verb: VerbReviseSpec, Source: SourceHuman}, "revise"); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	if _, err := os.Stat(wt); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree still there: %v", err)
	}
	root := g.r.ws.Root
	if out := gitT(t, root, "branch", "--list", "ralph/t1"); strings.TrimSpace(out) != "" {
		t.Errorf("branch kept: %s", out)
	}
	if out := gitT(t, root, "show", "refs/ralph/threads/t1/before-reset:half.txt"); out != "half\n" {
		t.Errorf("uncommitted work not kept: %q", out)
	}
	if b := strings.TrimSpace(gitT(t, root, "symbolic-ref", "--short", "HEAD")); b != "master" {
		t.Errorf("checkout on %s, want master", b)
	}
	th, _ := Load(g.r.dir, "t1")
	if th.Phase.Type != PhaseDrafting || th.Branch != "" || th.Worktree != wt {
		t.Errorf("thread %+v: want Drafting, no branch, the worktree choice kept", th)
	}
	if g.r.inWorktree() {
		t.Error("the runner still works in the removed worktree")
	}
}

// TestGoneWorktreeIsMadeAgainFromItsBranch: a worktree deleted by hand is
// made again, with every commit of the thread's branch, by the next
// command on the thread; with the branch gone too, the command says so.
func TestGoneWorktreeIsMadeAgainFromItsBranch(t *testing.T) {
	g := newRig(t, PhasePendingReview, ModeQuick, nil)
	wt := g.toWorktree()
	if err := os.WriteFile(filepath.Join(wt, "done.txt"), []byte("done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, wt, "add", "done.txt")
	gitT(t, wt, "commit", "-q", "-m", "done")
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(g.r.ctx, g.r.ws, g.r.cfg, g.r.Thread(), g.r.env, Options{})
	if err := r.Do("review", "", nil); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "done.txt")); err != nil || string(b) != "done\n" {
		t.Fatalf("worktree not made again from its branch: %q %v", b, err)
	}
	if !strings.Contains(g.out.String(), "done.txt") {
		t.Errorf("the review does not show the branch's work:\n%s", g.out)
	}

	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	gitT(t, g.r.ws.Root, "worktree", "prune")
	gitT(t, g.r.ws.Root, "branch", "-q", "-D", "ralph/t1")
	r = NewRunner(g.r.ctx, g.r.ws, g.r.cfg, g.r.Thread(), g.r.env, Options{})
	err := r.Do("review", "", nil)
	if err == nil || !strings.Contains(err.Error(), "its branch ralph/t1 are gone, and its work with them: `ralph thread abandon t1`") {
		t.Fatalf("err %v, want the branch named as gone", err)
	}
}
