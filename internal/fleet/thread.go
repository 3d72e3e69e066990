package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ralphloop/ralph/internal/thread"
)

// ThreadCommand is a person's command on a thread: a checkpoint Update,
// or the command a thread workflow starts with.
type ThreadCommand struct {
	// Verb is a thread command as `ralph thread NAME` spells it (approve,
	// request-changes, start, ...) or a verb of the thread table
	// (request_changes, revise_spec, ...).
	Verb string `json:"verb"`
	// Text is what to fix, for request-changes.
	Text string `json:"text,omitempty"`
	By   string `json:"by,omitempty"`
	// The options of start, reconfigure, assist and retry (thread.Options).
	Agents        []string `json:"agents,omitempty"`
	MaxIterations int      `json:"max_iterations,omitempty"`
	Verifiers     []string `json:"verifiers,omitempty"`
	Agent         string   `json:"agent,omitempty"`
	Worktree      bool     `json:"worktree,omitempty"`
	// Yes confirms the workspace reset revise asks about (from Stuck or
	// PendingReview): the host has no terminal to ask on.
	Yes bool `json:"yes,omitempty"`
}

// ThreadInput starts a thread workflow.
type ThreadInput struct {
	ThreadID string
	Placement
	// Thread is the thread as the starting command read it: the phase the
	// first command is checked against.
	Thread thread.Thread
	// Start is the command the workflow begins with (start).
	Start ThreadCommand
}

// ThreadCommandInput asks the host to run one command on the thread.
type ThreadCommandInput struct {
	ThreadID string
	// Name is the thread command (thread.Commands) and Verb the verb it
	// raises in From, the phase the workflow saw when it accepted it.
	Name string
	Verb thread.Verb
	From thread.Phase
	// Seq numbers the workflow's commands, so that the progress a host
	// reports is applied to the command it belongs to only.
	Seq     int
	Command ThreadCommand
}

// ThreadStep is how a command ended on the host: the thread as it
// settled, and the command's error, which is the person's to read (the
// thread has taken the step all the same: a loop that failed pauses it).
type ThreadStep struct {
	Thread thread.Thread `json:"thread"`
	Error  string        `json:"error,omitempty"`
}

// ThreadProgress is a phase the thread entered while a command's work
// runs on its host: the activity signals it, so that the status Query and
// the checkpoint validator see the phase the thread is in, not the one the
// command began in.
type ThreadProgress struct {
	Seq    int           `json:"seq"`
	Thread thread.Thread `json:"thread"`
}

// ThreadStatus is what the thread's status Query returns.
type ThreadStatus struct {
	ThreadID  string       `json:"thread_id"`
	Host      string       `json:"host"`
	Title     string       `json:"title"`
	Phase     thread.Phase `json:"phase"`
	Iteration int          `json:"iteration,omitempty"`
	Mode      thread.Mode  `json:"mode"`
	// Working is the command whose work runs on the host now ("" when
	// the thread waits for a person).
	Working string `json:"working,omitempty"`
	// WaitsFor is the human checkpoint the thread waits at, if any
	// (thread.Checkpoint: "Approve Review", ...).
	WaitsFor string `json:"waits_for,omitempty"`
	// Allowed are the commands a person can give now (ralph thread NAME);
	// Verbs the table's verbs with a human actor they raise.
	Allowed []string `json:"allowed"`
	Verbs   []string `json:"verbs"`
	// LastError is how the last command ended when it ended with an
	// error (a loop that stopped, a refused reset).
	LastError string `json:"last_error,omitempty"`
	// Commands are the commands taken, oldest first (at most 50).
	Commands      []string      `json:"commands,omitempty"`
	HistoryLength int           `json:"history_length"`
	Thread        thread.Thread `json:"thread"`
}

// threadRun is the thread workflow's working memory.
type threadRun struct {
	hostedRun
	t thread.Thread
	// working names the command whose activity runs; cancel stops it
	// (pause, abandon).
	working string
	cancel  workflow.CancelFunc
	lastErr string
}

// Thread is the thread workflow: the thread of seed 003 with its phase
// and table, its work done by activities on the queue of the host that
// holds its checkout, and a person's commands taken as checkpoint Updates
// whose validator refuses a command the phase does not allow. It ends when
// the thread is Done or Abandoned.
//
// Granularity: an activity runs one human command and the work it leads
// to (preflight, the loop, verification, polish) until the thread waits
// for a person, with the thread runner of internal/thread on the host,
// exactly as `ralph thread NAME` does locally. The runner's performers
// and its Next are the same code; the workflow holds the phase, checks
// each command against the table (thread.Next) before it is accepted, and
// learns each phase the work passes through from the host's progress
// Signals.
func Thread(ctx workflow.Context, in ThreadInput) (thread.Thread, error) {
	w := &threadRun{hostedRun: hostedRun{Placement: in.Placement}, t: in.Thread}
	if err := serve(ctx, w.status, UpdateCheckpoint, w.checkpoint, w.validate, SignalThreadProgress, func(p ThreadProgress) {
		// Progress of a command that ended already is older than its
		// result: only the running command's is taken.
		if w.working != "" && p.Seq == w.seq && p.Thread.ID == w.t.ID {
			w.t = p.Thread
		}
	}); err != nil {
		return w.t, err
	}
	if in.Start.Verb != "" {
		if err := w.validate(in.Start); err != nil {
			return w.t, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUsage, nil)
		}
		w.run(ctx, in.Start)
	}
	if err := workflow.Await(ctx, func() bool { return w.t.Phase.Type.Terminal() && w.working == "" }); err != nil {
		return w.t, err
	}
	// Every accepted command has its answer before the workflow ends.
	if err := handlersFinished(ctx); err != nil {
		return w.t, err
	}
	return w.t, nil
}

// resolve turns a command or a verb into the thread command and the verb
// it raises in phase p.
func resolve(p thread.Phase, verb string) (string, thread.Verb, bool) {
	v := strings.TrimSpace(verb)
	for _, c := range thread.Commands {
		if c.Name == v {
			mv, ok := c.Phases[p]
			return c.Name, mv, ok
		}
	}
	for _, c := range thread.Commands {
		if mv, ok := c.Phases[p]; ok && string(mv) == v {
			return c.Name, mv, true
		}
	}
	return "", "", false
}

// allowedNow are the commands a person can give in p: those of
// thread.Commands that raise a verb of the table there.
func allowedNow(p thread.Phase) []string {
	out := []string{}
	for _, c := range thread.Commands {
		if _, ok := c.Phases[p]; ok {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

// humanVerbs are the table's verbs with a human actor in p.
func humanVerbs(p thread.Phase) []string {
	out := []string{}
	for _, v := range thread.AllowedVerbs(p) {
		if r, ok := thread.Lookup(p, thread.Verb(v)); ok && r.With.Actor == thread.ActorHuman {
			out = append(out, v)
		}
	}
	return out
}

// validate refuses, before it is accepted, a command the thread's phase
// does not allow: the table decides (thread.Lookup through thread.Next,
// with a human source), and the error names the commands the phase
// allows. While the host works on a command, only pause (in Running) and
// abandon are taken: they stop that work first.
func (w *threadRun) validate(cmd ThreadCommand) error {
	p := w.t.Phase.Type
	name, mv, ok := resolve(p, cmd.Verb)
	if !ok {
		return w.refusal(cmd.Verb)
	}
	if w.working != "" && name != "pause" && name != "abandon" {
		return fmt.Errorf("thread %s is %s and ralph is working on it (%s) on host %s: wait until it waits for you, or pause or abandon it",
			w.t.ID, p, w.working, w.Host)
	}
	if _, _, err := thread.Next(w.t, thread.Event{Verb: mv, Source: thread.SourceHuman}); err != nil {
		var te *thread.TransitionError
		if errors.As(err, &te) {
			return w.refusal(cmd.Verb)
		}
		return err
	}
	switch name {
	case "request-changes":
		if strings.TrimSpace(cmd.Text) == "" {
			return errors.New("say what to fix: ralph thread request-changes ID \"the total is off by one\"")
		}
	case "resume":
		if len(cmd.Agents) > 0 || cmd.MaxIterations > 0 || len(cmd.Verifiers) > 0 {
			return errors.New("resume keeps the configuration: use `ralph thread reconfigure` to change it")
		}
	}
	return nil
}

func (w *threadRun) refusal(verb string) error {
	p := w.t.Phase.Type
	if p.Terminal() {
		return fmt.Errorf("thread %s is %s, which is final: %q does not apply", w.t.ID, p, verb)
	}
	return fmt.Errorf("thread %s is %s, which does not accept %q; allowed in %s: %s",
		w.t.ID, p, verb, p, strings.Join(allowedNow(p), ", "))
}

// checkpoint is the Update's handler: it stops the host's work when the
// command is pause or abandon, waits for the thread to be idle, checks the
// command again against the phase it finds (the work may have moved the
// thread meanwhile) and runs it on the host. The Update completes with
// the status once the thread waits for a person again.
func (w *threadRun) checkpoint(ctx workflow.Context, cmd ThreadCommand) (ThreadStatus, error) {
	name, _, _ := resolve(w.t.Phase.Type, cmd.Verb)
	if w.working != "" && w.cancel != nil {
		w.cancel()
	}
	if err := workflow.Await(ctx, func() bool { return w.working == "" }); err != nil {
		return w.status(0), err
	}
	if name == "pause" && w.t.Phase.Type == thread.PhasePaused {
		// Stopping the loop paused the thread: its runner took the
		// interrupt as Ctrl+C makes it.
		w.note("pause: the loop was stopped on " + w.Host)
		return w.status(historyLength(ctx)), nil
	}
	if err := w.validate(cmd); err != nil {
		return w.status(0), err
	}
	w.run(ctx, cmd)
	return w.status(historyLength(ctx)), nil
}

// run runs cmd on the thread's host and takes the thread as it settled.
func (w *threadRun) run(ctx workflow.Context, cmd ThreadCommand) {
	from := w.t.Phase.Type
	name, mv, _ := resolve(from, cmd.Verb)
	w.seq++
	w.working = name
	cctx, cancel := workflow.WithCancel(ctx)
	w.cancel = cancel
	ao := w.runOptions(ErrTypeUsage)
	// A pause or abandon waits for the host to stop the work and save
	// the thread, so that the next command finds it settled.
	ao.WaitForCancellation = true
	in := ThreadCommandInput{ThreadID: w.t.ID, Name: name, Verb: mv, From: from, Seq: w.seq, Command: cmd}
	var step ThreadStep
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(cctx, ao), ActivityThreadCommand, in).Get(ctx, &step)
	switch {
	case err == nil:
		w.t, w.lastErr = step.Thread, step.Error
	default:
		// Stopped (pause, abandon) or failed for good: the host's record
		// is the truth.
		if !temporal.IsCanceledError(err) {
			w.lastErr = errText(err)
		} else {
			w.lastErr = ""
		}
		lo := ao
		lo.StartToCloseTimeout, lo.HeartbeatTimeout, lo.WaitForCancellation = 2*time.Minute, 0, false
		var t thread.Thread
		if lerr := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, lo), ActivityThreadLoad, w.t.ID).Get(ctx, &t); lerr == nil {
			w.t = t
		}
	}
	line := fmt.Sprintf("%s by %s in %s → %s", name, orPerson(cmd.By), from, w.t.Phase.Type)
	if w.lastErr != "" {
		line += ": " + w.lastErr
	}
	w.note(line)
	w.working, w.cancel = "", nil
}

func (w *threadRun) status(history int) ThreadStatus {
	p := w.t.Phase.Type
	st := ThreadStatus{ThreadID: w.t.ID, Host: w.Host, Title: w.t.Title, Phase: p, Iteration: w.t.Phase.Iteration, Mode: w.t.Mode,
		Working: w.working, LastError: w.lastErr, Commands: slices.Clone(w.log), HistoryLength: history, Thread: w.t,
		Allowed: []string{}, Verbs: []string{}}
	if w.working == "" {
		st.Allowed, st.Verbs = allowedNow(p), humanVerbs(p)
		for _, r := range thread.Table {
			if r.From == p && r.With.Checkpoint != thread.CheckpointNone && r.On != thread.VerbAbandon {
				st.WaitsFor = string(r.With.Checkpoint)
				break
			}
		}
	} else {
		if p == thread.PhaseRunning {
			st.Allowed = []string{"abandon", "pause"}
		} else {
			st.Allowed = []string{"abandon"}
		}
	}
	return st
}

// SendCheckpoint sends a person's command to thread id as a checkpoint
// Update and returns once the workflow accepted it (the work it leads to
// goes on; QueryThread follows it). A command the thread's phase does
// not allow is refused by the validator: the error is a *Refused with its
// reason, and nothing changed.
func SendCheckpoint(ctx context.Context, c client.Client, id string, cmd ThreadCommand) (client.WorkflowUpdateHandle, error) {
	// An accepted command completes only when it settled, which this
	// does not wait for.
	var st ThreadStatus
	h, waited, err := sendUpdate(ctx, c, ThreadWorkflowID(id), UpdateCheckpoint, cmd, ErrNoThreadWorkflow, 300*time.Millisecond, &st)
	if err != nil && !waited {
		return nil, err
	}
	return h, nil
}
