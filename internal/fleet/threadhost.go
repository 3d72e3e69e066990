package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/thread"
)

// LoadThread reads the thread as this checkout holds it, once no ralph
// works on it: a command stopped by a pause saves the thread as it lets
// go of the thread's lock.
func (h *CheckoutHost) LoadThread(ctx context.Context, id string) (thread.Thread, error) {
	lock := filepath.Join(thread.Dir(h.RalphDir, id), "lock")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if _, held := store.Held(lock); !held {
			break
		}
		select {
		case <-ctx.Done():
			return thread.Thread{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	t, err := thread.Load(h.RalphDir, id)
	if errors.Is(err, os.ErrNotExist) {
		return t, temporal.NewNonRetryableApplicationError(fmt.Sprintf("host %s holds no thread %s in %s", h.Name, id, h.RalphDir), ErrTypeUsage, err)
	}
	return t, err
}

// ThreadCommand is the activity of a person's command: it runs the
// command with the thread runner, heartbeating and reporting each phase
// the thread enters; a pause or abandon from the workflow cancels it
// through the heartbeat, which stops the loop as Ctrl+C does. A retry
// after the worker was lost finds the thread moved on from the phase the
// command was given in: the command was taken, and the runner's resume
// goes on with the work of the phase it was cut short in.
func (h *CheckoutHost) ThreadCommand(ctx context.Context, in ThreadCommandInput) (ThreadStep, error) {
	t, err := h.LoadThread(ctx, in.ThreadID)
	if err != nil {
		return ThreadStep{}, err
	}
	if activity.GetInfo(ctx).Attempt > 1 && t.Phase.Type != in.From {
		switch t.Phase.Type {
		case thread.PhaseRunning, thread.PhaseVerifying, thread.PhasePreflight, thread.PhasePolishing:
			in.Name, in.Verb = "resume", ""
		default:
			return ThreadStep{Thread: t}, nil
		}
	}
	key := func(t thread.Thread) string { return fmt.Sprintf("%s/%d", t.Phase.Type, t.Phase.Iteration) }
	runErr := h.watched(ctx, SignalThreadProgress, key(t), func() (string, any, bool) {
		t, err := thread.Load(h.RalphDir, in.ThreadID)
		return key(t), ThreadProgress{Seq: in.Seq, Thread: t}, err == nil
	}, func() error { return h.RunThread(ctx, in) })
	settled, err := thread.Load(h.RalphDir, in.ThreadID)
	if err != nil {
		return ThreadStep{}, err
	}
	step := ThreadStep{Thread: settled}
	if ctx.Err() != nil {
		// Cancelled by the workflow: the runner saved the thread as it
		// stopped; the workflow reads it.
		return step, ctx.Err()
	}
	if runErr != nil {
		// The command's own ending (a refused reset, a loop that stopped
		// and paused the thread): the person's to read, not a failure
		// a retry could fix.
		step.Error = runErr.Error()
	}
	return step, nil
}
