package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/thread"
)

// ThreadHost is one machine's part of the thread workflows: the
// activities that work the threads of the checkout it holds. `ralph
// worker` makes one over its clone.
type ThreadHost struct {
	// Name is the host's id: its task queue is HostQueue(shared, Name).
	Name string
	// RalphDir is the checkout's .ralph folder, where its threads are.
	RalphDir string
	// Do runs the thread command in.Name on thread in.ThreadID in this
	// checkout and the work it leads to, as `ralph thread NAME` does,
	// until the thread waits for a person; ctx ends it as Ctrl+C does.
	// Its error is the command's (the thread may have moved all the same).
	Do func(ctx context.Context, in ThreadCommandInput) error
	// Client, when set, signals the thread's workflow each phase the
	// thread enters while Do works (ThreadProgress).
	Client client.Client
	// Progress, when set, is used instead of Client to report a phase
	// (tests hand it to the SDK's test environment).
	Progress func(ctx context.Context, p ThreadProgress)
	// Poll is how often the activity heartbeats and looks at the thread's
	// phase (0: 1s).
	Poll time.Duration
}

// RegisterThread puts the thread workflow on w and, with th, the thread
// activities of this host.
func RegisterThread(w worker.Registry, th *ThreadHost) {
	w.RegisterWorkflowWithOptions(Thread, workflow.RegisterOptions{Name: ThreadWorkflow})
	if th != nil {
		w.RegisterActivityWithOptions(th.Command, activity.RegisterOptions{Name: ActivityThreadCommand})
		w.RegisterActivityWithOptions(th.Load, activity.RegisterOptions{Name: ActivityThreadLoad})
	}
}

// Load reads the thread as this checkout holds it, once no ralph works
// on it: a command stopped by a pause saves the thread as it lets go of
// the thread's lock.
func (th *ThreadHost) Load(ctx context.Context, id string) (thread.Thread, error) {
	lock := filepath.Join(thread.Dir(th.RalphDir, id), "lock")
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
	t, err := thread.Load(th.RalphDir, id)
	if errors.Is(err, os.ErrNotExist) {
		return t, temporal.NewNonRetryableApplicationError(fmt.Sprintf("host %s holds no thread %s in %s", th.Name, id, th.RalphDir), ErrTypeUsage, err)
	}
	return t, err
}

// Command is the activity of a person's command: it runs the command with
// the thread runner, heartbeating; a pause or abandon from the workflow
// cancels it through the heartbeat, which stops the loop as Ctrl+C does.
// A retry after the worker was lost finds the thread moved on from the
// phase the command was given in: the command was taken, and the runner's
// resume goes on with the work of the phase it was cut short in.
func (th *ThreadHost) Command(ctx context.Context, in ThreadCommandInput) (ThreadStep, error) {
	t, err := th.Load(ctx, in.ThreadID)
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
	poll := th.Poll
	if poll <= 0 {
		poll = time.Second
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		th.watch(ctx, in, t, poll, done)
	}()
	runErr := th.Do(ctx, in)
	close(done)
	<-watched
	settled, err := thread.Load(th.RalphDir, in.ThreadID)
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

// watch heartbeats until done and reports each phase the thread enters.
func (th *ThreadHost) watch(ctx context.Context, in ThreadCommandInput, last thread.Thread, poll time.Duration, done <-chan struct{}) {
	key := func(t thread.Thread) string { return fmt.Sprintf("%s/%d", t.Phase.Type, t.Phase.Iteration) }
	watchProgress(ctx, poll, done, key(last), func() (string, ThreadProgress, bool) {
		t, err := thread.Load(th.RalphDir, in.ThreadID)
		return key(t), ThreadProgress{Seq: in.Seq, Thread: t}, err == nil
	}, th.Progress, th.Client, SignalThreadProgress)
}
