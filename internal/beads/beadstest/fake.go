// Package beadstest provides a recording fake of the bd program for tests:
// every expected command is scripted with its answer, and any other call
// fails the test.
package beadstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Call is one scripted bd command: the arguments it must be called with
// (after any --actor flag) and what it answers.
type Call struct {
	Args   string // space-joined arguments, e.g. "ready --limit 0 --json"
	Stdout string
	Stderr string
	Exit   int
}

// ExitError is the error a scripted non-zero exit returns.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode implements the interface beads.Client looks for.
func (e *ExitError) ExitCode() int { return e.Code }

// Runner answers scripted calls in order and records every call.
type Runner struct {
	T     testing.TB
	mu    sync.Mutex
	calls []Call
	// Got lists the arguments of every call made, --actor flags removed.
	Got []string
}

// New returns a runner that expects exactly calls, in order.
func New(t testing.TB, calls ...Call) *Runner {
	r := &Runner{T: t, calls: calls}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.calls) > 0 {
			t.Errorf("bd calls expected but not made: %q", r.calls[0].Args)
		}
	})
	return r
}

// Run implements beads.Runner.
func (r *Runner) Run(_ context.Context, _ string, _ []string, args []string) ([]byte, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(args) >= 2 && args[0] == "--actor" {
		args = args[2:]
	}
	got := strings.Join(args, " ")
	r.Got = append(r.Got, got)
	if len(r.calls) == 0 {
		r.T.Errorf("unexpected bd call: bd %s", got)
		return nil, []byte("unexpected call"), &ExitError{Code: 99}
	}
	c := r.calls[0]
	if c.Args != got {
		r.T.Errorf("bd call %d: got `bd %s`, want `bd %s`", len(r.Got), got, c.Args)
		return nil, []byte("unexpected call"), &ExitError{Code: 99}
	}
	r.calls = r.calls[1:]
	var err error
	if c.Exit != 0 {
		err = &ExitError{Code: c.Exit}
	}
	return []byte(c.Stdout), []byte(c.Stderr), err
}
