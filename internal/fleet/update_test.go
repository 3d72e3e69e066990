package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// cutHandle is an Update handle whose first polls the server cuts short,
// as it did under load in CI (RST_STREAM CANCEL).
type cutHandle struct {
	client.WorkflowUpdateHandle
	cuts  int
	polls int
	final error
}

func (h *cutHandle) Get(ctx context.Context, v any) error {
	h.polls++
	if h.polls <= h.cuts {
		return client.NewWorkflowUpdateServiceTimeoutOrCanceledError(errors.New("stream terminated by RST_STREAM with error code: CANCEL"))
	}
	if h.final != nil {
		return h.final
	}
	*(v.(*string)) = "paused"
	return nil
}

// A poll the server cut short is polled again while the caller waits; the
// run's own answer, or the caller's deadline, ends the wait.
func TestPatientUpdateOutlastsCutPolls(t *testing.T) {
	h := &cutHandle{cuts: 3}
	var msg string
	if err := (patientUpdate{h}).Get(context.Background(), &msg); err != nil || msg != "paused" || h.polls != 4 {
		t.Fatalf("after 3 cut polls: %v, %q, %d polls; want the answer on the 4th", err, msg, h.polls)
	}
	refused := errors.New("the run is already paused")
	h = &cutHandle{cuts: 1, final: refused}
	if err := (patientUpdate{h}).Get(context.Background(), &msg); !errors.Is(err, refused) {
		t.Fatalf("the run's refusal after a cut poll: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
	defer cancel()
	h = &cutHandle{cuts: 1 << 30}
	var cut *client.WorkflowUpdateServiceTimeoutOrCanceledError
	if err := (patientUpdate{h}).Get(ctx, &msg); !errors.As(err, &cut) || ctx.Err() == nil {
		t.Fatalf("polls cut until the caller's deadline: %v (ctx %v)", err, ctx.Err())
	}
}
