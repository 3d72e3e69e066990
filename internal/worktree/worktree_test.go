package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/gitx"
)

// TestMain keeps the user's and the system's git config out of the tests.
func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// git runs git in dir for test setup and returns its trimmed output. The
// tests exist to check ralph against the real git, so a missing git fails
// them rather than skipping them.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the worktree tests but is not in PATH: %v", err)
	}
	out, err := gitx.ExecRunner{}.Git(context.Background(), dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository with one commit in a folder named app inside
// a fresh temporary folder, so its worktrees go next to it.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "config", "user.name", "Ralph Test")
	git(t, dir, "config", "user.email", "ralph@example.com")
	writeFile(t, filepath.Join(dir, "README"), "app\n", 0o644)
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", "one")
	return dir
}

func writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

// addWorktree makes a worktree of repo at path on a new branch.
func addWorktree(t *testing.T, repo, path, branch string) {
	t.Helper()
	r, err := gitx.Open(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddWorktree(context.Background(), path, branch, "main"); err != nil {
		t.Fatal(err)
	}
}

func TestWhereWorktreesGo(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"default", Path("/src/app", "20261124-1", "US-001"), "/src/.ralph-worktrees/app/20261124-1/US-001"},
		{"default root", DefaultRoot("/src/app/"), "/src/.ralph-worktrees/app"},
		{"absolute override", PathUnder(Root("/src/app", "/fast/wt"), "r", "US-1"), "/fast/wt/r/US-1"},
		{"relative override from the repository", Root("/src/app", "../wt"), "/src/wt"},
		{"no override", Root("/src/app", ""), "/src/.ralph-worktrees/app"},
		{"a subtask id stays one folder", PathUnder("/w", "r", "1.1/1.1.2"), "/w/r/1.1%2F1.1.2"},
		{"an id cannot climb out", PathUnder("/w", "..", ".hidden"), "/w/%2E./%2Ehidden"},
		{"an empty id is still a folder", PathUnder("/w", "r", ""), "/w/r/%"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, tt.got, tt.want)
		}
	}
	if PathUnder("/w", "r", "a/b") == PathUnder("/w", "r", "a%2Fb") {
		t.Error("two different task ids share a folder")
	}
}

func TestIsInside(t *testing.T) {
	repo := newRepo(t)
	parent := filepath.Dir(repo)

	byLayout := Path(repo, "run", "US-001")
	addWorktree(t, repo, byLayout, "ralph/run/US-001")
	custom := filepath.Join(parent, "custom-root", "run", "US-002")
	addWorktree(t, repo, custom, "ralph/run/US-002")
	unmarked := filepath.Join(parent, "someone-elses", "wt")
	addWorktree(t, repo, unmarked, "theirs")
	plain := t.TempDir()

	check := func(what, dir string, want bool) {
		t.Helper()
		if got := IsInside(dir); got != want {
			t.Errorf("IsInside(%s), %s = %v, want %v", dir, what, got, want)
		}
	}
	check("the person's checkout", repo, false)
	check("a folder outside any repository", plain, false)
	check("a worktree in ralph's folder, never marked", byLayout, true)
	check("a person's own worktree elsewhere", unmarked, false)
	check("a worktree under a configured root, before its mark", custom, false)

	if err := Mark(custom, Marker{Repo: repo, Run: "run", Task: "US-002"}); err != nil {
		t.Fatalf("Mark: %v", err)
	}
	check("a marked worktree under a configured root", custom, true)
	sub := filepath.Join(custom, "src", "deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	check("a folder deep in a marked worktree", sub, true)
	if st := git(t, custom, "status", "--porcelain"); st != "" {
		t.Errorf("the mark shows among the worktree's files:\n%s", st)
	}

	if err := Mark(repo, Marker{}); err == nil || !strings.Contains(err.Error(), "not a linked git worktree") {
		t.Errorf("Mark of the person's checkout = %v, want a refusal", err)
	}
	check("the person's checkout after a refused Mark", repo, false)
}

// A kill of ralph during its own git add leaves index.lock in a worker's
// worktree, and every later commit there fails: ClearLeftLock removes it
// from ralph's marked worktrees, and never from a person's.
func TestClearLeftLockOnlyInRalphsWorktrees(t *testing.T) {
	repo := newRepo(t)
	parent := filepath.Dir(repo)
	mine := filepath.Join(parent, "wt", "run", "US-001")
	addWorktree(t, repo, mine, "ralph/run/US-001")
	if err := Mark(mine, Marker{Repo: repo, Run: "run", Task: "US-001"}); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(parent, "theirs")
	addWorktree(t, repo, theirs, "theirs")
	lockOf := func(dir string) string {
		return filepath.Join(git(t, dir, "rev-parse", "--absolute-git-dir"), "index.lock")
	}
	for _, dir := range []string{mine, theirs, repo} {
		if err := os.WriteFile(lockOf(dir), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := ClearLeftLock(mine); got != lockOf(mine) {
		t.Errorf("ClearLeftLock(ralph's worktree) = %q, want %q", got, lockOf(mine))
	}
	git(t, mine, "add", "-A") // fails while the lock stays
	for _, dir := range []string{theirs, repo} {
		if got := ClearLeftLock(dir); got != "" {
			t.Errorf("ClearLeftLock(%s) = %q; a person's lock must stay", dir, got)
		}
		if _, err := os.Stat(lockOf(dir)); err != nil {
			t.Errorf("the lock in %s is gone: %v", dir, err)
		}
	}
}

// Path is the worktree of task in run under DefaultRoot(repoRoot).
func Path(repoRoot, run, task string) string {
	return PathUnder(DefaultRoot(repoRoot), run, task)
}
