package engine

import (
	"context"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/tasks"
)

// A task store that is not a file of the repository (beads: a database
// every checkout and worktree shares) is one store for the scheduler and
// every worker, instead of a copy per worktree. Two rules keep it right:
// a worker's done mark waits until the task landed (deferredDone), and a
// task is claimed in the store before a worker gets it, so that another
// ralph on the same store never works it too.

// sharedStore reports whether src is such a store.
func sharedStore(src tasks.Source) bool { return src.Kind() == tasks.KindBeads }

// deferredDone is a worker's view of a shared store: its loop's MarkDone
// is kept in memory and shown by Load, so the loop sees its story done and
// ends, while the store itself is marked only by the merge queue, once the
// task's commit is on the target. Everything else goes to the store.
type deferredDone struct {
	tasks.Source
	done map[string]bool
}

func (d *deferredDone) MarkDone(storyID, subtaskID string, now time.Time) error {
	if d.done == nil {
		d.done = map[string]bool{}
	}
	d.done[storyID] = true
	return nil
}

func (d *deferredDone) Load() (*tasks.Board, error) {
	// Workers share the source: each of their reads asks the store
	// afresh, since the other workers and the merge queue change it
	// at any time.
	if r, ok := d.Source.(tasks.Resetter); ok {
		r.Reset()
	}
	b, err := d.Source.Load()
	if err != nil {
		return nil, err
	}
	for i := range b.Stories {
		if d.done[b.Stories[i].ID] {
			b.Stories[i].Status, b.Stories[i].Done = tasks.StatusComplete, true
		}
	}
	return b, nil
}

// Forget passes the worker loop's word that its agent ran through to a
// store that keeps what it read (beads).
func (d *deferredDone) Forget() {
	if f, ok := d.Source.(tasks.Forgetter); ok {
		f.Forget()
	}
}

// Prime passes the store's workflow context (bd prime) through.
func (d *deferredDone) Prime(ctx context.Context) (string, error) {
	if p, ok := d.Source.(tasks.Primer); ok {
		return p.Prime(ctx)
	}
	return "", nil
}

// claim takes task id in a shared store for this run; taken is true when
// another ralph holds it (bd: "already claimed"), which is no error: the
// scheduler leaves the task to it.
func (e *engine) claim(ctx context.Context, id string) (taken bool, err error) {
	c, ok := e.o.Source.(tasks.Claimer)
	if !ok {
		return false, nil
	}
	if err := c.Claim(ctx, id); err != nil {
		if strings.Contains(err.Error(), "already claimed") {
			return true, nil
		}
		return false, err
	}
	return false, nil
}
