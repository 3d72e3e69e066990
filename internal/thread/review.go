package thread

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
)

// commitHumanEdits commits what a person changed on the thread's branch,
// so that the loop, which refuses a dirty tree, can go on from it.
func (r *Runner) commitHumanEdits(what string) error {
	snap, err := r.ws.Repo.Snapshot(r.bg())
	if err != nil || snap.Clean() {
		return err
	}
	if r.t.Branch != "" && r.currentBranch() != r.t.Branch {
		return fmt.Errorf("you are on %q, not the thread's branch %s: git checkout %s first", r.currentBranch(), r.t.Branch, r.t.Branch)
	}
	if err := r.ws.Repo.AddAll(r.bg()); err != nil {
		return err
	}
	sha, err := r.ws.Repo.Commit(r.bg(), fmt.Sprintf("%s: %s\n\nRalph-Thread: %s\n", r.t.Title, what, r.t.ID))
	if err != nil {
		return err
	}
	r.out("committed your edits on %s: %s", r.t.Branch, short(sha))
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
	r.out("revise resets the workspace to the baseline %s (%s) and deletes %s; the loop's commits there are dropped.", short(b.CommitSHA), orNone(b.Branch), BranchName(old.ID))
	if !r.confirm("This will reset changes. Continue?") {
		return ErrResetDeclined
	}
	// Uncommitted work is stashed, not thrown away (ralph's own folder
	// is left alone): git stash list shows it.
	if snap, err := r.ws.Repo.Snapshot(r.bg()); err == nil && !snap.Clean() {
		msg := fmt.Sprintf("ralph: thread %s work before reset to baseline", old.ID)
		if out, err := r.git("stash", "push", "--include-untracked", "-m", msg, "--", ".", ":(exclude).ralph"); err != nil {
			return fmt.Errorf("reset: git stash: %w", err)
		} else if !strings.Contains(out, "No local changes") {
			r.out("uncommitted work stashed: %q (git stash list)", msg)
		}
	}
	target := b.Branch
	if target == "" || target == BranchName(old.ID) {
		target = b.CommitSHA
	}
	if _, err := r.git("checkout", "-q", "-f", target); err != nil {
		return fmt.Errorf("reset: git checkout %s: %w", target, err)
	}
	if _, err := r.git("reset", "-q", "--hard", b.CommitSHA); err != nil {
		return fmt.Errorf("reset: git reset --hard %s: %w", short(b.CommitSHA), err)
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
	r.out("workspace reset to %s; %s deleted", short(b.CommitSHA), BranchName(old.ID))
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

// commitWork commits what is left on the thread's branch with the proposed
// message. It never pushes or merges.
func (r *Runner) commitWork() error {
	if r.t.Branch != "" && r.currentBranch() != r.t.Branch {
		return fmt.Errorf("you are on %q, not the thread's branch %s: git checkout %s, then commit again", r.currentBranch(), r.t.Branch, r.t.Branch)
	}
	msg, err := os.ReadFile(r.path("commit_msg.txt"))
	if err != nil {
		msg = []byte(r.commitMessage())
	}
	conf := r.loadConf()
	snap, err := r.ws.Repo.Snapshot(r.bg())
	if err != nil {
		return err
	}
	if !snap.Clean() {
		if err := r.ws.Repo.AddAll(r.bg()); err != nil {
			return err
		}
		sha, err := r.ws.Repo.Commit(r.bg(), string(msg))
		if err != nil && !errors.Is(err, gitx.ErrNothingToCommit) {
			return err
		}
		conf.CommitSHA = sha
	}
	return r.saveConf(conf)
}
