package engine

import (
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
)

// The scheduler takes the skip, block and unblock commands for every
// worker (their loops heed pause only): a skipped or blocked task is not
// handed to a worker, and a block of a task in flight is applied when its
// worker comes back.

// steer takes the queued task commands and applies them to the registry.
// board is the task file as the scheduler reads it now; active are the
// tasks in flight.
func (e *engine) steer(board *tasks.Board, active map[string]bool) {
	att := e.o.Control
	if att == nil {
		return
	}
	cmds := att.Take(control.Skip, control.Block, control.Unblock)
	if len(cmds) == 0 {
		return
	}
	for _, c := range cmds {
		id, note, why := e.applyControl(board, active, c)
		e.em.Emit(loop.ControlEvent(c, id, note, why))
	}
	_ = e.save()
}

// holds is the workspace's record of persons' blocks (control.Folder.Hold).
func (e *engine) holds() control.Folder { return control.Folder{Dir: e.o.WS.Path("control")} }

// applyHolds blocks every task a person holds (`ralph block`, given to
// this run, to an earlier one or while none went) that is not already
// set aside, so that no worker is handed it. A task in flight is blocked
// when its worker comes back, as a block given now would be.
func (e *engine) applyHolds(board *tasks.Board, active map[string]bool) {
	for _, c := range e.holds().Holds() {
		story, ok := board.Find(c.Task)
		if !ok || story.Done {
			continue
		}
		reason := control.HeldReason(c)
		if active[c.Task] {
			if _, ok := e.held[c.Task]; !ok {
				e.held[c.Task] = reason
			}
			continue
		}
		t := e.reg.Tasks[c.Task]
		if t != nil && t.State != landing.Queued && t.State != landing.SentBack && t.State != landing.Working {
			continue // landed, landing, blocked or waiting for review already
		}
		if t == nil {
			t = &TaskRecord{ID: c.Task, Title: story.Title, Branch: landing.Branch(e.reg.RunID, c.Task)}
			e.reg.Tasks[c.Task] = t
		}
		t.State, t.Reason = landing.Blocked, reason
		delete(e.skipped, c.Task)
		e.tell(t, report.Blocker{State: "blocked", Reason: reason, ByControl: true, ByPerson: true})
	}
}

// applyControl applies c; it returns the task, a note on when it takes
// effect, and why it was refused ("" when it was taken).
func (e *engine) applyControl(board *tasks.Board, active map[string]bool, c control.Command) (id, note, why string) {
	id = strings.TrimSpace(c.Task)
	storyID, _ := tasks.ParseTaskID(id)
	if storyID != id {
		return id, "", fmt.Sprintf("a parallel build works whole stories: give the story %s", storyID)
	}
	story, ok := board.Find(id)
	if !ok {
		if c.Kind == control.Block {
			e.holds().Release(id) // a refused block holds nothing
		}
		return id, "", fmt.Sprintf("no task %s in %s", id, e.prdRel)
	}
	t := e.reg.Tasks[id]
	switch c.Kind {
	case control.Block, control.Skip:
		if story.Done || t != nil && (t.State == landing.Landed || t.State == landing.Landing) {
			if c.Kind == control.Block {
				e.holds().Release(id)
			}
			return id, "", fmt.Sprintf("%s is done already", id)
		}
		if t != nil && (t.State == landing.Blocked || t.State == landing.NeedsReview) {
			return id, "", fmt.Sprintf("%s is %s already", id, strings.ReplaceAll(string(t.State), "_", " "))
		}
		reason := string(c.Kind) + "ed by " + c.By
		if c.Kind == control.Skip {
			reason = "skipped by " + c.By
		}
		if c.Text != "" {
			reason += ": " + c.Text
		}
		if c.Kind == control.Block && e.holds().Held(id) == nil {
			// Kept beyond this run, whoever queued it.
			if err := e.holds().Hold(c); err != nil {
				return id, "", fmt.Sprintf("could not record the block of %s: %v", id, err)
			}
		}
		if active[id] {
			if c.Kind == control.Skip {
				return id, "", fmt.Sprintf("%s is in flight already: `ralph block %s` keeps it from landing", id, id)
			}
			e.held[id] = reason
			return id, " (in flight: blocked when its worker comes back)", ""
		}
		if c.Kind == control.Skip {
			if t != nil && t.State == landing.Queued {
				return id, "", fmt.Sprintf("%s is verified and waiting to land: `ralph block %s` keeps it from landing", id, id)
			}
			e.skipped[id] = true
			return id, " (others go first)", ""
		}
		if t == nil {
			t = &TaskRecord{ID: id, Title: story.Title, Branch: landing.Branch(e.reg.RunID, id)}
			e.reg.Tasks[id] = t
		}
		t.State, t.Reason = landing.Blocked, reason
		delete(e.skipped, id)
		return id, "", ""
	case control.Unblock:
		delete(e.skipped, id)
		released, _ := e.holds().Release(id)
		if _, ok := e.held[id]; ok {
			delete(e.held, id)
			return id, "", ""
		}
		if t == nil || t.State != landing.Blocked && t.State != landing.NeedsReview {
			if released {
				return id, "", ""
			}
			if story.Status == tasks.StatusBlocked {
				return id, "", fmt.Sprintf("%s is blocked in %s: `ralph unblock %s` clears it once this build ends", id, e.prdRel, id)
			}
			return id, "", fmt.Sprintf("%s is not blocked", id)
		}
		// Back to the workers, on a fresh branch from the current tip.
		t.State, t.Reason, t.Feedback = landing.SentBack, "", ""
		return id, "", ""
	}
	return id, "", fmt.Sprintf("a parallel build does not take %s", c.Kind)
}

// heldBlock applies a block given while t was in flight, now that its
// worker is back: its work stays on its branch for a person.
func (e *engine) heldBlock(t *TaskRecord) {
	reason, ok := e.held[t.ID]
	if !ok {
		return
	}
	delete(e.held, t.ID)
	t.State, t.Reason = landing.Blocked, reason
	e.tell(t, report.Blocker{State: "blocked", Reason: reason, ByControl: true, Branch: t.Branch})
}
