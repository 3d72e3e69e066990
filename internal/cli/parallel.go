package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// runParallel is `ralph build --workers N` with N > 1: the engine's
// scheduler, workers in worktrees and merge queue, each worker's loop
// wired from the same flags and config as a one-at-a-time build.
func runParallel(cmd *cobra.Command, opts *BuildOptions, s *loopSetup, workers int) error {
	if s.opts.NoCommit {
		return usageErrorf("--workers lands every task as a commit on your branch; --no-commit cannot go with it")
	}
	// The checkout's memory store is the merge queue's, which records each
	// landed task once; a worker's loop keeps its own in its worktree.
	defer s.opts.Memory.Close()
	base := s.opts
	sink := opts.Env.events(opts.JSON)
	if !opts.JSON {
		sink = engine.WorkerText{Out: sink}
	}
	sink = withNotify(opts.Env, s.app, sink)
	ctx, attach, detach := attachControl(cmd.Context(), opts.Env, s.ws, control.Run{Machine: "parallel build", Takes: []control.Kind{control.Skip, control.Block, control.Unblock}})
	defer detach()
	eo := s.app.Parallel(workers)
	eo.Attach, eo.Source, eo.Checks, eo.Checker, eo.PlanPath, eo.Memory = attach, base.Source, base.Checks, base.Checker, base.PlanPath, base.Memory
	eo.MaxIterations, eo.MaxRetries, eo.Sink = base.MaxIterations, base.MaxRetries, sink
	if base.SandboxWarning != "" {
		// Said once for the run, not by every worker's loop.
		sink.Emit(report.Event{Machine: "parallel build", Kind: report.KindWarning, Text: base.SandboxWarning + "\n"})
	}
	eo.LoopOptions = func(ws *workspace.Workspace, src tasks.Source) loop.Options {
		o := base
		o.Memory, o.SandboxWarning = nil, ""
		o.PlanPath = ws.Abs(s.ws.Rel(base.PlanPath))
		return o
	}
	rep, err := engine.Run(ctx, eo)
	if rep.RunID != "" {
		fmt.Fprintf(opts.progress(), "parallel run %s: %s landed, %d left, %s; records in %s\n", rep.RunID,
			words.Count(rep.Landed, "task", "tasks"), rep.Left, words.Count(rep.Iterations, "iteration", "iterations"), s.ws.Rel(s.ws.Path("runs", rep.RunID)))
	}
	if err != nil {
		if errors.Is(err, loop.ErrInterrupted) {
			return &ExitError{Code: ExitInterrupted, Msg: interruptedMsg(ctx, "every worker's state is saved: run `ralph build --workers N` again to go on")}
		}
		return err
	}
	switch rep.Outcome {
	case loop.OutcomeNeedsHuman:
		var parts []string
		if len(rep.NeedsReview) > 0 {
			parts = append(parts, "needing review: "+strings.Join(rep.NeedsReview, ", "))
		}
		if len(rep.Blocked) > 0 {
			parts = append(parts, "blocked: "+strings.Join(rep.Blocked, ", "))
		}
		msg := fmt.Sprintf("%s left (%s): see `ralph status`", words.Count(rep.Left, "task", "tasks"), strings.Join(parts, "; "))
		if len(parts) == 0 {
			msg = rep.Reason
		}
		return &ExitError{Code: ExitNeedsHuman, Msg: msg}
	case loop.OutcomeMaxIterations:
		return &ExitError{Code: ExitLimit, Msg: fmt.Sprintf("iteration limit reached with %s left: run `ralph build --workers %d` again to go on", words.Count(rep.Left, "task", "tasks"), workers)}
	case loop.OutcomeChecksFailing:
		return &ExitError{Code: ExitChecksFailing, Msg: rep.Reason + ": the run is not complete. Fix what fails (or add a story for it) and run `ralph build` again"}
	}
	return nil
}
