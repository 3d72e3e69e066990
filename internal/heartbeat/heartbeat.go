// Package heartbeat shows that a long, silent step (an agent thinking, a
// check running) is still alive. On a terminal it keeps one line updated
// in place with the elapsed time; elsewhere (a log file, CI) it prints a
// line at most every Every, so that a watcher of the log can tell a slow
// step from a hung ralph.
package heartbeat

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Every is how often a heartbeat line is printed when the output is not a
// terminal. RALPH_HEARTBEAT_EVERY (a Go duration) overrides it, for tests
// and for people who want more or less of them.
var Every = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("RALPH_HEARTBEAT_EVERY")); err == nil && d > 0 {
		return d
	}
	return 30 * time.Second
}()

// tick is how often the terminal line is redrawn.
const tick = time.Second

// Beat is one running heartbeat. Output of the step itself must go through
// Writer, so that the terminal line is cleared before it and the silence
// is measured from it.
type Beat struct {
	mu       sync.Mutex
	w        io.Writer
	what     string
	terminal bool
	started  time.Time
	lastOut  time.Time
	lastBeat time.Time
	shown    bool // the terminal line is on screen
	now      func() time.Time
	stop     chan struct{}
	done     chan struct{}
}

// Start begins a heartbeat for the step described by what ("agent codex
// working", "check tests running"), written to w.
func Start(w io.Writer, what string, terminal bool) *Beat {
	b := newBeat(w, what, terminal, time.Now)
	go b.run(b.every())
	return b
}

// newBeat is a heartbeat that nothing ticks yet. Its clock is a parameter
// so that tests can drive beat with the times they choose rather than
// sleep through real seconds.
func newBeat(w io.Writer, what string, terminal bool, clock func() time.Time) *Beat {
	now := clock()
	return &Beat{w: w, what: what, terminal: terminal, started: now, lastOut: now, lastBeat: now,
		now: clock, stop: make(chan struct{}), done: make(chan struct{})}
}

// every is the least silence after which a line is written.
func (b *Beat) every() time.Duration {
	if b.terminal {
		return tick
	}
	return Every
}

func (b *Beat) run(every time.Duration) {
	defer close(b.done)
	t := time.NewTicker(min(every, tick))
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.beat(now, every)
		}
	}
}

func (b *Beat) beat(now time.Time, every time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	elapsed := now.Sub(b.started).Round(time.Second)
	if b.terminal {
		if now.Sub(b.lastOut) < tick {
			return
		}
		fmt.Fprintf(b.w, "\r\033[K  … %s · %s", b.what, elapsed)
		b.shown = true
		return
	}
	if now.Sub(b.lastOut) < every || now.Sub(b.lastBeat) < every {
		return
	}
	fmt.Fprintf(b.w, "  … still %s (%s so far)\n", b.what, elapsed)
	b.lastBeat = now
}

// Writer returns w wrapped so that the step's own output clears the
// heartbeat line and counts as a sign of life.
func (b *Beat) Writer() io.Writer { return beatWriter{b} }

type beatWriter struct{ b *Beat }

func (w beatWriter) Write(p []byte) (int, error) {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	b.lastOut = b.now()
	return b.w.Write(p)
}

func (b *Beat) clear() {
	if b.shown {
		io.WriteString(b.w, "\r\033[K")
		b.shown = false
	}
}

// Stop ends the heartbeat and clears its line; it is safe to call twice.
func (b *Beat) Stop() {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	<-b.done
	b.mu.Lock()
	b.clear()
	b.mu.Unlock()
}
