package loop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/workspace"
)

// newBenchWorkspace makes a git repository with a one-story PRD.
func newBenchWorkspace(tb testing.TB) *workspace.Workspace {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Fatal("this benchmark needs git on PATH: install it (apt-get install git)")
	}
	dir := tb.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.name", "b"}, {"config", "user.email", "b@example.invalid"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			tb.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	prd := filepath.Join(dir, "prd.md")
	if err := os.WriteFile(prd, []byte("### [ ] US-001: Never done\n- [ ] x\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	ws, err := workspace.Open(context.Background(), dir)
	if err != nil {
		tb.Fatal(err)
	}
	return ws
}

// BenchmarkBuildOverhead measures ralph's own cost per iteration: a build of
// 200 iterations against an agent that exits at once, total time minus the
// agent processes' time, divided by 200. The figure is reported as
// overhead-ms/iter; the README's performance section quotes it.
func BenchmarkBuildOverhead(b *testing.B) {
	const iterations = 200
	ws := newBenchWorkspace(b)
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{
		MaxIterations: iterations,
		PRDPath:       filepath.Join(ws.Root, "prd.md"),
		PlanPath:      ws.Path("IMPLEMENTATION_PLAN.md"),
		Agent:         agent.Spec{Name: "true", Headless: []string{truePath}, Format: agent.FormatPlain},
		AgentTimeout:  time.Minute,
		// The agent never changes anything: without room for 200 retries
		// the story would be blocked after its second attempt.
		MaxRetries: iterations + 1,
	}
	var overhead time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Each run starts afresh: retry counts outlive runs in state.json.
		os.Remove(HomeOf(ws).StatePath())
		start := time.Now()
		rep, err := Build(context.Background(), ws, opts)
		if err != nil || rep.Outcome != OutcomeMaxIterations || rep.Iterations != iterations {
			b.Fatalf("outcome %s after %d iterations: %v", rep.Outcome, rep.Iterations, err)
		}
		overhead += time.Since(start) - rep.AgentTime
	}
	b.ReportMetric(float64(overhead.Microseconds())/1000/float64(b.N*iterations), "overhead-ms/iter")
}

// BenchmarkBuildOverheadSuccess measures ralph's own cost per story on the
// success path: a build of 50 stories against a trivial agent that writes
// one file and ticks the first open story, so that every iteration passes
// its check and is committed by ralph. Total time minus the agent
// processes' time, divided by the stories, is reported as
// overhead-ms/story: ralph's snapshots, its check's process, its commit
// and its records, git's own processes included.
func BenchmarkBuildOverheadSuccess(b *testing.B) {
	const stories = 50
	var overhead time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ws, opts := newSuccessBuild(b, stories)
		b.StartTimer()
		start := time.Now()
		rep, err := Build(context.Background(), ws, opts)
		if err != nil || rep.Outcome != OutcomeComplete || rep.StoriesDone != stories {
			b.Fatalf("outcome %s with %d stories done after %d iterations: %v", rep.Outcome, rep.StoriesDone, rep.Iterations, err)
		}
		overhead += time.Since(start) - rep.AgentTime
	}
	b.ReportMetric(float64(overhead.Microseconds())/1000/float64(b.N*stories), "overhead-ms/story")
}

// newSuccessBuild makes a repository with a PRD of n stories, committed,
// and the options of a build whose trivial agent (a shell line) does each
// story at its first attempt: it writes a file of its own and ticks the
// first open story with its criterion (GNU sed's 0,/re/ changes the first
// match only); ralph's one check is `true`.
func newSuccessBuild(tb testing.TB, n int) (*workspace.Workspace, Options) {
	tb.Helper()
	ws := newBenchWorkspace(tb)
	var prd strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&prd, "### [ ] US-%03d: Story %d\n- [ ] done\n\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(ws.Root, "prd.md"), []byte(prd.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-qm", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws.Root}, args...)...).CombinedOutput(); err != nil {
			tb.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		tb.Fatal(err)
	}
	script := `n=$(ls out 2>/dev/null | wc -l); mkdir -p out; echo $n > out/$n.txt; ` +
		`sed -i -e '0,/^### \[ \]/s//### [x]/' -e '0,/^- \[ \]/s//- [x]/' prd.md`
	return ws, Options{
		MaxIterations: n,
		PRDPath:       filepath.Join(ws.Root, "prd.md"),
		PlanPath:      ws.Path("IMPLEMENTATION_PLAN.md"),
		Agent:         agent.Spec{Name: "sh", Headless: []string{"sh", "-c", script}, Format: agent.FormatPlain},
		AgentTimeout:  time.Minute,
		Checks:        []check.Check{{Name: "true", Run: truePath, Timeout: time.Minute}},
	}
}

// BenchmarkTaskEdits100k measures what ralph does after every agent run
// on a PRD of 100,000 stories (4.6 MB) whose agent ticked its own story:
// find what else the agent changed in the task file (describeTaskEdits).
// It was quadratic, a scan of the stories for each story: 50 s an
// iteration (issue 26, item 18). Now it is two parses and two maps.
func BenchmarkTaskEdits100k(b *testing.B) {
	const n = 100000
	var before, after strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&before, "### [ ] US-%06d: Story %d\n- [ ] Criterion %d\n\n", i, i, i)
		box := " "
		if i == 1 {
			box = "x"
		}
		fmt.Fprintf(&after, "### [%s] US-%06d: Story %d\n- [%s] Criterion %d\n\n", box, i, i, box, i)
	}
	old, cur := []byte(before.String()), []byte(after.String())
	b.SetBytes(int64(len(cur)))
	for b.Loop() {
		if got := describeTaskEdits(old, cur, "US-000001"); len(got) != 0 {
			b.Fatalf("edits %v; want none besides the agent's own story", got)
		}
	}
}
