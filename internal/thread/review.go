package thread

import (
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/text"
)

// commitHumanEdits commits what a person changed on the thread's branch,
// so that the loop, which refuses a dirty tree, can go on from it.
func (r *Runner) commitHumanEdits(what string) error {
	snap, err := r.repo.Snapshot(r.bg())
	if err != nil || snap.Clean() {
		return err
	}
	if r.t.Branch != "" && r.currentBranch() != r.t.Branch {
		return fmt.Errorf("you are on %q, not the thread's branch %s: git checkout %s first", r.currentBranch(), r.t.Branch, r.t.Branch)
	}
	if err := r.repo.AddAll(r.bg()); err != nil {
		return err
	}
	sha, err := r.repo.Commit(r.bg(), fmt.Sprintf("%s: %s\n\nRalph-Thread: %s\n", r.t.Title, what, r.t.ID))
	if err != nil {
		return err
	}
	r.note("committed your edits on %s: %s", r.t.Branch, text.ShortHash(sha))
	return nil
}

// confirm asks the person through Env.Confirm; without one the answer is
// no.
func (r *Runner) confirm(question string) bool {
	return r.env.Confirm != nil && r.env.Confirm(question)
}

// resetWorkspace restores the baseline: checkout of the baseline branch,
// reset --hard to the baseline commit, deletion of the thread's branch.
// It asks first and refuses with ErrResetDeclined without a yes.
func (r *Runner) resetWorkspace(old Thread) error {
	if old.Baseline == nil || old.Baseline.CommitSHA == "" {
		return nil
	}
	b := old.Baseline
	r.note("revise resets the workspace to the baseline %s (%s) and deletes %s; the loop's commits there are dropped.", text.ShortHash(b.CommitSHA), text.OrNone(b.Branch, "(detached)"), BranchName(old.ID))
	if !r.confirm("This will reset changes. Continue?") {
		return ErrResetDeclined
	}
	// Uncommitted work is kept, not thrown away (ralph's own folder is
	// left alone), on a ref of the thread's: never in git stash, which is
	// the user's and which every worktree of the repository shares.
	if snap, err := r.repo.Snapshot(r.bg()); err == nil && !snap.Clean() {
		ref := "refs/ralph/threads/" + old.ID + "/before-reset"
		msg := fmt.Sprintf("ralph: thread %s work before reset to baseline", old.ID)
		kept, err := r.repo.SetAside(r.bg(), ref, msg, ".ralph")
		if err != nil {
			return fmt.Errorf("reset: keeping the uncommitted work: %w", err)
		}
		if kept != "" {
			r.note("uncommitted work kept at %s: see it with `git show %s`, bring it back with `git cherry-pick --no-commit %s`", ref, ref, ref)
		}
	}
	if r.inWorktree() {
		// The checkout is still at the baseline, which the thread never
		// touched: the worktree goes, its changes kept above, and the
		// next implementation makes it again from the checkout.
		path := r.work.Root
		if err := r.ws.Repo.RemoveWorktree(r.bg(), path, true); err != nil {
			if _, serr := os.Stat(path); serr == nil {
				return fmt.Errorf("reset: removing the worktree %s: %w", path, err)
			}
			_ = r.ws.Repo.PruneWorktrees(r.bg())
		}
		r.setWork(r.ws)
		r.note("worktree %s removed", path)
	} else {
		target := b.Branch
		if target == "" || target == BranchName(old.ID) {
			target = b.CommitSHA
		}
		if _, err := r.git("checkout", "-q", "-f", target); err != nil {
			return fmt.Errorf("reset: git checkout %s: %w", target, err)
		}
		if _, err := r.git("reset", "-q", "--hard", b.CommitSHA); err != nil {
			return fmt.Errorf("reset: git reset --hard %s: %w", text.ShortHash(b.CommitSHA), err)
		}
	}
	if _, err := r.git("rev-parse", "--verify", "--quiet", "refs/heads/"+BranchName(old.ID)); err == nil {
		if _, err := r.git("branch", "-q", "-D", BranchName(old.ID)); err != nil {
			return fmt.Errorf("reset: deleting %s: %w", BranchName(old.ID), err)
		}
	}
	// The next run starts from the new spec, not from this attempt.
	if err := r.retireLoopState(false); err != nil {
		return err
	}
	os.Remove(r.prdPath())
	c := r.loadConf()
	c.PRDSpecVersion, c.Extra, c.RunID, c.RunBase = 0, 0, "", 0
	r.saveConf(c)
	r.note("workspace reset to %s; %s deleted", text.ShortHash(b.CommitSHA), BranchName(old.ID))
	return nil
}

// commitMessage is the proposed message: the title, the spec version, the
// verification evidence and the trailers that link the commit to the
// thread and its run.
func (r *Runner) commitMessage() string {
	t := r.t
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nThread %s, spec v%d.\n", t.Title, t.ID, t.SpecVersion)
	if ev := r.Evidence(); ev != nil {
		b.WriteString("\nVerification:\n")
		for _, it := range ev.Items {
			mark := "✓"
			if !it.Passed {
				mark = "✗"
			}
			fmt.Fprintf(&b, "- %s %s\n", mark, it.Name)
		}
	}
	fmt.Fprintf(&b, "\nRalph-Thread: %s\n", t.ID)
	if c := r.loadConf(); c.RunID != "" {
		fmt.Fprintf(&b, "Ralph-Run: %s\n", c.RunID)
	}
	return b.String()
}

// StoriesRef is where `ralph thread commit` keeps the per-story commits of
// thread id once it has squashed them into the one approved commit.
func StoriesRef(id string) string { return "refs/ralph/threads/" + id + "/stories" }

// commitWork is the Commit checkpoint. The loop committed each story on
// the thread's branch as it went; what the person approved is the whole
// of the thread's work: the commits since the baseline and whatever is
// still uncommitted. That becomes one commit on the baseline with the
// approved message, and the per-story commits stay reachable under
// StoriesRef. It never pushes or merges.
//
// A kill at any step is undone by doing it again: the squashed commit is
// recorded in config.json before the branch moves to it, so a second
// commit recognizes a branch that has moved already and never squashes
// twice, and the stories ref only ever points at the branch's own tip
// before the squash.
func (r *Runner) commitWork() error {
	if r.t.Branch != "" && r.currentBranch() != r.t.Branch {
		return fmt.Errorf("you are on %q, not the thread's branch %s: git checkout %s, then commit again", r.currentBranch(), r.t.Branch, r.t.Branch)
	}
	if r.t.Baseline == nil || r.t.Baseline.CommitSHA == "" {
		return fmt.Errorf("thread %s has no baseline to squash its work onto: commit it yourself, then `ralph thread abandon`", r.t.ID)
	}
	ctx, base := r.bg(), r.t.Baseline.CommitSHA
	conf := r.loadConf()
	head, err := r.repo.Head(ctx)
	if err != nil {
		return err
	}
	if conf.CommitSHA != "" && head == conf.CommitSHA {
		return nil // squashed already, by a commit killed before it saved Done
	}
	// The approved message, as the person saw it; -F reads it from here.
	msgPath := r.path("commit_msg.txt")
	if _, err := os.Stat(msgPath); err != nil {
		if err := store.WriteFileAtomic(msgPath, []byte(r.commitMessage()), 0o644); err != nil {
			return err
		}
	}
	// What is not committed yet was in the review too.
	if err := r.commitHumanEdits("uncommitted work at commit"); err != nil {
		return err
	}
	if head, err = r.repo.Head(ctx); err != nil {
		return err
	}
	conf.CommitSHA = ""
	if head == base {
		return r.saveConf(conf) // nothing was changed: nothing to commit
	}
	if ok, err := r.repo.IsAncestor(ctx, base, head); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%s no longer descends from the thread's baseline %s (was it rebased?): ralph squashes only baseline..HEAD; commit it yourself, then `ralph thread abandon`", r.currentBranchOr(head), text.ShortHash(base))
	}
	if _, err := r.git("update-ref", "-m", "ralph thread commit: the per-story commits of thread "+r.t.ID, StoriesRef(r.t.ID), head); err != nil {
		return fmt.Errorf("keeping the per-story commits at %s: %w", StoriesRef(r.t.ID), err)
	}
	// commit-tree rather than reset and commit: the branch moves in one
	// step from the stories to the squash, so no kill leaves it half
	// way. The tree is the stories' own, whose commits ran the hooks.
	sha, err := r.git("commit-tree", head+"^{tree}", "-p", base, "-F", msgPath)
	if err != nil {
		return fmt.Errorf("squashing the thread's work: %w", err)
	}
	conf.CommitSHA = sha
	if err := r.saveConf(conf); err != nil {
		return err
	}
	loop.CrashPoint("thread-squash-recorded")
	ref := "HEAD"
	if b := r.currentBranch(); b != "" {
		ref = "refs/heads/" + b
	}
	if _, err := r.git("update-ref", "-m", "ralph thread commit: squash of thread "+r.t.ID, ref, sha, head); err != nil {
		return fmt.Errorf("moving %s to the squashed commit: %w (the per-story commits are at %s)", ref, err, StoriesRef(r.t.ID))
	}
	loop.CrashPoint("thread-squashed")
	return nil
}

func (r *Runner) currentBranchOr(head string) string {
	if b := r.currentBranch(); b != "" {
		return "branch " + b
	}
	return "HEAD " + text.ShortHash(head)
}
