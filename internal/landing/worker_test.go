package landing

import (
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/report"
)

type collected []report.Event

func (c *collected) Emit(ev report.Event) { *c = append(*c, ev) }

// A worker's loop events reach its executor's stream marked with the
// worker, under the task unless the event names one of its own (a
// subtask), numbered in the executor's sequence; the executor's watch
// sees each.
func TestWorkerSinkMarksTheWorkersEvents(t *testing.T) {
	var got collected
	em := report.NewEmitter("engine", "r1", 41, func() time.Time { return time.Unix(0, 0) }, &got)
	var watched []report.Kind
	sink := Sink(em, "w2", "US-001", func(ev report.Event) { watched = append(watched, ev.Kind) })
	sink.Emit(report.Event{Machine: "loop", Run: "loop-run", Kind: report.KindNote, Text: "one\n"})
	sink.Emit(report.Event{Machine: "loop", Run: "loop-run", Kind: report.KindNote, Task: "US-001/a", Text: "two\n"})
	if len(got) != 2 || len(watched) != 2 {
		t.Fatalf("the stream got %d events and the watch %d; want 2 and 2", len(got), len(watched))
	}
	for i, want := range []string{"US-001", "US-001/a"} {
		if ev := got[i]; ev.Worker != "w2" || ev.Task != want || ev.Seq != int64(42+i) || ev.Run != "r1" {
			t.Errorf("event %d = worker %q task %q seq %d run %q; want w2, %s, %d, r1", i, ev.Worker, ev.Task, ev.Seq, ev.Run, want, 42+i)
		}
	}
}
