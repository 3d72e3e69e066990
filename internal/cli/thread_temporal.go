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
	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/thread"
)

// A thread on Temporal: `ralph thread start --engine temporal` starts the
// thread's workflow (fleet.Thread) instead of working in this process,
// and leaves a marker in the thread's folder. While the marker is there,
// the thread's commands (approve, pause, abandon, ...) are checkpoint
// Updates to the workflow, whose validator refuses what the phase does
// not allow; the work runs on the `ralph worker` of the host that holds
// this checkout.

func threadMarkerPath(ralphDir, id string) string {
	return filepath.Join(thread.Dir(ralphDir, id), markerName)
}

// threadOnTemporal runs the thread command name on Temporal when the
// thread runs there (its marker), or when it is start with the Temporal
// engine chosen. It reports whether it handled the command; when not,
// the command runs here as always.
func threadOnTemporal(cmd *cobra.Command, opts *ThreadOptions, name string, idArgs []string, msg string) (bool, error) {
	tc, err := readThread(cmd, opts, idArgs)
	if err != nil {
		return false, nil // the local path reports it in its words
	}
	t := tc.r.Thread()
	m, err := readMarker(threadMarkerPath(tc.dir, t.ID))
	if err != nil {
		return true, fmt.Errorf("reading the thread's Temporal marker: %w", err)
	}
	if m == nil {
		if name != "start" {
			return false, nil
		}
		onTemporal, err := tc.app.OnTemporal(opts.Engine)
		if err != nil {
			return true, err
		}
		if !onTemporal {
			return false, nil
		}
		if opts.Sandbox != "" {
			return true, usageErrorf("--sandbox is for threads that run here: a thread on Temporal runs in the sandbox of the `ralph worker` that runs it (start that worker with --sandbox, or set [sandbox] mode in its checkout's config)")
		}
		return true, startThreadOnTemporal(cmd, tc, opts)
	}
	if opts.Sandbox != "" {
		return true, usageErrorf("thread %s runs on Temporal (workflow %s): --sandbox is for threads that run here; its agents run in the sandbox of the `ralph worker --host %s` that runs it", t.ID, m.WorkflowID, m.Host)
	}
	if opts.Engine == app.EngineLocal {
		return true, usageErrorf("thread %s runs on Temporal (workflow %s): its commands go there; --engine local does not apply", t.ID, m.WorkflowID)
	}
	eng := tc.app.Temporal()
	c, err := eng.Dial(cmd.Context())
	if err != nil {
		return true, err
	}
	defer c.Close()
	ww := newWorkerWatch(opts.Env, c, eng, "thread "+t.ID, opts.JSON, hostQueues(eng, m.Host)...)
	// The Query, and the Update after it, wait for the workflow's worker:
	// a person is told when none polls.
	stop := ww.watch(cmd.Context())
	before, err := fleet.QueryThread(cmd.Context(), c, t.ID)
	stop()
	if errors.Is(err, fleet.ErrNoThreadWorkflow) {
		// The workflow ended (or was terminated): the thread is this
		// checkout's again, and the command runs here.
		_ = os.Remove(threadMarkerPath(tc.dir, t.ID))
		fmt.Fprintf(opts.Env.IO.Err, "ralph: thread %s's workflow %s is no longer running on Temporal: the command runs here\n", t.ID, m.WorkflowID)
		return false, nil
	}
	if err != nil {
		return true, err
	}
	by := os.Getenv("USER")
	if h, err := os.Hostname(); err == nil && by != "" {
		by += "@" + h
	}
	stop = ww.watch(cmd.Context())
	_, err = fleet.SendCheckpoint(cmd.Context(), c, t.ID, opts.command(name, msg, by))
	stop()
	if err != nil {
		return true, err // a refusal says why, as a usage error
	}
	out := tc.progress()
	fmt.Fprintf(out, "ralph: %s accepted by thread %s on Temporal (workflow %s, host %s)\n", name, t.ID, m.WorkflowID, m.Host)
	if opts.Detach {
		return true, nil
	}
	return true, followThread(cmd.Context(), tc, c, t.ID, len(before.Commands), ww)
}

// startThreadOnTemporal starts the thread's workflow with start as its
// first command, writes the marker, and follows the thread until it waits
// for a person.
func startThreadOnTemporal(cmd *cobra.Command, tc *threadCmd, opts *ThreadOptions) error {
	ctx := cmd.Context()
	t := tc.r.Thread()
	start := thread.Commands[0]
	for _, c := range thread.Commands {
		if c.Name == "start" {
			start = c
		}
	}
	if _, ok := start.Phases[t.Phase.Type]; !ok {
		return &thread.WrongCommandError{ID: t.ID, Phase: t.Phase.Type, Command: "start", Allowed: thread.AllowedCommands(t.Phase.Type)}
	}
	if tc.r.Busy() {
		return usageErrorf("thread %s is busy in another ralph here: wait for it, or `ralph thread pause %s`", t.ID, t.ID)
	}
	host, err := hostName(opts.Host)
	if err != nil {
		return err
	}
	eng := tc.app.Temporal()
	c, err := eng.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	in := fleet.ThreadInput{ThreadID: t.ID, Placement: fleet.Placement{Host: host, Shared: eng.TaskQueue, Heartbeat: eng.Heartbeat}, Thread: t,
		Start: opts.command("start", "", os.Getenv("USER"))}
	run, err := fleet.StartThread(ctx, c, in)
	if err != nil {
		return err
	}
	if err := markStarted(opts.Env, tc.progress(), eng, run, host, threadMarkerPath(tc.dir, t.ID), "thread "+t.ID, "its work runs", "the thread's commands would run here"); err != nil {
		return err
	}
	if opts.Detach {
		fmt.Fprintf(tc.progress(), "follow it with `ralph thread show %s`\n", t.ID)
		return nil
	}
	ww := newWorkerWatch(opts.Env, c, eng, "thread "+t.ID, opts.JSON, hostQueues(eng, host)...)
	return followThread(ctx, tc, c, t.ID, 0, ww)
}

// followThread prints the thread's phases, through its status Query, until
// the command sent after n earlier commands has settled, and ends as the
// local command would: stuck and a failed preflight have their exit codes,
// a command that ended with an error ends with it.
func followThread(ctx context.Context, tc *threadCmd, c client.Client, id string, n int, ww *workerWatch) error {
	last := thread.Phase("")
	seen := func(st fleet.ThreadStatus, err error) (bool, error) {
		if err != nil {
			return !errors.Is(err, fleet.ErrNoThreadWorkflow) || n > 0, err
		}
		if st.Phase != last {
			if tc.opts.JSON {
				_ = writeJSONLine(tc.env, map[string]any{"kind": "thread", "thread": id, "phase": st.Phase, "working": st.Working})
			} else {
				fmt.Fprintf(tc.progress(), "thread %s: %s\n", id, st.Phase)
			}
			last = st.Phase
		}
		if st.Working == "" && len(st.Commands) > n {
			return true, threadSettled(tc, st)
		}
		return false, nil
	}
	return following[fleet.ThreadStatus]{name: "thread " + id, noun: "thread", hint: fmt.Sprintf(": `ralph thread show %s` shows it", id),
		every: 500 * time.Millisecond, seen: seen, query: func(ctx context.Context) (fleet.ThreadStatus, error) { return fleet.QueryThread(ctx, c, id) }}.follow(ctx, tc.env, ww)
}

// threadSettled reports where the thread waits and maps it to the exit
// code, as the local command's finish does.
func threadSettled(tc *threadCmd, st fleet.ThreadStatus) error {
	if tc.opts.JSON {
		_ = writeJSONLine(tc.env, map[string]any{"kind": "summary", "thread": st})
	} else {
		line := fmt.Sprintf("thread %s waits in %s", st.ThreadID, st.Phase)
		if st.WaitsFor != "" {
			line += " at the " + st.WaitsFor + " checkpoint"
		}
		if len(st.Allowed) > 0 {
			line += ": next: ralph thread " + strings.Join(st.Allowed, " | ") + " " + st.ThreadID
		}
		fmt.Fprintln(tc.progress(), line)
	}
	if st.LastError != "" {
		return errors.New(st.LastError)
	}
	switch st.Phase {
	case thread.PhaseStuck:
		return &ExitError{Code: ExitNeedsHuman, Msg: fmt.Sprintf("thread %s is stuck: a person must decide: ralph thread revise | reconfigure | assist | abandon | diagnose", st.ThreadID)}
	case thread.PhasePreflightFailed:
		return &ExitError{Code: ExitFailure, Msg: fmt.Sprintf("preflight failed for thread %s: fix it, then `ralph thread retry` (or `ralph thread revise` to fix the spec)", st.ThreadID)}
	}
	return nil
}

// showThreadOnTemporal prints, under `ralph thread show`, the status the
// thread's workflow answers its Query with, when the thread runs there.
func showThreadOnTemporal(cmd *cobra.Command, tc *threadCmd) {
	t := tc.r.Thread()
	m, err := readMarker(threadMarkerPath(tc.dir, t.ID))
	if err != nil || m == nil {
		return
	}
	eng := tc.app.Temporal()
	c, err := eng.Dial(cmd.Context())
	if err != nil {
		fmt.Fprintf(tc.env.IO.Err, "ralph: thread %s runs on Temporal (workflow %s), which cannot be reached: %v\n", t.ID, m.WorkflowID, err)
		return
	}
	defer c.Close()
	hostStart := "ralph worker --host " + m.Host
	stop := newWorkerWatch(tc.env, c, eng, "thread "+t.ID, false, waitQueue{eng.TaskQueue, hostStart, ""}).watch(cmd.Context())
	st, err := fleet.QueryThread(cmd.Context(), c, t.ID)
	stop()
	if err != nil {
		fmt.Fprintf(tc.env.IO.Err, "ralph: thread %s: its workflow %s did not answer: %v\n", t.ID, m.WorkflowID, err)
		return
	}
	working := "waits for a person"
	if st.Working != "" {
		working = "working on " + st.Working
	}
	tc.out("  temporal:  workflow %s on %s (host %s): %s, %s, history %d events", m.WorkflowID, m.Address, st.Host, st.Phase, working, st.HistoryLength)
	if st.LastError != "" {
		tc.out("  last:      %s", st.LastError)
	}
}

// command is the thread command verb that opts give, as the workflow
// takes it; runThreadCommandHere reads the options back on the host.
func (opts *ThreadOptions) command(verb, text, by string) fleet.ThreadCommand {
	return fleet.ThreadCommand{Verb: verb, Text: text, By: by, Agents: opts.Agents, MaxIterations: opts.MaxIterations,
		Verifiers: opts.Verifiers, Agent: opts.Agent, Worktree: opts.Worktree, Yes: opts.Yes}
}

// runThreadCommandHere runs a thread command from the workflow in this
// checkout, as `ralph thread NAME` does, its events in this checkout's
// journal and on the worker's output, its loop's agents in the worker's
// sandbox mode.
func runThreadCommandHere(ctx context.Context, env *Env, in fleet.ThreadCommandInput, box *sandbox.Policy) error {
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	c := in.Command
	mode := sandbox.Off
	if box != nil {
		mode = sandbox.Bwrap
	}
	opts := &ThreadOptions{Env: env, Agents: c.Agents, MaxIterations: c.MaxIterations, Verifiers: c.Verifiers,
		Agent: c.Agent, Worktree: c.Worktree, Yes: c.Yes, Sandbox: string(mode)}
	tc, err := readThread(cmd, opts, []string{in.ThreadID})
	if err != nil {
		return err
	}
	// The worker settled its sandbox before it polled: the thread's
	// loop, spec agents and checks take it as it is (prepare hands it on).
	tc.box, tc.boxSettled = box, true
	if err := tc.prepare(); err != nil {
		return err
	}
	if tc.detach != nil {
		tc.att = tc.attach("")
		defer tc.detach()
	}
	return tc.r.Do(in.Name, c.Text, nil)
}
