package mcpserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/journalgen"
)

// A tail of a few events costs what it holds, not what the journal
// holds: the tool read the whole journal into memory (357 MB for 5
// events of a 60 MB one).
func TestJournalTailHeapDoesNotGrowWithTheJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 24 MB journal")
	}
	dir := t.TempDir()
	j, err := journalgen.Write(filepath.Join(dir, "events.jsonl"), 24<<20)
	if err != nil {
		t.Fatal(err)
	}
	src := &live.Local{Dir: dir, Journal: j.Path, StatusOf: func(context.Context) (status.Report, error) { return testReport, nil }}
	tl := &tools{src: src}
	var got Tail
	peak := journalgen.PeakHeap(func() {
		_, got, err = tl.tail(context.Background(), nil, TailInput{N: 5})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 5 || got.LastSeq != j.LastSeq || got.Events[4].Seq != j.LastSeq {
		t.Fatalf("tail of 5: %d events, last seq %d; want 5 ending at %d", len(got.Events), got.LastSeq, j.LastSeq)
	}
	if peak > 4<<20 {
		t.Errorf("a tail of 5 events of a %d MB journal raised the heap by %.1f MB; want under 4 MB", j.Size>>20, float64(peak)/(1<<20))
	}
}

// benchJournal is a journal written once per test binary
// (journalgen.Cached).
func benchJournal(b *testing.B, size int64) journalgen.Journal { return journalgen.Cached(b, size) }

func TestMain(m *testing.M) {
	code := m.Run()
	journalgen.RemoveCached()
	os.Exit(code)
}

// BenchmarkJournalTail is ralph_journal_tail of 5 events against
// journals of 1, 60 and 600 MB: its time and peak heap must not grow with
// the journal.
func BenchmarkJournalTail(b *testing.B) {
	for _, mb := range []int64{1, 60, 600} {
		b.Run(sizeName(mb), func(b *testing.B) {
			j := benchJournal(b, mb<<20)
			tl := &tools{src: &live.Local{Dir: filepath.Dir(j.Path), Journal: j.Path}}
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				peak = max(peak, journalgen.PeakHeap(func() {
					if _, _, err := tl.tail(context.Background(), nil, TailInput{N: 5}); err != nil {
						b.Fatal(err)
					}
				}))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

func sizeName(mb int64) string {
	return map[int64]string{1: "1MB", 60: "60MB", 600: "600MB"}[mb]
}
