package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/worktree"
)

// records is the run's folder, where the merge queue keeps the checks'
// results on the target's tip (landing.TipChecks).
func (e *engine) records() string { return filepath.Join(e.home, "runs", e.reg.RunID) }

// land lands ts, the verified tasks waiting in the order their workers
// finished, through the parallel core's one landing procedure
// (landing.Queue.LandBatch) on the target branch of the person's
// repository, which moves as a fast-forward of their checkout would:
// together, checked once, when there are several. A conflict or a
// failing check sends a task back to a worker, or after the retry limit
// sets it aside for review.
func (e *engine) land(ctx context.Context, ts []*TaskRecord) error {
	bg := context.WithoutCancel(ctx)
	integ, err := e.integration(bg)
	if err != nil {
		return err
	}
	var batch *report.Batch
	if len(ts) > 1 {
		e.reg.Batches++
		batch = &report.Batch{ID: fmt.Sprintf("b%d", e.reg.Batches)}
	}
	var jobs []landing.Job
	var members []*TaskRecord
	for _, t := range ts {
		if err := e.move(t, landing.Taken); err != nil {
			return err
		}
		t.Token = ""
		head, err := e.repo.RevParse(bg, t.Branch)
		if err != nil {
			if err := e.sendBack(bg, t, landing.SendBack("its branch "+t.Branch+" is gone (deleted by hand?)", "", nil), nil); err != nil {
				return err
			}
			continue
		}
		jobs = append(jobs, landing.Job{Run: e.reg.RunID, Task: t.ID, Title: t.Title, Worker: t.Worker, Attempt: t.Attempt,
			Base: t.Base, Head: head, PRD: e.prdRel, Kind: e.o.Source.Kind(),
			Committing: func(tok string) error { t.Token = tok; return e.save() },
			Committed:  func(hash string) error { t.Commit = hash; return e.save() }})
		members = append(members, t)
		if batch != nil {
			batch.Members = append(batch.Members, t.ID)
		}
	}
	if len(members) == 0 {
		return nil
	}
	if len(members) == 1 {
		batch = nil
	}
	for _, t := range members {
		if batch != nil {
			t.Batch = batch.ID
		}
	}
	lead := members[0]
	prefix := lead.ID
	if batch != nil {
		prefix = "batch " + batch.ID
	}
	q := &landing.Queue{Repo: e.repo, Integ: integ, Target: localTarget{e}, Name: e.reg.Target, Checks: e.o.Checks, Checker: e.o.Checker,
		Records: e.records(), Left: e.reg.Checkout, Now: e.o.Now,
		Say: func(kind report.Kind, data report.Payload, line string) {
			e.sayTask(lead, kind, data, "[queue %s] %s", prefix, line)
		}}
	outs, err := q.LandBatch(ctx, jobs)
	e.reg.Checkout = q.Left // where ralph left the target, a move it accepted included
	e.adapt(outs)
	for i, t := range members {
		out := outs[i]
		var ferr error
		switch {
		case out.Landed:
			ferr = e.landed(bg, t, out.Commit, batch)
		case out.Reason != "":
			ferr = e.sendBack(bg, t, out, batch)
		case err == nil:
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			// Interrupted during the checks, the target untouched: the
			// task stays queued and is landed again on the next start.
			t.State, t.Token = landing.Queued, ""
		case t.Token == "":
			t.State = landing.Queued
		} // after the commit: reconcile finds out on the next start
		if ferr != nil && err == nil {
			err = ferr
		}
		if t.State != landing.Landing {
			t.Batch = ""
		}
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// adapt sizes the next batch from how this one went: doubled after a
// batch that landed whole, halved after one that sent a task back, within
// [1, MaxBatch]. Bisection makes a failing batch cost more check runs, so
// a run whose stories often fail together lands them in smaller batches.
func (e *engine) adapt(outs []landing.Outcome) {
	whole := true
	for _, o := range outs {
		whole = whole && o.Landed
	}
	if whole {
		e.batch *= 2
	} else {
		e.batch /= 2
	}
	e.batch = max(1, min(e.batch, e.o.MaxBatch))
}

// move takes t along the task machine's edge ev.
func (e *engine) move(t *TaskRecord, ev landing.TaskEvent) error {
	to, _, err := landing.Next(t.State, ev)
	if err != nil {
		return fmt.Errorf("%s: %w", t.ID, err)
	}
	t.State = to
	return nil
}

// localTarget is the target branch in the person's repository.
type localTarget struct{ e *engine }

func (l localTarget) Tip(ctx context.Context) (string, error) {
	return l.e.repo.RevParse(ctx, l.e.reg.Target)
}

// Move fast-forwards the target, and the person's checkout of it with
// it, refusing to overwrite what they changed.
func (l localTarget) Move(ctx context.Context, tip, commit string) error {
	return l.e.repo.FastForward(ctx, l.e.reg.Target, tip, commit)
}

func (l localTarget) Moved(from, to string, failing []string) *verify.MovedError {
	target := l.e.reg.Target
	return &MovedError{Target: target, From: from, To: to, Failing: failing,
		PutBack: fmt.Sprintf("`git update-ref refs/heads/%s %s %s` (or, in its checkout, `git reset --keep %s`)", target, from, to, text.ShortHash(from))}
}

// landed records t's commit on the target and removes the task's
// worktree and branch.
func (e *engine) landed(ctx context.Context, t *TaskRecord, hash string, batch *report.Batch) error {
	t.State, t.Commit, t.Reason, t.Feedback, t.Conflicts, t.Batch = landing.Landed, hash, "", "", nil, ""
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
	e.tell(t, report.Commit{State: "landed", Commit: hash, Branch: e.reg.Target, Batch: batch})
	e.removeTaskWork(ctx, t)
	return nil
}

// removeTaskWork deletes a landed task's worktree and branch.
func (e *engine) removeTaskWork(ctx context.Context, t *TaskRecord) {
	if err := landing.RemoveWork(ctx, e.repo, t.Worktree, t.Branch); err != nil {
		e.sayTask(t, report.KindWarning, nil, "[queue %s] could not remove the worktree %s or the branch %s: %v", t.ID, t.Worktree, t.Branch, err)
	}
}

// sendBack returns t to a worker with the reason in its next prompt, or
// after the retry limit sets it aside for review with its branch kept.
func (e *engine) sendBack(ctx context.Context, t *TaskRecord, out landing.Outcome, batch *report.Batch) error {
	t.Reason, t.Feedback, t.Conflicts, t.Token, t.Commit, t.Batch = out.Reason, out.Feedback, out.Conflicts, "", "", ""
	if err := e.move(t, out.Event(t.Attempt, e.o.RetryLimit)); err != nil {
		return err
	}
	if t.State == landing.NeedsReview {
		if t.Worktree != "" {
			_ = e.repo.RemoveWorktree(ctx, t.Worktree, true)
		}
		e.sayTask(t, report.KindBlocker, report.Blocker{State: "needs_review", Reason: t.Reason, Conflicts: report.Ptr(t.Conflicts), Branch: t.Branch, Attempts: t.Attempt, Batch: batch},
			"[queue %s] ✗ needs review after %s: %s; its work is on branch %s (see it: git diff %s...%s)",
			t.ID, words.Count(t.Attempt, "attempt", "attempts"), t.Reason, t.Branch, e.reg.Target, t.Branch)
		return e.save()
	}
	e.tell(t, report.Blocker{State: "sent_back", Reason: t.Reason, Conflicts: report.Ptr(t.Conflicts), Attempts: t.Attempt, Batch: batch})
	return e.save()
}

// integration returns the merge queue's worktree, making it when missing
// in a folder that is not another program's.
func (e *engine) integration(ctx context.Context) (*gitx.Repo, error) {
	if e.integ == nil {
		if err := e.foreignFolder(filepath.Join(e.reg.WorktreeRoot, landing.IntegrationDir)); err != nil {
			return nil, err
		}
		w, err := landing.Integration(ctx, e.repo, e.reg.WorktreeRoot, e.reg.Target, worktree.Marker{Repo: e.o.WS.Root, Run: e.reg.RunID, Task: "integration"})
		if err != nil {
			return nil, err
		}
		e.integ = w
	}
	return e.integ, nil
}

func (e *engine) removeIntegration(ctx context.Context) {
	dir := filepath.Join(e.reg.WorktreeRoot, landing.IntegrationDir)
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
		if t.State == landing.Landed {
			// A kill between the landing and the removal of the
			// task's worktree and branch: remove them now.
			e.removeTaskWork(ctx, t)
			continue
		}
		if t.State != landing.Landing {
			continue
		}
		// A member of a batch landed below the batch's head; its commit
		// is on record before the target moved.
		hash, ok := landing.LandedBefore(ctx, e.repo, e.reg.Target, t.Token)
		if !ok && landing.LandedIn(ctx, e.repo, e.reg.Target, t.Commit, t.Token) {
			hash, ok = t.Commit, true
		}
		if ok {
			// landed() says {"state":"landed"} next; this line only tells
			// that the landing was found after a restart.
			e.tell(t, report.Commit{Commit: hash, BeforeRestart: true})
			if err := e.landed(ctx, t, hash, nil); err != nil {
				return err
			}
			continue
		}
		t.State, t.Token, t.Batch = landing.Queued, "", ""
	}
	return e.save()
}

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
		if t.State != landing.Landing || t.Commit == "" {
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
