package gitx

// This file holds what parallel workers need from git: linked worktrees,
// branches that may be deleted only when nothing on them would be lost, a
// rebase that never leaves a conflict behind, and a fast-forward that moves
// a branch only from where the caller last saw it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Worktree is one entry of `git worktree list --porcelain`.
type Worktree struct {
	// Path is the worktree's top-level folder, absolute, as git records it.
	Path string
	// Head is the commit checked out there; "" for a bare repository.
	Head string
	// Branch is the checked-out branch without "refs/heads/" ("main"); ""
	// when HEAD is detached or the entry is bare.
	Branch string
	// Bare reports the main entry of a bare repository.
	Bare bool
	// Detached reports that HEAD is detached from any branch.
	Detached bool
	// Locked reports a lock (`git worktree lock`), which keeps git from
	// pruning or removing the worktree; LockReason is its reason, or "".
	Locked     bool
	LockReason string
	// Prunable reports an entry git would prune, usually because its folder
	// is gone; PrunableReason says why.
	Prunable       bool
	PrunableReason string
}

// Worktrees lists the repository's worktrees as `git worktree list
// --porcelain -z` reports them; the first is always the main one.
func (r *Repo) Worktrees(ctx context.Context) ([]Worktree, error) {
	out, err := r.git(ctx, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	return ParseWorktrees(out)
}

// ParseWorktrees parses the output of `git worktree list --porcelain -z`:
// records of NUL-terminated "key value" fields, each record ended by an
// empty field. -z keeps paths and lock reasons with newlines intact. Keys a
// newer git may add are ignored; a record that does not start with its
// "worktree" field is an error.
func ParseWorktrees(out []byte) ([]Worktree, error) {
	var (
		list []Worktree
		cur  *Worktree
	)
	fields := strings.Split(string(out), "\x00")
	// Output ends with the terminator of the last field and of the last
	// record, which leave two empty strings after the split.
	if len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	for _, f := range fields {
		if f == "" {
			if cur == nil {
				return nil, errors.New("gitx: worktree list: empty record")
			}
			cur = nil
			continue
		}
		key, value, _ := strings.Cut(f, " ")
		if cur == nil {
			if key != "worktree" || value == "" {
				return nil, fmt.Errorf("gitx: worktree list: record starts with %q, want \"worktree <path>\"", f)
			}
			list = append(list, Worktree{Path: value})
			cur = &list[len(list)-1]
			continue
		}
		switch key {
		case "HEAD":
			cur.Head = value
		case "branch":
			cur.Branch = strings.TrimPrefix(value, "refs/heads/")
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		case "locked":
			cur.Locked, cur.LockReason = true, value
		case "prunable":
			cur.Prunable, cur.PrunableReason = true, value
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("gitx: worktree list: record of %s is not terminated", cur.Path)
	}
	return list, nil
}

// AddWorktree makes a linked worktree at path, an absolute folder outside
// every work tree of the repository, with branch checked out. A new branch
// is created at base, without tracking anything. An existing branch is
// checked out as it is and never moved to base, so that re-creating the
// worktree of a task whose folder was deleted, or whose creation a crash
// cut short, loses none of its commits; a caller who wants the current tip
// deletes the branch first. Git refuses a branch checked out elsewhere.
//
// A path that is already this repository's worktree of branch is left as it
// is (nil), so a resumed run can call AddWorktree again; a stale entry (its
// folder gone) is pruned and one that `git worktree add` left half made
// (still locked "initializing") is removed before the worktree is made
// again. Refused: a path inside a work tree of the repository (an agent
// there would find the outer .git and write into it), and an existing path
// that is not an empty folder and not a worktree of this repository.
func (r *Repo) AddWorktree(ctx context.Context, path, branch, base string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("gitx: add worktree: %q is not an absolute path", path)
	}
	if err := checkBranchName(branch); err != nil {
		return err
	}
	path = filepath.Clean(path)
	list, err := r.Worktrees(ctx)
	if err != nil {
		return err
	}
	for _, w := range list {
		if !samePath(w.Path, path) {
			if !w.Prunable && !w.Bare && isWithin(path, w.Path) {
				return fmt.Errorf("cannot make a worktree at %s: it is inside the work tree %s; put ralph's worktrees outside the repository", path, w.Path)
			}
			continue
		}
		switch {
		case w.Prunable:
			if err := r.PruneWorktrees(ctx); err != nil {
				return err
			}
		case w.Locked && w.LockReason == "initializing":
			// `git worktree add` was killed before it finished; nothing in
			// the folder is anyone's work yet.
			if _, err := r.gitLocked(ctx, r.Dir, "worktree", "remove", "--force", "--force", "--", w.Path); err != nil {
				return err
			}
		case w.Branch == branch:
			return nil
		default:
			on := "a detached HEAD"
			if w.Branch != "" {
				on = "branch " + w.Branch
			}
			return fmt.Errorf("cannot make a worktree of branch %s at %s: it is already a worktree of this repository, on %s; remove it with `git worktree remove %s` if it is not needed", branch, path, on, path)
		}
	}
	if entries, err := os.ReadDir(path); err == nil && len(entries) > 0 {
		return fmt.Errorf("cannot make a worktree at %s: the folder exists, is not empty and is not a worktree of %s; move it away or remove it", path, r.Dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot make a worktree at %s: %w", path, err)
	}

	exists, err := r.BranchExists(ctx, branch)
	if err != nil {
		return err
	}
	args := []string{"worktree", "add", "--quiet"}
	if exists {
		args = append(args, "--", path, branch)
	} else {
		if base == "" || strings.HasPrefix(base, "-") {
			return fmt.Errorf("gitx: add worktree: invalid base %q for the new branch %s", base, branch)
		}
		args = append(args, "--no-track", "-b", branch, "--", path, base)
	}
	_, err = r.gitLocked(ctx, r.Dir, args...)
	return err
}

// RemoveWorktree removes the worktree at path: its folder and git's record
// of it. The branch stays. Without force git refuses a worktree with
// changes or untracked files, so nobody's work is dropped by accident; with
// force they go too. A locked worktree is always refused: its lock says a
// person wants it kept.
func (r *Repo) RemoveWorktree(ctx context.Context, path string, force bool) error {
	args := []string{"worktree", "remove"}
	if force {
		args = append(args, "--force")
	}
	_, err := r.gitLocked(ctx, r.Dir, append(args, "--", path)...)
	return err
}

// PruneWorktrees drops git's records of worktrees whose folders are gone.
// Locked records stay.
func (r *Repo) PruneWorktrees(ctx context.Context) error {
	_, err := r.gitLocked(ctx, r.Dir, "worktree", "prune")
	return err
}

// BranchMovedError is returned by FastForward when the branch is no longer
// where the caller saw it.
type BranchMovedError struct {
	Branch string
	// Expected is where the caller saw the branch, Actual where it is.
	Expected, Actual string
}

// Is makes errors.Is(err, ErrBranchMoved) hold for it, as for MoveBranch's
// refusal, so callers test for a moved branch one way.
func (e *BranchMovedError) Is(target error) bool { return target == ErrBranchMoved }

func (e *BranchMovedError) Error() string {
	return fmt.Sprintf("branch %s moved: it is at %.12s, not at %.12s where ralph last saw it; rebase on its new tip and try again", e.Branch, e.Actual, e.Expected)
}

// FastForward moves refs/heads/branch from from to to, but only while the
// branch is still at from (git update-ref with the old value, so a commit
// made meanwhile is never thrown away) and only when to descends from
// from; otherwise it returns a *BranchMovedError or an error saying it is
// no fast-forward, and nothing changes.
//
// When the branch is checked out in a worktree (the user's checkout on the
// target branch, say), that worktree's index and files move with it, by a
// two-way merge that keeps the worktree's own changes: moving only the ref
// would leave the checkout showing every landed change reverted. A change
// there to a file that to also changes, or an untracked file in the way,
// refuses the fast-forward and leaves everything as it was.
func (r *Repo) FastForward(ctx context.Context, branch, from, to string) error {
	if err := checkBranchName(branch); err != nil {
		return err
	}
	if err := checkRevs(from, to); err != nil || from == "" {
		return fmt.Errorf("gitx: fast-forward %s: invalid revisions %q..%q", branch, from, to)
	}
	ref := "refs/heads/" + branch
	oldHash, err := r.commitHash(ctx, from)
	if err != nil {
		return err
	}
	newHash, err := r.commitHash(ctx, to)
	if err != nil {
		return err
	}
	if ok, err := r.IsAncestor(ctx, oldHash, newHash); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("cannot fast-forward %s from %.12s to %.12s: %s does not contain %s", branch, oldHash, newHash, to, from)
	}
	if actual, err := r.commitHash(ctx, ref); err != nil {
		return err
	} else if actual != oldHash {
		return &BranchMovedError{Branch: branch, Expected: oldHash, Actual: actual}
	}
	checkout := ""
	list, err := r.Worktrees(ctx)
	if err != nil {
		return err
	}
	for _, w := range list {
		if w.Branch == branch && !w.Prunable && !w.Bare {
			checkout = w.Path
		}
	}
	if checkout != "" {
		// Stat information left stale by a touch would make read-tree see
		// changes that are not there.
		_, _ = r.Runner.Git(ctx, checkout, "update-index", "-q", "--refresh")
		if _, err := r.gitLocked(ctx, checkout, "read-tree", "-m", "-u", oldHash, newHash); err != nil {
			return fmt.Errorf("cannot fast-forward %s: the checkout at %s has changes or untracked files in the way of the landed work; commit or move them and try again: %w", branch, checkout, err)
		}
	}
	_, err = r.gitLocked(ctx, r.Dir, "update-ref", "-m", "ralph: fast-forward", ref, newHash, oldHash)
	if err == nil {
		return nil
	}
	if checkout != "" {
		// Put the checkout's files back where its branch still is.
		_, _ = r.gitLocked(ctx, checkout, "read-tree", "-m", "-u", newHash, oldHash)
	}
	if actual, aerr := r.commitHash(ctx, ref); aerr == nil && actual != oldHash {
		return &BranchMovedError{Branch: branch, Expected: oldHash, Actual: actual}
	}
	return err
}

// commitHash resolves rev to the full hash of a commit.
func (r *Repo) commitHash(ctx context.Context, rev string) (string, error) {
	out, err := r.git(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%s is not a commit: %w", rev, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// BranchExists reports whether refs/heads/name exists.
func (r *Repo) BranchExists(ctx context.Context, name string) (bool, error) {
	if err := checkBranchName(name); err != nil {
		return false, err
	}
	_, err := r.git(ctx, "show-ref", "--verify", "--quiet", "refs/heads/"+name)
	var ee *ExitError
	if errors.As(err, &ee) && ee.ExitCode == 1 {
		return false, nil
	}
	return err == nil, err
}

// UnmergedCommits counts the commits of branch that base does not contain.
// A commit whose change landed on base as another commit (the merge
// queue's squashed one) still counts: ralph knows such a branch landed
// from its own records.
func (r *Repo) UnmergedCommits(ctx context.Context, branch, base string) (int, error) {
	if err := checkBranchName(branch); err != nil {
		return 0, err
	}
	if base == "" || strings.HasPrefix(base, "-") {
		return 0, fmt.Errorf("gitx: invalid base %q", base)
	}
	out, err := r.git(ctx, "rev-list", "--count", "refs/heads/"+branch, "^"+base, "--")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// UnmergedError is returned by DeleteBranch for a branch with commits that
// are not on the base.
type UnmergedError struct {
	Branch, Base string
	// Commits is how many commits of the branch base does not contain.
	Commits int
}

func (e *UnmergedError) Error() string {
	noun := "commits"
	if e.Commits == 1 {
		noun = "commit"
	}
	return fmt.Sprintf("branch %s has %d %s that %s does not contain; it is kept (look at them with `git log %s..%s`)", e.Branch, e.Commits, noun, e.Base, e.Base, e.Branch)
}

// DeleteBranch deletes branch. Unless force, it refuses with an
// *UnmergedError when the branch has commits that base does not contain, so
// work that never landed is never lost. It always refuses a branch checked
// out in a worktree, and deletes only the commit it checked: a commit added
// meanwhile makes it fail instead.
func (r *Repo) DeleteBranch(ctx context.Context, name, base string, force bool) error {
	ref := "refs/heads/" + name
	if err := checkBranchName(name); err != nil {
		return err
	}
	hash, err := r.commitHash(ctx, ref)
	if err != nil {
		return err
	}
	if !force {
		n, err := r.UnmergedCommits(ctx, name, base)
		if err != nil {
			return err
		}
		if n > 0 {
			return &UnmergedError{Branch: name, Base: base, Commits: n}
		}
	}
	list, err := r.Worktrees(ctx)
	if err != nil {
		return err
	}
	for _, w := range list {
		if w.Branch == name {
			return fmt.Errorf("cannot delete branch %s: it is checked out in %s; remove that worktree first", name, w.Path)
		}
	}
	_, err = r.gitLocked(ctx, r.Dir, "update-ref", "-d", ref, hash)
	return err
}

// checkBranchName refuses names git would read as options or that are
// empty; git itself judges the rest.
func checkBranchName(name string) error {
	if name == "" || strings.HasPrefix(name, "-") {
		return fmt.Errorf("gitx: invalid branch name %q", name)
	}
	return nil
}

// samePath reports whether two absolute paths name the same folder, even
// when one of them reaches it through a symbolic link.
func samePath(a, b string) bool {
	return filepath.Clean(a) == filepath.Clean(b) || realPath(a) == realPath(b)
}

// isWithin reports whether path is dir or below it.
func isWithin(path, dir string) bool {
	for _, p := range [][2]string{{path, dir}, {realPath(path), realPath(dir)}} {
		rel, err := filepath.Rel(p[1], p[0])
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// realPath resolves symbolic links in the longest existing prefix of p, so
// that a path not made yet compares equal to itself through a link.
func realPath(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// LockError reports a git lock file (index.lock, a ref's .lock) that stayed
// held while ralph waited for it.
type LockError struct {
	// Path is the lock file.
	Path string
	// Err is git's last refusal.
	Err error
}

func (e *LockError) Error() string {
	return fmt.Sprintf("git could not take the lock %s: another git process is working in this repository, or one that crashed left the file; if no git is running, remove %s and try again (%v)", e.Path, e.Path, e.Err)
}

func (e *LockError) Unwrap() error { return e.Err }

// lockWaits are the pauses before each retry of a git command that found a
// lock held, about three seconds in all: long enough for another git
// command (an editor's, the agent's) to finish, short enough not to stall a
// run behind a lock that a crash left.
var lockWaits = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}

// gitLocked runs a git command that takes a lock in dir, retrying while
// another process holds the lock. Git takes its locks before it changes
// anything, so a refused attempt changed nothing and is safe to repeat.
func (r *Repo) gitLocked(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return retryLocked(ctx, func() ([]byte, error) { return r.Runner.Git(ctx, dir, args...) }, nil)
}

// retryLocked runs run until it does not fail on a held lock, waiting
// lockWaits between attempts; canRetry, when set, may veto a retry.
func retryLocked(ctx context.Context, run func() ([]byte, error), canRetry func() bool) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		out, err := run()
		lock := heldLock(err)
		if lock == "" || (canRetry != nil && !canRetry()) {
			return out, err
		}
		if attempt == len(lockWaits) {
			return out, &LockError{Path: lock, Err: err}
		}
		select {
		case <-ctx.Done():
			return out, &LockError{Path: lock, Err: err}
		case <-time.After(lockWaits[attempt]):
		}
	}
}

// heldLock returns the lock file git names in a refusal such as "Unable to
// create '/repo/.git/index.lock': File exists.", or "".
func heldLock(err error) string {
	var ee *ExitError
	if !errors.As(err, &ee) {
		return ""
	}
	const prefix, suffix = "Unable to create '", "': File exists"
	_, after, ok := strings.Cut(ee.Stderr, prefix)
	if !ok {
		return ""
	}
	lock, _, ok := strings.Cut(after, suffix)
	if !ok {
		return ""
	}
	return lock
}
