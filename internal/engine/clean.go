package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
)

// threadsDir is the folder of threads' worktrees under ralph's worktree
// root (see internal/thread): clean leaves them to their threads.
const threadsDir = "threads"

// CleanItem is one thing a finished or abandoned parallel run left.
type CleanItem struct {
	// Kind is "worktree" or "branch".
	Kind string `json:"kind"`
	// Name is the worktree's folder or the branch's name.
	Name string `json:"name"`
	// Why says why it goes, or why it stays.
	Why string `json:"why"`
	// Dirty says a worktree holds changes nobody committed: they are set
	// aside on SetAsideRef before it goes. A branch whose task is done
	// has its tip kept on SetAsideRef before it goes.
	Dirty       bool   `json:"dirty,omitempty"`
	SetAsideRef string `json:"set_aside_ref,omitempty"`
}

// CleanPlan is what `ralph clean` removes and what it keeps.
type CleanPlan struct {
	Remove []CleanItem `json:"remove"`
	Keep   []CleanItem `json:"keep"`
}

// PlanClean lists what parallel runs left in the repository of ws:
// ralph's worktrees (all of them go: a worktree holds nothing a branch or
// a set-aside ref does not keep), and ralph's task branches, which go when
// their task landed or every commit of theirs is on target, and stay,
// named with the command to look at them, when they hold work that never
// landed. A branch whose task is done in the task file (done reports it;
// nil: none) holds work a later run or a person superseded: it goes too,
// its tip kept on a ref under refs/ralph/abandoned/, or a needs-review
// branch would stay forever after its story landed in a later run. root
// is [build] worktree_root. It changes nothing.
func PlanClean(ctx context.Context, ws *workspace.Workspace, root, target string, done func(task string) bool) (CleanPlan, error) {
	plan := CleanPlan{Remove: []CleanItem{}, Keep: []CleanItem{}}
	repo := ws.Repo
	reg, _, err := LoadRegistry(ws.Dir())
	if err != nil {
		return plan, err
	}
	landed := map[string]bool{}
	if reg != nil {
		if !reg.Finished {
			return plan, fmt.Errorf("parallel run %s has not finished: `ralph build --workers N` resumes it; clean up after it ends", reg.RunID)
		}
		for _, t := range reg.Tasks {
			if t.State == landing.Landed {
				landed[t.Branch] = true
			}
		}
	}
	base := worktree.Root(ws.Root, root)
	list, err := repo.Worktrees(ctx)
	if err != nil {
		return plan, err
	}
	for _, w := range list {
		if w.Bare || filepath.Clean(w.Path) == filepath.Clean(ws.Root) {
			continue
		}
		rel, err := filepath.Rel(base, w.Path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // not under ralph's worktree folder: the person's
		}
		if first, _, _ := strings.Cut(filepath.ToSlash(rel), "/"); first == threadsDir {
			continue // a thread's worktree: the thread owns it (commit, abandon)
		}
		item := CleanItem{Kind: "worktree", Name: w.Path, Why: "a worktree of a parallel run"}
		if w.Prunable {
			item.Why = "its folder is gone; git's record of it is pruned"
		} else if wr, err := gitx.Open(ctx, w.Path); err == nil {
			if snap, err := wr.Snapshot(ctx); err == nil && !snap.Clean() {
				item.Dirty = true
				item.SetAsideRef = "refs/ralph/abandoned/" + strings.ReplaceAll(strings.TrimPrefix(rel, string(filepath.Separator)), string(filepath.Separator), "/")
				item.Why = "a worktree with uncommitted changes; they are kept at " + item.SetAsideRef
			}
		}
		plan.Remove = append(plan.Remove, item)
	}
	branches, err := repo.RalphBranches(ctx)
	if err != nil {
		return plan, err
	}
	for _, b := range branches {
		if strings.Count(b, "/") != 2 {
			continue // ralph/<thread>: a thread's branch, not a parallel run's ralph/<run>/<task>
		}
		n, err := repo.UnmergedCommits(ctx, b, target)
		switch {
		case err != nil:
			return plan, err
		case landed[b]:
			plan.Remove = append(plan.Remove, CleanItem{Kind: "branch", Name: b, Why: "its task landed on " + target})
		case n == 0:
			plan.Remove = append(plan.Remove, CleanItem{Kind: "branch", Name: b, Why: "every commit of it is on " + target})
		case done != nil && done(b[strings.LastIndex(b, "/")+1:]):
			ref := "refs/ralph/abandoned/" + strings.TrimPrefix(b, "ralph/")
			plan.Remove = append(plan.Remove, CleanItem{Kind: "branch", Name: b, SetAsideRef: ref,
				Why: fmt.Sprintf("its task %s is done on %s, by a later run or a person; its %d commit(s) are kept at %s", b[strings.LastIndex(b, "/")+1:], target, n, ref)})
		default:
			plan.Keep = append(plan.Keep, CleanItem{Kind: "branch", Name: b,
				Why: fmt.Sprintf("%d commit(s) not on %s: look with `git log %s..%s`, delete with `git branch -D %s`", n, target, target, b, b)})
		}
	}
	return plan, nil
}

// Apply removes what the plan lists, setting aside uncommitted changes of
// a worktree first. Worktrees go before branches: git refuses to delete a
// branch checked out in one.
func (p CleanPlan) Apply(ctx context.Context, ws *workspace.Workspace) error {
	repo := ws.Repo
	for _, it := range p.Remove {
		if it.Kind != "worktree" {
			continue
		}
		if it.Dirty {
			wr, err := gitx.Open(ctx, it.Name)
			if err != nil {
				return err
			}
			if _, err := wr.SetAside(ctx, it.SetAsideRef, "ralph clean: what an abandoned parallel worker left uncommitted"); err != nil {
				return fmt.Errorf("setting aside the changes in %s: %w", it.Name, err)
			}
		}
		if err := repo.RemoveWorktree(ctx, it.Name, true); err != nil {
			if _, serr := os.Stat(it.Name); serr == nil {
				return err
			}
		}
	}
	_ = repo.PruneWorktrees(ctx)
	for _, it := range p.Remove {
		if it.Kind == "branch" {
			if it.SetAsideRef != "" {
				tip, err := repo.RevParse(ctx, "refs/heads/"+it.Name)
				if err != nil {
					return err
				}
				if err := repo.UpdateRef(ctx, it.SetAsideRef, tip); err != nil {
					return fmt.Errorf("keeping %s at %s: %w", it.Name, it.SetAsideRef, err)
				}
			}
			if err := repo.DeleteBranch(ctx, it.Name, "", true); err != nil {
				return err
			}
		}
	}
	return nil
}
