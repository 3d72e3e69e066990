// Package journalgen writes journals (.ralph/events.jsonl) of a given
// size shaped like a chatty build's, for the tests and benchmarks of the
// views that read them (serve, mcpserver): each iteration is a banner,
// thousands of agent lines (about 2.9 MB, as one chatty iteration
// measured), a check, a commit and the event that closes it.
package journalgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/report"
)

// IterationBytes is about how much of the journal one iteration takes.
const IterationBytes = 2900 << 10

// Journal is what Write wrote.
type Journal struct {
	Path       string
	Size       int64
	Events     int64
	Iterations int
	LastSeq    int64
}

// Write writes a journal of at least size bytes at path.
func Write(path string, size int64) (Journal, error) {
	f, err := os.Create(path)
	if err != nil {
		return Journal{}, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	j := Journal{Path: path}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	line := strings.Repeat("the agent reads a file and says what it sees in it; ", 2)
	emit := func(ev report.Event) {
		j.Events++
		j.LastSeq = j.Events
		ev.V, ev.Seq, ev.Run, ev.Machine = report.SchemaVersion, j.Events, "run-1", "loop"
		ev.Time = t0.Add(time.Duration(j.Events) * time.Millisecond)
		b, _ := json.Marshal(ev)
		w.Write(b)
		w.WriteByte('\n')
		j.Size += int64(len(b)) + 1
	}
	for j.Size < size {
		j.Iterations++
		n := j.Iterations
		task := fmt.Sprintf("US-%03d", (n-1)%50+1)
		emit(report.Event{Kind: report.KindIteration, Task: task, Attempt: 1, Data: report.Iteration{Turn: &report.Turn{Iteration: n, Task: task}, Agent: "claude"},
			Text: fmt.Sprintf("\n=== iteration %d: %s ===\n", n, task)})
		start := j.Size
		for j.Size-start < IterationBytes && j.Size < size {
			emit(report.Event{Kind: report.KindAgentOutput, Task: task, Text: line + "\n", Data: report.AgentOutput{Line: line}})
		}
		emit(report.Event{Kind: report.KindCheck, Task: task, Data: report.Check{Name: "test", Passed: report.Ptr(true)}, Text: "  ralph: test passed\n"})
		hash := fmt.Sprintf("%040x", n)
		emit(report.Event{Kind: report.KindCommit, Task: task, Data: report.Commit{Iteration: n, Commit: hash, Status: "done", Judged: &report.Judged{Verdict: "verified", Evidence: []string{"test"}}},
			Text: "  ralph: committed " + hash[:7] + "\n"})
		emit(report.Event{Kind: report.KindIteration, Task: task, Data: report.Iteration{Turn: &report.Turn{Iteration: n, Task: task}, End: &report.End{IterationEnd: true, Status: "done",
			DurationMS: 60000, Tokens: agent.Usage{InputTokens: 1000, OutputTokens: 200}, CostUSD: 0.01}}, Text: fmt.Sprintf("iteration %d: done\n", n)})
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return j, err
	}
	return j, f.Close()
}

// PeakHeap runs f and returns how far the heap rose above where it
// stood before, at its highest: sampled every half millisecond, which a
// view holding a journal in memory for the time it takes to parse it
// cannot slip between.
func PeakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		var s runtime.MemStats
		for {
			runtime.ReadMemStats(&s)
			if s.HeapAlloc > peak.Load() {
				peak.Store(s.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	runtime.ReadMemStats(&ms)
	top := max(peak.Load(), ms.HeapAlloc)
	if top < base {
		return 0
	}
	return top - base
}

var cached sync.Map // size in bytes -> Journal

// Cached is a journal of size bytes written once per test binary, for
// benchmarks that read the same journal many times; RemoveCached (from
// TestMain) deletes them. One over 100 MB is written only when
// RALPH_BENCH_BIG=1: it costs minutes and disk.
func Cached(b testing.TB, size int64) Journal {
	b.Helper()
	if size > 100<<20 && os.Getenv("RALPH_BENCH_BIG") != "1" {
		b.Skip("set RALPH_BENCH_BIG=1 to write and read a 600 MB journal")
	}
	if j, ok := cached.Load(size); ok {
		return j.(Journal)
	}
	dir, err := os.MkdirTemp("", "ralph-bench-")
	if err != nil {
		b.Fatal(err)
	}
	j, err := Write(filepath.Join(dir, "events.jsonl"), size)
	if err != nil {
		b.Fatal(err)
	}
	cached.Store(size, j)
	return j
}

// RemoveCached deletes the journals Cached wrote.
func RemoveCached() {
	cached.Range(func(_, v any) bool {
		os.RemoveAll(filepath.Dir(v.(Journal).Path))
		return true
	})
}
