package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/fleet"
)

// workerWatch keeps a person who waits on a Temporal worker told: while
// a task queue the wait needs has no poller, a progress line every few
// seconds, and once the wait lasted [engine] worker_wait, which queue no
// worker polls and the command that starts one. Without it a session
// with no worker waited silently forever.
type workerWatch struct {
	env *Env
	c   client.Client
	// queues are the task queues the wait needs, in the order they are
	// named when none polls them.
	queues []waitQueue
	// what the waiting command waits for, in words ("session X to start").
	what  string
	json  bool
	every time.Duration
	after time.Duration

	mu     sync.Mutex
	began  time.Time // when the queue was first seen without a poller
	last   time.Time // the last look at the pollers
	warned bool
}

// waitQueue is a task queue a wait needs, the command that starts a
// worker polling it, and where to run that ("" for this checkout).
type waitQueue struct{ name, start, where string }

// hostQueues are the queues the workflow of a thread or a session of
// host's checkout needs polled: the shared one, and host's own.
func hostQueues(eng app.Temporal, host string) []waitQueue {
	start := "ralph worker --host " + host
	return []waitQueue{{eng.TaskQueue, start, ""}, {fleet.HostQueue(eng.TaskQueue, host), start, ""}}
}

func newWorkerWatch(env *Env, c client.Client, eng app.Temporal, what string, asJSON bool, queues ...waitQueue) *workerWatch {
	after := eng.WorkerWait
	return &workerWatch{env: env, c: c, queues: queues, what: what, json: asJSON, every: min(5*time.Second, after), after: after}
}

// check looks at the queues' pollers, at most every w.every, and says
// how long the wait on a missing worker lasts. It returns the queue no
// worker polls, "" when every one has a poller (or the server did not
// say).
func (w *workerWatch) check(ctx context.Context) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if !w.last.IsZero() && now.Sub(w.last) < w.every {
		return ""
	}
	w.last = now
	var missing, start, where string
	for _, q := range w.queues {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := fleet.Pollers(qctx, w.c, q.name)
		cancel()
		if err == nil && n == 0 {
			missing, start, where = q.name, q.start, q.where
			break
		}
	}
	if missing == "" {
		w.began, w.warned = time.Time{}, false
		return ""
	}
	if w.began.IsZero() {
		w.began = now
	}
	waited := now.Sub(w.began).Round(time.Second)
	if waited <= 0 {
		return missing // a worker may be just starting: said at the next look
	}
	noWorker := waited >= w.after
	if w.json {
		_ = writeJSONLine(w.env, map[string]any{"kind": "waiting", "for": w.what, "task_queue": missing, "waited_s": int(waited.Seconds()),
			"no_worker": noWorker, "start_worker": start, "where": where})
	} else {
		fmt.Fprintf(w.env.IO.Err, "ralph: waiting %s for a worker on task queue %s (%s)\n", waited, missing, w.what)
	}
	if noWorker && !w.warned {
		w.warned = true
		if where == "" {
			where = "in this checkout"
		}
		if !w.json {
			fmt.Fprintf(w.env.IO.Err, "ralph: no worker polls task queue %s after %s: start one with `%s` %s (with the same [engine] address, namespace and task_queue); %s goes on once it polls\n",
				missing, waited, start, where, w.what)
		}
	}
	return missing
}

// watch checks the pollers until the returned stop is called: for a
// wait that is one blocking call (an Update waiting for its worker).
func (w *workerWatch) watch(ctx context.Context) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			w.check(wctx)
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
