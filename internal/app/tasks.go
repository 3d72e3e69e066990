package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/tasks"
)

// unblockTask clears task id's blocker while no run is going: in ralph's
// state and in the task file, under the run's lock.
func (a *App) unblockTask(ctx context.Context, id string, warn io.Writer) (string, error) {
	src, story, err := a.findTask(id, "unblock")
	if err != nil {
		return "", err
	}
	asked := id
	// The loop's state owns the blocker; the task file is changed
	// under the same lock, so a running build can neither miss the
	// change nor write its own state over it.
	id, err = loop.HomeOf(a.WS).Unblock(id, func(tid string, rec *loop.TaskRecord) error {
		if (rec == nil || rec.Blocker == nil) && story.Status != tasks.StatusBlocked {
			return fmt.Errorf("%s is not blocked", tid)
		}
		return src.SetState(story.ID, tasks.StatusNotStarted, 0, nil, a.now())
	})
	if err != nil {
		return "", err
	}
	// A person decided about the blocker: it leaves the known
	// issues of the next prompts, and stays in memory, resolved.
	if err := a.resolveBlockers(ctx, asked); err != nil {
		fmt.Fprintf(warn, "ralph: could not mark %s's blockers resolved in memory (%v); the prompts drop them once the task is done\n", asked, err)
	}
	a.WS.LogEvent(a.now(), fmt.Sprintf("task %s unblocked by hand", id))
	return fmt.Sprintf("%s unblocked: the next `ralph build` can pick it up", id), nil
}

// blockTask blocks task id by a person's decision while no run is going.
func (a *App) blockTask(id, reason string) (string, error) {
	src, story, err := a.findTask(id, "block")
	if err != nil {
		return "", err
	}
	if story.Done {
		return "", &control.InputError{Msg: fmt.Sprintf("%s is done already: there is nothing to block", id)}
	}
	if reason == "" {
		reason = "blocked by a person"
	}
	err = loop.HomeOf(a.WS).Block(id, reason, func(string, *loop.TaskRecord) error {
		return src.SetState(story.ID, tasks.StatusBlocked, 0, &tasks.Blocker{Reason: reason, Type: tasks.BlockerPermanent, RequiresHuman: true}, a.now())
	})
	if err != nil {
		return "", err
	}
	a.WS.LogEvent(a.now(), fmt.Sprintf("task %s blocked by hand: %s", id, reason))
	return fmt.Sprintf("%s blocked: builds leave it until `ralph unblock %s`", id, id), nil
}

// findTask finds task id's story in the task file `ralph build` uses, for
// a command (verb) given while no run is going.
func (a *App) findTask(id, verb string) (tasks.Source, tasks.Story, error) {
	src, err := a.TaskSource("", "")
	if err != nil {
		return nil, tasks.Story{}, err
	}
	board, err := src.Load()
	if errors.Is(err, fs.ErrNotExist) {
		what := "no task file"
		if c, ok := src.(tasks.Creatable); ok {
			what = "no " + c.Noun()
		}
		return nil, tasks.Story{}, fmt.Errorf("%s at %s, so there is no task %s to %s: %s works on the task file `ralph build` uses; if yours is elsewhere, set [build] prd or [tasks] path in .ralph/config.toml", what, a.WS.Rel(src.Path()), id, verb, verb)
	}
	if err != nil {
		return nil, tasks.Story{}, err
	}
	storyID, _ := tasks.ParseTaskID(id)
	story, ok := board.Find(storyID)
	if !ok {
		return nil, tasks.Story{}, &control.InputError{Msg: fmt.Sprintf("no task %s in %s", id, a.WS.Rel(src.Path()))}
	}
	return src, story, nil
}

// resolveBlockers marks the memory's blockers of task (a story's cover its
// subtasks') resolved.
func (a *App) resolveBlockers(ctx context.Context, task string) error {
	mem, err := a.Memory()
	if err != nil {
		return err
	}
	defer mem.Close()
	return mem.Resolve(ctx, task, a.now())
}

// approveTask accepts task id's reviewed work while no run is going.
func (a *App) approveTask(ctx context.Context, id, by string) (string, error) {
	src, err := a.TaskSource("", "")
	if err != nil {
		return "", err
	}
	return loop.Approve(ctx, a.WS, src, id, by, a.now())
}
