package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
)

// The steer step runs between two steps of the machine: it is where a
// run takes the control commands a person gave from another terminal, the
// TUI, the web page or an MCP client (package control).

// steerKinds are the queued commands a build's loop applies itself.
var steerKinds = []control.Kind{control.Skip, control.Block, control.Unblock, control.Approve}

// steer holds the run while a pause is in force and, when the machine is
// about to select a task, takes the queued skip, block and unblock
// commands. It returns ErrInterrupted when ctx ends during a pause (a stop
// or Ctrl+C), which ends the run as interrupted.
func (b *builder) steer(ctx context.Context) error {
	att := b.opts.Control
	if att == nil {
		return nil
	}
	var saveErr error
	var pausedAt time.Time
	err := att.Boundary(ctx, func(p control.Command) {
		pausedAt = b.opts.now()
		// A person may change the tree while the run is paused.
		b.trees.invalidate()
		// A transition still in memory reaches the disk and the journal
		// before the pause, which may last hours.
		saveErr = b.flush()
		b.say(report.KindWait, fmt.Sprintf("⏸ paused by %s at %s: `ralph resume` goes on\n", p.By, p.Time.Local().Format("15:04:05")),
			report.Wait{Paused: true, By: p.By, ID: p.ID, State: string(b.st.Machine.State)})
	}, func() {
		b.say(report.KindNote, "", report.Note{Paused: report.Ptr(false)})
	})
	if saveErr != nil {
		return saveErr
	}
	if !pausedAt.IsZero() {
		// A pause is time a person held the run, not time in the state
		// it was held in (TEST, between the agent and the checks).
		b.bookWait(WaitPause, pausedAt)
	}
	if err != nil {
		return ErrInterrupted
	}
	// Only between tasks: a task in the middle of its attempt is never
	// set aside under the agent's feet.
	if b.st.Machine.State != StateStorySelect || b.opts.ControlPauseOnly {
		return nil
	}
	var kinds []control.Kind
	for _, k := range att.Run().Takes {
		if slices.Contains(steerKinds, k) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	cmds := att.Take(kinds...)
	if len(cmds) == 0 {
		return nil
	}
	if err := b.reloadBoard(); err != nil {
		return err
	}
	for _, c := range cmds {
		task, why := b.applyControl(c)
		b.emit(ControlEvent(c, task, "", why))
	}
	if err := b.saveState(); err != nil {
		return err
	}
	return b.reloadBoard()
}

// applyControl applies one skip, block or unblock to the run's state and
// the task file, as the loop's own blocker code would. It returns the task
// id it applied to and, when it refused the command, why.
func (b *builder) applyControl(c control.Command) (string, string) {
	id := strings.TrimSpace(c.Task)
	storyID, _ := tasks.ParseTaskID(id)
	story, ok := b.board.Find(storyID)
	holds := control.Folder{Dir: b.ws.Path("control")}
	if !ok {
		if c.Kind == control.Block {
			holds.Release(id) // a refused block holds nothing
		}
		return id, fmt.Sprintf("no task %s in %s", id, b.ws.Rel(b.src.Path()))
	}
	now := b.opts.now()
	switch c.Kind {
	case control.Block, control.Skip:
		if story.Done || story.Status == tasks.StatusComplete {
			if c.Kind == control.Block {
				holds.Release(id)
			}
			return id, fmt.Sprintf("%s is done already", id)
		}
		t := b.st.task(id)
		if h := holds.Held(id); c.Kind == control.Block && t.Blocker != nil && t.Blocker.ByPerson && !t.Blocker.InFile && h != nil && h.ID == c.ID {
			// This block's own hold, laid over the board when the run
			// read it: taken now, in the task file too.
			t.Blocker = nil
		}
		if t.Blocker != nil && (c.Kind == control.Skip || t.Blocker.Type == "permanent") {
			if c.Kind == control.Block && !t.Blocker.ByPerson {
				// Now a person holds it: it stays blocked until they
				// unblock it, not until the file says otherwise.
				t.Blocker.ByPerson = true
			}
			return id, fmt.Sprintf("%s is blocked already (%s)", id, t.Blocker.Reason)
		}
		bl := &BlockerRecord{Type: "permanent", RequiresHuman: true, Iteration: b.st.Machine.Iteration,
			Reason: "blocked by " + c.By, ByPerson: c.Kind == control.Block}
		if c.Kind == control.Skip {
			// A transient blocker: the loop's revival retries it when
			// nothing else is left, which is what skip promises.
			bl.Type, bl.RequiresHuman, bl.Reason, bl.SkippedBy = "transient", false, "skipped by "+c.By, c.By
			t.AutoRetried = false
		}
		if c.Text != "" {
			bl.Reason += ": " + c.Text
		}
		if c.Kind == control.Block && holds.Held(id) == nil {
			// Kept beyond this run, whoever queued it (the CLI holds it
			// when it gives it; another front end may not).
			if err := holds.Hold(c); err != nil {
				return id, fmt.Sprintf("could not record the block of %s: %v", id, err)
			}
		}
		bl.AttemptedFixes = []string{fmt.Sprintf("iteration %d: %s", b.st.Machine.Iteration, bl.Reason)}
		if err := b.src.SetState(storyID, tasks.StatusBlocked, t.RetryCount, &tasks.Blocker{
			Reason: bl.Reason, Type: tasks.BlockerType(bl.Type), RequiresHuman: bl.RequiresHuman, AttemptedFixes: bl.AttemptedFixes,
		}, now); err != nil {
			return id, fmt.Sprintf("could not mark %s in %s: %v", id, b.ws.Rel(b.src.Path()), err)
		}
		if board, err := b.src.Load(); err == nil {
			if s, ok := board.Find(storyID); ok && s.Status == tasks.StatusBlocked {
				bl.InFile = true
			}
		}
		t.Blocker = bl
		b.st.Metrics.Blocked++
		delete(b.st.Feedback, id)
		b.logError("task %s %s (%s): %s", id, map[control.Kind]string{control.Block: "blocked", control.Skip: "skipped"}[c.Kind], bl.Type, bl.Reason)
		b.appendProgress(fmt.Sprintf("%s BLOCKED (%s, requires_human=%v): %s", id, bl.Type, bl.RequiresHuman, bl.Reason))
	case control.Unblock:
		tid, rec := b.st.BlockedTask(id)
		released, _ := holds.Release(id)
		if (rec == nil || rec.Blocker == nil) && story.Status != tasks.StatusBlocked && !released {
			return tid, fmt.Sprintf("%s is not blocked", tid)
		}
		if err := b.src.SetState(storyID, tasks.StatusNotStarted, 0, nil, now); err != nil {
			return tid, fmt.Sprintf("could not clear %s in %s: %v", tid, b.ws.Rel(b.src.Path()), err)
		}
		if rec != nil {
			rec.Blocker, rec.RetryCount, rec.AutoRetried = nil, 0, false
		}
		delete(b.st.Feedback, tid)
		// A person decided about the blocker: it stays in memory,
		// resolved, and leaves the known issues of the next prompts.
		if err := b.mem.Resolve(context.Background(), id, now); err != nil {
			b.logError("could not mark %s's blockers resolved in memory: %v", id, err)
		}
		id = tid
	case control.Approve:
		if _, err := approveWork(context.Background(), b.ws, b.ws.Repo, b.src, b.st, id, c.By, now); err != nil {
			return id, err.Error()
		}
		b.sayf(report.KindCommit, "  ✓ %s approved by %s: its reviewed test change is committed\n", id, c.By)
		if b.st.Baseline != nil {
			// The tree moved under the run: the next task's start is
			// read again, from git, rather than from the last commit.
			b.trees.invalidate()
		}
	default:
		return id, fmt.Sprintf("a build does not take %s", c.Kind)
	}
	b.event("task %s: %s by %s", id, c.Kind, c.By)
	return id, ""
}

// ControlEvent is what became of a command a build took on task: the
// front end that gave it sees "taken" (note, which the payload does not
// hold, added to the line), or why it was refused, in the journal.
func ControlEvent(c control.Command, task, note, why string) report.Event {
	data := report.Control{ID: c.ID, Command: string(c.Kind), By: c.By, Status: "taken", Task: &task, Text: c.Text}
	if why != "" {
		data.Status, data.Why = "refused", why
	}
	ev := report.Event{Task: task, Data: data}
	if note != "" && why == "" {
		ev.Text = fmt.Sprintf("  ⇢ %s %s by %s: taken%s\n", c.Kind, task, c.By, note)
	}
	return ev
}

// stopMessage says why ctx ended: a stop command names who gave it.
func stopMessage(ctx context.Context) string {
	var se *control.StopError
	if errors.As(context.Cause(ctx), &se) {
		return "stopped by " + se.Cmd.By
	}
	return "interrupted"
}
