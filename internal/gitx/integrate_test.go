package gitx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// An integration worktree of r, detached at rev.
func integration(t *testing.T, r *Repo, rev string) *Repo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "integration")
	gitT(t, r.Dir, "worktree", "add", "-q", "--detach", dir, rev)
	w, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Two tasks cut from one base: one that touches another file applies on a
// tip that already has the first; one that changed the same line is a
// conflict naming the file, and the integration tree is left clean.
func TestSquashAndApplyOnTheTip(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "one\ntwo\nthree\n")
	write(t, r, ".ralph/progress.md", "log\n")
	base := commitAll(t, r, "base")
	gitT(t, r.Dir, "branch", "t1")
	gitT(t, r.Dir, "branch", "t2")
	gitT(t, r.Dir, "branch", "t3")
	// The target moves on: a.txt line two changes.
	write(t, r, "a.txt", "one\nTWO from main\nthree\n")
	tip := commitAll(t, r, "main moves")

	gitT(t, r.Dir, "checkout", "-q", "t1")
	write(t, r, "b.txt", "new file\n")
	write(t, r, ".ralph/progress.md", "log\nt1 was here\n")
	t1 := commitAll(t, r, "t1")
	gitT(t, r.Dir, "checkout", "-q", "t2")
	write(t, r, "a.txt", "one\nTWO from t2\nthree\n")
	t2 := commitAll(t, r, "t2")
	gitT(t, r.Dir, "checkout", "-q", "main")

	w := integration(t, r, tip)
	patch, err := r.SquashDiff(ctx, base, t1, ".ralph")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ApplyThreeWay(ctx, patch); err != nil {
		t.Fatalf("a change to another file does not apply on the tip: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir, "b.txt")); string(b) != "new file\n" {
		t.Errorf("b.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir, ".ralph/progress.md")); string(b) != "log\n" {
		t.Errorf("an excluded path came along: progress.md = %q", b)
	}
	if err := w.DetachAt(ctx, tip); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "b.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Error("DetachAt left the applied file behind")
	}

	patch, _ = r.SquashDiff(ctx, base, t2)
	err = w.ApplyThreeWay(ctx, patch)
	var c *ApplyConflict
	if !errors.As(err, &c) || !slices.Equal(c.Files, []string{"a.txt"}) {
		t.Fatalf("same line changed on both sides: err = %v; want a conflict in a.txt", err)
	}
	if s := snapshot(t, w); !s.Clean() || s.Head != tip {
		t.Errorf("after a conflict the integration tree is %+v; want clean at the tip", s)
	}
	if err := w.ApplyThreeWay(ctx, nil); err != nil {
		t.Errorf("an empty patch: %v", err)
	}
}

func TestRejectedFiles(t *testing.T) {
	got := rejectedFiles("error: patch failed: src/x.go:12\nerror: src/x.go: patch does not apply\nerror: gone.txt: does not exist in index\n")
	if !slices.Equal(got, []string{"src/x.go", "gone.txt"}) {
		t.Errorf("rejectedFiles = %v", got)
	}
}
