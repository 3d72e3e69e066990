package loop

import (
	"context"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/words"
)

// HistoryError stops a run whose git history was changed under it: the
// branch it works on was switched, or commits it had were dropped (an
// agent's `git reset --hard`, `git checkout other`). A person must put
// things right; ralph neither redoes the lost work silently nor commits
// the run's work on a branch it did not start on.
type HistoryError struct{ Msg string }

func (e *HistoryError) Error() string { return e.Msg }

// historyChanged says what changed when now is not on branch ("" = any)
// or does not descend from start ("" = anything does).
func historyChanged(ctx context.Context, repo GitPort, branch, start string, now gitx.Snapshot) error {
	if branch != "" && now.Branch != branch {
		on := "a detached HEAD"
		if now.Branch != "" {
			on = "branch " + now.Branch
		}
		return &HistoryError{Msg: fmt.Sprintf("the run started on branch %s, but %s is checked out now (an agent switched it?); ralph never commits a run's work on another branch. "+
			"Switch back with `git checkout %s` (set aside any changes there first with `git stash`), then run `ralph build` again to resume", branch, on, branch)}
	}
	if start == "" || now.Head == start {
		return nil
	}
	ok, err := repo.IsAncestor(ctx, start, now.Head)
	if err != nil || ok {
		return err
	}
	lost, _ := repo.CommitsBetween(ctx, now.Head, start)
	names := make([]string, 0, len(lost))
	for _, c := range lost {
		names = append(names, short(c.Hash)+" "+c.Subject)
	}
	what := "commits"
	if len(lost) > 0 {
		what = fmt.Sprintf("%s: %s", words.Count(len(lost), "commit", "commits"), strings.Join(clipList(names, 5), "; "))
	}
	return &HistoryError{Msg: fmt.Sprintf("history was rewritten during the run (an agent ran `git reset` or `git rebase`?): HEAD %s no longer contains %s, which were there before. "+
		"They are still in the reflog: `git reset --hard %s` brings them back (it discards uncommitted changes: `git stash` them first if you want them), then run `ralph build` again to resume", short(now.Head), what, short(start))}
}

// resumable refuses, before anything is written, to resume a run whose
// branch or history changed while it was stopped.
func resumable(ctx context.Context, repo GitPort, prior *LoopState) error {
	if prior.NoCommit {
		return nil
	}
	snap, err := repo.Snapshot(ctx)
	if err != nil {
		return err
	}
	start := ""
	if a := prior.Attempt; a != nil {
		start = a.HeadBefore
	}
	return historyChanged(ctx, repo, prior.Branch, start, snap)
}
