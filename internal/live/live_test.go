package live

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/report"
)

// Events replays the journal after the seq asked for, then follows what
// is appended, and ends when its context does: a view that attaches late
// or reconnects sees every event once.
func TestLocalEventsReplaysThenFollows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	em := report.NewEmitter("loop", "r1", 0, nil, &report.Journal{Path: p})
	for i := 0; i < 3; i++ {
		em.Emit(report.Event{Kind: report.KindNote})
	}
	src := &Local{Dir: "ws", Journal: p}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan int64, 10)
	done := make(chan error, 1)
	go func() {
		done <- src.Events(ctx, 1, func(ev report.Event) error {
			got <- ev.Seq
			return nil
		})
	}()
	for _, want := range []int64{2, 3} {
		if s := <-got; s != want {
			t.Fatalf("replayed seq %d, want %d", s, want)
		}
	}
	em.Emit(report.Event{Kind: report.KindNote})
	select {
	case s := <-got:
		if s != 4 {
			t.Fatalf("followed seq %d, want 4", s)
		}
	case <-ctx.Done():
		t.Fatal("an appended event never came")
	}
	// A torn line (a writer killed mid-append) is not an event.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"v":1,"seq":5,"kin`)
	f.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Events ended with %v, want nil when its context ends", err)
	}
	select {
	case s := <-got:
		t.Errorf("a torn line came through as seq %d", s)
	default:
	}
}
