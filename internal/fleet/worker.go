package fleet

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Register puts ralph's workflows on w, the worker of the shared queue.
func Register(w worker.Registry) {
	w.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: BuildWorkflow})
}

// RegisterHost puts h's activities on w under their names.
func RegisterHost(w worker.Registry, h *Host) {
	w.RegisterActivityWithOptions(h.Board, activity.RegisterOptions{Name: ActivityBoard})
	w.RegisterActivityWithOptions(h.Prepare, activity.RegisterOptions{Name: ActivityPrepare})
	w.RegisterActivityWithOptions(h.Work, activity.RegisterOptions{Name: ActivityWork})
	w.RegisterActivityWithOptions(h.Land, activity.RegisterOptions{Name: ActivityLand})
	w.RegisterActivityWithOptions(h.Cleanup, activity.RegisterOptions{Name: ActivityCleanup})
	w.RegisterActivityWithOptions(h.Finish, activity.RegisterOptions{Name: ActivityFinish})
}

// WorkerOptions configures the workers of one host.
type WorkerOptions struct {
	// Name is the host's name when RunWorker gets no build host.
	Name string
	// Shared is [engine] task_queue.
	Shared string
	// Integrate makes this host the run's merge queue: it also polls the
	// integration queue. One host per task queue does.
	Integrate bool
	// Slots bounds the task loops this host runs at once (0: 4).
	Slots int
	// Checkout works the sessions and threads of this host's checkout
	// (nil: they are not worked here, though their workflows still run).
	Checkout *CheckoutHost
}

// workerStopTimeout bounds how long a stopping worker waits for its
// cancelled activities: an agent gets proc.DefaultGrace to stop.
const workerStopTimeout = 30 * time.Second

// RunWorker runs this host's workers until ctx ends: the shared queue
// (workflows, and Prepare for any host), the host's own queue (the work
// of the checkouts it holds) and, for the integration host, the merge
// queue's. A nil h works no builds (the checkout has no exchange remote):
// the host then takes no activity from the shared queue, where any
// build's Prepare would find no host to run it, only the workflows, and
// its sessions' and threads' work on its own queue.
func RunWorker(ctx context.Context, c client.Client, h *Host, o WorkerOptions) error {
	slots := o.Slots
	if slots <= 0 {
		slots = 4
	}
	name := o.Name
	if h != nil {
		name = h.Name
	}
	queues := []string{o.Shared, HostQueue(o.Shared, name)}
	if o.Integrate && h != nil {
		queues = append(queues, IntegrationQueue(o.Shared))
	}
	var workers []worker.Worker
	for i, q := range queues {
		// A stopped worker cancels its activities and waits for them to
		// end: an agent run stops its agent and writes its records, rather
		// than being cut off mid-write when the process exits (and its
		// agent left running for the next start to find).
		wo := worker.Options{MaxConcurrentActivityExecutionSize: slots, WorkerStopTimeout: workerStopTimeout}
		if i == 2 {
			wo.MaxConcurrentActivityExecutionSize = 1 // one landing at a time
		}
		if i == 0 && h == nil {
			wo.LocalActivityWorkerOnly = true
		}
		w := worker.New(c, q, wo)
		if i == 0 {
			Register(w)
		}
		if h != nil {
			RegisterHost(w, h)
		}
		RegisterHosted(w, o.Checkout)
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err := w.Start(); err != nil {
			for _, s := range workers {
				s.Stop()
			}
			return err
		}
	}
	<-ctx.Done()
	for _, w := range workers {
		w.Stop()
	}
	return nil
}
