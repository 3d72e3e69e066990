package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
)

// prepare gives task t a worktree on its branch, cut from the target's
// tip for a new attempt, and returns the loop options its worker runs
// with. A task a crash left Working keeps its worktree, branch and loop
// home, so its loop resumes where it was.
func (e *engine) prepare(ctx context.Context, t *TaskRecord) (*workspace.Workspace, loop.Options, error) {
	resume := t.State == landing.Working && t.Home != ""
	t.Worktree = worktree.PathUnder(filepath.Dir(e.reg.WorktreeRoot), e.reg.RunID, t.ID)
	if !resume {
		t.Attempt++
		tip, err := e.repo.RevParse(ctx, e.reg.Target)
		if err != nil {
			return nil, loop.Options{}, err
		}
		if err := e.worker(t).Cut(ctx, tip); err != nil {
			return nil, loop.Options{}, err
		}
		t.Base = tip
		t.Home = landing.Home(e.home, e.reg.RunID, t.ID, t.Attempt)
	} else if err := e.ensureWorktree(ctx, t); err != nil {
		return nil, loop.Options{}, err
	} else if err := e.worker(t).Include(); err != nil {
		return nil, loop.Options{}, err
	}
	ws, err := workspace.Open(ctx, t.Worktree)
	if err != nil {
		return nil, loop.Options{}, err
	}
	var src tasks.Source
	if bs, ok := e.o.Source.(*tasks.BeadsSource); ok {
		// A source of its own over the same database and client: a
		// source keeps per-use state that goroutines must not share.
		src = &deferredDone{Source: tasks.OpenBeads(e.o.WS.Root, bs.Molecule(), bs.Client())}
	} else if sharedStore(e.o.Source) {
		src = &deferredDone{Source: e.o.Source}
	} else {
		src = tasks.Open(e.o.Source.Kind(), filepath.Join(t.Worktree, filepath.FromSlash(e.prdRel)))
	}
	// Not the command line's N, which a resume may lack: the run's own.
	opts := e.worker(t).Loop(e.o.LoopOptions(ws, src), src, t.Home, e.home, resume,
		"the parallel run's limit, which its workers share", landing.Sink(e.em, t.Worker, t.ID, nil))
	if !sharedStore(e.o.Source) {
		opts.PRDPath = src.Path()
	}
	// Every worker pauses with the run; the scheduler alone takes the
	// task commands, between workers.
	opts.Control, opts.ControlPauseOnly = e.o.Control, true
	// The loop blocks the task after its failed attempts ([loop]
	// max_retries); the run's iteration limit and budget are the
	// ledger's, shared by every worker. A worker's own bound is the run's
	// limit, so iterations a crash cut short (which a resumed loop counts
	// and runs again) never use up a task's attempts.
	opts.MaxIterations = max(e.o.MaxIterations, 1)
	opts.Ledger = e.ledger
	if t.Reason != "" && !resume {
		opts.Feedback = verify.SentBack(t.ID, e.reg.Target, t.Reason, t.Feedback)
	}
	t.State, t.Since = landing.Working, e.o.Now().UTC()
	if err := e.save(); err != nil {
		return nil, loop.Options{}, err
	}
	verb := "started"
	if resume {
		verb = "resumed"
	}
	e.sayTask(t, report.KindRun, report.Run{Worktree: t.Worktree, Branch: t.Branch},
		"[%s %s] ▶ %s (attempt %d) on %s in %s", t.Worker, t.ID, verb, t.Attempt, t.Branch, t.Worktree)
	return ws, opts, nil
}

// worker is t's attempt in its worktree, as the parallel core prepares it.
func (e *engine) worker(t *TaskRecord) landing.Worker {
	return landing.Worker{Repo: e.repo, Root: e.o.WS.Root, Run: e.reg.RunID, Task: t.ID, Attempt: t.Attempt, Path: t.Worktree, Branch: t.Branch}
}

// ensureWorktree re-creates t's worktree from its branch when the folder
// is gone (deleted by hand, or a crash before it was made); git's stale
// entry for it is pruned first.
func (e *engine) ensureWorktree(ctx context.Context, t *TaskRecord) error {
	if _, err := os.Stat(filepath.Join(t.Worktree, ".git")); err == nil {
		return nil
	}
	// AddWorktree checks out the existing branch with its commits, and
	// refuses a folder that is not ralph's.
	if err := e.repo.AddWorktree(ctx, t.Worktree, t.Branch, e.reg.Target); err != nil {
		return err
	}
	return worktree.Mark(t.Worktree, e.worker(t).Marker())
}

// foreignFolder refuses a worktree path that exists and is not ralph's:
// ralph never writes into a folder it did not make.
func (e *engine) foreignFolder(path string) error {
	entries, err := os.ReadDir(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
		return nil
	}
	return fmt.Errorf("%s exists and is not one of ralph's worktrees: move it away or set [build] worktree_root to another folder", path)
}

// WorkerText renders a parallel run on a terminal: each line of a
// worker's event is prefixed with its worker and task, and the agents'
// own output and heartbeats stay in the run records (each agent's full
// log is in its worker's run folder), so lines of several workers never
// interleave mid-line.
type WorkerText struct{ Out report.Sink }

// Emit implements report.Sink.
func (w WorkerText) Emit(ev report.Event) {
	if ev.Worker == "" || ev.Machine == MachineName {
		w.Out.Emit(ev)
		return
	}
	// A worker's loop ends with its own summary of one story; the run's
	// summary is the engine's.
	if ev.Kind == report.KindAgentOutput || ev.Kind == report.KindHeartbeat || ev.Kind == report.KindSummary || ev.Text == "" {
		return
	}
	prefix := "[" + ev.Worker + " " + ev.Task + "] "
	var b strings.Builder
	for line := range strings.Lines(strings.TrimRight(strings.ReplaceAll(ev.Text, "\r", ""), "\n")) {
		line = strings.TrimRight(line, "\n")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "\033[") {
			continue
		}
		b.WriteString(prefix + line + "\n")
	}
	if b.Len() > 0 {
		ev.Text = b.String()
		w.Out.Emit(ev)
	}
}
