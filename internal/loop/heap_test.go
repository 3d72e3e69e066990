package loop

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
)

// tickingAgent is the trivial agent of the success path, in process: each
// run ticks the first open story of the PRD and its first open criterion,
// as an agent that did the story would. It keeps nothing between runs.
type tickingAgent struct {
	prd string
	git *fakeGit
}

func (a tickingAgent) RunAgent(ctx context.Context, spec agent.Spec, n int, prompt string) (runkit.Result, error) {
	data, err := os.ReadFile(a.prd)
	if err != nil {
		return runkit.Result{}, err
	}
	text := strings.Replace(string(data), "### [ ] ", "### [x] ", 1)
	text = strings.Replace(text, "- [ ] ", "- [x] ", 1)
	if err := os.WriteFile(a.prd, []byte(text), 0o644); err != nil {
		return runkit.Result{}, err
	}
	a.git.touch(".agents/tasks/prd.md")
	return runkit.Result{}, nil
}

// heapProbe is a sink that reads the heap in use, after a collection, at
// the end of chosen iterations. It also drops what the fake git records
// of past iterations (its call log, its commit messages), so that only
// what the runner keeps is measured.
type heapProbe struct {
	mu   sync.Mutex
	git  *fakeGit
	ends int
	at   map[int]uint64
}

func (h *heapProbe) Emit(ev report.Event) {
	if it, ok := ev.Data.(report.Iteration); !ok || it.End == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ends++
	h.git.mu.Lock()
	h.git.calls, h.git.msgs = nil, nil
	if n := len(h.git.commits); n > 1 {
		h.git.commits = h.git.commits[n-1:]
	}
	h.git.mu.Unlock()
	if _, ok := h.at[h.ends]; ok {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.at[h.ends] = ms.HeapAlloc
	}
}

// heapRun builds a PRD of stories (each about 40 bytes, and a
// description of desc bytes) for iterations iterations on the success
// path, one story done and committed in each, and returns the heap in
// use after iteration from and after the last.
func heapRun(tb testing.TB, stories, desc, from, iterations int) (before, after uint64) {
	tb.Helper()
	var prd strings.Builder
	prd.WriteString("# PRD: many stories\n\n")
	for i := 1; i <= stories; i++ {
		fmt.Fprintf(&prd, "### [ ] US-%05d: Story %d\n%s\n- [ ] it works\n\n", i, i, strings.Repeat("d", desc))
	}
	r := newRig(tb, prd.String())
	r.git.allowed["CommitSnapshot"] = true
	probe := &heapProbe{git: r.git, at: map[int]uint64{from: 0, iterations: 0}}
	r.opts.MaxIterations = iterations
	r.opts.Agents = tickingAgent{prd: r.opts.PRDPath, git: r.git}
	r.opts.Sink = probe
	rep, err := Build(r.ctx, r.ws, r.opts)
	if err != nil || rep.Iterations != iterations || rep.StoriesDone != iterations {
		tb.Fatalf("build: %d iterations, %d stories done, %v; want %d of each", rep.Iterations, rep.StoriesDone, err, iterations)
	}
	return probe.at[from], probe.at[iterations]
}

// TestBuildMemoryFlat holds the loop's memory flat with iterations (issue
// 26, item 16). The ids of the parsed task file are substrings of the
// whole file; the state's per-task records were keyed by them, so every
// task done kept its iteration's copy of the task file alive: with this
// 52 KB PRD, 5 MB more after 100 more iterations. Now the heap grows by
// the records themselves only, about 600 bytes a task.
func TestBuildMemoryFlat(t *testing.T) {
	before, after := heapRun(t, 130, 360, 20, 120)
	grew := int64(after) - int64(before)
	t.Logf("heap in use after iteration 20: %d KB, after 120: %d KB", before>>10, after>>10)
	if grew > 1<<20 {
		t.Errorf("the heap grew by %d KB in 100 iterations; want under 1 MB, whatever the iteration count", grew>>10)
	}
}

// BenchmarkBuildMemory is the measure of issue 26's item 16: 1,000
// iterations on the success path over a PRD of 1,100 stories (45 KB),
// the heap in use after iteration 100 and after iteration 1,000
// reported as heap-KB-at-100 and heap-KB-at-1000. Before the fix the
// second was 40 MB. It fails when the heap grew by more than 2 MB.
func BenchmarkBuildMemory(b *testing.B) {
	for b.Loop() {
		before, after := heapRun(b, 1100, 0, 100, 1000)
		b.ReportMetric(float64(before>>10), "heap-KB-at-100")
		b.ReportMetric(float64(after>>10), "heap-KB-at-1000")
		if grew := int64(after) - int64(before); grew > 2<<20 {
			b.Fatalf("the heap grew by %d KB from iteration 100 to 1,000; want under 2 MB", grew>>10)
		}
	}
}
