package engine

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
)

// An agent runs with the whole repository in reach: it can move the
// target branch, switch the person's checkout to another branch, or write
// into it. The merge queue does not trust the checkout for what landed,
// and it notices a target moved outside ralph before it judges a landing
// against it.

// BoardAt reads the task file src (rel below the repository) as the commit
// rev holds it: what landed on a branch, whatever the checkout has. A
// shared store (beads) is not in git and is read as it is.
func BoardAt(ctx context.Context, repo *gitx.Repo, src tasks.Source, rel, rev string) (*tasks.Board, error) {
	if sharedStore(src) {
		return src.Load()
	}
	files, err := repo.FilesAt(ctx, rev, []string{rel})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s has no %s", rev, rel)
	}
	dir, err := os.MkdirTemp("", "ralph-board-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, path.Base(rel))
	if err := os.WriteFile(p, files[0].Content, 0o644); err != nil {
		return nil, err
	}
	return tasks.Open(src.Kind(), p).Load()
}

// MovedError is the target moved outside ralph to a commit that fails
// a check (verify.MovedError): both merge queues stop on it.
type MovedError = verify.MovedError

// targetBoard is the task file as the target's tip holds it.
func (e *engine) targetBoard(ctx context.Context) (*tasks.Board, error) {
	return BoardAt(context.WithoutCancel(ctx), e.repo, e.o.Source, e.prdRel, "refs/heads/"+e.reg.Target)
}

// sayCheckout warns, at the end of a run, when the person's checkout is
// not where the run left it: on another branch (the landings are on the
// target, not there), or the target moved outside ralph since its last
// landing. Both are named, with how to get back.
func (e *engine) sayCheckout(ctx context.Context) {
	bg := context.WithoutCancel(ctx)
	if snap, err := e.repo.Snapshot(bg); err == nil && snap.Branch != e.reg.Target {
		on := "a detached HEAD at " + text.ShortHash(snap.Head)
		if snap.Branch != "" {
			on = "branch " + snap.Branch
		}
		e.say(report.KindWarning, report.Warning{Target: e.reg.Target, CheckoutBranch: snap.Branch, CheckoutHead: snap.Head},
			"ralph: your checkout is on %s, not on %s where this run lands (something switched it during the run): the landed work is on %s; `git switch %s` goes back to it",
			on, e.reg.Target, e.reg.Target, e.reg.Target)
	}
	if tip, err := e.repo.RevParse(bg, "refs/heads/"+e.reg.Target); err == nil && e.reg.Checkout != "" && tip != e.reg.Checkout {
		e.say(report.KindWarning, report.Warning{Target: e.reg.Target, From: e.reg.Checkout, To: tip},
			"ralph: %s moved outside ralph after its last landing, from %s to %s, and ralph did not check it; if that was not you, `git update-ref refs/heads/%s %s %s` puts it back",
			e.reg.Target, text.ShortHash(e.reg.Checkout), text.ShortHash(tip), e.reg.Target, e.reg.Checkout, tip)
	}
}

// checkCheckout reports the files changed in the person's checkout since
// it was last looked at: ralph's workers never write there (the queue
// moves it only by a fast-forward), so an agent that acted outside its
// worktree did, and the tasks whose agents ran meanwhile are named. The
// files are left as they are, for the person. active are the tasks still
// in flight: their agents go on running into the next window.
func (e *engine) checkCheckout(ctx context.Context, active map[string]bool) {
	snap, err := e.repo.Snapshot(context.WithoutCancel(ctx))
	if err != nil {
		return
	}
	var fresh []string
	for _, p := range snap.Dirty {
		if !e.strays[p] {
			e.strays[p] = true
			fresh = append(fresh, p)
		}
	}
	var ran []string
	for id := range e.ran {
		ran = append(ran, id)
	}
	slices.Sort(ran)
	clear(e.ran)
	for id := range active {
		e.ran[id] = true
	}
	e.checkIdle(ctx, ran)
	if len(fresh) == 0 {
		return
	}
	who := "no agent of this run ran meanwhile"
	if len(ran) > 0 {
		who = words.Plural(len(ran), "the agent of ", "the agents of ") + strings.Join(ran, ", ") + " ran meanwhile"
	}
	e.say(report.KindWarning, report.Warning{CheckoutChanged: fresh, Tasks: &ran},
		"ralph: %s changed in your checkout outside ralph (%s); ralph did not make %s and leaves %s for you: `git status` shows %s",
		strings.Join(text.ClipList(fresh, 10), ", "), who, words.Plural(len(fresh), "it", "them"), words.Plural(len(fresh), "it", "them"), words.Plural(len(fresh), "it", "them"))
}

// markIdle records what t's worktree holds now that its worker is back:
// nothing of ralph's writes there until the task is worked again.
func (e *engine) markIdle(ctx context.Context, t *TaskRecord) {
	delete(e.idle, t.ID)
	if t.Worktree == "" || t.State == landing.Landed || t.State == landing.Working {
		return
	}
	w, err := gitx.Open(context.WithoutCancel(ctx), t.Worktree)
	if err != nil {
		return
	}
	snap, err := w.Snapshot(context.WithoutCancel(ctx))
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, p := range snap.Dirty {
		seen[p] = true
	}
	e.idle[t.ID] = seen
}

// checkIdle reports the files changed in the worktree of a task whose
// worker is back (waiting to land, blocked, or waiting for review) since
// it came back: no worker of its own wrote them, so a sibling's agent
// did, and the tasks whose agents ran meanwhile are named. They are not
// the task's work (a landing takes its commits only) and are left there.
func (e *engine) checkIdle(ctx context.Context, ran []string) {
	ids := make([]string, 0, len(e.idle))
	for id := range e.idle {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := e.reg.Tasks[id]
		if t == nil || t.Worktree == "" || t.State == landing.Landed || t.State == landing.Working {
			delete(e.idle, id)
			continue
		}
		w, err := gitx.Open(context.WithoutCancel(ctx), t.Worktree)
		if err != nil {
			continue
		}
		snap, err := w.Snapshot(context.WithoutCancel(ctx))
		if err != nil {
			continue
		}
		var fresh []string
		for _, p := range snap.Dirty {
			if !e.idle[id][p] {
				e.idle[id][p] = true
				fresh = append(fresh, p)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		who := "no agent of this run ran meanwhile"
		if others := slices.DeleteFunc(slices.Clone(ran), func(r string) bool { return r == id }); len(others) > 0 {
			who = words.Plural(len(others), "the agent of ", "the agents of ") + strings.Join(others, ", ") + " ran meanwhile"
		}
		e.sayTask(t, report.KindWarning, report.Warning{WorktreeChanged: fresh, Worktree: t.Worktree, Tasks: &ran},
			"ralph: %s changed in the worktree of %s after its worker finished (%s); they are not %s's work, which is its commits, and are left in %s",
			strings.Join(text.ClipList(fresh, 10), ", "), id, who, id, t.Worktree)
	}
}
