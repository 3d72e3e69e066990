package landing

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/worktree"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// branchTarget is the target as a plain branch of the repository; moves
// lists commits a person (or an agent) puts on it before each Move.
type branchTarget struct {
	t      *testing.T
	repo   *gitx.Repo
	branch string
	moves  []func()
	moved  *verify.MovedError
	// n counts the moves that went through.
	n int
}

func (b *branchTarget) Tip(ctx context.Context) (string, error) {
	return b.repo.RevParse(ctx, b.branch)
}

func (b *branchTarget) Move(ctx context.Context, tip, commit string) error {
	if len(b.moves) > 0 {
		b.moves[0]()
		b.moves = b.moves[1:]
	}
	if cur, err := b.repo.RevParse(ctx, b.branch); err != nil || cur != tip {
		return gitx.ErrBranchMoved
	}
	b.n++
	return b.repo.UpdateBranch(ctx, b.branch, commit, tip)
}

func (b *branchTarget) Moved(from, to string, failing []string) *verify.MovedError {
	b.moved = &verify.MovedError{Target: b.branch, From: from, To: to, Failing: failing, PutBack: "put it back"}
	return b.moved
}

// fixture is a repository with a two-story task file on main, a task
// branch for US-001 that writes a.txt, and a merge queue over it.
type fixture struct {
	root, base, head string
	q                *Queue
	target           *branchTarget
	said             []string
}

func newFixture(t *testing.T, checks ...check.Check) *fixture {
	t.Helper()
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "repo")
	git(t, filepath.Dir(root), "init", "-q", "-b", "main", root)
	write(t, filepath.Join(root, "prd.md"), "# PRD\n\n### [ ] US-001: First\n- [ ] a.txt exists\n\n### [ ] US-002: Second\n- [ ] b.txt exists\n")
	write(t, filepath.Join(root, ".ralph", "progress.md"), "# Progress\n")
	write(t, filepath.Join(root, "shared.txt"), "one\n")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "start")
	f := &fixture{root: root, base: git(t, root, "rev-parse", "HEAD")}
	git(t, root, "switch", "-q", "-c", "ralph/r1/US-001")
	write(t, filepath.Join(root, "a.txt"), "a\n")
	write(t, filepath.Join(root, "shared.txt"), "from the task\n")
	write(t, filepath.Join(root, ".ralph", "progress.md"), "# Progress\nthe worker's own line\n")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "US-001 work")
	f.head = git(t, root, "rev-parse", "HEAD")
	git(t, root, "switch", "-q", "main")
	repo, err := gitx.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(filepath.Dir(root), "worktrees", "r1")
	integ, err := Integration(ctx, repo, runDir, "main", worktree.Marker{Repo: root, Run: "r1", Task: "integration"})
	if err != nil {
		t.Fatal(err)
	}
	f.target = &branchTarget{t: t, repo: repo, branch: "main"}
	f.q = &Queue{Repo: repo, Integ: integ, Target: f.target, Name: "main", Checks: checks, Records: filepath.Join(root, ".ralph", "runs", "r1"),
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC) },
		Say: func(_ report.Kind, _ report.Payload, line string) { f.said = append(f.said, line) }}
	return f
}

func (f *fixture) job(kind tasks.Kind) Job {
	return Job{Run: "r1", Task: "US-001", Title: "First", Worker: "w1", Attempt: 1, Base: f.base, Head: f.head, PRD: "prd.md", Kind: kind}
}

// A landing is one commit on the target: the task's changes, its done
// mark and its progress line (the worker's own edits of ralph's files
// left out), with the run's trailers.
func TestLandIsOneCommitWithTheBookkeeping(t *testing.T) {
	f := newFixture(t, check.Check{Name: "tests", Run: "test -f a.txt", Format: check.FormatNone})
	var token, committed string
	j := f.job(tasks.KindForPath("prd.md"))
	j.Committing = func(tok string) error { token = tok; return nil }
	j.Committed = func(hash string) error { committed = hash; return nil }
	out, err := f.q.Land(context.Background(), j)
	if err != nil || !out.Landed {
		t.Fatalf("Land = %+v, %v; want landed", out, err)
	}
	if tip := git(t, f.root, "rev-parse", "main"); tip != out.Commit || committed != out.Commit {
		t.Fatalf("main at %s, committed %s; want the landing %s", tip, committed, out.Commit)
	}
	if parent := git(t, f.root, "rev-parse", "main^"); parent != f.base {
		t.Errorf("the landing's parent is %s; want the start %s (one commit)", parent, f.base)
	}
	msg := git(t, f.root, "log", "-1", "--format=%B", "main")
	for _, want := range []string{"US-001: First", "Ralph-Task: US-001", "Ralph-Run: r1", "Ralph-Worker: w1", "Ralph-Attempt: 1", token} {
		if token == "" || !strings.Contains(msg, want) {
			t.Errorf("landing message lacks %q:\n%s", want, msg)
		}
	}
	prd := git(t, f.root, "show", "main:prd.md")
	if !strings.Contains(prd, "[x] US-001") || strings.Contains(prd, "[x] US-002") {
		t.Errorf("task file on main:\n%s", prd)
	}
	progress := git(t, f.root, "show", "main:.ralph/progress.md")
	if strings.Contains(progress, "the worker's own line") || !strings.Contains(progress, "First landed by ralph's merge queue (run r1, w1, attempt 1)") {
		t.Errorf("progress.md on main:\n%s", progress)
	}
	if tip := verify.LoadTip(TipChecks(f.q.Records)); tip == nil || tip.Commit != out.Commit {
		t.Errorf("the tip's checks on record are %+v; want the landing's", tip)
	}
}

// A store every checkout shares (beads) is not in the landing commit: the
// task file of the repository is left as it is.
func TestLandLeavesASharedStoreToItsExecutor(t *testing.T) {
	f := newFixture(t)
	out, err := f.q.Land(context.Background(), f.job(tasks.KindBeads))
	if err != nil || !out.Landed {
		t.Fatalf("Land = %+v, %v", out, err)
	}
	if prd := git(t, f.root, "show", "main:prd.md"); strings.Contains(prd, "[x]") {
		t.Errorf("a beads landing marked the task file:\n%s", prd)
	}
}

// A conflict sends the task back naming the files, and the target stays.
func TestLandConflictSendsBack(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.root, "shared.txt"), "landed meanwhile\n")
	git(t, f.root, "commit", "-qam", "US-002 landed")
	tip := git(t, f.root, "rev-parse", "main")
	out, err := f.q.Land(context.Background(), f.job(tasks.KindForPath("prd.md")))
	if err != nil || out.Landed || !strings.Contains(out.Reason, "conflict with work landed on main meanwhile, in shared.txt") {
		t.Fatalf("Land = %+v, %v; want sent back for the conflict", out, err)
	}
	if got := git(t, f.root, "rev-parse", "main"); got != tip {
		t.Errorf("main moved to %s", got)
	}
	if ev := out.Event(1, 3); ev != Conflicted {
		t.Errorf("event at attempt 1 of 3 = %s; want %s", ev, Conflicted)
	}
	if ev := out.Event(3, 3); ev != Exhausted {
		t.Errorf("event at attempt 3 of 3 = %s; want %s", ev, Exhausted)
	}
}

// A check the integration breaks sends the task back with the check's
// feedback, and nothing moves.
func TestLandFailingCheckSendsBackWithFeedback(t *testing.T) {
	f := newFixture(t, check.Check{Name: "no a", Run: "echo a.txt must not exist; test ! -f a.txt", Format: check.FormatNone})
	out, err := f.q.Land(context.Background(), f.job(tasks.KindForPath("prd.md")))
	if err != nil || out.Landed || !strings.Contains(out.Reason, `check "no a" failed after integration on main`) || !strings.Contains(out.Feedback, "must not exist") {
		t.Fatalf("Land = %+v, %v; want sent back with the check's feedback", out, err)
	}
	if got := git(t, f.root, "rev-parse", "main"); got != f.base {
		t.Errorf("main moved to %s", got)
	}
}

// A target moved outside ralph while the task was integrated is
// integrated on again, on the new tip, and said.
func TestLandIntegratesAgainOnATargetMovedMeanwhile(t *testing.T) {
	f := newFixture(t)
	var moved string
	f.target.moves = []func(){func() {
		write(t, filepath.Join(f.root, "b.txt"), "b\n")
		git(t, f.root, "add", "b.txt")
		git(t, f.root, "commit", "-qm", "someone else")
		moved = git(t, f.root, "rev-parse", "main")
	}}
	f.q.Left = f.base
	out, err := f.q.Land(context.Background(), f.job(tasks.KindForPath("prd.md")))
	if err != nil || !out.Landed {
		t.Fatalf("Land = %+v, %v", out, err)
	}
	if parent := git(t, f.root, "rev-parse", "main^"); parent != moved {
		t.Errorf("the landing's parent is %s; want the moved tip %s", parent, moved)
	}
	if said := strings.Join(f.said, "\n"); !strings.Contains(said, "main moved outside ralph while US-001 was integrated: integrating again on the new tip") {
		t.Errorf("said:\n%s", said)
	}
}

// A target moved outside ralph to a commit where a check fails that
// passed where ralph left it stops with a MovedError; a move whose checks
// pass as before is accepted and said.
func TestLandNoticesATargetMovedOutsideRalph(t *testing.T) {
	f := newFixture(t, check.Check{Name: "no bad", Run: "test ! -f bad.txt", Format: check.FormatNone})
	f.q.Left = f.base
	write(t, filepath.Join(f.root, "bad.txt"), "bad\n")
	git(t, f.root, "add", "bad.txt")
	git(t, f.root, "commit", "-qm", "an agent's commit")
	bad := git(t, f.root, "rev-parse", "main")
	_, err := f.q.Land(context.Background(), f.job(tasks.KindForPath("prd.md")))
	var moved *verify.MovedError
	if !errors.As(err, &moved) || moved.From != f.base || moved.To != bad || len(moved.Failing) != 1 {
		t.Fatalf("Land error = %v; want a MovedError from %s to %s", err, f.base, bad)
	}
	git(t, f.root, "rm", "-q", "bad.txt")
	git(t, f.root, "commit", "-qm", "fixed")
	f.q.Left = f.base
	out, err := f.q.Land(context.Background(), f.job(tasks.KindForPath("prd.md")))
	if err != nil || !out.Landed {
		t.Fatalf("Land after the fix = %+v, %v", out, err)
	}
	if said := strings.Join(f.said, "\n"); !strings.Contains(said, "its checks pass as before, so landings go on from there") {
		t.Errorf("said:\n%s", said)
	}
}

// A new attempt, as either executor's worker cuts it, starts on the tip
// in the task's worktree, with the ignored files .worktreeinclude names;
// what the earlier attempt left, its commits and its uncommitted changes,
// is kept on the attempt's ref. A branch deleted by hand gets a fresh
// worktree.
func TestWorkerCutKeepsTheEarlierAttempt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	write(t, filepath.Join(f.root, ".git", "info", "exclude"), ".env\n") // for every worktree
	write(t, filepath.Join(f.root, worktree.IncludeFile), ".env\n")
	write(t, filepath.Join(f.root, ".env"), "TOKEN=local\n")
	path := filepath.Join(filepath.Dir(f.root), "worktrees", "r1", "US-002")
	w := Worker{Repo: f.q.Repo, Root: f.root, Run: "r1", Task: "US-002", Attempt: 1, Path: path, Branch: Branch("r1", "US-002")}
	if err := w.Cut(ctx, f.base); err != nil {
		t.Fatal(err)
	}
	if env, err := os.ReadFile(filepath.Join(path, ".env")); err != nil || string(env) != "TOKEN=local\n" {
		t.Errorf("the worktree's .env = %q, %v; want the checkout's, as .worktreeinclude names it", env, err)
	}
	if !worktree.IsInside(path) {
		t.Error("the worktree is not marked as ralph's")
	}
	write(t, filepath.Join(path, "b.txt"), "b\n")
	git(t, path, "add", "b.txt")
	git(t, path, "commit", "-qm", "attempt 1")
	first := git(t, path, "rev-parse", "HEAD")
	write(t, filepath.Join(path, "wip.txt"), "not committed\n")
	write(t, filepath.Join(f.root, "c.txt"), "c\n")
	git(t, f.root, "add", "c.txt")
	git(t, f.root, "commit", "-qm", "landed meanwhile")
	tip := git(t, f.root, "rev-parse", "main")

	w.Attempt = 2
	if err := w.Cut(ctx, tip); err != nil {
		t.Fatal(err)
	}
	if head := git(t, path, "rev-parse", "HEAD"); head != tip {
		t.Errorf("attempt 2 starts at %s; want the tip %s", head, tip)
	}
	if _, err := os.Stat(filepath.Join(path, "wip.txt")); err == nil {
		t.Error("attempt 2 starts with attempt 1's uncommitted wip.txt")
	}
	if got := git(t, f.root, "rev-parse", "refs/ralph/attempts/r1/US-002/1^"); got != first {
		t.Errorf("the kept work's parent is %s; want attempt 1's commit %s", got, first)
	}
	if got := git(t, f.root, "show", "refs/ralph/attempts/r1/US-002/1:wip.txt"); got != "not committed" {
		t.Errorf("kept wip.txt = %q", got)
	}

	// Deleted by hand (its worktree detached first, as git asks), with a
	// commit of attempt 2 on it.
	write(t, filepath.Join(path, "d.txt"), "d\n")
	git(t, path, "add", "d.txt")
	git(t, path, "commit", "-qm", "attempt 2")
	second := git(t, path, "rev-parse", "HEAD")
	git(t, path, "switch", "-q", "--detach")
	git(t, f.root, "branch", "-D", "ralph/r1/US-002")
	w.Attempt = 3
	if err := w.Cut(ctx, tip); err != nil {
		t.Fatal(err)
	}
	if head := git(t, path, "rev-parse", "HEAD"); head != tip {
		t.Errorf("attempt 3 starts at %s; want the tip %s", head, tip)
	}
	if branch := git(t, path, "branch", "--show-current"); branch != "ralph/r1/US-002" {
		t.Errorf("attempt 3 is on %q", branch)
	}
	if got := git(t, f.root, "rev-parse", "refs/ralph/attempts/r1/US-002/2"); got != second {
		t.Errorf("attempt 2's commit is kept at %s; want %s", got, second)
	}
}

// A task branch deleted under its worktree (git update-ref -d, which git
// allows on a checked-out branch) leaves the worktree's HEAD unborn: its
// commits went with the branch, so there is nothing to keep, and the next
// attempt starts afresh on the tip instead of failing to set work aside.
func TestCutRedoesATaskWhoseBranchWasDeletedUnderIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	path := filepath.Join(filepath.Dir(f.root), "worktrees", "r1", "US-003")
	mark := worktree.Marker{Repo: f.root, Run: "r1", Task: "US-003"}
	if err := Cut(ctx, f.q.Repo, path, "ralph/r1/US-003", f.base, "refs/ralph/attempts/r1/US-003/0", mark); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(path, "e.txt"), "e\n")
	git(t, path, "add", "e.txt")
	git(t, path, "commit", "-qm", "attempt 1")
	git(t, f.root, "update-ref", "-d", "refs/heads/ralph/r1/US-003")
	// The worker's loop reads the tree after its agent, as it always does.
	git(t, path, "status", "--porcelain")
	if err := Cut(ctx, f.q.Repo, path, "ralph/r1/US-003", f.base, "refs/ralph/attempts/r1/US-003/1", mark); err != nil {
		t.Fatalf("Cut after the branch was deleted under the worktree: %v; want a fresh attempt", err)
	}
	if head := git(t, path, "rev-parse", "HEAD"); head != f.base {
		t.Errorf("attempt 2 starts at %s; want the tip %s", head, f.base)
	}
	if branch := git(t, path, "branch", "--show-current"); branch != "ralph/r1/US-003" {
		t.Errorf("attempt 2 is on %q", branch)
	}
}
