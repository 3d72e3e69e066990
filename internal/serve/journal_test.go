package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/journalgen"
)

// bigJournal is a workspace whose journal is a build of size bytes.
func bigJournal(t testing.TB, size int64) (*live.Local, journalgen.Journal) {
	t.Helper()
	dir := t.TempDir()
	j, err := journalgen.Write(filepath.Join(dir, "events.jsonl"), size)
	if err != nil {
		t.Fatal(err)
	}
	return localOf(j), j
}

func localOf(j journalgen.Journal) *live.Local {
	return &live.Local{Dir: filepath.Dir(j.Path), Journal: j.Path,
		StatusOf: func(context.Context) (status.Report, error) { return status.Report{RunID: "run-1"}, nil }}
}

// readUntil reads an event stream until the event of seq last and
// returns the seqs it saw.
func readUntil(t testing.TB, ctx context.Context, url string, last int64) []int64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var seqs []int64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), report.MaxLine+64)
	for sc.Scan() {
		id, ok := bytes.CutPrefix(sc.Bytes(), []byte("id: "))
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(string(id), 10, 64)
		seqs = append(seqs, n)
		if n == last {
			return seqs
		}
	}
	t.Fatalf("the stream ended after %d events, before seq %d: %v", len(seqs), last, sc.Err())
	return nil
}

// One event stream, one receipts request: what they cost does not grow
// with the journal (it was the journal's size and more, for each: a 60
// MB journal cost 380 MB per stream and 13 GB per receipts request).
func TestViewsHeapDoesNotGrowWithTheJournal(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 16 MB journal")
	}
	src, j := bigJournal(t, 16<<20)
	s, err := New(Options{Workspaces: []live.Source{src}, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	var rc Receipts
	peak := journalgen.PeakHeap(func() { get(t, ts.URL+"/api/receipts", &rc) })
	if len(rc.Iterations) != j.Iterations || len(rc.Stories) != min(j.Iterations, 50) || rc.Stories[0].State != "verified" {
		t.Fatalf("receipts of %d iterations: %d iterations, %d stories %+v", j.Iterations, len(rc.Iterations), len(rc.Stories), rc.Stories)
	}
	t.Logf("receipts of a %d MB journal: heap +%.1f MB", j.Size>>20, float64(peak)/(1<<20))
	if peak > 12<<20 {
		t.Errorf("receipts of a %d MB journal raised the heap by %.1f MB; want under 12 MB", j.Size>>20, float64(peak)/(1<<20))
	}
	var seqs []int64
	peak = journalgen.PeakHeap(func() { seqs = readUntil(t, context.Background(), ts.URL+"/api/events", j.LastSeq) })
	if int64(len(seqs)) != j.LastSeq || seqs[0] != 1 {
		t.Fatalf("a stream replayed %d events, want %d from 1", len(seqs), j.LastSeq)
	}
	t.Logf("a stream of a %d MB journal: heap +%.1f MB", j.Size>>20, float64(peak)/(1<<20))
	if peak > 24<<20 {
		t.Errorf("a stream replaying a %d MB journal raised the heap by %.1f MB; want under 24 MB", j.Size>>20, float64(peak)/(1<<20))
	}
}

// A stream resumes after any seq of a journal longer than the hub keeps
// ready, replays each event once and in order, and follows what is
// written next; a replaced journal is read again from its start.
func TestEventsOfALongJournal(t *testing.T) {
	defer func(n int) { ringBytes = n }(ringBytes)
	ringBytes = 256 << 10
	src, j := bigJournal(t, 3<<20) // the ring's 12 times, 3 index marks
	ts := newServer(t, src)
	for _, after := range []int64{0, 1, j.LastSeq / 3, j.LastSeq - 2} {
		ctx, cancel := context.WithCancel(context.Background())
		seqs := readUntil(t, ctx, fmt.Sprintf("%s/api/events?after=%d", ts.URL, after), j.LastSeq)
		cancel()
		if int64(len(seqs)) != j.LastSeq-after || seqs[0] != after+1 {
			t.Fatalf("after %d: %d events from %d; want %d from %d", after, len(seqs), seqs[0], j.LastSeq-after, after+1)
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Fatalf("after %d: seq %d follows %d", after, seqs[i], seqs[i-1])
			}
		}
	}
	// Written while a stream is open.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []int64, 1)
	go func() {
		got <- readUntil(t, ctx, fmt.Sprintf("%s/api/events?after=%d", ts.URL, j.LastSeq), j.LastSeq+2)
	}()
	em := report.NewEmitter("loop", "run-1", j.LastSeq, nil, &report.Journal{Path: j.Path})
	em.Emit(report.Event{Kind: report.KindNote, Text: "one\n"})
	em.Emit(report.Event{Kind: report.KindNote, Text: "two\n"})
	if seqs := <-got; len(seqs) != 2 || seqs[0] != j.LastSeq+1 {
		t.Fatalf("new events: %v", seqs)
	}
	// Replaced by a shorter one.
	small := filepath.Join(t.TempDir(), "small.jsonl")
	js, _ := journalgen.Write(small, 100<<10)
	b, _ := os.ReadFile(small)
	os.WriteFile(j.Path, b, 0o644)
	if seqs := readUntil(t, ctx, ts.URL+"/api/events", js.LastSeq); int64(len(seqs)) != js.LastSeq {
		t.Fatalf("a replaced journal: %d events, want %d", len(seqs), js.LastSeq)
	}
}

// benchJournal is a journal written once per test binary
// (journalgen.Cached).
func benchJournal(b *testing.B, mb int64) journalgen.Journal { return journalgen.Cached(b, mb<<20) }

func TestMain(m *testing.M) {
	code := m.Run()
	journalgen.RemoveCached()
	os.Exit(code)
}

// benchViews runs req against a server of journals of 1, 60 and 600 MB
// (fresh per request when cold), reporting its time, its allocations and
// the peak of the heap above where it stood.
func benchViews(b *testing.B, cold bool, req func(b *testing.B, url string, j journalgen.Journal)) {
	for _, mb := range []int64{1, 60, 600} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			j := benchJournal(b, mb)
			newTS := func() *httptest.Server {
				s, err := New(Options{Workspaces: []live.Source{localOf(j)}, Token: testToken})
				if err != nil {
					b.Fatal(err)
				}
				return httptest.NewServer(s)
			}
			ts := newTS()
			req(b, ts.URL, j) // warm: the server has read the journal once
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				if cold {
					b.StopTimer()
					ts.Close()
					ts = newTS()
					b.StartTimer()
				}
				peak = max(peak, journalgen.PeakHeap(func() { req(b, ts.URL, j) }))
			}
			ts.Close()
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// BenchmarkStatus is GET /api/status: the state file's document, which
// reads no journal.
func BenchmarkStatus(b *testing.B) {
	benchViews(b, false, func(b *testing.B, url string, _ journalgen.Journal) {
		var st status.Report
		get(b, url+"/api/status", &st)
	})
}

// BenchmarkReceiptsCold is the first GET /api/receipts of a server: it
// reads the whole journal once, a piece at a time.
func BenchmarkReceiptsCold(b *testing.B) {
	benchViews(b, true, func(b *testing.B, url string, _ journalgen.Journal) {
		var rc Receipts
		get(b, url+"/api/receipts", &rc)
	})
}

// BenchmarkReceipts is GET /api/receipts of a server that has read the
// journal before: only what was appended is read.
func BenchmarkReceipts(b *testing.B) {
	benchViews(b, false, func(b *testing.B, url string, _ journalgen.Journal) {
		var rc Receipts
		get(b, url+"/api/receipts", &rc)
	})
}

// BenchmarkEventsResume is one event stream (a dashboard coming back
// with Last-Event-ID) until it has the journal's last 5 events.
func BenchmarkEventsResume(b *testing.B) {
	benchViews(b, false, func(b *testing.B, url string, j journalgen.Journal) {
		readUntil(b, context.Background(), fmt.Sprintf("%s/api/events?after=%d", url, j.LastSeq-5), j.LastSeq)
	})
}

// BenchmarkEventsReplay is one event stream that asks for the whole
// journal, until it has the last event.
func BenchmarkEventsReplay(b *testing.B) {
	benchViews(b, false, func(b *testing.B, url string, j journalgen.Journal) {
		readUntil(b, context.Background(), url+"/api/events", j.LastSeq)
	})
}

// A stream that takes nothing holds up neither the hub nor another
// stream: the hub never waits for a stream, and one that fell behind the
// ring reads the file on its own.
func TestHubNeverWaitsForAStream(t *testing.T) {
	defer func(n int) { ringBytes = n }(ringBytes)
	ringBytes = 64 << 10
	w := newWorkspace(t, "app", status.Report{})
	w.emit(t, 3)
	h := newHub(w.Journal, 10*time.Millisecond, make(chan struct{}, replaySlots))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := make(chan struct{})
	defer close(stuck)
	go h.stream(ctx, 0, func([]byte) error { <-stuck; return nil })
	got := make(chan int64, 10000)
	go h.stream(ctx, 0, func(b []byte) error {
		id, _, _ := bytes.Cut(bytes.TrimPrefix(b, []byte("id: ")), []byte("\n"))
		n, _ := strconv.ParseInt(string(id), 10, 64)
		got <- n
		return nil
	})
	// Far more than the ring holds, while the first stream is stuck.
	big := strings.Repeat("x", 200)
	for range 2000 {
		w.em.Emit(report.Event{Kind: report.KindAgentOutput, Text: big})
	}
	timeout := time.After(20 * time.Second)
	for want := int64(1); want <= 2003; want++ {
		select {
		case n := <-got:
			if n != want {
				t.Fatalf("the free stream got seq %d, want %d", n, want)
			}
		case <-timeout:
			t.Fatalf("the free stream got to seq %d of 2003 while another was stuck", want-1)
		}
	}
	h.mu.Lock()
	end := h.end
	h.mu.Unlock()
	if fi, _ := os.Stat(w.Journal); end != fi.Size() {
		t.Errorf("the hub read to %d of %d bytes while a stream was stuck", end, fi.Size())
	}
}
