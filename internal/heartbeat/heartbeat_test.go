package heartbeat

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/wait"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeClock is the time a test says it is: the tests drive a beat through
// seconds of silence without waiting for them.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// tickFor drives b as its ticker would for d, in steps of its tick.
func tickFor(b *Beat, c *fakeClock, d time.Duration) {
	step := min(b.every(), tick)
	for end := c.t.Add(d); !c.t.Add(step).After(end); {
		c.advance(step)
		b.beat(c.now(), b.every())
	}
}

// Not on a terminal: a silent step gets a line every Every, and output of
// the step itself restarts the wait.
func TestSilentStepGetsALineEveryInterval(t *testing.T) {
	old := Every
	Every = 300 * time.Millisecond
	defer func() { Every = old }()
	var out syncBuf
	c := &fakeClock{t: time.Unix(1_000_000, 0)}
	b := newBeat(&out, "agent fake working", false, c.now)
	tickFor(b, c, 1100*time.Millisecond)
	got := out.String()
	if n := strings.Count(got, "  … still agent fake working ("); n != 3 {
		t.Fatalf("%d heartbeat lines in 1.1 s of silence at one per 300 ms; want 3: %q", n, got)
	}
	if strings.Contains(got, "\r") {
		t.Fatalf("a log got terminal control characters: %q", got)
	}
	b.Writer().Write([]byte("progress\n"))
	tickFor(b, c, 200*time.Millisecond)
	if n := strings.Count(out.String(), "still"); n != 3 {
		t.Fatalf("a line came 200 ms after the step's own output; want the silence counted from it: %q", out.String())
	}
}

func TestOutputKeepsTheHeartbeatQuiet(t *testing.T) {
	old := Every
	Every = 400 * time.Millisecond
	defer func() { Every = old }()
	var out syncBuf
	c := &fakeClock{t: time.Unix(1_000_000, 0)}
	b := newBeat(&out, "check tests running", false, c.now)
	w := b.Writer()
	// The step prints every 150 ms for 900 ms; the ticker looks every
	// 400 ms. Time moves in 50 ms steps so that the two interleave.
	for ms := 50; ms <= 900; ms += 50 {
		c.advance(50 * time.Millisecond)
		if ms%150 == 0 {
			w.Write([]byte("progress\n"))
		}
		if ms%400 == 0 {
			b.beat(c.now(), b.every())
		}
	}
	if got := out.String(); strings.Contains(got, "still") {
		t.Fatalf("a step that keeps printing got heartbeat lines: %q", got)
	}
	// And the same step falling silent does get one: the quiet above is
	// the output's doing, not a heartbeat that never speaks.
	tickFor(b, c, 800*time.Millisecond)
	if got := out.String(); !strings.Contains(got, "still check tests running") {
		t.Fatalf("no heartbeat line after the step fell silent: %q", got)
	}
}

// On a terminal the line is redrawn in place and cleared before the step's
// own output and at the end.
func TestTerminalLineIsUpdatedInPlaceAndCleared(t *testing.T) {
	var out syncBuf
	c := &fakeClock{t: time.Unix(1_000_000, 0)}
	b := newBeat(&out, "agent fake working", true, c.now)
	tickFor(b, c, 2200*time.Millisecond)
	b.Writer().Write([]byte("the agent says hi\n"))
	got := out.String()
	if !strings.Contains(got, "\r\033[K  … agent fake working · 1s") || !strings.Contains(got, "\r\033[K  … agent fake working · 2s") {
		t.Fatalf("no in-place elapsed line: %q", got)
	}
	if !strings.HasSuffix(got, "\r\033[Kthe agent says hi\n") {
		t.Fatalf("the line was not cleared before the step's output: %q", got)
	}
	tickFor(b, c, time.Second)
	close(b.done) // nothing ticks this beat: Stop must not wait for a ticker
	b.Stop()
	if got := out.String(); !strings.HasSuffix(got, "\r\033[K") {
		t.Fatalf("Stop left the line on screen: %q", got)
	}
}

// Start's own ticker writes the lines: the tests above drive the beat by
// hand, this one waits for the real one (a line must come at all; how soon
// is not asserted, a loaded machine may be slow).
func TestStartTicksByItself(t *testing.T) {
	old := Every
	Every = 10 * time.Millisecond
	defer func() { Every = old }()
	var out syncBuf
	b := Start(&out, "agent fake working", false)
	defer b.Stop()
	wait.Until(t, wait.Long, func() bool { return strings.Contains(out.String(), "still agent fake working") },
		"a heartbeat line from Start's own ticker")
}
