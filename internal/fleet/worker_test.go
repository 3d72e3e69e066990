package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/wait"
	enumspb "go.temporal.io/api/enums/v1"
)

// A host without a build host (its checkout has no exchange remote) runs
// sessions and threads only: on the shared queue it polls workflow tasks
// and no activity, so no build's Prepare can land on a host that cannot
// push its branch; its own queue is polled for its sessions' and
// threads' activities; no integration queue.
func TestRunWorkerWithoutBuildsTakesNoSharedActivity(t *testing.T) {
	c := devServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunWorker(wctx, c, nil, WorkerOptions{Name: "s1", Shared: "nobuild", Integrate: true, Checkout: &CheckoutHost{Name: "s1"}})
	}()
	pollers := func(queue string, kind enumspb.TaskQueueType) int {
		d, err := c.DescribeTaskQueue(ctx, queue, kind)
		if err != nil {
			t.Fatalf("describing %s: %v", queue, err)
		}
		return len(d.GetPollers())
	}
	wait.Until(t, wait.Long, func() bool {
		return pollers("nobuild", enumspb.TASK_QUEUE_TYPE_WORKFLOW) > 0 && pollers(HostQueue("nobuild", "s1"), enumspb.TASK_QUEUE_TYPE_ACTIVITY) > 0
	}, "the worker to poll the shared queue's workflow tasks and its own queue's activities")
	// A hold, not a sync: pollers show up within a poll, so this gives
	// the shared queue's activity poller, if there were one, the time to
	// be seen; the absence below is what the test asserts.
	time.Sleep(2 * time.Second)
	if n := pollers("nobuild", enumspb.TASK_QUEUE_TYPE_ACTIVITY); n != 0 {
		t.Errorf("%d activity pollers on the shared queue: a host without builds would take a build's Prepare", n)
	}
	if n := pollers(IntegrationQueue("nobuild"), enumspb.TASK_QUEUE_TYPE_ACTIVITY); n != 0 {
		t.Errorf("%d activity pollers on the integration queue: a host without builds runs no merge queue", n)
	}
	if n, err := Pollers(ctx, c, HostQueue("nobuild", "s1")); err != nil || n == 0 {
		t.Errorf("Pollers of the host's queue = %d, %v; want its worker", n, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("RunWorker: %v", err)
	}
}
