package heartbeat

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
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

// Not on a terminal: a silent step gets a line every Every, and output of
// the step itself restarts the wait.
func TestSilentStepGetsALineEveryInterval(t *testing.T) {
	old := Every
	Every = 300 * time.Millisecond
	defer func() { Every = old }()
	var out syncBuf
	b := Start(&out, "agent fake working", false)
	time.Sleep(1100 * time.Millisecond)
	b.Stop()
	got := out.String()
	if n := strings.Count(got, "  … still agent fake working ("); n < 1 || n > 3 {
		t.Fatalf("%d heartbeat lines in 1.1 s at one per 300 ms of silence (ticks are 300 ms): %q", n, got)
	}
	if strings.Contains(got, "\r") {
		t.Fatalf("a log got terminal control characters: %q", got)
	}
}

func TestOutputKeepsTheHeartbeatQuiet(t *testing.T) {
	old := Every
	Every = 400 * time.Millisecond
	defer func() { Every = old }()
	var out syncBuf
	b := Start(&out, "check tests running", false)
	w := b.Writer()
	for range 6 {
		time.Sleep(150 * time.Millisecond)
		w.Write([]byte("progress\n"))
	}
	b.Stop()
	if got := out.String(); strings.Contains(got, "still") {
		t.Fatalf("a step that keeps printing got heartbeat lines: %q", got)
	}
}

// On a terminal the line is redrawn in place and cleared before the step's
// own output and at the end.
func TestTerminalLineIsUpdatedInPlaceAndCleared(t *testing.T) {
	var out syncBuf
	b := Start(&out, "agent fake working", true)
	time.Sleep(2200 * time.Millisecond)
	b.Writer().Write([]byte("the agent says hi\n"))
	b.Stop()
	got := out.String()
	if !strings.Contains(got, "\r\033[K  … agent fake working · 1s") || !strings.Contains(got, "\r\033[K  … agent fake working · 2s") {
		t.Fatalf("no in-place elapsed line: %q", got)
	}
	if !strings.HasSuffix(got, "\r\033[Kthe agent says hi\n") {
		t.Fatalf("the line was not cleared before the step's output: %q", got)
	}
}
