package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// runFleetBuild is `ralph build --engine temporal`: it prepares the
// checkout as any build does, publishes the target's tip on the exchange
// remote, and starts the build workflow, which the `ralph worker`s of
// every host run. Without --detach it follows the run through its status
// Query until it ends; the run does not depend on this process.
func runFleetBuild(cmd *cobra.Command, opts *BuildOptions, s *loopSetup, workers int) error {
	defer s.opts.Memory.Close()
	ctx := cmd.Context()
	eng, in, err := s.app.FleetBuild()
	if err != nil {
		return err
	}
	if s.opts.NoCommit {
		return usageErrorf("the Temporal engine lands every task as a commit; --no-commit cannot go with it")
	}
	if _, ok := s.opts.Source.(*tasks.BeadsSource); ok {
		return usageErrorf("the Temporal engine reads the task file at the target's tip on every host; a beads database is not shared that way yet: use a PRD, prd.json or progress.txt committed in the repository")
	}
	rel, err := filepath.Rel(s.ws.Root, s.opts.Source.Path())
	if err != nil || strings.HasPrefix(rel, "..") {
		return usageErrorf("the task file %s is outside the repository: every host reads it from the target's tip, so it must be committed in the repository", s.opts.Source.Path())
	}
	if _, err := s.opts.Source.Load(); err != nil {
		return fmt.Errorf("cannot read the task file: %w", err)
	}
	snap, err := s.ws.Repo.Snapshot(ctx)
	if err != nil {
		return err
	}
	if snap.Branch == "" {
		return usageErrorf("HEAD is detached: check out the branch the tasks should land on (git checkout BRANCH), then run again")
	}
	c, err := eng.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	out := opts.progress()
	say := func(kind report.Kind, text string, data report.Payload) { fmt.Fprint(out, text) }
	if err := loop.PrepareCheckout(ctx, s.ws, s.opts.Source.Path(), s.opts.PlanPath, say); err != nil {
		return err
	}
	tip, err := s.ws.Repo.RevParse(ctx, "HEAD")
	if err != nil {
		return err
	}
	runID := opts.Env.Now().UTC().Format("20060102-150405") + "-" + gitx.NewCommitToken()[:6]
	resumed := resumable(ctx, c, s.ws, eng, snap.Branch)
	if resumed != nil {
		runID = resumed.RunID
		landed := 0
		for _, t := range resumed.Tasks {
			if t.State == landing.Landed {
				landed++
			}
		}
		fmt.Fprintf(out, "ralph: resuming build %s on %s (%s landed so far; tasks stopped in flight resume on their hosts)\n", runID, snap.Branch, words.Count(landed, "task", "tasks"))
	} else if err := s.ws.Repo.PushBranch(ctx, eng.ExchangeRemote, fleet.TipBranch(runID, snap.Branch), tip, gitx.NoBranch, false); err != nil {
		return fmt.Errorf("publishing %s on the exchange remote: %w", snap.Branch, err)
	}
	in.RunID, in.State, in.Target, in.PRD = runID, resumed, snap.Branch, filepath.ToSlash(rel)
	in.Workers, in.MaxIterations = workers, opts.MaxIterations
	run, err := fleet.Start(ctx, c, in)
	if errors.Is(err, fleet.ErrAlreadyRunning) {
		if resumed == nil {
			_ = s.ws.Repo.DeleteRemoteBranch(ctx, eng.ExchangeRemote, fleet.TipBranch(runID, snap.Branch))
		}
		if st, qerr := fleet.Query(ctx, c, fleet.BuildID(eng.TaskQueue, snap.Branch)); qerr == nil && st.Stopping {
			return usageErrorf("the last build of %s is still stopping (its hosts are saving the attempts in flight): run `ralph build` again in a few seconds to resume it", snap.Branch)
		}
		return usageErrorf("%v", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ralph: build %s started on Temporal (%s, namespace %s) as workflow %s: %s of the hosts polling task queue %q; landing on %s by the host that runs `ralph worker --integrate`\n",
		runID, eng.Address, eng.Namespace, run.GetID(), words.Count(workers, "worker", "workers"), eng.TaskQueue, snap.Branch)
	if opts.Detach {
		fmt.Fprintf(out, "follow it with `ralph status`; stop it with `ralph stop`\n")
		return nil
	}
	ww := newWorkerWatch(opts.Env, c, eng, "build "+runID, opts.JSON,
		waitQueue{eng.TaskQueue, "ralph worker --host HOST", "in each clone that works tasks"},
		waitQueue{fleet.IntegrationQueue(eng.TaskQueue), "ralph worker --integrate", "in the one clone that lands the tasks"})
	return followFleet(ctx, opts, c, run, ww)
}

// resumable returns the state of the last build of branch when it was
// stopped or ended on an error (a Query answers for a closed workflow
// while the server keeps it) and its integrated tip is still on the
// exchange remote: a new build goes on from it, as a local build resumes
// its unfinished run. Nil starts afresh.
func resumable(ctx context.Context, c client.Client, ws *workspace.Workspace, eng app.Temporal, branch string) *fleet.RunState {
	id := fleet.BuildID(eng.TaskQueue, branch)
	if fleet.Running(ctx, c, id) {
		return nil // Start refuses it, and says why
	}
	st, err := fleet.Query(ctx, c, id)
	if err != nil || st.Target != branch || (st.Outcome != "interrupted" && st.Outcome != "error") {
		return nil
	}
	if _, err := ws.Repo.FetchBranch(ctx, eng.ExchangeRemote, fleet.TipBranch(st.RunID, branch)); err != nil {
		return nil
	}
	rs := st.RunState
	rs.Outcome, rs.Reason, rs.Stopping, rs.Paused = "", "", false, false
	rs.CooldownUntil = time.Time{}
	return &rs
}

// fleetTaskLine is one move of a task as followFleet prints it. The host
// named is where the task's worktree is: its work runs there, but it is
// queued and landed by the integration host (the one that runs `ralph
// worker --integrate`), which the line must not call its own ("[US-003]
// landing on b" for a host that does not integrate).
func fleetTaskLine(t fleet.Task) string {
	line := fmt.Sprintf("[%s] %s", t.ID, t.State)
	switch {
	case t.Host == "" || t.State == landing.Landed:
	case t.State == landing.Landing:
		line += " by the integration host (its work from " + t.Host + ")"
	case t.State == landing.Queued:
		line += " for the integration host (its work from " + t.Host + ")"
	default:
		line += " on " + t.Host
	}
	if t.Commit != "" && t.State == landing.Landed {
		line += " · commit " + short(t.Commit)
	}
	if t.Reason != "" && t.State != landing.Landed {
		line += ": " + t.Reason
	}
	return line
}

// followFleet prints each task's moves until the run ends, and returns its
// outcome as the exit code. Ctrl+C leaves the run going. While no worker
// polls the queues the run needs, ww says so.
func followFleet(ctx context.Context, opts *BuildOptions, c client.Client, run client.WorkflowRun, ww *workerWatch) error {
	out := opts.progress()
	ended := make(chan error, 1)
	var final fleet.RunState
	go func() { ended <- run.Get(context.WithoutCancel(ctx), &final) }()
	seen := map[string]landing.TaskState{}
	show := func(st fleet.Status) {
		for _, t := range st.Tasks {
			if seen[t.ID] == t.State {
				continue
			}
			seen[t.ID] = t.State
			line := fleetTaskLine(*t)
			if opts.JSON {
				_ = writeJSONLine(opts.Env, map[string]any{"kind": "task", "run": st.RunID, "task": t.ID, "state": t.State, "host": t.Host, "commit": t.Commit, "reason": t.Reason})
				continue
			}
			fmt.Fprintln(out, line)
		}
	}
	end := func(err error) error {
		if st, qerr := fleet.Query(context.WithoutCancel(ctx), c, run.GetID()); qerr == nil {
			show(st)
		} else if err == nil {
			show(fleet.Status{RunState: final})
		}
		if err != nil {
			return fmt.Errorf("the build workflow failed: %w", err)
		}
		return fleetOutcome(opts, final)
	}
	return following[fleet.Status]{name: "the run", noun: "run", hint: ": `ralph status` shows it, `ralph stop` stops it", every: time.Second,
		query: func(ctx context.Context) (fleet.Status, error) { return fleet.Query(ctx, c, run.GetID()) },
		seen: func(st fleet.Status, err error) (bool, error) {
			if err == nil {
				show(st)
			}
			return false, nil
		}, ended: ended, end: end}.follow(ctx, opts.Env, ww)
}

func short(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

func fleetOutcome(opts *BuildOptions, st fleet.RunState) error {
	landed := 0
	for _, t := range st.Tasks {
		if t.State == landing.Landed {
			landed++
		}
	}
	fmt.Fprintf(opts.progress(), "ralph: %s: %s landed (%s)\n", st.Outcome, words.Count(landed, "task", "tasks"), st.Reason)
	switch st.Outcome {
	case "complete":
		return nil
	case "needs_human":
		return &ExitError{Code: ExitNeedsHuman, Msg: st.Reason + ": see `ralph status`"}
	case "max_iterations":
		return &ExitError{Code: ExitLimit, Msg: st.Reason}
	case string(loop.OutcomeChecksFailing):
		return &ExitError{Code: ExitChecksFailing, Msg: st.Reason + ": the run is not complete"}
	case "interrupted":
		return &ExitError{Code: ExitInterrupted, Msg: st.Reason}
	}
	return errors.New(st.Reason)
}

// WorkerOptions are the flags of `ralph worker`.
type WorkerOptions struct {
	Env       *Env
	Host      string
	Integrate bool
	Slots     int
	Agent     string
	// Sandbox is --sandbox ("": [sandbox] mode): it confines every agent
	// this worker runs, whoever started the work.
	Sandbox string
}

func newWorkerCmd(env *Env) *cobra.Command {
	opts := &WorkerOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run this machine's Temporal worker: it works the tasks of builds started with --engine temporal in this clone",
		Long: `Run the Temporal engine's worker for this clone of the repository, until
Ctrl+C. It polls [engine] task_queue (the runs' workflows, and new tasks
any host may take), its own queue TASK_QUEUE@HOST (the work of the
worktrees this clone holds), and with --integrate the merge queue's
(one host per task queue lands tasks on the target branch).

Task branches travel through [engine] exchange_remote. The agents' output
goes to this clone's journal (.ralph/events.jsonl): ralph watch and
ralph serve here show it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorker(cmd, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Host, "host", "", "this host's name: its task queue is TASK_QUEUE@HOST (default: the machine's hostname)")
	cmd.Flags().BoolVar(&opts.Integrate, "integrate", false, "also run the merge queue: land verified tasks on the target branch in this clone")
	cmd.Flags().IntVar(&opts.Slots, "slots", 4, "task loops this host runs at once")
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "agent to run (see ralph build --help)")
	cmd.Flags().StringVar(&opts.Sandbox, "sandbox", "", "run every agent this worker runs (build tasks, sessions, threads) in a sandbox: off, bwrap (refuse to start when it cannot) or auto (default [sandbox] mode: off)")
	return cmd
}

func runWorker(cmd *cobra.Command, opts *WorkerOptions) error {
	env := opts.Env
	if opts.Slots < 1 {
		return usageErrorf("--slots must be at least 1, got %d", opts.Slots)
	}
	host, err := hostName(opts.Host)
	if err != nil {
		return err
	}
	// The machine that runs the agents decides how they are contained:
	// the policy is found (or bwrap that cannot start refused) before the
	// worker polls, and every build task, session and thread it runs gets
	// it.
	s, err := loopOptions(cmd, &BuildOptions{Env: env, Agent: opts.Agent, Sandbox: opts.Sandbox}, true)
	if err != nil {
		return err
	}
	s.opts.Memory.Close()
	s.opts.Memory = nil
	box := s.opts.Sandbox
	if s.opts.SandboxWarning != "" {
		// Said once for the worker, not again by each task's loop.
		fmt.Fprintln(env.IO.Out, s.opts.SandboxWarning)
		s.opts.SandboxWarning = ""
	}
	// Builds need the exchange remote; sessions and threads, which stay
	// in this checkout, do not: without it the worker runs those only.
	eng := s.app.Temporal()
	builds := eng.ExchangeRemote != ""
	if !builds && opts.Integrate {
		return usageErrorf("--integrate lands the tasks of builds, which travel between machines through [engine] exchange_remote: set it in .ralph/config.toml (docs/temporal.md), or leave out --integrate for a worker of sessions and threads")
	}
	c, err := eng.Dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	base := s.opts
	h := s.app.FleetHost(host)
	h.Checks, h.Checker, h.Sink = base.Checks, base.Checker, engine.WorkerText{Out: report.Text{W: env.IO.Out}}
	h.LoopOptions = func(ws *workspace.Workspace, src tasks.Source) loop.Options {
		o := base
		o.PlanPath = ws.Abs(s.ws.Rel(base.PlanPath))
		return o
	}
	queues := []string{eng.TaskQueue, fleet.HostQueue(eng.TaskQueue, host)}
	if opts.Integrate {
		queues = append(queues, fleet.IntegrationQueue(eng.TaskQueue))
	}
	fmt.Fprintf(env.IO.Out, "ralph worker %s: polling %s on %s (namespace %s); Ctrl+C stops it (work in flight is retried)\n",
		host, strings.Join(queues, ", "), eng.Address, eng.Namespace)
	if box != nil {
		fmt.Fprintf(env.IO.Out, "ralph worker %s: every agent it runs is sandboxed (bwrap): its work tree writable, the home hidden\n", host)
	}
	if !builds {
		fmt.Fprintf(env.IO.Out, "ralph worker %s: no [engine] exchange_remote: it runs this checkout's sessions and threads, and no build's tasks (builds need it: docs/temporal.md)\n", host)
		h = nil
	}
	ch, err := NewCheckoutHost(cmd.Context(), env, c, host, box)
	if err != nil {
		return err
	}
	err = fleet.RunWorker(cmd.Context(), c, h, fleet.WorkerOptions{Name: host, Shared: eng.TaskQueue, Integrate: opts.Integrate, Slots: opts.Slots, Checkout: ch})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.IO.Out, "ralph worker %s: stopped\n", host)
	return nil
}

// fleetStatus is `ralph status` for a build on Temporal: the run's state
// from its status Query.
func fleetStatus(cmd *cobra.Command, opts *StatusOptions, a *app.App) error {
	ws, eng := a.WS, a.Temporal()
	snap, err := ws.Repo.Snapshot(cmd.Context())
	if err != nil {
		return err
	}
	c, err := eng.Dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	// A Query is answered by a worker: while none polls, a person is told
	// (on stderr, so that --json stays one document).
	stop := newWorkerWatch(opts.Env, c, eng, "the status of the build of "+snap.Branch, false,
		waitQueue{eng.TaskQueue, "ralph worker --host HOST", "in a clone of the repository"}).watch(cmd.Context())
	st, err := fleet.Query(cmd.Context(), c, fleet.BuildID(eng.TaskQueue, snap.Branch))
	stop()
	if err != nil {
		return err
	}
	if opts.JSON {
		// The one status document, as a local build has it, with the
		// run's Query laid over it: a script reads one shape whichever
		// engine runs the build.
		rep, _, _, err := a.Status(opts.Tasks)
		if err != nil {
			return err
		}
		fleetOverlay(&rep, st, opts.Env.Now())
		fleetEngine(&rep, eng)
		return writeJSON(opts.Env, rep)
	}
	out := opts.Env.IO.Out
	state := "running"
	switch {
	case st.Outcome != "":
		state = st.Outcome + ": " + st.Reason
	case st.Paused:
		state = "paused"
	case st.Stopping:
		state = "stopping"
	}
	fmt.Fprintf(out, "build %s on Temporal (%s, task queue %s): %s\n", st.RunID, eng.Address, eng.TaskQueue, state)
	fmt.Fprintf(out, "target %s · %s · %s · history %d events (continued as new %s)\n", st.Target, words.Count(st.Workers, "worker", "workers"),
		words.Count(st.Iterations, "iteration", "iterations"), st.HistoryLength, words.Count(st.Generation, "time", "times"))
	if !st.CooldownUntil.IsZero() {
		fmt.Fprintf(out, "every agent is at a usage limit: waiting until %s (a durable timer)\n", st.CooldownUntil.Local().Format(time.RFC3339))
	}
	for _, t := range st.Tasks {
		line := fmt.Sprintf("  %-12s %-12s", t.ID, t.State)
		if t.Host != "" {
			line += " host " + t.Host
		}
		if t.Attempt > 0 {
			line += fmt.Sprintf(" attempt %d", t.Attempt)
		}
		if t.Commit != "" {
			line += " commit " + short(t.Commit)
		}
		if t.Reason != "" && t.State != landing.Landed {
			line += " · " + t.Reason
		}
		fmt.Fprintln(out, line)
	}
	return nil
}

// fleetSteer gives a control command to the build on Temporal as an
// Update: the run's validator refuses what it cannot take now.
func fleetSteer(ctx context.Context, a *app.App, cmd control.Command) (control.Result, error) {
	ws := a.WS
	switch cmd.Kind {
	case control.Pause, control.Resume, control.Stop, control.Hint, control.Skip, control.Block, control.Unblock:
	default:
		return control.Result{}, &control.InputError{Msg: fmt.Sprintf("%s is not a command a build on Temporal takes (threads on Temporal take checkpoints: ralph thread approve ...)", cmd.Kind)}
	}
	snap, err := ws.Repo.Snapshot(ctx)
	if err != nil {
		return control.Result{}, err
	}
	eng := a.Temporal()
	c, err := eng.Dial(ctx)
	if err != nil {
		return control.Result{}, err
	}
	defer c.Close()
	msg, err := fleet.Send(ctx, c, fleet.BuildID(eng.TaskQueue, snap.Branch), fleet.Command{Kind: string(cmd.Kind), Task: cmd.Task, Text: cmd.Text, By: cmd.By})
	if err != nil {
		return control.Result{}, &control.InputError{Msg: err.Error()}
	}
	return control.Result{ID: cmd.ID, Status: control.Applied, Message: msg}, nil
}

// fleetOverlay puts the build on Temporal, as its status Query returns
// it, into the status document the front ends (ralph watch, ralph serve,
// the MCP server) read: the board's states, the workers and the merge
// queue, and a steerable run so their controls send Updates. The local
// parts (this host's journal, the task file) stay as they are.
func fleetOverlay(rep *status.Report, st fleet.Status, now time.Time) {
	p := &status.Parallel{RunID: st.RunID, Target: st.Target, Workers: st.Workers, Finished: st.Outcome != "",
		Outcome: st.Outcome, Reason: st.Reason, Working: []status.Worker{}, Queue: []status.Queued{},
		NeedsReview: []status.Queued{}, Blocked: []status.Queued{}, Worktrees: "on each host, under its worktree root"}
	byID := map[string]*fleet.Task{}
	for _, t := range st.Tasks {
		byID[t.ID] = t
		q := status.Queued{Task: t.ID, State: string(t.State), Attempt: t.Attempt, Branch: t.Branch, Reason: t.Reason}
		switch t.State {
		case landing.Preparing, landing.Working, landing.Cooling:
			p.Working = append(p.Working, status.Worker{Worker: t.Host, Task: t.ID, State: string(t.State), Attempt: t.Attempt, Branch: t.Branch})
		case landing.Queued, landing.Landing:
			p.Queue = append(p.Queue, q)
		case landing.NeedsReview:
			p.NeedsReview = append(p.NeedsReview, q)
		case landing.Blocked:
			p.Blocked = append(p.Blocked, q)
		case landing.Landed:
			p.Landed++
		}
	}
	rep.Parallel = p
	rep.RunID, rep.Running, rep.Finished = st.RunID, st.Outcome == "", st.Outcome != ""
	rep.Outcome, rep.Reason, rep.Iteration = st.Outcome, st.Reason, st.Iterations
	for i := range rep.Board {
		t := byID[rep.Board[i].ID]
		if t == nil {
			continue
		}
		// The board's words are the local document's (status.Story*),
		// so that one reader reads both engines.
		switch t.State {
		case landing.Landed:
			rep.Board[i].State = status.StoryLanded
		case landing.Blocked:
			rep.Board[i].State, rep.Board[i].Reason = status.StoryBlocked, t.Reason
		case landing.NeedsReview:
			rep.Board[i].State, rep.Board[i].Reason = status.StoryNeedsReview, t.Reason
		case landing.Queued, landing.Landing:
			rep.Board[i].State = status.StoryQueued
		case landing.Ready, landing.SentBack:
		default:
			rep.Board[i].State = status.StoryClaimed
		}
		rep.Board[i].Worker = t.Host
	}
	if st.Outcome == "" {
		rep.Steerable = append(rep.Steerable, control.Run{Run: st.RunID, Machine: "build on Temporal",
			Takes: []control.Kind{control.Pause, control.Resume, control.Stop, control.Hint, control.Skip, control.Block, control.Unblock}, Since: st.StartedAt})
	}
	if st.Paused && rep.Paused == nil {
		rep.Paused = &control.Command{Kind: control.Pause, By: "the build on Temporal", Time: now}
	}
	rep.Engine = status.EngineTemporal
	rep.Temporal = &status.Temporal{HistoryLength: st.HistoryLength, Generation: st.Generation, Stopping: st.Stopping,
		Failing: st.Failing, Controls: st.Controls, Tasks: []status.TemporalTask{}}
	for _, t := range st.Tasks {
		rep.Temporal.Tasks = append(rep.Temporal.Tasks, status.TemporalTask{ID: t.ID, State: string(t.State), Host: t.Host, Attempt: t.Attempt,
			Branch: t.Branch, Commit: t.Commit, Reason: t.Reason, Skipped: t.Skipped, HeldBy: t.HeldBy})
	}
	if !st.CooldownUntil.IsZero() {
		rep.Temporal.CooldownUntil = st.CooldownUntil.UTC().Format(time.RFC3339)
		if rep.Cooldowns == nil {
			rep.Cooldowns = map[string]string{}
		}
		rep.Cooldowns["every agent (the run's durable timer)"] = st.CooldownUntil.UTC().Format(time.RFC3339)
	}
}

// fleetEngine names in rep the Temporal server and task queue of eng.
func fleetEngine(rep *status.Report, eng app.Temporal) {
	if rep.Temporal == nil {
		return
	}
	rep.Temporal.Address, rep.Temporal.TaskQueue = eng.Address, eng.TaskQueue
}

// fleetStatusOf returns the status function of a live source over a
// build on Temporal: the local document with the run's Query laid over
// it. The client is dialled once, at the first call.
func fleetStatusOf(a *app.App, env *Env, local func(context.Context) (status.Report, error)) func(context.Context) (status.Report, error) {
	ws := a.WS
	var c client.Client
	eng := a.Temporal()
	return func(ctx context.Context) (status.Report, error) {
		rep, err := local(ctx)
		if err != nil {
			return rep, err
		}
		if c == nil {
			if c, err = eng.Dial(ctx); err != nil {
				c = nil
				return rep, err
			}
		}
		snap, err := ws.Repo.Snapshot(ctx)
		if err != nil {
			return rep, err
		}
		st, err := fleet.Query(ctx, c, fleet.BuildID(eng.TaskQueue, snap.Branch))
		if err != nil {
			// No build on the server yet: the local document stands.
			return rep, nil
		}
		fleetOverlay(&rep, st, env.Now())
		fleetEngine(&rep, eng)
		return rep, nil
	}
}

// hostName is the host a worker, thread or session runs on: the --host
// flag, else this machine's hostname. Its task queue is TASK_QUEUE@HOST.
func hostName(flag string) (string, error) {
	host := flag
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", usageErrorf("cannot read this machine's hostname (%v): name the host with --host, as its `ralph worker --host` does", err)
		}
		host = h
	}
	if host == "" || strings.ContainsAny(host, " @/\t\n") {
		return "", usageErrorf("--host %q: use a name without spaces, '@' or '/'", host)
	}
	return host, nil
}
