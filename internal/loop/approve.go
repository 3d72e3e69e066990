package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/workspace"
)

// A story whose criteria say its tests change (a behaviour change) and
// whose attempt changed them, with the start's tests failing against the
// new code, is neither waived nor retried: it waits, blocked for review,
// its work at its attempt's ref. A person reads the test change and
// approves it; ralph then brings the work back, marks the story done and
// commits it, saying in the commit and its records who approved what.

// Approve accepts the reviewed work of task id (a story or its task) while
// no run is going: under the workspace's lock, from the state on disk.
func Approve(ctx context.Context, ws *workspace.Workspace, src tasks.Source, id, by string, now time.Time) (string, error) {
	home := HomeOf(ws)
	if _, err := home.load(); err != nil {
		return "", err
	}
	lock, err := store.TryLock(home.LockPath(), "ralph approve")
	if err != nil {
		return "", err
	}
	defer lock.Unlock()
	st, err := home.load()
	if err != nil {
		return "", err
	}
	if st == nil {
		return "", fmt.Errorf("no build has run in this workspace, so %s is not waiting for a review", id)
	}
	msg, err := approveWork(ctx, ws, ws.Repo, src, st, id, by, now)
	if err != nil {
		return "", err
	}
	return msg, home.save(st)
}

// approveWork is the approval itself, on st: the run's state in memory
// (a build takes approve at its next step) or read under the lock.
func approveWork(ctx context.Context, ws *workspace.Workspace, repo *gitx.Repo, src tasks.Source, st *LoopState, id, by string, now time.Time) (string, error) {
	tid, rec := st.BlockedTask(id)
	if rec == nil || rec.Blocker == nil || !rec.Blocker.Review {
		return "", fmt.Errorf("%s is not waiting for a review: approve takes a task blocked because its story changes tests (`ralph status` lists them); `ralph unblock %s` has a blocked task done again", tid, tid)
	}
	bl := rec.Blocker
	if bl.Ref == "" || bl.Base == "" {
		return "", fmt.Errorf("%s's work was not kept at a ref, so there is nothing to approve: `ralph unblock %s` has it done again", tid, tid)
	}
	snap, err := repo.Snapshot(ctx)
	if err != nil {
		return "", err
	}
	taskRel := ws.Rel(src.Path())
	for _, f := range snap.Dirty {
		if f != taskRel && !strings.HasPrefix(f, workspace.DirName+"/") {
			return "", fmt.Errorf("the work tree has changes of its own (%s): commit or stash them, then approve %s", f, tid)
		}
	}
	patch, err := repo.SquashDiff(ctx, bl.Base, bl.Ref, workspace.DirName, taskRel)
	if err != nil {
		return "", err
	}
	if len(strings.TrimSpace(string(patch))) > 0 {
		if err := repo.ApplyThreeWay(ctx, patch); err != nil {
			var c *gitx.ApplyConflict
			if errors.As(err, &c) {
				return "", fmt.Errorf("%s's work conflicts with what the branch has now, in %s: `ralph unblock %s` has it done again on the current code", tid, strings.Join(c.Files, ", "), tid)
			}
			return "", err
		}
	}
	storyID, subID := tasks.ParseTaskID(tid)
	if err := src.MarkDone(storyID, subID, now); err != nil {
		return "", fmt.Errorf("marking %s done: %w", tid, err)
	}
	title := storyID
	if board, err := src.Load(); err == nil {
		if s, ok := board.Find(storyID); ok {
			title = s.Title
		}
	}
	evidence := fmt.Sprintf("%s approved the test change the story asks for (git diff %s %s)", by, short(bl.Base), bl.Ref)
	msg := runkit.Message{
		Subject: tid + ": " + title,
		Body:    "Approved by a person: " + evidence + ".\nBlocked for review because: " + bl.Reason,
		Trailers: []runkit.Trailer{{Key: "Ralph-Task", Value: tid}, {Key: "Ralph-Story", Value: storyID},
			{Key: "Ralph-Run", Value: st.RunID}, {Key: "Ralph-Approved-By", Value: by}},
	}
	hash, err := runkit.Commit(ctx, repo, msg, func(string) error { return nil })
	if err != nil && !errors.Is(err, gitx.ErrNothingToCommit) {
		return "", fmt.Errorf("committing %s's approved work: %w", tid, err)
	}
	rec.Blocker, rec.RetryCount = nil, 0
	rec.Done = &DoneRecord{Outcome: verify.Verified, Evidence: []string{evidence}, Commit: hash, Run: st.RunID}
	rec.Successes++
	delete(st.Feedback, tid)
	ws.LogEvent(now, fmt.Sprintf("task %s approved by %s: its test change is committed (%s)", tid, by, short(hash)))
	return fmt.Sprintf("%s approved: its work is committed as %s with the test change you reviewed", tid, short(hash)), nil
}
