package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// This file holds what ralph's merge queue does to integrate a task's work
// in its own integration worktree: squash the task branch's changes into a
// patch, apply it on the tip of the target branch with a three-way merge,
// and move the target branch forward only from the commit it was seen at.

// RevParse resolves rev to a commit hash.
func (r *Repo) RevParse(ctx context.Context, rev string) (string, error) {
	return r.commitHash(ctx, rev)
}

// DetachAt puts the work tree's HEAD, detached, at rev and makes its index
// and files match rev exactly, removing untracked files (ignored ones
// stay). It is for ralph's integration worktree only, which holds nothing
// of anyone's: never call it on a person's checkout.
func (r *Repo) DetachAt(ctx context.Context, rev string) error {
	if strings.HasPrefix(rev, "-") {
		return fmt.Errorf("gitx: invalid revision %q", rev)
	}
	if _, err := r.git(ctx, "checkout", "--quiet", "--force", "--detach", rev); err != nil {
		return err
	}
	return r.ResetTo(ctx, rev)
}

// SquashDiff returns the changes from base to tip as one binary patch,
// leaving out the paths (and folders) in exclude.
func (r *Repo) SquashDiff(ctx context.Context, base, tip string, exclude ...string) ([]byte, error) {
	if err := checkRevs(base, tip); err != nil {
		return nil, err
	}
	args := []string{"diff", "--binary", "--no-color", "--no-ext-diff", "--full-index", base, tip, "--", "."}
	for _, e := range exclude {
		args = append(args, ":(exclude)"+e)
	}
	return r.git(ctx, args...)
}

// ApplyConflict is a patch that did not apply cleanly on the tip: the
// files both sides changed. The work tree is left as it was before.
type ApplyConflict struct {
	Files []string
	// Said is what git said, for the agent asked to redo the work.
	Said string
}

func (e *ApplyConflict) Error() string {
	return "conflict in " + strings.Join(e.Files, ", ")
}

// ApplyThreeWay applies patch to the index and files, falling back to a
// three-way merge for hunks that do not apply as they are. A conflict
// undoes the attempt (the tree and index return to HEAD) and returns an
// *ApplyConflict naming the conflicting files. An empty patch applies as
// nothing.
func (r *Repo) ApplyThreeWay(ctx context.Context, patch []byte) error {
	if len(bytes.TrimSpace(patch)) == 0 {
		return nil
	}
	sr, ok := r.Runner.(StdinRunner)
	if !ok {
		return errors.New("gitx: applying a patch needs a runner that takes stdin")
	}
	_, err := sr.GitStdin(ctx, r.Dir, bytes.NewReader(patch), "apply", "--3way", "--index", "--whitespace=nowarn", "-")
	if err == nil {
		return nil
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		return err
	}
	files, _ := r.paths(ctx, "diff", "--name-only", "--diff-filter=U", "-z")
	if len(files) == 0 {
		// A hunk that did not apply at all (the file is gone on the
		// tip) names its file in git's message.
		files = rejectedFiles(ee.Stderr)
	}
	if _, rerr := r.git(ctx, "reset", "--quiet", "--hard", "HEAD"); rerr != nil {
		return fmt.Errorf("%w (and undoing the attempt failed: %v)", err, rerr)
	}
	_, _ = r.git(ctx, "clean", "-fdq")
	return &ApplyConflict{Files: files, Said: strings.TrimSpace(ee.Stderr)}
}

// rejectedFiles picks the file names out of git apply's "error: patch
// failed: FILE:LINE" and "error: FILE: does not exist in index" lines.
func rejectedFiles(stderr string) []string {
	var out []string
	seen := map[string]bool{}
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		var f string
		switch {
		case strings.HasPrefix(line, "error: patch failed: "):
			f = strings.TrimPrefix(line, "error: patch failed: ")
			if i := strings.LastIndexByte(f, ':'); i > 0 {
				f = f[:i]
			}
		case strings.HasPrefix(line, "error: ") && strings.Contains(line, ": does not exist in index"):
			f = strings.TrimSuffix(strings.TrimPrefix(line, "error: "), ": does not exist in index")
		default:
			continue
		}
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// ErrBranchMoved says a branch was not where ralph last saw it.
var ErrBranchMoved = errors.New("the branch moved")

// GitPath returns the absolute path of name inside the repository's git
// folder (MERGE_HEAD, rebase-merge, ...), as git resolves it for this
// work tree.
func (r *Repo) GitPath(ctx context.Context, name string) (string, error) {
	out, err := r.git(ctx, "rev-parse", "--git-path", name)
	if err != nil {
		return "", err
	}
	p := strings.TrimSpace(string(out))
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.Dir, p)
	}
	return p, nil
}

// UpdateRef points ref (a full name under refs/) at commit, creating it
// when missing. ralph uses its own refs only (refs/ralph/...).
func (r *Repo) UpdateRef(ctx context.Context, ref, commit string) error {
	if !strings.HasPrefix(ref, "refs/") {
		return fmt.Errorf("gitx: %q is not a full ref name", ref)
	}
	if err := checkRevs("", commit); err != nil {
		return err
	}
	_, err := r.git(ctx, "update-ref", ref, commit)
	return err
}

// ResetTo moves the checked-out branch (or the detached HEAD) of ralph's
// own worktree to rev and makes its files match, removing untracked
// files. Never call it on a person's checkout.
func (r *Repo) ResetTo(ctx context.Context, rev string) error {
	if strings.HasPrefix(rev, "-") {
		return fmt.Errorf("gitx: invalid revision %q", rev)
	}
	if _, err := r.git(ctx, "reset", "--quiet", "--hard", rev); err != nil {
		return err
	}
	_, err := r.git(ctx, "clean", "-fdq")
	return err
}

// AddDetachedWorktree adds a worktree at path with HEAD detached at rev:
// the merge queue's integration worktree, which holds no branch, so the
// target branch stays free to be checked out by the person.
func (r *Repo) AddDetachedWorktree(ctx context.Context, path, rev string) error {
	if strings.HasPrefix(rev, "-") || strings.HasPrefix(path, "-") {
		return fmt.Errorf("gitx: invalid worktree %q or revision %q", path, rev)
	}
	_, err := r.git(ctx, "worktree", "add", "--quiet", "--detach", path, rev)
	return err
}

// CommitMessage returns the hash and full message of the commit rev names.
func (r *Repo) CommitMessage(ctx context.Context, rev string) (hash, message string, err error) {
	if strings.HasPrefix(rev, "-") {
		return "", "", fmt.Errorf("gitx: invalid revision %q", rev)
	}
	out, err := r.git(ctx, "log", "-1", "--format=%H%n%B", rev, "--")
	if err != nil {
		return "", "", err
	}
	hash, message, _ = strings.Cut(string(out), "\n")
	return hash, message, nil
}

// RalphBranches lists the branches under ralph/ (the task branches of
// parallel runs, ralph/<run>/<task>), sorted.
func (r *Repo) RalphBranches(ctx context.Context) ([]string, error) {
	out, err := r.git(ctx, "for-each-ref", "--format=%(refname:short)", "--sort=refname", "refs/heads/ralph/")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// CheckoutIs reports whether the work tree's index and files both hold
// exactly rev's tree (untracked files aside): a checkout whose files a
// fast-forward already brought to rev although its branch still points
// elsewhere, because the process was killed in between.
func (r *Repo) CheckoutIs(ctx context.Context, rev string) (bool, error) {
	if strings.HasPrefix(rev, "-") {
		return false, fmt.Errorf("gitx: invalid revision %q", rev)
	}
	for _, args := range [][]string{{"diff", "--cached", "--quiet", rev, "--"}, {"diff", "--quiet", "--"}} {
		_, err := r.git(ctx, args...)
		var ee *ExitError
		if errors.As(err, &ee) && ee.ExitCode == 1 {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// UpdateBranch points refs/heads/branch at to, only if it is still at
// from. Unlike FastForward it leaves every checkout alone: for a checkout
// whose files are already at to.
func (r *Repo) UpdateBranch(ctx context.Context, branch, to, from string) error {
	if err := checkBranchName(branch); err != nil {
		return err
	}
	if err := checkRevs(from, to); err != nil {
		return err
	}
	_, err := r.git(ctx, "update-ref", "-m", "ralph: finish a fast-forward", "refs/heads/"+branch, to, from)
	return err
}
