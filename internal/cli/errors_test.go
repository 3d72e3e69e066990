package cli

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/thread"
)

// TestOneInterruptedOneUsageError: the loop, the thread and the session
// return the same interrupted sentinel and the same usage error type, so
// every check for either (exitCode, status's --tasks check, a caller's
// errors.Is) catches all of them, not only the kind it was written for.
func TestOneInterruptedOneUsageError(t *testing.T) {
	for name, err := range map[string]error{"loop": loop.ErrInterrupted, "thread": thread.ErrInterrupted} {
		if !errors.Is(err, errs.ErrInterrupted) || !errors.Is(fmt.Errorf("x: %w", err), loop.ErrInterrupted) {
			t.Errorf("%s.ErrInterrupted is not the shared sentinel", name)
		}
		if got := exitCode(fmt.Errorf("wrapped: %w", err)); got != ExitInterrupted {
			t.Errorf("%s interrupted: exit %d, want %d", name, got, ExitInterrupted)
		}
	}
	var threadUsage error = &thread.UsageError{Err: errors.New("say what to fix")}
	var ue *UsageError
	if !errors.As(fmt.Errorf("request-changes: %w", threadUsage), &ue) {
		t.Error("a thread usage error is not a cli.UsageError")
	}
	if got := exitCode(threadUsage); got != ExitUsage {
		t.Errorf("thread usage error: exit %d, want %d", got, ExitUsage)
	}
}
