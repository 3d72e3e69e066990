package runkit

import (
	"context"
	"time"

	"github.com/ralphloop/ralph/internal/errs"
)

// WaitStep is how often a wait shows how long it has left.
const WaitStep = 30 * time.Second

// Wait sleeps until until, calling show with the time left first and then
// every step (WaitStep when zero), so a person watching a long wait (a
// usage limit, an open circuit breaker) sees it is alive. It returns
// errs.ErrInterrupted as soon as ctx is cancelled. show may be nil.
func Wait(ctx context.Context, until time.Time, step time.Duration, show func(left time.Duration)) error {
	if step <= 0 {
		step = WaitStep
	}
	for {
		left := time.Until(until)
		if left <= 0 {
			return nil
		}
		if show != nil {
			show(left)
		}
		t := time.NewTimer(min(left, step))
		select {
		case <-ctx.Done():
			t.Stop()
			return errs.ErrInterrupted
		case <-t.C:
		}
	}
}
