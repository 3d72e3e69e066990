package gitx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestMain keeps the user's and the system's git config out of the tests.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// requireGit fails the test when the git binary is missing: these tests
// exist to check ralph against the real git, so skipping would hide that.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the gitx tests but is not in PATH: %v", err)
	}
}

// gitT runs git in dir for test setup and returns its trimmed output.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := ExecRunner{}.Git(context.Background(), dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// newRepo creates an empty repository on branch main and opens it.
func newRepo(t testing.TB) *Repo {
	t.Helper()
	requireGit(t)
	dir := t.TempDir()
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "config", "user.name", "Ralph Test")
	gitT(t, dir, "config", "user.email", "ralph@example.com")
	r, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// write creates or replaces a file below the repository's top level.
func write(t testing.TB, r *Repo, name, content string) {
	t.Helper()
	p := filepath.Join(r.Dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// commitAll stages everything and commits it, returning the new hash.
func commitAll(t testing.TB, r *Repo, msg string) string {
	t.Helper()
	ctx := context.Background()
	if err := r.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	hash, err := r.Commit(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	return hash
}

func snapshot(t *testing.T, r *Repo) Snapshot {
	t.Helper()
	s, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpenNotRepo(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	// Stops git from finding a repository above the temp dir.
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	_, err := Open(context.Background(), dir)
	if !errors.Is(err, ErrNotRepo) {
		t.Fatalf("Open(non-repo) error = %v, want ErrNotRepo", err)
	}
	if !strings.Contains(err.Error(), "not a git repository (run `git init` first)") {
		t.Errorf("error %q lacks the hint", err)
	}
}

func TestOpenFindsTopLevel(t *testing.T) {
	r := newRepo(t)
	sub := filepath.Join(r.Dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := Open(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(r.Dir)
	if got.Dir != want || got.Runner == nil {
		t.Errorf("Open(sub) = %+v, want Dir %q", got, want)
	}
}

func TestSnapshotEmptyRepo(t *testing.T) {
	r := newRepo(t)
	s := snapshot(t, r)
	if s.Head != "" || s.Branch != "main" || s.Dirty != nil || !s.Clean() {
		t.Errorf("snapshot of empty repo = %+v", s)
	}
	head, err := r.Head(context.Background())
	if err != nil || head != "" {
		t.Errorf("Head() = %q, %v; want empty", head, err)
	}
}

func TestSnapshotAfterCommits(t *testing.T) {
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	commitAll(t, r, "first")
	write(t, r, "a.txt", "a2\n")
	hash := commitAll(t, r, "second")

	s := snapshot(t, r)
	if s.Head != hash || s.Branch != "main" || !s.Clean() {
		t.Errorf("snapshot = %+v, want Head %s on main, clean", s, hash)
	}
	if head, err := r.Head(context.Background()); err != nil || head != hash {
		t.Errorf("Head() = %q, %v; want %s", head, err, hash)
	}
}

func TestSnapshotDirty(t *testing.T) {
	r := newRepo(t)
	write(t, r, ".gitignore", "*.log\n")
	write(t, r, "modified.txt", "1\n")
	write(t, r, "deleted.txt", "1\n")
	write(t, r, "old name.txt", "rename me\n")
	commitAll(t, r, "base")

	write(t, r, "modified.txt", "2\n")
	write(t, r, "staged.txt", "new\n")
	gitT(t, r.Dir, "add", "staged.txt")
	write(t, r, "with space.txt", "x\n")
	write(t, r, "dir/nested/deep.txt", "x\n")
	write(t, r, "ignored.log", "x\n")
	if err := os.Remove(filepath.Join(r.Dir, "deleted.txt")); err != nil {
		t.Fatal(err)
	}
	gitT(t, r.Dir, "mv", "old name.txt", "new name.txt")

	s := snapshot(t, r)
	want := []string{
		"deleted.txt", "dir/nested/deep.txt", "modified.txt", "new name.txt",
		"old name.txt", "staged.txt", "with space.txt",
	}
	if !slices.Equal(s.Dirty, want) {
		t.Errorf("Dirty = %q\nwant    %q", s.Dirty, want)
	}
	if s.Clean() {
		t.Error("Clean() = true for a dirty tree")
	}
}

func TestSnapshotDetached(t *testing.T) {
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	hash := commitAll(t, r, "first")
	gitT(t, r.Dir, "checkout", "-q", "--detach")
	s := snapshot(t, r)
	if s.Head != hash || s.Branch != "" {
		t.Errorf("snapshot = %+v, want Head %s, no branch", s, hash)
	}
}

func TestSnapshotRunsOneGitProcessOnRealRepo(t *testing.T) {
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	commitAll(t, r, "first")
	write(t, r, "b.txt", "b\n")
	counter := &countingRunner{Runner: r.Runner}
	r.Runner = counter
	snapshot(t, r)
	if counter.calls != 1 {
		t.Errorf("Snapshot ran %d git processes, want 1", counter.calls)
	}
}

func TestCommitsBetweenAndChangedFiles(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	write(t, r, "keep.txt", "k\n")
	c1 := commitAll(t, r, "first commit")
	write(t, r, "a.txt", "a2\n")
	write(t, r, "dir/b.txt", "b\n")
	c2 := commitAll(t, r, "second: add b")
	write(t, r, "c.txt", "c\n")
	if err := os.Remove(filepath.Join(r.Dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	c3 := commitAll(t, r, "third")

	commits, err := r.CommitsBetween(ctx, c1, c3)
	if err != nil {
		t.Fatal(err)
	}
	want := []Commit{{c2, "second: add b"}, {c3, "third"}}
	if !slices.Equal(commits, want) {
		t.Errorf("CommitsBetween(c1, c3) = %v, want %v", commits, want)
	}
	all, err := r.CommitsBetween(ctx, "", c2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Commit{{c1, "first commit"}, {c2, "second: add b"}}; !slices.Equal(all, want) {
		t.Errorf("CommitsBetween(\"\", c2) = %v, want %v", all, want)
	}
	if same, err := r.CommitsBetween(ctx, c3, c3); same != nil || err != nil {
		t.Errorf("CommitsBetween(c3, c3) = %v, %v; want nil", same, err)
	}

	files, err := r.ChangedFiles(ctx, c1, c3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.txt", "c.txt", "dir/b.txt"}; !slices.Equal(files, want) {
		t.Errorf("ChangedFiles(c1, c3) = %q, want %q", files, want)
	}
	files, err = r.ChangedFiles(ctx, "", c2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.txt", "dir/b.txt", "keep.txt"}; !slices.Equal(files, want) {
		t.Errorf("ChangedFiles(\"\", c2) = %q, want %q", files, want)
	}
	if same, err := r.ChangedFiles(ctx, c2, c2); same != nil || err != nil {
		t.Errorf("ChangedFiles(c2, c2) = %v, %v; want nil", same, err)
	}
}

func TestChangedFilesListsBothSidesOfRename(t *testing.T) {
	r := newRepo(t)
	write(t, r, "old.txt", "some content that survives the rename\n")
	c1 := commitAll(t, r, "first")
	gitT(t, r.Dir, "mv", "old.txt", "new.txt")
	c2 := commitAll(t, r, "rename")
	files, err := r.ChangedFiles(context.Background(), c1, c2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"new.txt", "old.txt"}; !slices.Equal(files, want) {
		t.Errorf("ChangedFiles = %q, want %q", files, want)
	}
}

func TestCommit(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	// A message starting with a dash must not be taken for an option.
	msg := "-subject with dash\n\nbody line\n"
	hash := commitAll(t, r, msg)
	if hash != gitT(t, r.Dir, "rev-parse", "HEAD") {
		t.Errorf("Commit returned %s, HEAD is elsewhere", hash)
	}
	if got := gitT(t, r.Dir, "log", "-1", "--format=%B"); got != strings.TrimSpace(msg) {
		t.Errorf("commit message %q, want %q", got, msg)
	}

	_, err := r.Commit(ctx, "empty")
	if !errors.Is(err, ErrNothingToCommit) {
		t.Errorf("Commit with nothing staged: %v, want ErrNothingToCommit", err)
	}
}

func TestCommitWithoutStdinRunner(t *testing.T) {
	r := newRepo(t)
	r.Runner = plainRunner{r.Runner}
	write(t, r, "a.txt", "a\n")
	hash := commitAll(t, r, "via file\n\nbody\n")
	if got := gitT(t, r.Dir, "log", "-1", "--format=%H %B"); got != hash+" via file\n\nbody" {
		t.Errorf("HEAD is %q", got)
	}
}

func TestCommitRunsHooks(t *testing.T) {
	r := newRepo(t)
	hook := filepath.Join(r.Dir, ".git", "hooks", "pre-commit")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho hook says no >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, r, "a.txt", "a\n")
	ctx := context.Background()
	if err := r.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := r.Commit(ctx, "blocked")
	if err == nil || !strings.Contains(err.Error(), "hook says no") {
		t.Errorf("Commit with a failing pre-commit hook: %v", err)
	}
}

func TestExitErrorNamesCommandAndStderr(t *testing.T) {
	r := newRepo(t)
	_, err := r.CommitsBetween(context.Background(), "", "no-such-rev")
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v is not an *ExitError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "git log") || !strings.Contains(msg, "no-such-rev") || ee.ExitCode == 0 {
		t.Errorf("error %q lacks the command or stderr", msg)
	}
}

func TestRejectsOptionLikeRevisions(t *testing.T) {
	r := &Repo{Dir: "/nonexistent", Runner: newStub(t)}
	if _, err := r.CommitsBetween(context.Background(), "--output=/tmp/x", "HEAD"); err == nil {
		t.Error("CommitsBetween accepted an option as a revision")
	}
	if _, err := r.ChangedFiles(context.Background(), "HEAD", "-p"); err == nil {
		t.Error("ChangedFiles accepted an option as a revision")
	}
}

func TestSnapshotRunsExactlyOneCommand(t *testing.T) {
	const head = "0123456789abcdef0123456789abcdef01234567"
	out := strings.Join([]string{
		"# branch.oid " + head,
		"# branch.head feature/x",
		"# branch.upstream origin/feature/x",
		"# branch.ab +1 -0",
		"1 .M N... 100644 100644 100644 " + head + " " + head + " mod ified.go",
		"2 R. N... 100644 100644 100644 " + head + " " + head + " R100 new name.go",
		"old name.go",
		"u UU N... 100644 100644 100644 100644 " + head + " " + head + " " + head + " conflict.go",
		"? untracked dir/file.txt",
		"",
	}, "\x00")
	stub := newStub(t, stubCall{
		args: "status --porcelain=v2 --branch -z --untracked-files=all",
		out:  out,
	})
	r := &Repo{Dir: "/repo", Runner: stub}
	s := snapshot(t, r)
	want := []string{"conflict.go", "mod ified.go", "new name.go", "old name.go", "untracked dir/file.txt"}
	if s.Head != head || s.Branch != "feature/x" || !slices.Equal(s.Dirty, want) {
		t.Errorf("snapshot = %+v", s)
	}
}

func TestSnapshotInitialDetached(t *testing.T) {
	stub := newStub(t, stubCall{
		args: "status --porcelain=v2 --branch -z --untracked-files=all",
		out:  "# branch.oid (initial)\x00# branch.head (detached)\x00",
	})
	s := snapshot(t, &Repo{Dir: "/repo", Runner: stub})
	if s.Head != "" || s.Branch != "" || s.Dirty != nil {
		t.Errorf("snapshot = %+v, want zero", s)
	}
}

func TestEqualRevisionsRunNoGit(t *testing.T) {
	r := &Repo{Dir: "/repo", Runner: newStub(t)}
	ctx := context.Background()
	if c, err := r.CommitsBetween(ctx, "abc", "abc"); c != nil || err != nil {
		t.Errorf("CommitsBetween = %v, %v", c, err)
	}
	if f, err := r.ChangedFiles(ctx, "", ""); f != nil || err != nil {
		t.Errorf("ChangedFiles = %v, %v", f, err)
	}
}

func BenchmarkSnapshot(b *testing.B) {
	r := newRepo(b)
	for i := range 200 {
		write(b, r, fmt.Sprintf("pkg%d/file%d.go", i%10, i), "package x\n")
	}
	commitAll(b, r, "base")
	for i := range 5 {
		write(b, r, fmt.Sprintf("pkg%d/file%d.go", i, i), "package y\n")
		write(b, r, fmt.Sprintf("new%d.txt", i), "new\n")
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// stub is a Runner that expects an exact sequence of git calls and fails
// the test on any other call or on calls left unmade.
type stub struct {
	t     testing.TB
	calls []stubCall
}

type stubCall struct {
	args string // the git arguments joined by spaces
	out  string
	err  error
}

func newStub(t testing.TB, calls ...stubCall) *stub {
	s := &stub{t: t, calls: calls}
	t.Cleanup(func() {
		for _, c := range s.calls {
			t.Errorf("expected git call never made: git %s", c.args)
		}
	})
	return s
}

func (s *stub) Git(_ context.Context, _ string, args ...string) ([]byte, error) {
	got := strings.Join(args, " ")
	if len(s.calls) == 0 {
		s.t.Errorf("unexpected git call: git %s", got)
		return nil, errors.New("unexpected git call")
	}
	c := s.calls[0]
	s.calls = s.calls[1:]
	if got != c.args {
		s.t.Errorf("git call %q, want %q", got, c.args)
	}
	return []byte(c.out), c.err
}

// countingRunner counts the git processes run through it.
type countingRunner struct {
	Runner
	calls int
}

func (c *countingRunner) Git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	c.calls++
	return c.Runner.Git(ctx, dir, args...)
}

// plainRunner hides StdinRunner so the temp-file commit path runs.
type plainRunner struct{ r Runner }

func (p plainRunner) Git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return p.r.Git(ctx, dir, args...)
}

func TestSnapshotListsMergeConflicts(t *testing.T) {
	r := newRepo(t)
	ctx := context.Background()
	write(t, r, "f.txt", "base\n")
	gitT(t, r.Dir, "add", "-A")
	gitT(t, r.Dir, "commit", "-q", "-m", "base")
	gitT(t, r.Dir, "checkout", "-q", "-b", "other")
	write(t, r, "f.txt", "other\n")
	gitT(t, r.Dir, "commit", "-qam", "other")
	gitT(t, r.Dir, "checkout", "-q", "main")
	write(t, r, "f.txt", "mine\n")
	gitT(t, r.Dir, "commit", "-qam", "mine")
	if _, err := (ExecRunner{}).Git(ctx, r.Dir, "merge", "-q", "other"); err == nil {
		t.Fatal("the merge was expected to conflict")
	}
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Unmerged) != 1 || snap.Unmerged[0] != "f.txt" {
		t.Fatalf("unmerged = %v", snap.Unmerged)
	}
}

// The reviewer sees everything a task changed since its base: edits and
// new, untracked files, as a diff or a diffstat, cut at the limit.
func TestDiffShowsUntrackedFilesAndIsCut(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	base := commitAll(t, r, "base")
	write(t, r, "a.txt", "a changed\n")
	write(t, r, "new/b.txt", "brand new\n")
	diff, err := r.Diff(ctx, base, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"+a changed", "new/b.txt", "+brand new"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	stat, err := r.Diff(ctx, base, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stat, "2 files changed") {
		t.Errorf("diffstat = %q, want 2 files changed", stat)
	}
	cut, err := r.Diff(ctx, base, false, 20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cut, diff[:20]) || !strings.Contains(cut, "diff cut at 20 bytes") {
		t.Errorf("cut diff = %q", cut)
	}
	if _, err := r.Diff(ctx, "--output=/tmp/x", false, 0); err == nil {
		t.Error("an option-like revision was passed to git")
	}
	hash, msg, err := r.LastCommit(ctx)
	if err != nil || hash != base || !strings.HasPrefix(msg, "base") {
		t.Errorf("LastCommit = %q, %q, %v; want %s and its message", hash, msg, err, base)
	}
}

// SetAside keeps an attempt's work on its own ref, not in the stash that
// every worktree of the repository shares: the user's stash is untouched,
// excluded and ignored files stay, and the tree is back at HEAD for the
// files the attempt touched.
func TestSetAsideKeepsTheWorkOnItsOwnRef(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "one\n")
	write(t, r, "gone.txt", "kept at HEAD\n")
	write(t, r, ".gitignore", "*.log\n")
	write(t, r, ".ralph/state.json", "{}\n")
	gitT(t, r.Dir, "add", "a.txt", "gone.txt", ".gitignore")
	gitT(t, r.Dir, "commit", "-q", "-m", "initial")
	write(t, r, "a.txt", "my own work in progress\n")
	gitT(t, r.Dir, "stash", "push", "-q", "-m", "MY OWN WIP")
	mine := gitT(t, r.Dir, "rev-parse", "stash@{0}")
	const ref = "refs/ralph/attempts/run-1/US-001"

	// Only excluded and ignored files are dirty: nothing is set aside.
	write(t, r, "debug.log", "ignored\n")
	got, err := r.SetAside(ctx, ref, "ralph: blocked attempt", ".ralph")
	if err != nil || got != "" {
		t.Fatalf("SetAside with nothing to set aside = %q, %v; want empty", got, err)
	}
	if _, err := r.git(ctx, "rev-parse", "-q", "--verify", ref); err == nil {
		t.Fatal("a ref was made for nothing")
	}

	// The attempt changed a file, deleted one, added one in a new folder
	// and staged a new one.
	write(t, r, "a.txt", "attempt\n")
	os.Remove(filepath.Join(r.Dir, "gone.txt"))
	write(t, r, "new/deep/b.txt", "attempt\n")
	write(t, r, "staged.txt", "attempt\n")
	gitT(t, r.Dir, "add", "staged.txt")
	write(t, r, ".ralph/state.json", "{\"blocker\": 1}\n")
	got, err = r.SetAside(ctx, ref, "ralph: blocked attempt", ".ralph")
	if err != nil || got == "" {
		t.Fatalf("SetAside = %q, %v; want a commit", got, err)
	}
	if at := gitT(t, r.Dir, "rev-parse", ref); at != got {
		t.Fatalf("%s = %s, want %s", ref, at, got)
	}
	if msg := gitT(t, r.Dir, "log", "-1", "--format=%s", ref); msg != "ralph: blocked attempt" {
		t.Fatalf("set-aside commit says %q", msg)
	}
	if files := gitT(t, r.Dir, "diff", "--name-status", "--no-renames", ref+"^", ref); files != "M\ta.txt\nD\tgone.txt\nA\tnew/deep/b.txt\nA\tstaged.txt" {
		t.Fatalf("set-aside commit holds:\n%s", files)
	}
	if st := gitT(t, r.Dir, "status", "--porcelain", "--", ".", ":(exclude).ralph"); st != "" {
		t.Fatalf("tree after SetAside is not back at HEAD:\n%s", st)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "new")); !os.IsNotExist(err) {
		t.Error("the folder the attempt made is left behind")
	}
	if b, _ := os.ReadFile(filepath.Join(r.Dir, ".ralph/state.json")); string(b) != "{\"blocker\": 1}\n" {
		t.Errorf("an excluded file was touched: %q", b)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "debug.log")); err != nil {
		t.Error("an ignored file was removed:", err)
	}
	if n := gitT(t, r.Dir, "stash", "list"); strings.Count(n, "\n") != 0 || gitT(t, r.Dir, "rev-parse", "stash@{0}") != mine {
		t.Fatalf("the user's stash changed: %q", n)
	}
	// The work comes back onto the tree.
	gitT(t, r.Dir, "cherry-pick", "--no-commit", ref)
	if b, _ := os.ReadFile(filepath.Join(r.Dir, "new/deep/b.txt")); string(b) != "attempt\n" {
		t.Errorf("cherry-pick of the ref did not bring the work back: %q", b)
	}
}

func TestIsAncestor(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "1\n")
	gitT(t, r.Dir, "add", "-A")
	gitT(t, r.Dir, "commit", "-q", "-m", "one")
	one := gitT(t, r.Dir, "rev-parse", "HEAD")
	write(t, r, "a.txt", "2\n")
	gitT(t, r.Dir, "commit", "-q", "-am", "two")
	two := gitT(t, r.Dir, "rev-parse", "HEAD")
	for _, c := range []struct {
		a, b string
		want bool
	}{{one, two, true}, {two, two, true}, {two, one, false}} {
		got, err := r.IsAncestor(ctx, c.a, c.b)
		if err != nil || got != c.want {
			t.Errorf("IsAncestor(%.7s, %.7s) = %v, %v; want %v", c.a, c.b, got, err, c.want)
		}
	}
}

// With TMPDIR inside the work tree (as under go test's testscript), the
// set-aside's own temporary index must not end up in the set-aside commit:
// it lives in the git folder.
func TestSetAsideKeepsItsIndexOutOfTheWorkTree(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "one\n")
	commitAll(t, r, "initial")
	tmp := filepath.Join(r.Dir, ".tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	write(t, r, "b.txt", "attempt\n")
	ref, err := r.SetAside(ctx, "refs/ralph/attempts/run-1/US-001", "ralph: blocked attempt")
	if err != nil || ref == "" {
		t.Fatalf("SetAside = %q, %v", ref, err)
	}
	files := gitT(t, r.Dir, "ls-tree", "-r", "--name-only", ref)
	if strings.Contains(files, "ralph-set-aside") || strings.Contains(files, "index") {
		t.Fatalf("the set-aside commit holds ralph's temporary index: %q", files)
	}
	if !strings.Contains(files, "b.txt") {
		t.Fatalf("the set-aside commit lacks the attempt's file: %q", files)
	}
}

// Range tells in one git process what CommitsBetween, ChangedFiles and
// IsAncestor tell in three: the commits, the files they changed (paths
// with spaces and newlines too), and whether history was only added to.
func TestRangeMatchesTheThreeQueriesItReplaces(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "base.txt", "0\n")
	base := commitAll(t, r, "base")
	write(t, r, "a.txt", "a\n")
	write(t, r, "dir/with space.txt", "s\n")
	commitAll(t, r, "first: a and a spaced path")
	write(t, r, "line\nbreak.txt", "n\n")
	gitT(t, r.Dir, "commit", "-q", "--allow-empty", "-m", "empty")
	head := commitAll(t, r, "second: a newline in a name")

	counting := &countingRunner{Runner: r.Runner}
	rg, err := (&Repo{Dir: r.Dir, Runner: counting}).Range(ctx, base, head)
	if err != nil {
		t.Fatal(err)
	}
	if counting.calls != 1 {
		t.Errorf("Range ran %d git processes, want 1", counting.calls)
	}
	commits, _ := r.CommitsBetween(ctx, base, head)
	files, _ := r.ChangedFiles(ctx, base, head)
	if !reflect.DeepEqual(rg.Commits, commits) {
		t.Errorf("Range commits %v, CommitsBetween %v", rg.Commits, commits)
	}
	if !reflect.DeepEqual(rg.Files, files) {
		t.Errorf("Range files %q, ChangedFiles %q", rg.Files, files)
	}
	if !rg.Descends {
		t.Error("Range says HEAD does not descend from its own ancestor")
	}

	// History rewritten: the old head is no ancestor of the new one.
	gitT(t, r.Dir, "reset", "-q", "--hard", base)
	write(t, r, "other.txt", "o\n")
	other := commitAll(t, r, "other")
	if rg, err := r.Range(ctx, head, other); err != nil || rg.Descends {
		t.Errorf("Range(%s, %s) after a reset: descends=%v, %v; want false", short(head), short(other), rg.Descends, err)
	}
	// Back to an ancestor: nothing in the range, and no descent.
	if rg, err := r.Range(ctx, head, base); err != nil || rg.Descends || len(rg.Commits) != 0 {
		t.Errorf("Range back to an ancestor: %+v, %v; want no commits and no descent", rg, err)
	}
	// From the root: every commit, and it descends.
	if rg, err := r.Range(ctx, "", other); err != nil || !rg.Descends || len(rg.Commits) != 2 {
		t.Errorf("Range from the root: %+v, %v", rg, err)
	}
}

func short(h string) string { return h[:7] }

// CommitSnapshot makes the commit (maintenance off) and reads the tree
// after it in two git processes; Head is the new commit.
func TestCommitSnapshot(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	write(t, r, "left.txt", "l\n")
	gitT(t, r.Dir, "add", "a.txt")
	counting := &countingRunner{Runner: r.Runner}
	snap, err := (&Repo{Dir: r.Dir, Runner: stdinCounting{counting, r.Runner.(StdinRunner)}}).CommitSnapshot(ctx, "one\n")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Head == "" || snap.Head != gitT(t, r.Dir, "rev-parse", "HEAD") || !reflect.DeepEqual(snap.Dirty, []string{"left.txt"}) {
		t.Errorf("snapshot after the commit %+v, HEAD %s", snap, gitT(t, r.Dir, "rev-parse", "HEAD"))
	}
	if counting.calls != 2 {
		t.Errorf("CommitSnapshot ran %d git processes, want 2", counting.calls)
	}
	if _, err := r.CommitSnapshot(ctx, "nothing\n"); !errors.Is(err, ErrNothingToCommit) {
		t.Errorf("CommitSnapshot with nothing staged: %v, want ErrNothingToCommit", err)
	}
}

// stdinCounting counts the commit (fed on stdin) with the other calls.
type stdinCounting struct {
	*countingRunner
	sr StdinRunner
}

func (s stdinCounting) GitStdin(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	s.calls++
	return s.sr.GitStdin(ctx, dir, stdin, args...)
}

// ralph's commits never start git's automatic maintenance: GIT_TRACE
// logs every git process, the ones git starts itself included.
func TestCommitsStartNoMaintenance(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	trace := filepath.Join(t.TempDir(), "trace")
	t.Setenv("GIT_TRACE", trace)
	write(t, r, "a.txt", "a\n")
	commitAll(t, r, "one")
	write(t, r, "b.txt", "b\n")
	if _, err := r.CommitPaths(ctx, "two", "b.txt"); err != nil {
		t.Fatal(err)
	}
	write(t, r, "c.txt", "c\n")
	gitT(t, r.Dir, "add", "c.txt")
	if _, err := r.CommitSnapshot(ctx, "three"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "commit") {
		t.Fatalf("GIT_TRACE logged no commit:\n%s", got)
	}
	if strings.Contains(string(got), "maintenance run") || strings.Contains(string(got), " gc ") {
		t.Errorf("a commit of ralph's started git maintenance:\n%s", got)
	}
}
