package thread

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
)

// A thread started with --worktree works in a worktree of its own, outside
// the repository, on its branch: its loop, checks, polish and review work
// there, and its loop keeps its state with the thread's records
// (threads/<id>/loop), so that several threads run at once, each in its
// own work tree with its own state and lock, and the person's checkout is
// left alone. The thread's records stay in the checkout's .ralph, so that
// every command finds them from there.

// WorktreePath is the worktree of thread id of the repository at repoRoot:
// <root>/threads/<id>, root being where ralph's worktrees of the
// repository go ([build] worktree_root, or next to the repository).
func WorktreePath(repoRoot, worktreeRoot, id string) string {
	return worktree.PathUnder(worktree.Root(repoRoot, worktreeRoot), "threads", id)
}

// worktreeWorkspace is the work tree at path, opened without running git:
// should the folder be gone, git fails there instead of finding the
// repository around some other folder.
func worktreeWorkspace(path string) *workspace.Workspace {
	return &workspace.Workspace{Root: path, Repo: &gitx.Repo{Dir: path, Runner: gitx.ExecRunner{}}}
}

// setWork makes w the work tree the runner's git port works in.
func (r *Runner) setWork(w *workspace.Workspace) {
	r.work = w
	r.repo = r.gitPort
	if r.repo == nil {
		r.repo = repoGit{w.Repo}
	}
}

// chooseWork sets the work tree for the thread as it was read: its
// worktree once it has its branch there, else the checkout. Should the
// worktree's folder be gone, git fails there rather than working on the
// checkout, and the commands that change the thread make it again
// (ensureWorktree).
func (r *Runner) chooseWork() {
	if r.t.Worktree != "" && r.t.Branch != "" {
		r.setWork(worktreeWorkspace(r.t.Worktree))
		return
	}
	r.setWork(r.ws)
}

// inWorktree reports whether the runner works in the thread's own
// worktree now (rather than in the checkout).
func (r *Runner) inWorktree() bool { return r.work != r.ws }

// loopHome is where the thread's loop keeps its state, lock and run
// records: the checkout's .ralph for a thread in the checkout, as for
// `ralph build`; threads/<id>/loop for a thread in its own worktree, so
// that its records outlive the worktree and no two threads share them.
func (r *Runner) loopHome() *loop.Home {
	if r.t.Worktree == "" {
		return loop.HomeOf(r.ws)
	}
	return loop.HomeAt(r.ws, r.path("loop"))
}

// openWorktree gives the thread's branch its worktree at path and makes it
// the runner's work tree. A new branch is cut from base; an existing one
// is checked out as it is, so that a worktree deleted by hand comes back
// with every commit of its branch. A folder there that is not this
// repository's worktree of the branch is refused and left alone. A new
// worktree is marked as ralph's (so that ralph refuses to run inside it)
// and gets the files .worktreeinclude names and ralph's own files.
func (r *Runner) openWorktree(path, branch, base string) error {
	ctx := r.bg()
	_, err := os.Stat(filepath.Join(path, ".git"))
	made := err != nil
	if made && base == "" {
		if ok, err := r.ws.Repo.BranchExists(ctx, branch); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("thread %s: its worktree %s and its branch %s are gone, and its work with them: `ralph thread abandon %s`, or make the branch again (git branch %s COMMIT)",
				r.t.ID, path, branch, r.t.ID, branch)
		}
	}
	if err := r.ws.Repo.AddWorktree(ctx, path, branch, base); err != nil {
		return fmt.Errorf("thread %s: %w", r.t.ID, err)
	}
	w := worktreeWorkspace(path)
	if made {
		if err := worktree.Mark(path, worktree.Marker{Repo: r.ws.Root, Run: "threads", Task: r.t.ID}); err != nil {
			return err
		}
		if _, err := worktree.CopyIncluded(r.ws.Root, path); err != nil {
			return fmt.Errorf("copying the files %s names into %s: %w", worktree.IncludeFile, path, err)
		}
		// The thread's PRD copy and the loop's notes go in the worktree's
		// .ralph, which must keep them out of git as the checkout's does.
		if _, err := w.EnsureStateFiles(r.now()); err != nil {
			return err
		}
		if err := EnsureIgnores(w); err != nil {
			return err
		}
		r.note("thread %s works in its own worktree %s, on %s; your checkout is left as it is", r.t.ID, path, branch)
	}
	r.setWork(w)
	return nil
}

// ensureWorktree makes the worktree of a thread that has one and has its
// branch the runner's work tree, making it again from the branch when its
// folder is gone, before a command works on the thread.
func (r *Runner) ensureWorktree() error {
	t := r.t
	if t.Worktree == "" || t.Branch == "" || t.Phase.Type.Terminal() {
		return nil
	}
	return r.openWorktree(t.Worktree, t.Branch, "")
}

// checkoutBusy names a thread other than this one that is at work in the
// checkout (Running or Verifying), "" when none is: the checkout's branch
// must not change under it.
func (r *Runner) checkoutBusy() string {
	others, _ := List(r.dir)
	for _, o := range others {
		if o.ID != r.t.ID && o.Worktree == "" && o.Phase.Type.busyInWorkTree() {
			return fmt.Sprintf("thread %s is %s", o.ID, o.Phase.Type)
		}
	}
	return ""
}

// busyInWorkTree reports whether a thread in p is at work in its work
// tree: its loop or its checks may be running there.
func (p Phase) busyInWorkTree() bool { return p == PhaseRunning || p == PhaseVerifying }

// sameWorkTree reports whether threads a and b work in one work tree: the
// checkout for both, or one worktree.
func sameWorkTree(a, b Thread) bool {
	return filepath.Clean(a.Worktree) == filepath.Clean(b.Worktree)
}

// dropWorktree removes the thread's worktree once the thread is done or
// abandoned, when nothing in it would be lost: everything of the person's
// and the agent's is committed on the thread's branch, which stays. Only
// ralph's own files in it (.ralph) may be uncommitted; other changes keep
// the worktree, and the person is told where it is and how to remove it.
func (r *Runner) dropWorktree() {
	if !r.inWorktree() {
		return
	}
	path, branch := r.work.Root, r.t.Branch
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return
	}
	snap, err := r.repo.Snapshot(r.bg())
	if err != nil {
		r.note("the worktree %s is kept: ralph could not read its state (%v); remove it with `git worktree remove %s` when you no longer need it", path, oneLineErr(err), path)
		return
	}
	if dirty := workspace.UserChanges(snap.Dirty); len(dirty) > 0 {
		if len(dirty) > 5 {
			dirty = append(dirty[:5], "…")
		}
		r.note("the worktree %s is kept: it has changes that are not on %s (%s); commit them there, or remove it with `git worktree remove --force %s` if they can go", path, branch, strings.Join(dirty, ", "), path)
		return
	}
	if err := r.ws.Repo.RemoveWorktree(r.bg(), path, true); err != nil {
		r.note("the worktree %s is kept: removing it failed (%v); remove it with `git worktree remove --force %s`", path, oneLineErr(err), path)
		return
	}
	r.note("worktree %s removed; the work is on branch %s", path, branch)
	r.setWork(r.ws)
}

// agentDir is where a spec agent of kind works: polish changes the work in
// the thread's work tree; the conversation and the assessment write the
// draft among the thread's records in the checkout.
func (r *Runner) agentDir(kind string) string {
	if kind == "polish" {
		return r.work.Root
	}
	return r.ws.Root
}
