// Package wait is how tests wait for something another goroutine or
// process does: they poll the condition itself until a deadline, instead
// of sleeping for a time that is long enough on an idle machine and too
// short on a loaded one. It is test code.
package wait

import (
	"testing"
	"time"
)

// Long is a deadline for things that take milliseconds on an idle machine:
// far beyond what they take on a loaded CI machine, far inside a package's
// test timeout.
const Long = 30 * time.Second

// every is how often a condition is looked at.
const every = 5 * time.Millisecond

// Until returns as soon as cond holds. When it has not held within the
// deadline it ends the test, naming what it waited for ("the run to say it
// is paused"), so that a failure says what did not happen rather than
// failing later on a consequence.
func Until(t testing.TB, within time.Duration, cond func() bool, what string) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("waited %s for %s; it did not happen", within, what)
	}
}

// Within reports whether cond held within the deadline, for a test that
// does something else than fail when it did not (retry, count a miss).
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// Recv returns the value ch gives (the zero value once ch is closed, the
// usual signal of a chan struct{}), or ends the test when none comes within
// the deadline, naming what it waited for.
func Recv[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waited %s for %s; it did not happen", within, what)
	}
	panic("unreachable")
}
