package landing

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/worktree"
)

// Worker is one attempt at a task in a worktree of its own, where the
// task's loop runs: the local engine's worker on this machine, the
// Temporal engine's on the host that holds the worktree. Each executor
// keeps only what is its own (the local registry; heartbeats and leases).
type Worker struct {
	// Repo is the clone whose worktree it is; Root is that clone's work
	// tree (its .worktreeinclude, the repository the marker names).
	Repo      *gitx.Repo
	Root      string
	Run, Task string
	Attempt   int // from 1
	// Path and Branch are the task's worktree and its branch.
	Path, Branch string
}

// Branch is a task's branch in a run: ralph/<run>/<task>.
func Branch(run, task string) string { return "ralph/" + run + "/" + task }

// Home is the loop home of a task's attempt in a workspace's folder dir.
func Home(dir, run, task string, attempt int) string {
	return filepath.Join(dir, "runs", run, "workers", task, strconv.Itoa(attempt))
}

// Marker is ralph's mark on the worktree, so that ralph refuses to run
// from it.
func (w Worker) Marker() worktree.Marker {
	return worktree.Marker{Repo: w.Root, Run: w.Run, Task: w.Task}
}

// Cut points the task's branch at tip in its worktree for a new attempt
// (Cut: what the attempt before left is kept on
// refs/ralph/attempts/<run>/<task>/<attempt-1> first) and copies in the
// files .worktreeinclude names.
func (w Worker) Cut(ctx context.Context, tip string) error {
	ref := fmt.Sprintf("refs/ralph/attempts/%s/%s/%d", w.Run, w.Task, w.Attempt-1)
	if err := Cut(ctx, w.Repo, w.Path, w.Branch, tip, ref, w.Marker()); err != nil {
		return err
	}
	return w.Include()
}

// Include copies the files the clone's .worktreeinclude names (ignored
// files a build needs, such as .env) into the worktree.
func (w Worker) Include() error {
	if _, err := worktree.CopyIncluded(w.Root, w.Path); err != nil {
		return fmt.Errorf("copying the files .worktreeinclude names: %w", err)
	}
	return nil
}

// Loop sets on opts, the executor's options for any loop, what makes it
// this attempt's: its task alone from src, the loop's home and the
// workspace's shared one, no terminal (sink gets the events), and where
// the bound of its iterations comes from. resumed says the loop resumes
// an attempt a crash cut short, whose saved state counts them.
func (w Worker) Loop(opts loop.Options, src tasks.Source, home, shared string, resumed bool, from string, sink report.Sink) loop.Options {
	opts.Source, opts.OnlyStory = src, w.Task
	opts.Home, opts.SharedHome = home, shared
	opts.Terminal = false
	opts.IterationsGiven, opts.IterationsFrom = resumed, from
	opts.Sink = sink
	return opts
}

// Sink passes a worker's loop events into its executor's stream, marked
// with the worker and its task; watch, when not nil, sees each first.
func Sink(em *report.Emitter, worker, task string, watch func(report.Event)) report.Sink {
	return sinkFunc(func(ev report.Event) {
		if watch != nil {
			watch(ev)
		}
		ev.Worker = worker
		if ev.Task == "" {
			ev.Task = task
		}
		em.Forward(ev)
	})
}

type sinkFunc func(report.Event)

func (f sinkFunc) Emit(ev report.Event) { f(ev) }
