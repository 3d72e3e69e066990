package loop

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// The steer tests give a build control commands through a real control
// folder, as `ralph pause` or `ralph block` from another terminal would,
// and watch what the run does with them.

var buildTakes = []control.Kind{control.Skip, control.Block, control.Unblock}

// attach makes the rig's run one that takes commands from a control
// folder of its own, and returns the folder.
func (r *rig) attach() control.Folder {
	r.t.Helper()
	f := control.Folder{Dir: r.t.TempDir()}
	att, err := f.Attach(control.Run{Run: "build", Machine: "build", Takes: buildTakes})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(att.Detach)
	r.opts.Control = att
	return f
}

// give queues a command for the run, given now by web.
func give(t *testing.T, f control.Folder, kind control.Kind, task string) control.Command {
	t.Helper()
	c := control.New(kind, control.ByWeb, time.Now())
	c.Task = task
	if err := f.Enqueue(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// hookAgent runs before ahead of each agent attempt of the rig's agent.
type hookAgent struct {
	inner  AgentPort
	before func(n int)
}

func (h hookAgent) RunAgent(ctx context.Context, spec agent.Spec, n int, prompt string) (runkit.Result, error) {
	h.before(n)
	return h.inner.RunAgent(ctx, spec, n, prompt)
}

// controlEvents returns the control events the run journaled, as
// "command task status".
func controlEvents(r *rig) []string {
	var out []string
	for _, ev := range r.events.of(report.KindControl) {
		c := ev.Data.(report.Control)
		out = append(out, c.Command+" "+ev.Task+" "+c.Status)
	}
	return out
}

func TestSteerBlockTakenAtSelectionLeavesTheTask(t *testing.T) {
	r := newRig(t, twoStories, step{write: "b.txt", tick: "US-002"})
	f := r.attach()
	give(t, f, control.Block, "US-001")
	rep, err := r.build()
	if !errors.Is(err, ErrNeedsHuman) || rep.Outcome != OutcomeNeedsHuman || rep.StoriesDone != 1 {
		t.Fatalf("Build = %+v, %v; want US-002 done and the run ending as needing a person", rep, err)
	}
	if got := controlEvents(r); len(got) != 1 || got[0] != "block US-001 taken" {
		t.Errorf("control events = %q; want the block taken", got)
	}
	if ev := r.events.of(report.KindControl)[0]; ev.Text != "  ⇢ block US-001 by web: taken\n" || ev.Data.(report.Control).By != "web" {
		t.Errorf("control event = %+v; want the terminal line naming who gave it", ev)
	}
	if len(r.agent.prompts) != 1 || !strings.Contains(r.agent.prompts[0], "US-002") {
		t.Errorf("the agent ran %d times; want once, on US-002, never on the blocked US-001", len(r.agent.prompts))
	}
	st := r.state()
	bl := st.Tasks["US-001"].Blocker
	if bl == nil || bl.Type != "permanent" || !bl.RequiresHuman || bl.Reason != "blocked by web" {
		t.Errorf("US-001 blocker = %+v; want a permanent blocker that requires a person, by web", bl)
	}
	// A markdown PRD cannot say "blocked": ralph's state holds it, and
	// the story stays unchecked.
	if prd, _ := os.ReadFile(r.opts.PRDPath); !strings.Contains(string(prd), "### [ ] US-001") {
		t.Errorf("US-001 is no longer open in the PRD:\n%s", prd)
	}
	if q, _ := f.Queued(); len(q) != 0 {
		t.Errorf("the queue still holds %d commands; a taken command leaves it", len(q))
	}

	// unblock, queued for the next build, which takes it at its start
	// and does the task.
	give(t, f, control.Unblock, "US-001")
	r.agent.steps = append(r.agent.steps, step{write: "a.txt", tick: "US-001"})
	rep, err = r.resume()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("second Build = %+v, %v; want complete after the unblock", rep, err)
	}
	if got := controlEvents(r); len(got) != 2 || got[1] != "unblock US-001 taken" {
		t.Errorf("control events = %q; want the unblock taken", got)
	}
	if tr := r.state().Tasks["US-001"]; tr.Blocker != nil || tr.Successes != 1 {
		t.Errorf("US-001 = %+v; want it unblocked and done", tr)
	}
}

func TestSteerSkipPutsTheTaskLast(t *testing.T) {
	r := newRig(t, twoStories, step{write: "b.txt", tick: "US-002"}, step{write: "a.txt", tick: "US-001"})
	f := r.attach()
	give(t, f, control.Skip, "US-001")
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete || rep.StoriesDone != 2 {
		t.Fatalf("Build = %+v, %v; want both stories done, the skipped one last", rep, err)
	}
	if len(r.agent.prompts) != 2 || !strings.Contains(r.agent.prompts[0], "US-002: Second") || !strings.Contains(r.agent.prompts[1], "US-001: First") {
		t.Errorf("the agent worked %d prompts; want US-002 first, then the skipped US-001", len(r.agent.prompts))
	}
	if got := controlEvents(r); len(got) != 1 || got[0] != "skip US-001 taken" {
		t.Errorf("control events = %q; want the skip taken", got)
	}
	// A skip is a person's, not a failure: the line that takes the task
	// up again says so (it read "blocked by a transient failure").
	if bl := r.events.of(report.KindBlocker); !containsText(bl, "  ↻ only US-001 is left, skipped by web: taking it up again now\n") {
		t.Errorf("blocker lines = %+v; want US-001 taken up again as skipped by web", bl)
	}
}

func TestSteerUnknownTaskIsRefusedAndTheRunGoesOn(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	f := r.attach()
	give(t, f, control.Block, "US-999")
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want the run complete despite a command for no task", rep, err)
	}
	evs := r.events.of(report.KindControl)
	if len(evs) != 1 || evs[0].Data.(report.Control).Status != "refused" || !strings.Contains(evs[0].Data.(report.Control).Why, "no task US-999") {
		t.Fatalf("control events = %+v; want the block refused, saying there is no such task", evs)
	}
}

func TestSteerPauseHoldsTheNextStepUntilResume(t *testing.T) {
	r := newRig(t, twoStories, step{write: "a.txt", tick: "US-001"}, step{write: "b.txt", tick: "US-002"})
	f := r.attach()
	paused := make(chan struct{})
	r.opts.Agents = hookAgent{inner: r.agent, before: func(n int) {
		switch n {
		case 1:
			// A pause given while the first agent works: the run
			// finishes that step, then waits.
			if err := f.SetPause(control.New(control.Pause, control.ByCLI, time.Now())); err != nil {
				t.Error(err)
			}
			close(paused)
		case 2:
			// The verdict on the hold: the next agent starts only
			// once the pause is gone, however the goroutines ran.
			if p := f.Paused(); p != nil {
				t.Errorf("the second agent started while the pause was in force")
			}
		}
	}}
	done := make(chan error, 1)
	go func() { _, err := Build(r.ctx, r.ws, r.opts); done <- err }()
	wait.Recv(t, paused, wait.Long, "the first agent to start")
	wait.Until(t, wait.Long, func() bool { return len(r.events.of(report.KindWait)) > 0 }, "the run to say it is paused")
	if w := r.events.of(report.KindWait)[0]; !strings.HasPrefix(w.Text, "⏸ paused by cli at ") {
		t.Errorf("pause line = %q", w.Text)
	}
	// Holding is the behaviour under test: the pause stays in force over
	// several of the run's looks at the folder (every 200 ms), which gives
	// a run that ignores it the time to start the next agent and be caught
	// by the hook above. Nothing waits on this sleep: a correct run passes
	// however long or short it turns out under load.
	time.Sleep(600 * time.Millisecond)
	if n := len(r.events.banners()); n != 1 {
		t.Fatalf("%d iterations started while paused; want only the first, which was going when the pause came", n)
	}
	select {
	case err := <-done:
		t.Fatalf("the run ended while paused: %v", err)
	default:
	}
	if err := f.ClearPause(); err != nil {
		t.Fatal(err)
	}
	if err := wait.Recv(t, done, wait.Long, "the run to go on after resume and end"); err != nil {
		t.Fatalf("Build after resume: %v", err)
	}
	if n := len(r.events.banners()); n != 2 {
		t.Errorf("%d iterations; want 2 once resumed", n)
	}
	if notes := r.events.of(report.KindNote); !containsText(notes, "▶ resumed\n") {
		t.Errorf("no resumed line among the notes")
	}
}

func TestSteerStopWhilePausedEndsAsInterrupted(t *testing.T) {
	r := newRig(t, oneStory)
	f := r.attach()
	if err := f.SetPause(control.New(control.Pause, control.ByCLI, time.Now())); err != nil {
		t.Fatal(err)
	}
	stop := control.New(control.Stop, control.ByMCP, time.Now())
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	go func() {
		// A stop given once the run holds on the pause, not before it.
		if !wait.Within(wait.Long, func() bool { return len(r.events.of(report.KindWait)) > 0 }) {
			t.Error("the run never said it was paused")
		}
		cancel(&control.StopError{Cmd: stop})
	}()
	rep, err := Build(ctx, r.ws, r.opts)
	if !errors.Is(err, ErrInterrupted) || rep.Outcome != OutcomeInterrupted {
		t.Fatalf("Build = %+v, %v; want interrupted, as Ctrl+C", rep, err)
	}
	if !strings.Contains(rep.Reason, "stopped by mcp") {
		t.Errorf("reason %q does not say who stopped the run", rep.Reason)
	}
	if st := r.state(); st.Finished {
		t.Errorf("the stopped run is finished; want it resumable")
	}
	// The next build resumes and does the story.
	f.ClearPause()
	r.agent.steps = append(r.agent.steps, step{write: "a.txt", tick: "US-001"})
	rep, err = r.resume()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("resumed Build = %+v, %v; want complete", rep, err)
	}
}

func TestSteerWorkerTakesNoQueuedCommands(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	f := r.attach()
	r.opts.ControlPauseOnly = true
	give(t, f, control.Block, "US-001")
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want the story done: a worker leaves the queue to its scheduler", rep, err)
	}
	if q, _ := f.Queued(); len(q) != 1 {
		t.Errorf("queue holds %d commands; want the block left for the scheduler", len(q))
	}
}

func containsText(evs []report.Event, text string) bool {
	for _, ev := range evs {
		if ev.Text == text {
			return true
		}
	}
	return false
}

// A person's block outlives the run's records: with state.json gone (a
// parallel or Temporal run in between, or a fresh start) the next build
// still leaves the task, until the block is released.
func TestSteerBlockOutlivesTheRunsState(t *testing.T) {
	r := newRig(t, twoStories, step{write: "b.txt", tick: "US-002"})
	f := r.attach()
	give(t, f, control.Block, "US-001")
	if _, err := r.build(); !errors.Is(err, ErrNeedsHuman) {
		t.Fatalf("first Build: %v; want it needing a person", err)
	}
	holds := control.Folder{Dir: r.ws.Path("control")}
	if h := holds.Held("US-001"); h == nil || h.By != control.ByWeb {
		t.Fatalf("held = %+v; want the web's block kept in the workspace", h)
	}
	if err := os.Remove(HomeOf(r.ws).StatePath()); err != nil {
		t.Fatal(err)
	}
	rep, err := r.resume()
	if !errors.Is(err, ErrNeedsHuman) || len(r.agent.prompts) != 1 {
		t.Fatalf("second Build = %+v, %v, %d agent runs; want US-001 left for a person", rep, err, len(r.agent.prompts))
	}
	if bl := r.state().Tasks["US-001"].Blocker; bl == nil || !bl.ByPerson || bl.Reason != "blocked by web" {
		t.Fatalf("US-001 blocker = %+v; want a person's block", bl)
	}
	// Released (ralph unblock while another engine's run went): the next
	// build does the task.
	if ok, _ := holds.Release("US-001"); !ok {
		t.Fatal("nothing to release")
	}
	r.agent.steps = append(r.agent.steps, step{write: "a.txt", tick: "US-001"})
	if rep, err := r.resume(); err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("third Build = %+v, %v; want complete once released", rep, err)
	}
}
