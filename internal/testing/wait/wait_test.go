package wait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// failTB records a failure instead of ending the calling test, so that the
// helper's own failure can be looked at.
type failTB struct {
	testing.TB
	msg string
}

func (f *failTB) Helper() {}
func (f *failTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func catch(f *failTB, fn func()) {
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
	}()
	fn()
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	Until(t, Long, func() bool { return n.Load() == 3 }, "three increments")
}

func TestUntilFailsNamingWhatItWaitedFor(t *testing.T) {
	f := &failTB{TB: t}
	catch(f, func() { Until(f, 20*time.Millisecond, func() bool { return false }, "the run to say it is paused") })
	if !strings.Contains(f.msg, "the run to say it is paused") || !strings.Contains(f.msg, "did not happen") {
		t.Fatalf("failure = %q; want it to name what it waited for", f.msg)
	}
}

func TestRecvGivesTheValueOrFailsNamingIt(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, Long, "a number"); got != 7 {
		t.Fatalf("Recv = %d; want 7", got)
	}
	f := &failTB{TB: t}
	catch(f, func() { Recv(f, make(chan int), 20*time.Millisecond, "the run to end") })
	if !strings.Contains(f.msg, "the run to end") {
		t.Fatalf("failure = %q; want it to name what it waited for", f.msg)
	}
}
