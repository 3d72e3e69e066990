package landing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/worktree"
)

// Cut points a task's branch at tip in its worktree at path, for a new
// attempt, making the worktree when it is missing. What an earlier attempt
// left is kept on ref first, ralph never dropping a commit: the branch's
// head, with the worktree's uncommitted changes in a commit on top.
func Cut(ctx context.Context, repo *gitx.Repo, path, branch, tip, ref string, mark worktree.Marker) error {
	if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
		w, err := gitx.Open(ctx, path)
		if err != nil {
			return err
		}
		if head, err := w.Head(ctx); err == nil && head == "" {
			// Its branch was deleted under it (git update-ref -d): HEAD is
			// unborn and the attempt's commits went with the branch, so
			// there is nothing to set aside; the worktree is made afresh.
			return cutAfresh(ctx, repo, path, branch, tip, mark)
		}
		kept, err := w.SetAside(ctx, ref, "ralph: the earlier attempt's uncommitted work on "+mark.Task)
		if err != nil {
			return fmt.Errorf("keeping the work in %s: %w", path, err)
		}
		if head, err := w.Head(ctx); kept == "" && err == nil && head != "" && head != tip {
			if err := repo.UpdateRef(ctx, ref, head); err != nil {
				return err
			}
		}
		if ok, _ := repo.BranchExists(ctx, branch); ok {
			return w.ResetTo(ctx, tip)
		}
		// The branch was deleted by hand: the worktree is made afresh.
		return cutAfresh(ctx, repo, path, branch, tip, mark)
	}
	return addWorktree(ctx, repo, path, branch, tip, ref, mark)
}

// cutAfresh removes the worktree at path and makes it again at tip.
func cutAfresh(ctx context.Context, repo *gitx.Repo, path, branch, tip string, mark worktree.Marker) error {
	if err := repo.RemoveWorktree(ctx, path, true); err != nil {
		return err
	}
	return addWorktree(ctx, repo, path, branch, tip, "", mark)
}

// addWorktree makes the worktree at path on branch at tip; a branch left
// elsewhere by an earlier attempt is kept on ref first (when ref is set).
func addWorktree(ctx context.Context, repo *gitx.Repo, path, branch, tip, ref string, mark worktree.Marker) error {
	_ = repo.PruneWorktrees(ctx)
	if old, err := repo.RevParse(ctx, branch); err == nil && old != tip {
		if ref != "" {
			if err := repo.UpdateRef(ctx, ref, old); err != nil {
				return err
			}
		}
		if err := repo.UpdateRef(ctx, "refs/heads/"+branch, tip); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := repo.AddWorktree(ctx, path, branch, tip); err != nil {
		return err
	}
	return worktree.Mark(path, mark)
}

// IntegrationDir is the merge queue's worktree in a run's folder of
// worktrees. A task id never makes this name: worktree.PathUnder escapes
// a leading dot.
const IntegrationDir = ".integration"

// Integration opens the merge queue's worktree in the run's folder of
// repo's worktrees, making it (detached at at, marked as ralph's) when it
// is missing.
func Integration(ctx context.Context, repo *gitx.Repo, runDir, at string, mark worktree.Marker) (*gitx.Repo, error) {
	dir := filepath.Join(runDir, IntegrationDir)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		_ = repo.PruneWorktrees(ctx)
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return nil, err
		}
		if err := repo.AddDetachedWorktree(ctx, dir, at); err != nil {
			return nil, fmt.Errorf("making the integration worktree %s: %w", dir, err)
		}
		if err := worktree.Mark(dir, mark); err != nil {
			return nil, err
		}
	}
	return gitx.Open(ctx, dir)
}

// RemoveWork removes a landed task's worktree and branch: its work is on
// the target, in the task's one commit. What is gone already is no error.
func RemoveWork(ctx context.Context, repo *gitx.Repo, path, branch string) error {
	if _, err := os.Stat(path); path != "" && err == nil {
		if err := repo.RemoveWorktree(ctx, path, true); err != nil {
			return err
		}
	}
	if ok, _ := repo.BranchExists(ctx, branch); ok {
		return repo.DeleteBranch(ctx, branch, "", true)
	}
	return nil
}
