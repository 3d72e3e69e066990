package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Steerer is the one control.Steerer: every front end's commands are
// applied here. A command for a run that is going is left in the control
// folder for the run to take at its next step; one that needs no run is
// done now. Either way the journal records it with who gave it.
type Steerer struct {
	app *App
	ws  *workspace.Workspace
	// Remote gives a command to the build on Temporal, whose validator
	// accepts or refuses it.
	Remote func(context.Context, control.Command) (control.Result, error)
	// Executable is the running ralph binary: a thread's checkpoint is
	// taken by it, in a process of its own.
	Executable func() (string, error)
	// Warn is told what failed beside a command that was applied.
	Warn io.Writer
}

// Steerer applies control commands to the workspace's runs.
func (a *App) Steerer() *Steerer { return &Steerer{app: a, ws: a.WS} }

func (s *Steerer) folder() control.Folder { return control.Folder{Dir: s.ws.Path("control")} }

// Do implements control.Steerer.
func (s *Steerer) Do(ctx context.Context, cmd control.Command) (control.Result, error) {
	now := s.app.now()
	if cmd.V == 0 {
		cmd.V = control.SchemaVersion
	}
	if cmd.ID == "" {
		cmd.ID = control.NewID(now)
	}
	if cmd.Time.IsZero() {
		cmd.Time = now.UTC()
	}
	cmd.Text = strings.TrimSpace(cmd.Text)
	if err := cmd.Validate(); err != nil {
		return control.Result{}, err
	}
	// A person's block is kept from the moment it is given until `ralph
	// unblock`, whichever run or engine takes it, and even when none does.
	held, err := s.hold(cmd)
	if err != nil {
		return control.Result{}, err
	}
	if onTemporal, _ := s.app.OnTemporal(""); onTemporal && cmd.Kind != control.Answer && cmd.Kind != control.Checkpoint {
		// The build runs as a workflow: the command is an Update that its
		// validator accepts or refuses, from any machine.
		res, err := s.Remote(ctx, cmd)
		return s.settle(cmd, held, res, err)
	}
	res, err := s.apply(ctx, cmd)
	if res, err = s.settle(cmd, held, res, err); err != nil {
		return control.Result{}, err
	}
	res.ID = cmd.ID
	if jerr := s.journal(cmd, res); jerr != nil && err == nil {
		return res, jerr
	}
	return res, nil
}

// hold records a person's block before it is applied, and says whether
// a block of the task was in force before (an unblock's) or was recorded
// now (a block's), for settle.
func (s *Steerer) hold(cmd control.Command) (bool, error) {
	f := s.folder()
	switch cmd.Kind {
	case control.Block:
		if f.Held(cmd.Task) != nil {
			return false, nil
		}
		if err := s.ws.EnsureIgnoreFile(); err != nil {
			return false, err
		}
		return true, f.Hold(cmd)
	case control.Unblock:
		return f.Held(cmd.Task) != nil, nil
	}
	return false, nil
}

// settle finishes what hold began once cmd was applied or refused. A
// refused block holds nothing. An unblock applied now releases the
// person's block; one queued leaves that to the run that takes it, which
// may still refuse it. An unblock refused because ralph's run records
// had no blocker (another engine's run held it) still releases the
// person's block, which is what it was given for.
func (s *Steerer) settle(cmd control.Command, held bool, res control.Result, err error) (control.Result, error) {
	f := s.folder()
	switch cmd.Kind {
	case control.Block:
		if err != nil && held {
			f.Release(cmd.Task)
		}
	case control.Unblock:
		var ie *control.InputError
		switch {
		case err == nil && res.Status == control.Applied:
			if _, rerr := f.Release(cmd.Task); rerr != nil {
				return res, rerr
			}
		case err != nil && held && !errors.As(err, &ie):
			if _, rerr := f.Release(cmd.Task); rerr != nil {
				return res, rerr
			}
			s.ws.LogEvent(s.app.now(), fmt.Sprintf("task %s unblocked by hand", cmd.Task))
			return control.Result{Status: control.Applied, Message: fmt.Sprintf("%s unblocked: the next `ralph build` can pick it up", cmd.Task)}, nil
		}
	}
	return res, err
}

// apply does cmd. A command refused changes nothing: the control
// folder and ignore file are written only for one that is taken.
func (s *Steerer) apply(ctx context.Context, cmd control.Command) (control.Result, error) {
	f := s.folder()
	switch cmd.Kind {
	case control.Hint, control.Pause, control.Stop, control.Skip, control.Block, control.Unblock, control.Approve:
		if cmd.Kind != control.Hint && len(f.Attached()) == 0 {
			break // refused below, or applied by a function that knows its files
		}
		// Control records are machine state: kept out of git like the rest.
		if err := s.ws.EnsureIgnoreFile(); err != nil {
			return control.Result{}, err
		}
	}
	queued := func(r control.Run, what string) control.Result {
		return control.Result{Status: control.Queued, Message: fmt.Sprintf("%s: %s takes it at its next step", what, runNames([]control.Run{r}))}
	}
	switch cmd.Kind {
	case control.Hint:
		line := fmt.Sprintf("- (%s, %s) %s\n", s.app.now().Format("2006-01-02 15:04"), cmd.By, strings.Join(strings.Fields(cmd.Text), " "))
		// The build refuses hints beyond the cap: refuse the one that
		// would take them past it now, before anything is written.
		var queued int64
		if info, err := os.Stat(s.ws.Path("context.md")); err == nil {
			queued = info.Size()
		}
		if err := inputlimit.CheckContextSize(s.ws.Rel(s.ws.Path("context.md"))+" with this hint", queued+int64(len(line))); err != nil {
			return control.Result{}, err
		}
		if err := store.AppendFile(s.ws.Path("context.md"), []byte(line)); err != nil {
			return control.Result{}, err
		}
		n, _ := CountHints(s.ws)
		return control.Result{Status: control.Applied, Message: fmt.Sprintf("queued for the next iteration's prompt (%s waiting)", words.Count(n, "hint", "hints"))}, nil
	case control.Pause:
		runs := f.Attached()
		if len(runs) == 0 {
			return control.Result{}, errors.New("no run in this workspace is going, so there is nothing to pause: `ralph status` shows the last one")
		}
		if p := f.Paused(); p != nil {
			return control.Result{Status: control.Applied, Message: fmt.Sprintf("already paused by %s since %s: `ralph resume` goes on", p.By, p.Time.Local().Format("15:04:05"))}, nil
		}
		if err := f.SetPause(cmd); err != nil {
			return control.Result{}, err
		}
		return control.Result{Status: control.Queued, Message: fmt.Sprintf("%s after the current step: `ralph resume` goes on", pausing(runs))}, nil
	case control.Resume:
		if f.Paused() == nil {
			return control.Result{}, errors.New("nothing is paused: `ralph pause` pauses a run that is going")
		}
		if err := f.ClearPause(); err != nil {
			return control.Result{}, err
		}
		return control.Result{Status: control.Applied, Message: "resumed: the run goes on with its next step"}, nil
	case control.Stop:
		runs := f.Attached()
		if len(runs) == 0 {
			return control.Result{}, errors.New("no run in this workspace is going, so there is nothing to stop")
		}
		if err := f.RequestStop(cmd); err != nil {
			return control.Result{}, err
		}
		// A pause would keep the run from noticing: a stop ends it.
		f.ClearPause()
		return control.Result{Status: control.Queued, Message: fmt.Sprintf("stopping %s as Ctrl+C would: the iteration in progress is recorded as interrupted, and `ralph build` resumes", runNames(runs))}, nil
	case control.Skip, control.Block, control.Unblock, control.Approve:
		if r, ok := f.Taker(cmd.Kind); ok {
			if err := f.Enqueue(cmd); err != nil {
				return control.Result{}, err
			}
			return queued(r, cmd.Describe()), nil
		}
		var msg string
		var err error
		switch cmd.Kind {
		case control.Skip:
			err = fmt.Errorf("skip sets %s aside in a build that is going, and none is: `ralph block %s` keeps it out of the next build until `ralph unblock %s`", cmd.Task, cmd.Task, cmd.Task)
		case control.Block:
			msg, err = s.app.blockTask(cmd.Task, cmd.Text)
		case control.Approve:
			msg, err = s.app.approveTask(ctx, cmd.Task, cmd.By)
		default:
			msg, err = s.app.unblockTask(ctx, cmd.Task, s.Warn)
		}
		if err != nil {
			return control.Result{}, err
		}
		return control.Result{Status: control.Applied, Message: msg}, nil
	case control.Answer:
		dir, err := SessionDir(s.ws, cmd.Session)
		if err != nil {
			return control.Result{}, err
		}
		q, err := session.AnswerQuestion(dir, cmd.Question, cmd.Text, s.app.now())
		if err != nil {
			return control.Result{}, err
		}
		qs, _ := session.LoadQuestions(dir)
		msg := fmt.Sprintf("recorded the answer to %s; no questions left: continue with ralph run --resume", q.ID)
		if open := session.OpenQuestions(qs); len(open) > 0 {
			msg = fmt.Sprintf("recorded the answer to %s; %s still open: ralph questions", q.ID, words.Count(len(open), "question", "questions"))
		}
		return control.Result{Status: control.Applied, Message: msg}, nil
	case control.Checkpoint:
		return s.checkpoint(ctx, cmd)
	}
	return control.Result{}, fmt.Errorf("no way to apply %s", cmd.Kind)
}

// checkpointWait is how long a checkpoint given from a front end is
// waited for before the answer says it goes on in the background.
var checkpointWait = 20 * time.Second

// checkpoint takes a thread's human checkpoint by running `ralph thread
// STEP` in a process of its own: the thread command is the one way a
// thread moves, and a step such as quick mode's finalize goes on to run
// the loop, which must outlive the page or viewer that asked for it.
func (s *Steerer) checkpoint(ctx context.Context, cmd control.Command) (control.Result, error) {
	self, err := s.Executable()
	if err != nil {
		return control.Result{}, err
	}
	args := []string{"thread", cmd.Step}
	if cmd.Thread != "" {
		args = append(args, cmd.Thread)
	}
	if cmd.Step == "request-changes" {
		args = append(args, cmd.Text)
	}
	logPath := filepath.Join(s.ws.Path("control"), "checkpoints", cmd.ID+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return control.Result{}, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return control.Result{}, err
	}
	defer logf.Close()
	c := exec.Command(self, args...)
	c.Dir = s.ws.Root
	c.Env = append(os.Environ(), "RALPH_CONTROL_BY="+cmd.By, "NO_COLOR=1")
	var out bytes.Buffer
	c.Stdout = &teeWriter{a: logf, b: &out}
	c.Stderr = c.Stdout
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // the viewer's Ctrl+C is not the thread's
	if err := c.Start(); err != nil {
		return control.Result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		text := strings.TrimSpace(out.String())
		if err != nil {
			if text == "" {
				text = err.Error()
			}
			return control.Result{}, fmt.Errorf("ralph %s: %s", strings.Join(args, " "), text)
		}
		return control.Result{Status: control.Applied, Message: text}, nil
	case <-time.After(checkpointWait):
	case <-ctx.Done():
	}
	return control.Result{Status: control.Queued, Message: fmt.Sprintf("ralph %s goes on in the background (pid %d); its output is in %s", strings.Join(args[:2], " "), c.Process.Pid, s.ws.Rel(logPath))}, nil
}

// teeWriter writes to both a and b; a pipe's writer copies from one
// goroutine, so no lock is needed.
type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.a.Write(p)
	return t.b.Write(p)
}

// journal records cmd and what became of it.
func (s *Steerer) journal(cmd control.Command, res control.Result) error {
	if err := s.ws.EnsureIgnoreFile(); err != nil {
		return err
	}
	path := loop.EventsPath(s.ws)
	seq, _ := report.LastSeq(path)
	j := &report.Journal{Path: path}
	data := report.Control{ID: cmd.ID, Command: string(cmd.Kind), By: cmd.By, Status: res.Status,
		Text: cmd.Text, Session: cmd.Session, Question: cmd.Question, Thread: cmd.Thread, Step: cmd.Step}
	if cmd.Kind == control.Hint {
		data.ContextAdded = cmd.Text
	}
	report.NewEmitter("control", "", seq, s.app.now, j).Emit(report.Event{Kind: report.KindControl, Task: cmd.Task, Data: data,
		Text: fmt.Sprintf("control: %s by %s (%s)\n", cmd.Describe(), cmd.By, res.Status)})
	return j.Err()
}

func pausing(runs []control.Run) string { return "pausing " + runNames(runs) }

func runNames(runs []control.Run) string {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = fmt.Sprintf("the %s (run %s)", r.Machine, r.Run)
		if r.Run == "" {
			names[i] = fmt.Sprintf("the %s (pid %d)", r.Machine, r.PID)
		}
	}
	return strings.Join(names, " and ")
}
