package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/words"
)

// A session on Temporal: `ralph run "REQUEST" --engine temporal` creates
// the session here, as `ralph run` does, and starts the session's
// workflow (fleet.Session) instead of running the roles in this process;
// a marker in the session's folder says so. The session runs on the
// `ralph worker` of the host that holds this checkout, with the same
// runner; its questions for a person are answered with `ralph answer`,
// which becomes an Update of the workflow (from any machine, with
// --session), and the last answer lets it go on by itself.

func sessionMarkerPath(dir string) string { return filepath.Join(dir, markerName) }

// answerWait is how long `ralph answer` waits for the session's host to
// record an answer the workflow accepted.
var answerWait = 30 * time.Second

// sessionOnTemporal runs `ralph run` on Temporal when the Temporal
// engine is chosen, and refuses a local resume of a session whose
// workflow runs. It reports whether it handled the command; when not,
// the session runs here as always.
func sessionOnTemporal(ctx context.Context, opts *RunOptions) (bool, error) {
	env := opts.Env
	ws, a, err := openWorkspace(ctx, env)
	if err != nil {
		return false, nil // the local path reports it in its words
	}
	onTemporal, err := a.OnTemporal(opts.Engine)
	if err != nil {
		return true, err
	}
	if onTemporal && opts.Sandbox != "" {
		return true, usageErrorf("--sandbox is for sessions that run here: a session on Temporal runs in the sandbox of the `ralph worker` that runs it (start that worker with --sandbox, or set [sandbox] mode in its checkout's config)")
	}
	if !onTemporal {
		if !opts.Resume {
			return false, nil
		}
		dir, err := app.SessionDir(ws, opts.Session)
		if err != nil {
			return false, nil
		}
		m, err := readMarker(sessionMarkerPath(dir))
		if err != nil || m == nil {
			return false, nil
		}
		// Two runners of one session would each write its progress: while
		// its workflow runs, the session is the workflow's.
		c, err := a.Temporal().Dial(ctx)
		if err != nil {
			return true, fmt.Errorf("session %s runs on Temporal (workflow %s), which cannot be reached, so it cannot be resumed here: %w", filepath.Base(dir), m.WorkflowID, err)
		}
		defer c.Close()
		if fleet.Running(ctx, c, m.WorkflowID) {
			return true, usageErrorf("session %s runs on Temporal as workflow %s (host %s): it goes on by itself; answer its questions with `ralph answer`", filepath.Base(dir), m.WorkflowID, m.Host)
		}
		// The workflow ended: the session is this checkout's again.
		_ = os.Remove(sessionMarkerPath(dir))
		return false, nil
	}
	return true, startSessionOnTemporal(ctx, opts, a)
}

// startSessionOnTemporal creates the session (or takes the one to
// resume), starts its workflow, writes the marker and follows it. Bad
// input and an unreachable server change nothing.
func startSessionOnTemporal(ctx context.Context, opts *RunOptions, a *app.App) error {
	ws := a.WS
	env := opts.Env
	host, err := hostName(opts.Host)
	if err != nil {
		return err
	}
	var resumeDir string
	if opts.Resume {
		dir, err := app.SessionDir(ws, opts.Session)
		if err != nil {
			return err
		}
		p, err := session.Load(dir)
		if err != nil {
			return err
		}
		if p.State.Final() {
			return fmt.Errorf("session %s is %s; start a new one with ralph run \"request\"", p.State.SessionID, p.State.Current)
		}
		resumeDir = dir
	}
	// The agents run on this checkout's worker: a mistake in them is
	// told now, not in the worker's output.
	if _, err := a.SessionRoles(opts.Agent); err != nil {
		return err
	}
	if holder, busy := store.Held(ws.LockPath()); busy {
		return fmt.Errorf("another ralph is working in this repository (%v): wait for it to finish", holder)
	}
	var snap string
	if !opts.Resume {
		s, err := cleanTree(ctx, ws)
		if err != nil {
			return err
		}
		snap = s.Head
	}
	eng := a.Temporal()
	c, err := eng.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := ws.EnsureStateFiles(env.Now()); err != nil {
		return err
	}
	dir := resumeDir
	if dir == "" {
		id := session.NewID(env.Now())
		dir = filepath.Join(app.SessionsDir(ws), id)
		for n := 2; pathExists(dir); n++ {
			dir = filepath.Join(app.SessionsDir(ws), fmt.Sprintf("%s-%d", id, n))
		}
		if err := session.Create(ws, dir, filepath.Base(dir), opts.Request, snap, env.Now()); err != nil {
			return err
		}
	}
	id := filepath.Base(dir)
	p, err := session.Load(dir)
	if err != nil {
		return err
	}
	qs, err := session.LoadQuestions(dir)
	if err != nil {
		return err
	}
	in := fleet.SessionInput{SessionID: id, Placement: fleet.Placement{Host: host, Shared: eng.TaskQueue, Heartbeat: eng.Heartbeat},
		Agent: opts.Agent, Title: p.Title, State: p.State, Open: session.OpenQuestions(qs)}
	run, err := fleet.StartSession(ctx, c, in)
	if err != nil {
		if resumeDir == "" {
			_ = os.RemoveAll(dir) // nothing of it ran
		}
		return err
	}
	if err := store.WriteFileAtomic(app.ActiveSessionPath(ws), []byte(id+"\n"), 0o644); err != nil {
		return err
	}
	out := env.IO.Err
	if !opts.JSON {
		out = env.IO.Out
	}
	if err := markStarted(env, out, eng, run, host, sessionMarkerPath(dir), "session "+id, "it runs", "`ralph answer` would answer here"); err != nil {
		return err
	}
	if opts.Detach {
		fmt.Fprintf(out, "its questions: ralph questions --session %s; its progress: ralph metrics --session %s\n", id, id)
		return nil
	}
	ww := newWorkerWatch(env, c, eng, "session "+id, opts.JSON, hostQueues(eng, host)...)
	return followSession(ctx, env, c, run, id, opts.JSON, ww)
}

// followSession prints the session's states, through its status Query,
// until it waits for answers or ends, and ends as the local `ralph run`
// would: waiting for answers and a failed session exit with "a person
// must decide".
func followSession(ctx context.Context, env *Env, c client.Client, run client.WorkflowRun, id string, asJSON bool, ww *workerWatch) error {
	out := env.IO.Out
	ended := make(chan error, 1)
	var final fleet.SessionStatus
	go func() { ended <- run.Get(ctx, &final) }()
	last := ""
	show := func(st fleet.SessionStatus) {
		line := string(st.State)
		if st.CurrentTask != "" {
			line += fmt.Sprintf(" %s (attempt %d)", st.CurrentTask, st.Attempt)
		}
		if line == last {
			return
		}
		last = line
		if asJSON {
			_ = writeJSONLine(env, map[string]any{"kind": "session", "session": id, "state": st.State, "task": st.CurrentTask, "attempt": st.Attempt})
			return
		}
		fmt.Fprintf(out, "session %s: %s\n", id, line)
	}
	seen := func(st fleet.SessionStatus, err error) (bool, error) {
		if err != nil {
			return false, nil // not yet started by a worker, or ended: the result says
		}
		show(st)
		if !st.WaitsForAnswers {
			return false, nil
		}
		if asJSON {
			_ = writeJSONLine(env, map[string]any{"kind": "summary", "session": st})
		} else {
			fmt.Fprintf(out, "ralph: session %s waits for a person to answer:\n", id)
			for _, q := range st.OpenQuestions {
				fmt.Fprintf(out, "  %s  %s\n", q.ID, q.Text)
			}
			fmt.Fprintf(out, "answer with: ralph answer --session %s %s \"...\"   the session goes on by itself on Temporal once every question is answered\n", id, st.OpenQuestions[0].ID)
		}
		return true, &ExitError{Code: ExitNeedsHuman, Msg: "session " + id + " waits for answers: ralph answer ID \"...\" (it goes on by itself on Temporal)"}
	}
	end := func(err error) error {
		if err != nil {
			return err
		}
		show(final)
		return sessionEnded(env, final, asJSON)
	}
	return following[fleet.SessionStatus]{name: "session " + id, noun: "session", every: 500 * time.Millisecond, seen: seen, ended: ended, end: end,
		query: func(ctx context.Context) (fleet.SessionStatus, error) { return fleet.QuerySession(ctx, c, id) }}.follow(ctx, env, ww)
}

// sessionEnded maps how the workflow ended to the exit code the local
// `ralph run` gives.
func sessionEnded(env *Env, st fleet.SessionStatus, asJSON bool) error {
	if asJSON {
		_ = writeJSONLine(env, map[string]any{"kind": "summary", "session": st})
	}
	switch {
	case st.Done:
		if !asJSON {
			fmt.Fprintf(env.IO.Out, "✓ session %s complete: %s done, goal check passed\n", st.SessionID, words.Count(st.Tasks, "task", "tasks"))
		}
		return nil
	case st.Outcome == fleet.SessionFailed:
		return &ExitError{Code: ExitNeedsHuman, Msg: fmt.Sprintf("session %s failed: %s\nsee its progress.md and reports on host %s", st.SessionID, st.Reason, st.Host)}
	}
	return fmt.Errorf("session %s stopped at %s on host %s: %s; fix it there, then ralph run --resume --session %s --engine temporal",
		st.SessionID, st.State, st.Host, st.LastError, st.SessionID)
}

// answerOnTemporal gives `ralph answer` to the session's workflow when
// the session runs on Temporal: its marker is here, or the session is not
// here (another machine holds it) and [engine] kind is temporal. It
// reports whether it handled the command.
func answerOnTemporal(cmd *cobra.Command, env *Env, sessionID, qid, text string) (bool, error) {
	ctx := cmd.Context()
	ws, a, err := openWorkspace(ctx, env)
	if err != nil {
		return false, nil
	}
	id := sessionID
	dir, derr := app.SessionDir(ws, sessionID)
	var m *TemporalMarker
	if derr == nil {
		if m, err = readMarker(sessionMarkerPath(dir)); err != nil {
			return true, fmt.Errorf("reading the session's Temporal marker: %w", err)
		}
		if m == nil {
			return false, nil
		}
		id = filepath.Base(dir)
	} else if onTemporal, _ := a.OnTemporal(""); sessionID == "" || !onTemporal {
		return false, nil
	}
	eng := a.Temporal()
	c, err := eng.Dial(ctx)
	if err != nil {
		return true, err
	}
	defer c.Close()
	// The Update waits for the workflow's worker, the recording for the
	// host's: a person is told when none polls.
	queues := []waitQueue{{eng.TaskQueue, "ralph worker --host HOST", "in the checkout that holds the session"}}
	if m != nil && m.Host != "" {
		queues = hostQueues(eng, m.Host)
	}
	stop := newWorkerWatch(env, c, eng, "the answer to "+qid+" of session "+id, false, queues...).watch(ctx)
	st, recorded, err := fleet.SendAnswer(ctx, c, id, fleet.SessionAnswer{QuestionID: qid, Text: text, By: who()}, answerWait)
	stop()
	switch {
	case errors.Is(err, fleet.ErrNoSessionWorkflow) && m != nil:
		// The workflow ended: the session is this checkout's again.
		_ = os.Remove(sessionMarkerPath(dir))
		fmt.Fprintf(env.IO.Err, "ralph: session %s's workflow %s is no longer running on Temporal: the answer is recorded here\n", id, m.WorkflowID)
		return false, nil
	case errors.Is(err, fleet.ErrNoSessionWorkflow):
		return true, fmt.Errorf("no session %q here, and none runs on Temporal: %w", id, derr)
	case err != nil:
		return true, err
	}
	res := control.Result{Status: control.Applied}
	switch {
	case !recorded:
		res.Status = control.Queued
		res.Message = fmt.Sprintf("accepted the answer to %s by session %s; its host's worker records it when it runs", qid, id)
	case len(st.OpenQuestions) > 0:
		res.Message = fmt.Sprintf("recorded the answer to %s on host %s; %s still open: ralph questions --session %s", qid, st.Host, words.Count(len(st.OpenQuestions), "question", "questions"), id)
	default:
		res.Message = fmt.Sprintf("recorded the answer to %s on host %s; no questions left: session %s goes on there by itself", qid, st.Host, id)
	}
	if wantJSON(cmd) {
		return true, writeJSON(env, res)
	}
	fmt.Fprintln(env.IO.Out, res.Message)
	return true, nil
}

// runSessionHere runs session in.SessionID in this checkout with the
// session runner, as `ralph run --resume --session ID` does (without its
// terminal and pause controls: the workflow is its control), its events
// in this checkout's journal and on the worker's output, every role's
// agent in the worker's sandbox box (nil: none). It returns the runner's
// error for the activity to read.
func runSessionHere(ctx context.Context, env *Env, in fleet.SessionRunInput, box *sandbox.Policy) error {
	ws, a, err := openWorkspace(ctx, env)
	if err != nil {
		return err
	}
	dir, err := app.SessionDir(ws, in.SessionID)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), fleet.ErrTypeUsage, err)
	}
	specs, err := a.SessionRoles(in.Agent)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), fleet.ErrTypeAgentCannotRun, err)
	}
	lock, err := store.TryLock(ws.LockPath(), "ralph worker: session "+in.SessionID)
	if err != nil {
		var le *store.LockedError
		if errors.As(err, &le) {
			// Retried by the workflow's policy: the session runs once the
			// other ralph is done.
			return fmt.Errorf("another ralph is working in this checkout (%v): session %s waits for it", le.Holder, in.SessionID)
		}
		return err
	}
	defer lock.Unlock()
	em, journal := sessionEvents(env, ws, in.SessionID, false, notifier(env, a))
	em.Emit(report.Event{Kind: report.KindRun, Text: fmt.Sprintf("session %s · %s · %s (Temporal, run %d)\n", in.SessionID, describeRoles(specs), ws.Rel(dir), in.Seq),
		Data: report.Run{Dir: ws.Rel(dir), Resumed: report.Ptr(true), Temporal: true}})
	// The runner as runSession makes it.
	r := a.SessionRunner(dir)
	r.Invoker = &agentInvoker{env: env, ws: ws, app: a, specs: specs, dir: dir, em: em, sandbox: box}
	r.MaxLimitWait, r.Events = sessionMaxLimitWait, em
	_, err = r.Run(ctx)
	if jerr := journal.Err(); jerr != nil && err == nil {
		err = fmt.Errorf("the session's events could not all be written to %s: %w", ws.Rel(journal.Path), jerr)
	}
	return err
}
