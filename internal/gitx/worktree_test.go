package gitx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// outside returns a path for a worktree outside the repository, in a
// folder of its own that does not exist yet.
func outside(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(t.TempDir(), name)
}

// readFile returns a file's content, failing the test when it is missing.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// commitIn writes name=content in the work tree dir and commits it there.
func commitIn(t *testing.T, dir, name, content, msg string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "--", name)
	gitT(t, dir, "commit", "-q", "-m", msg)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// raceRunner runs do once, just before the first git command named
// before, to play another process acting at the worst moment.
type raceRunner struct {
	before string
	do     func()
}

func (rr *raceRunner) Git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	if rr.do != nil && len(args) > 0 && args[0] == rr.before {
		rr.do()
		rr.do = nil
	}
	return ExecRunner{}.Git(ctx, dir, args...)
}

// afterRunner runs do once, right after the first git command named after
// failed: to play another process that lets go of a lock ralph met.
type afterRunner struct {
	after string
	do    func()
	ran   int // commands named after
}

func (ar *afterRunner) Git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	out, err := ExecRunner{}.Git(ctx, dir, args...)
	if len(args) > 0 && args[0] == ar.after {
		ar.ran++
		if err != nil && ar.do != nil {
			ar.do()
			ar.do = nil
		}
	}
	return out, err
}

// shortLocks makes lock waits quick for the test.
func shortLocks(t *testing.T) {
	t.Helper()
	saved := lockWaits
	lockWaits = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	t.Cleanup(func() { lockWaits = saved })
}

func TestWorktreesListsEveryKind(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "f", "one\n")
	head := commitAll(t, r, "one")
	onBranch, detached, gone := outside(t, "on branch"), outside(t, "detached\nlocked"), outside(t, "gone")
	gitT(t, r.Dir, "worktree", "add", "-q", "-b", "task", onBranch, "main")
	gitT(t, r.Dir, "worktree", "add", "-q", "--detach", detached, "main")
	gitT(t, r.Dir, "worktree", "lock", "--reason", "kept\nfor review", detached)
	gitT(t, r.Dir, "worktree", "add", "-q", "-b", "gone", gone, "main")
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}

	got, err := r.Worktrees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Worktree{
		{Path: r.Dir, Head: head, Branch: "main"},
		{Path: onBranch, Head: head, Branch: "task"},
		{Path: detached, Head: head, Detached: true, Locked: true, LockReason: "kept\nfor review"},
		{Path: gone, Head: head, Branch: "gone", Prunable: true, PrunableReason: "gitdir file points to non-existent location"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Worktrees:\n got %+v\nwant %+v", got, want)
	}
}

// formatWorktrees writes worktrees the way `git worktree list --porcelain
// -z` does; the fuzz target checks the parser against it.
func formatWorktrees(list []Worktree) []byte {
	var b strings.Builder
	field := func(s string) { b.WriteString(s); b.WriteByte(0) }
	for _, w := range list {
		field("worktree " + w.Path)
		if w.Bare {
			field("bare")
		} else {
			field("HEAD " + w.Head)
		}
		switch {
		case w.Detached:
			field("detached")
		case w.Branch != "":
			field("branch refs/heads/" + w.Branch)
		}
		keyValue := func(key, value string) {
			if value != "" {
				key += " " + value
			}
			field(key)
		}
		if w.Locked {
			keyValue("locked", w.LockReason)
		}
		if w.Prunable {
			keyValue("prunable", w.PrunableReason)
		}
		b.WriteByte(0)
	}
	return []byte(b.String())
}

func FuzzParseWorktrees(f *testing.F) {
	f.Add([]byte("worktree /r\x00HEAD b2bea737a30e471a94fc9961aaeaac2ac8a73551\x00branch refs/heads/main\x00\x00" +
		"worktree /wt 2\x00HEAD b2bea737a30e471a94fc9961aaeaac2ac8a73551\x00detached\x00locked why\ntwo\x00\x00" +
		"worktree /wt3\x00HEAD b2bea737a30e471a94fc9961aaeaac2ac8a73551\x00branch refs/heads/t3\x00prunable gitdir file points to non-existent location\x00\x00"))
	f.Add([]byte("worktree /bare.git\x00bare\x00\x00"))
	f.Add([]byte("worktree /r\x00HEAD 0\x00future-key value\x00locked\x00\x00"))
	f.Add([]byte("worktree 0\x00prunable  \x00\x00"))
	f.Add([]byte("HEAD x\x00\x00"))
	f.Add([]byte("worktree /r\x00HEAD x"))
	f.Fuzz(func(t *testing.T, out []byte) {
		list, err := ParseWorktrees(out)
		if err != nil {
			return
		}
		for _, w := range list {
			if w.Path == "" {
				t.Fatalf("a worktree without a path from %q", out)
			}
		}
		// Whatever parsed, written back as git writes it, reads the same:
		// no field leaks into another, whatever bytes the values hold.
		again, err := ParseWorktrees(formatWorktrees(list))
		if err != nil {
			t.Fatalf("written back, %+v does not parse: %v", list, err)
		}
		if len(again) != len(list) {
			t.Fatalf("written back, %d worktrees read as %d", len(list), len(again))
		}
		for i := range list {
			w := list[i]
			if w.Detached {
				w.Branch = "" // git writes one or the other
			}
			if w.Bare {
				w.Head = ""
			}
			if !reflect.DeepEqual(again[i], w) {
				t.Fatalf("written back, %+v reads as %+v", w, again[i])
			}
		}
	})
}

func TestParseWorktreesRejectsGarbage(t *testing.T) {
	for _, out := range []string{"HEAD abc\x00\x00", "worktree /r\x00HEAD abc", "\x00", "worktree \x00\x00"} {
		if list, err := ParseWorktrees([]byte(out)); err == nil {
			t.Errorf("ParseWorktrees(%q) = %+v, want an error", out, list)
		}
	}
	if list, err := ParseWorktrees(nil); err != nil || len(list) != 0 {
		t.Errorf("ParseWorktrees(nothing) = %+v, %v; want none", list, err)
	}
}

func TestAddWorktreeCutsABranchFromBase(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "f", "one\n")
	base := commitAll(t, r, "one")
	write(t, r, "f", "two\n")
	commitAll(t, r, "two")

	// A user who asks git to track every new branch still gets ralph's
	// branches tracking nothing: pushing one must never go anywhere.
	gitT(t, r.Dir, "config", "branch.autoSetupMerge", "always")
	gitT(t, r.Dir, "branch", "base", base)

	path := filepath.Join(outside(t, "wts"), "run-1", "US-001")
	if err := r.AddWorktree(ctx, path, "ralph/run-1/US-001", "base"); err != nil {
		t.Fatalf("AddWorktree: %v", err)
	}
	if got := readFile(t, filepath.Join(path, "f")); got != "one\n" {
		t.Errorf("the worktree has f = %q, want the base's %q", got, "one\n")
	}
	if got := gitT(t, path, "rev-parse", "HEAD"); got != base {
		t.Errorf("the worktree is at %s, want the base %s", got, base)
	}
	if got := gitT(t, path, "branch", "--show-current"); got != "ralph/run-1/US-001" {
		t.Errorf("the worktree is on %q", got)
	}
	if out, err := r.git(ctx, "config", "branch.ralph/run-1/US-001.merge"); err == nil {
		t.Errorf("the new branch tracks %q; ralph's branches track nothing", out)
	}
	// A resumed run asks again: nothing changes, no error.
	if err := r.AddWorktree(ctx, path, "ralph/run-1/US-001", base); err != nil {
		t.Errorf("AddWorktree again: %v", err)
	}
}

// TestAddWorktreeRecreatesAMissingFolderFromItsBranch is the crash case:
// the folder of a worker is gone, its branch has commits. The worktree comes
// back on the branch as it is, never reset to the (newer) base.
func TestAddWorktreeRecreatesAMissingFolderFromItsBranch(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "f", "one\n")
	base := commitAll(t, r, "one")
	path := outside(t, "wt")
	if err := r.AddWorktree(ctx, path, "task", base); err != nil {
		t.Fatal(err)
	}
	work := commitIn(t, path, "g", "work\n", "the task's work")
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	write(t, r, "f", "newer\n")
	newer := commitAll(t, r, "newer")

	if err := r.AddWorktree(ctx, path, "task", newer); err != nil {
		t.Fatalf("AddWorktree over a stale entry: %v", err)
	}
	if got := gitT(t, path, "rev-parse", "HEAD"); got != work {
		t.Errorf("the re-created worktree is at %s, want the branch's own commit %s", got, work)
	}
	if got := readFile(t, filepath.Join(path, "g")); got != "work\n" {
		t.Errorf("g = %q, the task's work is lost", got)
	}
}

// TestAddWorktreeFinishesAnInterruptedAdd: `git worktree add` killed half
// way leaves an entry locked "initializing"; ralph makes it again.
func TestAddWorktreeFinishesAnInterruptedAdd(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "f", "one\n")
	base := commitAll(t, r, "one")
	path := outside(t, "wt")
	gitT(t, r.Dir, "worktree", "add", "-q", "-b", "task", path, base)
	gitDir := gitT(t, path, "rev-parse", "--absolute-git-dir")
	if err := os.WriteFile(filepath.Join(gitDir, "locked"), []byte("initializing"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(path, "f")); err != nil {
		t.Fatal(err)
	}
	if err := r.AddWorktree(ctx, path, "task", base); err != nil {
		t.Fatalf("AddWorktree after an interrupted add: %v", err)
	}
	if got := readFile(t, filepath.Join(path, "f")); got != "one\n" {
		t.Errorf("f = %q after re-making the worktree", got)
	}
}

func TestAddWorktreeRefuses(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "f", "one\n")
	base := commitAll(t, r, "one")

	notOurs := outside(t, "not-ours")
	if err := os.MkdirAll(notOurs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notOurs, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := outside(t, "other")
	if err := r.AddWorktree(ctx, other, "other", base); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, path, branch string
		phrases            []string
	}{
		{"a folder that is not a worktree", notOurs, "t1", []string{notOurs, "is not a worktree of " + r.Dir, "move it away or remove it"}},
		{"a path inside the repository", filepath.Join(r.Dir, ".worktrees", "t2"), "t2", []string{"inside the work tree " + r.Dir, "outside the repository"}},
		{"a path inside another worktree", filepath.Join(other, "nested"), "t3", []string{"inside the work tree " + other}},
		{"a worktree on another branch", other, "t4", []string{"already a worktree of this repository, on branch other", "git worktree remove " + other}},
		{"a relative path", "wt", "t5", []string{"not an absolute path"}},
		{"a branch git would read as an option", outside(t, "x"), "-D", []string{"invalid branch name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.AddWorktree(ctx, tt.path, tt.branch, base)
			if err == nil {
				t.Fatal("AddWorktree succeeded, want a refusal")
			}
			for _, p := range tt.phrases {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not say %q", err, p)
				}
			}
			if ok, _ := r.BranchExists(ctx, tt.branch); ok && tt.branch != "other" {
				t.Errorf("a refused AddWorktree left branch %s behind", tt.branch)
			}
		})
	}
	if got := readFile(t, filepath.Join(notOurs, "notes.txt")); got != "mine" {
		t.Errorf("the folder that is not ours changed: notes.txt = %q", got)
	}

	// An empty folder, made ahead of time, is fine, as it is for git.
	empty := outside(t, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.AddWorktree(ctx, empty, "t6", base); err != nil {
		t.Errorf("AddWorktree into an empty folder: %v", err)
	}
}

func TestRemoveAndPruneWorktrees(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "f", "one\n")
	base := commitAll(t, r, "one")
	path := outside(t, "wt")
	if err := r.AddWorktree(ctx, path, "task", base); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "unsaved"), []byte("agent's work"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveWorktree(ctx, path, false); err == nil {
		t.Fatal("RemoveWorktree dropped a worktree with untracked work without force")
	}
	if got := readFile(t, filepath.Join(path, "unsaved")); got != "agent's work" {
		t.Fatalf("a refused remove touched the work: %q", got)
	}
	if err := r.RemoveWorktree(ctx, path, true); err != nil {
		t.Fatalf("RemoveWorktree with force: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the folder is still there after RemoveWorktree: %v", err)
	}
	if ok, _ := r.BranchExists(ctx, "task"); !ok {
		t.Error("RemoveWorktree deleted the branch; it must stay")
	}

	gone := outside(t, "gone")
	if err := r.AddWorktree(ctx, gone, "gone", base); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	if err := r.PruneWorktrees(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := r.Worktrees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("after removing and pruning, worktrees %+v, want only the main one", list)
	}
}

func TestFastForward(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (r *Repo, from, to string) {
		r = newRepo(t)
		write(t, r, "f", "one\n")
		from = commitAll(t, r, "one")
		wt := outside(t, "wt")
		if err := r.AddWorktree(ctx, wt, "task", from); err != nil {
			t.Fatal(err)
		}
		to = commitIn(t, wt, "f", "landed\n", "task")
		return r, from, to
	}

	t.Run("the user's checkout on the branch moves with it", func(t *testing.T) {
		r, from, to := setup(t)
		write(t, r, "notes", "the user's own untracked file\n")
		if err := r.FastForward(ctx, "main", from, to); err != nil {
			t.Fatalf("FastForward: %v", err)
		}
		if got := gitT(t, r.Dir, "rev-parse", "main"); got != to {
			t.Errorf("main is at %s, want %s", got, to)
		}
		if got := readFile(t, filepath.Join(r.Dir, "f")); got != "landed\n" {
			t.Errorf("the checkout's f = %q, want the landed content", got)
		}
		if st := gitT(t, r.Dir, "status", "--porcelain"); st != "?? notes" {
			t.Errorf("the checkout's status after the fast-forward:\n%s\nwant only the user's untracked file", st)
		}
	})

	t.Run("a branch checked out nowhere", func(t *testing.T) {
		r, from, to := setup(t)
		gitT(t, r.Dir, "branch", "target", from)
		if err := r.FastForward(ctx, "target", from, to); err != nil {
			t.Fatalf("FastForward: %v", err)
		}
		if got := gitT(t, r.Dir, "rev-parse", "target"); got != to {
			t.Errorf("target is at %s, want %s", got, to)
		}
		if got := readFile(t, filepath.Join(r.Dir, "f")); got != "one\n" {
			t.Errorf("the checkout on main changed: f = %q", got)
		}
	})

	t.Run("a branch that moved is left where it is", func(t *testing.T) {
		r, from, to := setup(t)
		write(t, r, "h", "the user's commit\n")
		moved := commitAll(t, r, "user commit")
		err := r.FastForward(ctx, "main", from, to)
		var bm *BranchMovedError
		if !errors.As(err, &bm) || bm.Actual != moved || bm.Expected != from {
			t.Fatalf("FastForward = %v, want a *BranchMovedError at %s", err, moved)
		}
		if !errors.Is(err, ErrBranchMoved) {
			t.Errorf("errors.Is(%v, ErrBranchMoved) is false", err)
		}
		if !strings.Contains(err.Error(), "branch main moved") {
			t.Errorf("error %q does not say the branch moved", err)
		}
		if got := gitT(t, r.Dir, "rev-parse", "main"); got != moved {
			t.Errorf("main is at %s, want the user's commit %s", got, moved)
		}
	})

	t.Run("a commit made while it lands is never thrown away", func(t *testing.T) {
		r, from, to := setup(t)
		var sneaked string
		r.Runner = &raceRunner{before: "update-ref", do: func() {
			// The person commits between ralph's look at the branch
			// and its move.
			tree := gitT(t, r.Dir, "rev-parse", from+"^{tree}")
			sneaked = gitT(t, r.Dir, "commit-tree", tree, "-p", from, "-m", "the person's commit")
			gitT(t, r.Dir, "update-ref", "refs/heads/main", sneaked)
		}}
		err := r.FastForward(ctx, "main", from, to)
		var bm *BranchMovedError
		if !errors.As(err, &bm) || bm.Actual != sneaked {
			t.Fatalf("FastForward = %v, want a *BranchMovedError at the person's commit", err)
		}
		if got := gitT(t, r.Dir, "rev-parse", "main"); got != sneaked {
			t.Errorf("main is at %s, want the person's commit %s", got, sneaked)
		}
		if got := readFile(t, filepath.Join(r.Dir, "f")); got != "one\n" {
			t.Errorf("the checkout kept the landed content after the refusal: f = %q", got)
		}
	})

	t.Run("not a fast-forward", func(t *testing.T) {
		r, from, to := setup(t)
		err := r.FastForward(ctx, "main", to, from)
		if err == nil || !strings.Contains(err.Error(), "cannot fast-forward main") {
			t.Fatalf("FastForward backwards = %v, want a refusal", err)
		}
		if got := gitT(t, r.Dir, "rev-parse", "main"); got != from {
			t.Errorf("main moved to %s", got)
		}
	})

	t.Run("the user's change to a landed file refuses it", func(t *testing.T) {
		r, from, to := setup(t)
		write(t, r, "f", "the user's edit\n")
		err := r.FastForward(ctx, "main", from, to)
		if err == nil || !strings.Contains(err.Error(), "changes or untracked files in the way") {
			t.Fatalf("FastForward over the user's edit = %v, want a refusal", err)
		}
		if got := gitT(t, r.Dir, "rev-parse", "main"); got != from {
			t.Errorf("main moved to %s", got)
		}
		if got := readFile(t, filepath.Join(r.Dir, "f")); got != "the user's edit\n" {
			t.Errorf("the user's edit is gone: f = %q", got)
		}
	})
}

func TestBranchesAndUnmergedCommits(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "f", "one\n")
	base := commitAll(t, r, "one")
	wt := outside(t, "wt")
	if err := r.AddWorktree(ctx, wt, "ralph/run/US-1", base); err != nil {
		t.Fatal(err)
	}
	commitIn(t, wt, "g", "1\n", "first")
	commitIn(t, wt, "g", "2\n", "second")

	if ok, err := r.BranchExists(ctx, "ralph/run/US-1"); !ok || err != nil {
		t.Errorf("BranchExists(ralph/run/US-1) = %v, %v", ok, err)
	}
	if ok, err := r.BranchExists(ctx, "ralph/run/US-2"); ok || err != nil {
		t.Errorf("BranchExists(ralph/run/US-2) = %v, %v", ok, err)
	}
	if n, err := r.UnmergedCommits(ctx, "ralph/run/US-1", "main"); n != 2 || err != nil {
		t.Errorf("UnmergedCommits = %d, %v; want 2", n, err)
	}

	if err := r.RemoveWorktree(ctx, wt, false); err != nil {
		t.Fatal(err)
	}
	err := r.DeleteBranch(ctx, "ralph/run/US-1", "main", false)
	var unmerged *UnmergedError
	if !errors.As(err, &unmerged) || unmerged.Commits != 2 {
		t.Fatalf("DeleteBranch of unlanded work = %v, want an *UnmergedError of 2 commits", err)
	}
	if !strings.Contains(err.Error(), "2 commits that main does not contain") || !strings.Contains(err.Error(), "git log main..ralph/run/US-1") {
		t.Errorf("error %q does not say what would be lost and how to look", err)
	}
	if ok, _ := r.BranchExists(ctx, "ralph/run/US-1"); !ok {
		t.Fatal("the refused delete removed the branch")
	}

	// Landed: main fast-forwarded to the branch; now it may go.
	tip := gitT(t, r.Dir, "rev-parse", "ralph/run/US-1")
	if err := r.FastForward(ctx, "main", base, tip); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteBranch(ctx, "ralph/run/US-1", "main", false); err != nil {
		t.Fatalf("DeleteBranch of a landed branch: %v", err)
	}
	if ok, _ := r.BranchExists(ctx, "ralph/run/US-1"); ok {
		t.Error("the landed branch is still there")
	}

	// Force drops unlanded work, but never a checked-out branch.
	gitT(t, r.Dir, "branch", "scratch", base)
	scratch := outside(t, "scratch")
	gitT(t, r.Dir, "worktree", "add", "-q", scratch, "scratch")
	commitIn(t, scratch, "s", "s\n", "scratch work")
	if err := r.DeleteBranch(ctx, "scratch", "main", true); err == nil || !strings.Contains(err.Error(), "checked out in "+scratch) {
		t.Errorf("DeleteBranch of a checked-out branch = %v, want a refusal naming the worktree", err)
	}
	if err := r.RemoveWorktree(ctx, scratch, false); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteBranch(ctx, "scratch", "main", true); err != nil {
		t.Errorf("DeleteBranch with force: %v", err)
	}
}

// TestALockLeftBySomeoneElse: git's index.lock or a ref's lock held by
// another process is waited for, and when it stays, the error names the
// file and says what to do.
func TestALockLeftBySomeoneElse(t *testing.T) {
	ctx := context.Background()
	shortLocks(t)

	t.Run("index.lock that stays", func(t *testing.T) {
		r := newRepo(t)
		write(t, r, "f", "one\n")
		from := commitAll(t, r, "one")
		to := gitT(t, r.Dir, "commit-tree", gitT(t, r.Dir, "rev-parse", from+"^{tree}"), "-p", from, "-m", "two")
		lock := filepath.Join(r.Dir, ".git", "index.lock")
		if err := os.WriteFile(lock, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		err := r.FastForward(ctx, "main", from, to)
		var le *LockError
		if !errors.As(err, &le) || le.Path != lock {
			t.Fatalf("FastForward with a held index.lock = %v, want a *LockError for %s", err, lock)
		}
		if !strings.Contains(err.Error(), "if no git is running, remove "+lock) {
			t.Errorf("error %q does not say what to do", err)
		}
		if got := gitT(t, r.Dir, "rev-parse", "main"); got != from {
			t.Errorf("main moved to %s", got)
		}
	})

	t.Run("a lock released while ralph waits", func(t *testing.T) {
		r := newRepo(t)
		write(t, r, "f", "one\n")
		from := commitAll(t, r, "one")
		gitT(t, r.Dir, "branch", "target", from)
		write(t, r, "f", "two\n")
		to := commitAll(t, r, "two")
		lock := filepath.Join(r.Dir, ".git", "refs", "heads", "target.lock")
		if err := os.WriteFile(lock, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		// The lock goes once ralph's update-ref has met it: ralph is
		// known to be waiting, not merely to have come late.
		ar := &afterRunner{after: "update-ref", do: func() { os.Remove(lock) }}
		r.Runner = ar
		if err := r.FastForward(ctx, "target", from, to); err != nil {
			t.Fatalf("FastForward after the lock went: %v", err)
		}
		if ar.ran < 2 {
			t.Errorf("update-ref ran %d time(s); want a refusal, then a retry that took the released lock", ar.ran)
		}
		if got := gitT(t, r.Dir, "rev-parse", "target"); got != to {
			t.Errorf("target is at %s, want %s", got, to)
		}
	})
}
