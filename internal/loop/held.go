package loop

import (
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/tasks"
)

// A person's block (`ralph block`) is kept in the control folder until
// `ralph unblock` (control.Folder.Hold): a run lays it over the board as
// a blocker that only an unblock clears, whatever the task file says and
// whatever run took the block.

// held returns the persons' blocks in force, by task id. A parallel
// worker's loop has none: its scheduler heeds them before it hands out
// the task.
func (b *builder) held() map[string]control.Command {
	if b.opts.OnlyStory != "" {
		return nil
	}
	holds := control.Folder{Dir: b.ws.Path("control")}.Holds()
	if len(holds) == 0 {
		return nil
	}
	m := make(map[string]control.Command, len(holds))
	for _, c := range holds {
		m[c.Task] = c
	}
	return m
}

// holdTask is task id's record blocked by the person's block c.
func (b *builder) holdTask(id string, c control.Command) *TaskRecord {
	t := b.st.task(id)
	if t.Blocker == nil || !t.Blocker.ByPerson {
		reason := control.HeldReason(c)
		t.Blocker = &BlockerRecord{Reason: reason, Type: string(tasks.BlockerPermanent), RequiresHuman: true, ByPerson: true,
			Iteration: b.st.Machine.Iteration, AttemptedFixes: []string{reason}}
	}
	return t
}

// dropReleased clears the person's block of task id of story s that
// `ralph unblock` released while another run (a parallel or Temporal
// build) took it, or while no run went: this run's records follow, and
// the task file when it says blocked.
func (b *builder) dropReleased(s *tasks.Story, id string, t *TaskRecord) error {
	t.Blocker, t.RetryCount = nil, 0
	delete(b.st.Feedback, id)
	if s.Status == tasks.StatusBlocked {
		if err := b.src.SetState(s.ID, tasks.StatusNotStarted, 0, nil, b.opts.now()); err != nil {
			return err
		}
		s.Status = tasks.StatusNotStarted
	}
	return nil
}
