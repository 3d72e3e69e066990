package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
	"github.com/spf13/cobra"
)

// BuildOptions holds the flags and arguments of `ralph build` and
// `ralph plan`.
type BuildOptions struct {
	Env           *Env
	MaxIterations int // 0: from config
	Agent         string
	PRD           string
	// prdTyped says PRD came from the --prd flag a person typed: a path
	// that is not there is then a usage error (namedPRDMissing).
	prdTyped bool
	Tasks    string
	NoCommit bool
	// Proto names the formula `ralph plan` writes for beads.
	Proto string
	// JSON streams the run's events on stdout, one JSON object per line,
	// instead of the text a person reads.
	JSON bool
	// Workers is how many tasks are worked at once (0: from config).
	Workers int
	// Engine is "local" or "temporal" ("": [engine] kind).
	Engine string
	// Detach returns once a build on Temporal started, without following it.
	Detach bool
	// Sandbox is --sandbox: off, bwrap or auto ("": [sandbox] mode).
	Sandbox string
}

// progress is where the run's own lines go that are not events (the
// records line, the beads molecule): stdout for a person, stderr when
// stdout carries JSON lines only.
func (o *BuildOptions) progress() io.Writer {
	return o.Env.progress(o.JSON)
}

func newBuildCmd(env *Env, runF func(*BuildOptions) error) *cobra.Command {
	cmd, opts := loopCmd(env, runF, runBuild, "build [N]", "Implement the PRD's stories, one fresh agent per iteration, at most N iterations", `Run build iterations. Each one takes the first unchecked story of the PRD,
renders it into the build prompt, runs the agent headless, and then checks
the agent's claim: the story counts as done only when the agent exited
cleanly, the PRD shows it checked and every configured check passes.
A story that fails its checks is reopened and retried with the failure
output in the next prompt.

The run ends when every story is checked (exit 0), after N iterations with
work left (exit 4), or on Ctrl+C (exit 130). N defaults to max_iterations
in .ralph/config.toml. A run that was interrupted resumes with its own
limit; N given then allows up to N more iterations.

A fresh run first runs the checks on the starting tree. A check that
already fails there is reported and, by default, not held against any
attempt ([build] on_failing_baseline).`)
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "agent to run: "+strings.Join(agent.Names(nil), ", ")+" or one from config")
	cmd.Flags().StringVar(&opts.Tasks, "tasks", "", "task file: a PRD (.md), prd.json or progress.txt, or beads / beads:MOLECULE-ID for the beads database (default: config, then detected)")
	cmd.Flags().BoolVar(&opts.NoCommit, "no-commit", false, "verify but never commit (ralph and the agent)")
	cmd.Flags().IntVar(&opts.Workers, "workers", 0, "tasks worked at once, each in its own worktree, landed one at a time by the merge queue (default [build] workers: 1)")
	cmd.Flags().StringVar(&opts.Engine, "engine", "", "where the build runs: local (in this process) or temporal (workflows that ralph workers on many machines run; default [engine] kind)")
	cmd.Flags().BoolVar(&opts.Detach, "detach", false, "with --engine temporal: return once the build started instead of following it")
	return cmd
}

func newPlanCmd(env *Env, runF func(*BuildOptions) error) *cobra.Command {
	cmd, opts := loopCmd(env, runF, runPlan, "plan [N]", "Write or refine .ralph/IMPLEMENTATION_PLAN.md in read-only agent iterations", `Run planning iterations: the agent reads the PRD, the guardrails and the
code and writes the implementation plan, grouped by story. Planning is
read-only: an iteration that changes any file other than the plan is
recorded as an error in errors.log and the run summary, and stops the run.
N defaults to max_iterations under [plan] in .ralph/config.toml (1).`)
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "agent to run (see ralph build --help)")
	cmd.Flags().StringVar(&opts.Tasks, "tasks", "", "beads: write the PRD's stories as a proto (a bd formula) that ralph build pours; other task files use the planning agent")
	cmd.Flags().StringVar(&opts.Proto, "proto", "", "name of the proto written for beads (default: ralph-<PRD file name>)")
	return cmd
}

// loopCmd is build or plan: [N] or --max-iterations N, --prd and --json,
// then run (runF instead, in tests).
func loopCmd(env *Env, runF func(*BuildOptions) error, run func(*cobra.Command, *BuildOptions) error, use, short, long string) (*cobra.Command, *BuildOptions) {
	opts := &BuildOptions{Env: env}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := iterationsArg(cmd, args)
			if err != nil {
				return err
			}
			opts.MaxIterations = n
			opts.prdTyped = cmd.Flags().Changed("prd")
			if runF != nil {
				return runF(opts)
			}
			return run(cmd, opts)
		},
	}
	cmd.Flags().Int("max-iterations", 0, "the same as N (the name 'ralph thread start' uses)")
	cmd.Flags().StringVar(&opts.PRD, "prd", "", "path of the PRD (default from config: .agents/tasks/prd.md)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "stream the run's events on stdout, one JSON object per line (docs/events.md)")
	cmd.Flags().StringVar(&opts.Sandbox, "sandbox", "", "run the agents in a sandbox: off, bwrap (fail when it cannot start) or auto (default [sandbox] mode: off)")
	return cmd, opts
}

// checkSandboxFlag refuses a --sandbox mode ralph does not know, and
// bwrap where it cannot start, before a command changes anything (a
// thread's loop reads the flag only once the thread has moved on).
func checkSandboxFlag(ctx context.Context, flag string) error {
	mode, err := sandboxFlag(flag)
	if err != nil {
		return err
	}
	if mode == sandbox.Bwrap {
		if err := sandbox.Probe(ctx); err != nil {
			return fmt.Errorf("--sandbox bwrap: %w; or run with --sandbox off", err)
		}
	}
	return nil
}

// sandboxFlag reads --sandbox; "" is no flag (config's mode holds).
func sandboxFlag(flag string) (sandbox.Mode, error) {
	if flag == "" {
		return "", nil
	}
	mode, err := sandbox.ParseMode(flag)
	if err != nil {
		return "", usageErrorf("--sandbox %q: use off, bwrap or auto", flag)
	}
	return mode, nil
}

// loopOptions turns flags and config into the loop's options. Flags win
// over config.
func loopOptions(cmd *cobra.Command, opts *BuildOptions, planning bool) (*loopSetup, error) {
	env := opts.Env
	mode, err := sandboxFlag(opts.Sandbox)
	if err != nil {
		return nil, err
	}
	ws, a, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return nil, err
	}
	spec, err := a.Agent(opts.Agent)
	if err != nil {
		return nil, err
	}
	reviewer, fallbacks, err := a.Roles(spec)
	if err != nil {
		return nil, err
	}
	src, err := a.TaskSource(opts.Tasks, opts.PRD)
	if err == nil && opts.prdTyped && opts.Tasks == "" && !planning {
		err = namedPRDMissing(src, opts.PRD)
	}
	if err != nil && !planning {
		return nil, err
	}
	lo := a.LoopOptions(planning)
	if lo.Sandbox, lo.SandboxWarning, err = a.Sandbox(cmd.Context(), mode); err != nil {
		return nil, err
	}
	lo.Checker = a.Checker(lo.Sandbox)
	if opts.PRD != "" {
		lo.PRDPath = ws.Abs(opts.PRD)
	}
	if opts.MaxIterations > 0 {
		lo.MaxIterations = opts.MaxIterations
	}
	lo.NoCommit = lo.NoCommit || opts.NoCommit
	mem, err := a.Memory()
	if err != nil {
		return nil, err
	}
	lo.Agent, lo.Reviewer, lo.Fallbacks = spec, reviewer, fallbacks
	lo.Source, lo.Memory = src, mem
	lo.Sink = withNotify(env, a, env.events(opts.JSON))
	lo.Terminal = env.IO.OutTerminal && !opts.JSON // JSON lines carry no terminal control characters
	lo.Now = env.Now
	return &loopSetup{ws: ws, app: a, opts: lo}, nil
}

func runBuild(cmd *cobra.Command, opts *BuildOptions) error {
	if cmd.Flags().Changed("workers") && opts.Workers < 1 {
		return usageErrorf("--workers must be a whole number of at least 1, got %d", opts.Workers)
	}
	s, err := loopOptions(cmd, opts, false)
	if err != nil {
		return err
	}
	if worktree.IsInside(s.ws.Root) {
		s.opts.Memory.Close()
		return usageErrorf("%s is one of ralph's own worktrees (a parallel worker's or a thread's): run ralph build from the repository's own checkout", s.ws.Root)
	}
	workers := opts.Workers
	if workers == 0 {
		workers = s.app.Workers()
	}
	onTemporal, err := s.app.OnTemporal(opts.Engine)
	if err != nil {
		s.opts.Memory.Close()
		return err
	}
	if onTemporal {
		return runFleetBuild(cmd, opts, s, workers)
	}
	if opts.Detach {
		s.opts.Memory.Close()
		return usageErrorf("--detach is for builds on Temporal (--engine temporal): a local build runs in this process")
	}
	if workers > 1 {
		return runParallel(cmd, opts, s, workers)
	}
	defer s.opts.Memory.Close()
	if bs, ok := s.opts.Source.(*tasks.BeadsSource); ok {
		mol, err := beadsMolecule(cmd.Context(), s.ws, bs, opts.progress(), opts.Env.Now())
		if err != nil {
			return err
		}
		if mol != bs.Molecule() {
			s.opts.Source = tasks.OpenBeads(s.ws.Root, mol, bs.Client())
		}
	}
	// N on the command line raises the limit of a run it resumes; N from
	// the config does not.
	s.opts.IterationsGiven = opts.MaxIterations > 0
	ctx, attach, detach := attachControl(cmd.Context(), opts.Env, s.ws, control.Run{Machine: "build", Takes: []control.Kind{control.Skip, control.Block, control.Unblock, control.Approve}})
	defer detach()
	s.opts.Attach = attach
	rep, err := loop.Build(ctx, s.ws, s.opts)
	return reportOutcome(ctx, opts, s, rep, goneFromRun(s.ws, rep, err, "ralph build"))
}

func runPlan(cmd *cobra.Command, opts *BuildOptions) error {
	s, err := loopOptions(cmd, opts, true)
	if err != nil {
		return err
	}
	if _, ok := s.opts.Source.(*tasks.BeadsSource); ok {
		s.opts.Memory.Close()
		return planBeadsProto(cmd.Context(), s.ws, s.opts.PRDPath, opts.Proto, opts.progress(), opts.Env.Now())
	}
	if opts.Proto != "" {
		return usageErrorf("--proto names the proto written for beads: use it with --tasks beads")
	}
	defer s.opts.Memory.Close()
	// A plan takes stop (its agent runs are the steps); pause and the
	// task commands are a build's.
	ctx, attach, detach := attachControl(cmd.Context(), opts.Env, s.ws, control.Run{Machine: "plan"})
	defer detach()
	s.opts.Attach = attach
	rep, err := loop.Plan(ctx, s.ws, s.opts)
	return reportOutcome(ctx, opts, s, rep, goneFromRun(s.ws, rep, err, "ralph plan"))
}

// reportOutcome prints where the run's records are and turns the outcome
// into the documented exit code.
func reportOutcome(ctx context.Context, opts *BuildOptions, s *loopSetup, rep loop.Report, err error) error {
	if rep.RunID != "" {
		fmt.Fprintf(opts.progress(), "run %s: %s, %s done, %d left; records in %s\n",
			rep.RunID, words.Count(rep.Iterations, "iteration", "iterations"), words.Count(rep.StoriesDone, "story", "stories"), rep.StoriesLeft, s.ws.Rel(rep.RunDir))
	}
	if err != nil {
		if errors.Is(err, loop.ErrInterrupted) {
			return &ExitError{Code: ExitInterrupted, Msg: interruptedMsg(ctx, "run the command again to go on")}
		}
		var setup *loop.SetupRequiredError
		if errors.As(err, &setup) {
			// Seed 000's ERROR state: the tag and the template go to
			// stdout, where an agent or a script reads them.
			fmt.Fprintln(opts.progress(), setup.Error())
			return &ExitError{Code: ExitFailure, Msg: setup.Path + " is missing: run `ralph init --bmad` to create it"}
		}
		if errors.Is(err, loop.ErrNeedsHuman) {
			return &ExitError{Code: ExitNeedsHuman, Msg: "only blocked tasks are left: see `ralph status`, fix them, then `ralph unblock ID`"}
		}
		return err
	}
	if rep.Outcome == loop.OutcomeNeedsHuman {
		return &ExitError{Code: ExitNeedsHuman, Msg: "only blocked tasks are left: see `ralph status`, fix them, then `ralph unblock ID`"}
	}
	if rep.Outcome == loop.OutcomeBudget {
		return &ExitError{Code: ExitLimit, Msg: fmt.Sprintf("%s, with %s left: raise it under [budget] in .ralph/config.toml to go on", rep.Reason, words.Count(rep.StoriesLeft, "story", "stories"))}
	}
	if rep.Outcome == loop.OutcomeMaxIterations {
		return &ExitError{Code: ExitLimit, Msg: fmt.Sprintf("iteration limit reached with %s left: run `ralph build` again to go on", words.Count(rep.StoriesLeft, "story", "stories"))}
	}
	if rep.Outcome == loop.OutcomeChecksFailing {
		return &ExitError{Code: ExitChecksFailing, Msg: rep.Reason + ": the run is not complete. Fix what fails (or add a story for it to the task file) and run `ralph build` again"}
	}
	return nil
}

// goneFromRun says so when .ralph/ was deleted under a run that began,
// instead of the error that deletion caused.
func goneFromRun(ws *workspace.Workspace, rep loop.Report, err error, again string) error {
	if rep.RunID == "" {
		return err // the run never began: its .ralph/ may never have existed
	}
	return ws.Gone(err, again)
}

type loopSetup struct {
	ws   *workspace.Workspace
	app  *app.App
	opts loop.Options
}

// attachControl makes the run one that takes control commands (ralph
// pause, stop, block, ... from any terminal or front end). It returns ctx
// wrapped so that a stop ends the run as Ctrl+C would, and attach, which
// the run calls once it has begun: a run refused on bad input writes no
// control record. A run that cannot attach (another holds the same run
// id) goes on without control, with one warning. done detaches.
func attachControl(ctx context.Context, env *Env, ws *workspace.Workspace, run control.Run) (runCtx context.Context, attach func(runID string) *control.Attachment, done func()) {
	runCtx, cancel := context.WithCancelCause(ctx)
	var att *control.Attachment
	stopWatch := func() {}
	attach = func(runID string) *control.Attachment {
		if att != nil {
			return att
		}
		if runID != "" {
			run.Run = runID
		}
		// The control folder is machine state: never part of a commit.
		if err := ws.EnsureIgnoreFile(); err == nil {
			ws.Ignore("control/")
		}
		a, err := control.Folder{Dir: ws.Path("control")}.Attach(run)
		if err != nil {
			fmt.Fprintf(env.IO.Err, "ralph: this %s takes no control commands (ralph pause, stop, block): %v\n", run.Machine, err)
			return nil
		}
		att = a
		watched, stop := a.WatchStop(runCtx)
		stopWatch = stop
		go func() {
			<-watched.Done()
			var se *control.StopError
			if errors.As(context.Cause(watched), &se) {
				cancel(se)
			}
		}()
		return att
	}
	return runCtx, attach, func() {
		stopWatch()
		att.Detach()
		cancel(nil)
	}
}

// interruptedMsg is what the person is told when ctx ended the run: a
// stop names who gave it.
func interruptedMsg(ctx context.Context, again string) string {
	var se *control.StopError
	if errors.As(context.Cause(ctx), &se) {
		return fmt.Sprintf("stopped by %s (ralph stop); state is saved, %s", se.Cmd.By, again)
	}
	return "interrupted; state is saved, " + again
}

// loopStopWord is how a run that ctx ended ended: "stopped by web
// (ralph stop)" or "interrupted".
func loopStopWord(ctx context.Context) string {
	var se *control.StopError
	if errors.As(context.Cause(ctx), &se) {
		return se.Error()
	}
	return "interrupted"
}

// teeSink hands every event to each of its sinks: the terminal's and
// the notifications'.
type teeSink []report.Sink

func (t teeSink) Emit(ev report.Event) {
	for _, s := range t {
		s.Emit(ev)
	}
}

// withNotify adds the [notify] channels to sink.
func withNotify(env *Env, a *app.App, sink report.Sink) report.Sink {
	if n := notifier(env, a); n != nil {
		return teeSink{sink, n}
	}
	return sink
}
