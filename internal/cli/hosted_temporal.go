package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/store"
)

// What `ralph run` and `ralph thread` share when a session or a thread
// runs on Temporal (session_temporal.go, thread_temporal.go): the marker
// in its folder that says so, the start, the follow through its status
// Query, and the worker's host that runs both.

// markerName is the marker's file in a session's or a thread's folder.
const markerName = "temporal.json"

// TemporalMarker says a session or a thread runs on Temporal, and where.
type TemporalMarker struct {
	SchemaVersion int       `json:"schema_version"`
	WorkflowID    string    `json:"workflow_id"`
	RunID         string    `json:"run_id"`
	Host          string    `json:"host"`
	TaskQueue     string    `json:"task_queue"`
	Address       string    `json:"address"`
	Namespace     string    `json:"namespace"`
	StartedAt     time.Time `json:"started_at"`
}

// readMarker reads the marker of a thread or a session at path; nil when
// there is none: it runs here.
func readMarker(path string) (*TemporalMarker, error) {
	var m TemporalMarker
	if _, err := store.ReadJSON(path, 1, &m); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	return &m, nil
}

// addEngineFlags adds the Temporal flags of `ralph run` and `ralph thread
// start`; where says what runs where.
func addEngineFlags(f *pflag.FlagSet, engine, host *string, detach *bool, where string) {
	f.StringVar(engine, "engine", "", where+"; default [engine] kind")
	f.StringVar(host, "host", "", "with --engine temporal: the name this checkout's ralph worker --host polls under (default: the machine's hostname)")
	f.BoolVar(detach, "detach", false, "with --engine temporal: return once the workflow started, without following it")
}

// markStarted writes the marker at path of what (a session or a thread)
// whose workflow run started on host, and says on out that it runs
// there; without the marker, lost goes wrong.
func markStarted(env *Env, out io.Writer, eng app.Temporal, run client.WorkflowRun, host, path, what, runs, lost string) error {
	m := TemporalMarker{SchemaVersion: 1, WorkflowID: run.GetID(), RunID: run.GetRunID(), Host: host, TaskQueue: eng.TaskQueue,
		Address: eng.Address, Namespace: eng.Namespace, StartedAt: env.Now().UTC()}
	if err := store.WriteJSON(path, m); err != nil {
		return fmt.Errorf("the workflow %s started, but its marker could not be written (%v): %s; stop it with `temporal workflow terminate --workflow-id %s`", run.GetID(), err, lost, run.GetID())
	}
	fmt.Fprintf(out, "ralph: %s started on Temporal (%s, namespace %s) as workflow %s: %s on the `ralph worker --host %s` of this checkout (task queue %s)\n",
		what, eng.Address, eng.Namespace, run.GetID(), runs, host, fleet.HostQueue(eng.TaskQueue, host))
	return nil
}

// who names the person giving a command from this machine.
func who() string {
	by := os.Getenv("USER")
	if by == "" {
		by = control.ByCLI
	}
	if h, err := os.Hostname(); err == nil {
		by += "@" + h
	}
	return by
}

// following is a session, a thread or a build on Temporal that a command
// follows through its status Query, every period: seen takes each status
// or the Query's error and says when the follow is over; ended, when not
// nil, brings the workflow's end, which end maps. Ctrl+C stops following
// (the workflow goes on): the line says name goes on, then hint.
type following[S any] struct {
	name, noun, hint string
	every            time.Duration
	query            func(context.Context) (S, error)
	seen             func(st S, err error) (over bool, result error)
	ended            <-chan error
	end              func(error) error
}

// follow follows f. While no worker polls the queues the workflow needs,
// ww says so.
func (f following[S]) follow(ctx context.Context, env *Env, ww *workerWatch) error {
	tick := time.NewTicker(f.every)
	defer tick.Stop()
	for {
		// A Query waits for a worker to answer it: bounded, so that a
		// wait on a missing worker is seen and said, not taken for an
		// error.
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := f.query(qctx)
		waited := qctx.Err() != nil && ctx.Err() == nil
		cancel()
		ww.check(ctx)
		if !waited || err == nil {
			if over, err := f.seen(st, err); over {
				return err
			}
		}
		select {
		case err := <-f.ended:
			return f.end(err)
		case <-ctx.Done():
			fmt.Fprintf(env.IO.Err, "ralph: stopped following; %s goes on in Temporal%s\n", f.name, f.hint)
			return &ExitError{Code: ExitInterrupted, Msg: "stopped following the " + f.noun + " (it goes on)"}
		case <-tick.C:
		}
	}
}

// NewCheckoutHost is the session and thread part of `ralph worker`'s
// host: their activities over this checkout, run by the runners `ralph
// run` and `ralph thread` use, with no terminal (nothing asks a question
// on the worker's), and c to report their states to the workflows.
// Answers are recorded by the steerer, as `ralph answer` records them
// here, journal line included. box is the worker's sandbox policy (nil:
// none): every role's agent of a session and a thread's loop run in it.
func NewCheckoutHost(ctx context.Context, env *Env, c client.Client, host string, box *sandbox.Policy) (*fleet.CheckoutHost, error) {
	ws, a, err := openWorkspace(ctx, env)
	if err != nil {
		return nil, err
	}
	quiet := *env
	quiet.IO.InTerminal = false
	plain := quiet // a session's events are plain lines on the worker's output
	plain.IO.OutTerminal = false
	return &fleet.CheckoutHost{Name: host, RalphDir: ws.Dir(), Client: c,
		RunSession: func(ctx context.Context, in fleet.SessionRunInput) error { return runSessionHere(ctx, &plain, in, box) },
		RecordAnswer: func(ctx context.Context, ans fleet.SessionAnswer) error {
			cmd := control.New(control.Answer, ans.By, plain.Now())
			cmd.Session, cmd.Question, cmd.Text = ans.SessionID, ans.QuestionID, ans.Text
			if cmd.By == "" {
				cmd.By = "temporal"
			}
			_, err := newSteerer(&plain, a).Do(ctx, cmd)
			return err
		},
		RunThread: func(ctx context.Context, in fleet.ThreadCommandInput) error {
			// The thread's agents and checks run in the sandbox the worker
			// settled on (none when it has none: auto that could not
			// start warned once, at the start).
			return runThreadCommandHere(ctx, &quiet, in, box)
		},
	}, nil
}
