package loop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
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
		os.Remove(StatePath(ws))
		start := time.Now()
		rep, err := Build(context.Background(), ws, opts)
		if err != nil || rep.Outcome != OutcomeMaxIterations || rep.Iterations != iterations {
			b.Fatalf("outcome %s after %d iterations: %v", rep.Outcome, rep.Iterations, err)
		}
		overhead += time.Since(start) - rep.AgentTime
	}
	b.ReportMetric(float64(overhead.Microseconds())/1000/float64(b.N*iterations), "overhead-ms/iter")
}
