package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
)

// tipPath is where the merge queue keeps the checks' results on the
// target's tip (verify.Tip).
func (e *engine) tipPath() string {
	return filepath.Join(e.home, "runs", e.reg.RunID, "tip-checks.json")
}

// bookkeeping are the paths of a task branch the merge queue leaves out
// of the task's patch: ralph's own files, which every worker changes
// (progress.md, the loop's records) and would make every pair of tasks
// conflict. The queue writes them itself, once per landed task.
func (e *engine) bookkeeping() []string {
	return []string{workspace.DirName, e.prdRel}
}

// maxTargetMoves bounds how often one landing starts over because the
// target branch moved outside ralph while it was being integrated.
const maxTargetMoves = 5

// land integrates t's branch on the tip of the target in the integration
// worktree, runs the checks there, and moves the target to the result.
// The target only ever moves to a commit whose checks passed on it. A
// conflict or a failing check sends the task back to a worker, or after
// the retry limit sets it aside for review.
func (e *engine) land(ctx context.Context, t *TaskRecord) error {
	bg := context.WithoutCancel(ctx)
	integ, err := e.integration(bg)
	if err != nil {
		return err
	}
	for range maxTargetMoves {
		tip, err := e.repo.RevParse(bg, e.reg.Target)
		if err != nil {
			return err
		}
		if err := integ.DetachAt(bg, tip); err != nil {
			return err
		}
		// What the checks say of the tip, read once per tip: the landing
		// is judged against it (the last landing recorded it).
		tipChecks, err := verify.RunOnTip(ctx, check.Run, integ.Dir, e.tipPath(), tip, e.o.Checks)
		if ctx.Err() != nil {
			t.State = Queued
			return nil
		}
		if err != nil {
			return err
		}
		// A target moved outside ralph to a failing commit would send
		// every good task back: it stops the run, named.
		if err := e.checkMoved(bg, integ, tip, tipChecks); err != nil {
			t.State = Queued
			return err
		}
		head, err := e.repo.RevParse(bg, t.Branch)
		if err != nil {
			return e.sendBack(bg, t, "its branch "+t.Branch+" is gone (deleted by hand?)", "", nil)
		}
		patch, err := e.repo.SquashDiff(bg, t.Base, head, e.bookkeeping()...)
		if err != nil {
			return err
		}
		if err := integ.ApplyThreeWay(bg, patch); err != nil {
			var c *gitx.ApplyConflict
			if errors.As(err, &c) {
				return e.sendBack(bg, t, fmt.Sprintf("its changes conflict with work landed on %s meanwhile, in %s", e.reg.Target, strings.Join(c.Files, ", ")), "", c.Files)
			}
			return err
		}
		loop.CrashPoint("land-applied")
		if err := e.writeBookkeeping(integ.Dir, t); err != nil {
			return err
		}
		t.State = Landing
		hash, err := runkit.Commit(bg, integ, e.landingMessage(t), func(tok string) error {
			t.Token = tok
			return e.save()
		})
		if err != nil {
			return fmt.Errorf("committing %s on the integration worktree: %w", t.ID, err)
		}
		// The landing commit is on record before the target moves, so a
		// kill in the middle of the fast-forward can be finished.
		t.Commit = hash
		if err := e.save(); err != nil {
			return err
		}
		loop.CrashPoint("land-committed")
		e.sayTask(t, report.KindCheck, nil, "[queue %s] checking %s integrated on %s", t.ID, t.ID, text.ShortHash(tip))
		landing := verify.JudgeLanding(ctx, check.Run, integ.Dir, tipChecks, e.o.Checks)
		if ctx.Err() != nil {
			// Interrupted during the checks: the task stays queued and
			// is landed again on the next start.
			t.State, t.Token = Queued, ""
			return integ.DetachAt(bg, tip)
		}
		if landing.Failed != nil {
			if err := integ.DetachAt(bg, tip); err != nil {
				return err
			}
			t.Token = ""
			return e.sendBack(bg, t, landing.Reason(e.reg.Target), landing.Feedback(), nil)
		}
		// The integrated tree is the next tip: its checks have run.
		if err := verify.SaveTip(e.tipPath(), hash, landing.Runs); err != nil {
			return err
		}
		loop.CrashPoint("land-checked")
		// The person's checkout of the target moves with it, as a
		// fast-forward would, refusing to overwrite what they changed.
		if err := e.repo.FastForward(bg, e.reg.Target, tip, hash); err != nil {
			if errors.Is(err, gitx.ErrBranchMoved) {
				e.sayTask(t, report.KindWarning, nil, "[queue %s] %s moved outside ralph while %s was integrated: integrating again on the new tip", t.ID, e.reg.Target, t.ID)
				t.State, t.Token = Queued, ""
				continue
			}
			return err
		}
		loop.CrashPoint("land-moved")
		return e.landed(bg, t, hash)
	}
	t.State = Queued
	return fmt.Errorf("%s kept moving outside ralph while %s was integrated; the task stays queued: run again once nobody else commits to it", e.reg.Target, t.ID)
}

// landed records t's commit on the target and removes the task's
// worktree and branch.
func (e *engine) landed(ctx context.Context, t *TaskRecord, hash string) error {
	t.State, t.Commit, t.Reason, t.Feedback, t.Conflicts = Landed, hash, "", "", nil
	e.reg.Checkout = hash
	if err := e.save(); err != nil {
		return err
	}
	e.remember(ctx, t, hash)
	if sharedStore(e.o.Source) {
		// A shared store is marked once the commit is on the target (a
		// crash before this is repaired by reconcile, which lands the
		// task again through here).
		if err := e.o.Source.MarkDone(t.ID, "", e.o.Now()); err != nil {
			e.sayTask(t, report.KindWarning, report.Warning{Error: err.Error()}, "[queue %s] landed, but marking it done in the task store failed: %v; mark it done there by hand", t.ID, err)
		}
	}
	e.sayTask(t, report.KindCommit, report.Commit{State: "landed", Commit: hash, Branch: e.reg.Target},
		"[queue %s] ✓ landed on %s · commit %s", t.ID, e.reg.Target, text.ShortHash(hash))
	e.removeTaskWork(ctx, t)
	return nil
}

// removeTaskWork deletes a landed task's worktree and branch: its work is
// on the target, in the task's one commit.
func (e *engine) removeTaskWork(ctx context.Context, t *TaskRecord) {
	if t.Worktree != "" {
		if err := e.repo.RemoveWorktree(ctx, t.Worktree, true); err != nil && !errors.Is(err, os.ErrNotExist) {
			e.sayTask(t, report.KindWarning, nil, "[queue %s] could not remove the worktree %s: %v", t.ID, t.Worktree, err)
		}
	}
	if ok, _ := e.repo.BranchExists(ctx, t.Branch); !ok {
		return
	}
	if err := e.repo.DeleteBranch(ctx, t.Branch, "", true); err != nil {
		e.sayTask(t, report.KindWarning, nil, "[queue %s] could not delete the branch %s: %v", t.ID, t.Branch, err)
	}
}

// sendBack returns t to a worker with the reason in its next prompt, or
// after the retry limit sets it aside for review with its branch kept.
func (e *engine) sendBack(ctx context.Context, t *TaskRecord, reason, feedback string, conflicts []string) error {
	t.Reason, t.Feedback, t.Conflicts, t.Token = reason, feedback, conflicts, ""
	if t.Attempt >= e.o.RetryLimit {
		t.State = NeedsReview
		if t.Worktree != "" {
			_ = e.repo.RemoveWorktree(ctx, t.Worktree, true)
		}
		e.sayTask(t, report.KindBlocker, report.Blocker{State: "needs_review", Reason: reason, Conflicts: &conflicts, Branch: t.Branch, Attempts: t.Attempt},
			"[queue %s] ✗ needs review after %s: %s; its work is on branch %s (see it: git diff %s...%s)",
			t.ID, words.Count(t.Attempt, "attempt", "attempts"), reason, t.Branch, e.reg.Target, t.Branch)
		return e.save()
	}
	t.State = SentBack
	e.sayTask(t, report.KindBlocker, report.Blocker{State: "sent_back", Reason: reason, Conflicts: &conflicts, Attempts: t.Attempt},
		"[queue %s] ↻ sent back to a worker: %s", t.ID, reason)
	return e.save()
}

// writeBookkeeping marks t done in the integration worktree's task file
// and adds its line to progress.md: ralph's record of the landed task,
// part of the task's one commit.
func (e *engine) writeBookkeeping(dir string, t *TaskRecord) error {
	if !sharedStore(e.o.Source) {
		src := tasks.Open(e.o.Source.Kind(), filepath.Join(dir, filepath.FromSlash(e.prdRel)))
		if err := src.MarkDone(t.ID, "", e.o.Now()); err != nil {
			return fmt.Errorf("marking %s done in %s: %w", t.ID, e.prdRel, err)
		}
	}
	progress := filepath.Join(dir, workspace.DirName, "progress.md")
	if _, err := os.Stat(progress); err == nil {
		line := fmt.Sprintf("\n## %s - %s\n- %s landed by ralph's merge queue (run %s, %s, attempt %d): verified on its branch, checks passed on %s\n",
			e.o.Now().Format("2006-01-02 15:04"), t.ID, t.Title, e.reg.RunID, t.Worker, t.Attempt, e.reg.Target)
		if err := store.AppendFile(progress, []byte(line)); err != nil {
			return err
		}
	}
	return nil
}

func (e *engine) landingMessage(t *TaskRecord) runkit.Message {
	return runkit.Message{Subject: t.ID + ": " + text.OneLine(t.Title), Trailers: []runkit.Trailer{
		{Key: "Ralph-Task", Value: t.ID}, {Key: "Ralph-Run", Value: e.reg.RunID},
		{Key: "Ralph-Worker", Value: t.Worker}, {Key: "Ralph-Attempt", Value: fmt.Sprint(t.Attempt)},
	}}
}

// integration returns the merge queue's worktree, making it when missing.
func (e *engine) integration(ctx context.Context) (*gitx.Repo, error) {
	if e.integ != nil {
		return e.integ, nil
	}
	dir := filepath.Join(e.reg.WorktreeRoot, integrationDir)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		if err := e.foreignFolder(dir); err != nil {
			return nil, err
		}
		_ = e.repo.PruneWorktrees(ctx)
		if err := e.repo.AddDetachedWorktree(ctx, dir, e.reg.Target); err != nil {
			return nil, fmt.Errorf("making the integration worktree %s: %w", dir, err)
		}
		if err := worktree.Mark(dir, worktree.Marker{Repo: e.o.WS.Root, Run: e.reg.RunID, Task: "integration"}); err != nil {
			return nil, err
		}
	}
	w, err := gitx.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	e.integ = w
	return w, nil
}

func (e *engine) removeIntegration(ctx context.Context) {
	dir := filepath.Join(e.reg.WorktreeRoot, integrationDir)
	if _, err := os.Stat(dir); err == nil {
		_ = e.repo.RemoveWorktree(ctx, dir, true)
	}
	e.integ = nil
	// The run's folder is empty once every worktree is gone.
	_ = os.Remove(e.reg.WorktreeRoot)
}

// reconcile makes a resumed run's records and git agree after a crash: a
// landing whose commit reached the target is landed (never twice), one
// that did not is queued again, and the person's checkout catches up.
func (e *engine) reconcile(ctx context.Context) error {
	_ = e.repo.PruneWorktrees(ctx)
	for _, t := range e.reg.Sorted() {
		if t.State == Landed {
			// A kill between the landing and the removal of the
			// task's worktree and branch: remove them now.
			e.removeLeftovers(ctx, t)
			continue
		}
		if t.State != Landing {
			continue
		}
		if hash, ok := runkit.Committed(ctx, targetTip{e.repo, e.reg.Target}, t.Token); ok {
			// landed() says {"state":"landed"} next; this line only tells
			// that the landing was found after a restart.
			e.sayTask(t, report.KindCommit, report.Commit{Commit: hash, BeforeRestart: true}, "[queue %s] landed before the restart · commit %s", t.ID, text.ShortHash(hash))
			if err := e.landed(ctx, t, hash); err != nil {
				return err
			}
			continue
		}
		t.State, t.Token = Queued, ""
	}
	return e.save()
}

// targetTip reads the last commit of a branch, for runkit.Committed.
type targetTip struct {
	repo   *gitx.Repo
	branch string
}

func (t targetTip) LastCommit(ctx context.Context) (string, string, error) {
	return t.repo.CommitMessage(ctx, t.branch)
}

// integrationDir is the merge queue's worktree in the run's folder. A task
// id never makes this name: worktree.PathUnder escapes a leading dot.
const integrationDir = ".integration"

// remember records the landed task in the checkout's memory store: its
// task-complete event, linked to the commit, and its blockers resolved.
// The event's id is the run's and the task's, so a landing recognised
// after a crash records it once.
func (e *engine) remember(ctx context.Context, t *TaskRecord, hash string) {
	if e.o.Memory == nil {
		return
	}
	id, err := e.o.Memory.Add(ctx, memory.Node{ID: "evt-" + e.reg.RunID + "-" + t.ID, Name: t.ID + " complete: " + t.Title,
		MemoryType: memory.TypeEvent, Props: map[string]string{"event": memory.EventTaskComplete, "task": t.ID, "run": e.reg.RunID, "worker": t.Worker}})
	if err == nil {
		err = e.o.Memory.Link(ctx, id, "commit", hash)
	}
	if err == nil {
		err = e.o.Memory.Resolve(ctx, t.ID, e.o.Now())
	}
	if err != nil {
		e.sayTask(t, report.KindWarning, report.Warning{Error: err.Error()}, "[queue %s] landed, but the memory store did not record it: %v", t.ID, err)
	}
}

// removeLeftovers removes what a landed task still has, its worktree or
// its branch, when a kill came before landed removed them.
func (e *engine) removeLeftovers(ctx context.Context, t *TaskRecord) {
	_, wtErr := os.Stat(t.Worktree)
	exists, _ := e.repo.BranchExists(ctx, t.Branch)
	if (t.Worktree != "" && wtErr == nil) || exists {
		e.removeTaskWork(ctx, t)
	}
}

// finishFastForward completes a fast-forward a kill cut in two: the
// person's checkout of the target already holds a landing commit's files
// and index while the target still points at the commit before it. That
// checkout would otherwise look like uncommitted work and stop the next
// start. Anything else in the checkout is left for the person.
func finishFastForward(ctx context.Context, repo *gitx.Repo, home string) error {
	reg, ok, err := LoadRegistry(home)
	if err != nil || !ok || reg.Finished {
		return err
	}
	snap, err := repo.Snapshot(ctx)
	if err != nil || snap.Branch != reg.Target || snap.Clean() {
		return err
	}
	for _, t := range reg.Sorted() {
		if t.State != Landing || t.Commit == "" {
			continue
		}
		if done, err := repo.CheckoutIs(ctx, t.Commit); err != nil || !done {
			continue
		}
		if ok, err := repo.IsAncestor(ctx, snap.Head, t.Commit); err != nil || !ok {
			continue
		}
		return repo.UpdateBranch(ctx, reg.Target, t.Commit, snap.Head)
	}
	return nil
}
