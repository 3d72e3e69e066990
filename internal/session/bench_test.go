package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/session"
)

// benchInvoker plays every role at once: the planner returns n tasks, each
// executor writes one file, every review qualifies and the goal check
// passes. What remains is ralph's own work per task: the transitions and
// their atomic progress writes, the marks, the reports, the diff for the
// reviewer and the git commit.
type benchInvoker struct {
	root string
	n    int
}

func (benchInvoker) Agent(string) string { return "bench" }

func (b benchInvoker) Invoke(_ context.Context, c session.Call) (string, error) {
	switch c.Role {
	case "planner":
		var ts []string
		for i := 1; i <= b.n; i++ {
			ts = append(ts, fmt.Sprintf(`{"title": "Write file %d"}`, i))
		}
		return "```json\n{\"status\": \"completed\", \"tasks\": [" + strings.Join(ts, ",") + "]}\n```", nil
	case "executor":
		i := strings.Index(c.Prompt, "Execute task-")
		id := strings.Fields(c.Prompt[i+len("Execute "):])[0]
		if err := os.WriteFile(filepath.Join(b.root, strings.TrimSuffix(id, ",")+".txt"), []byte("x\n"), 0o644); err != nil {
			return "", err
		}
		return "```json\n{\"status\": \"completed\"}\n```", nil
	case "reviewer":
		return "```json\n{\"verdict\": \"Qualified\"}\n```", nil
	default:
		return "```json\n{\"status\": \"passed\"}\n```", nil
	}
}

// BenchmarkSessionOverheadPerTask runs whole sessions of 10 tasks against
// roles that answer at once and reports ralph's cost per task.
func BenchmarkSessionOverheadPerTask(b *testing.B) {
	const tasks = 10
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		e := newSessionEnv(b, "write ten files")
		r := e.runner(b, benchInvoker{root: e.ws.Root, n: tasks})
		r.Events = nil
		b.StartTimer()
		if _, err := r.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*tasks), "ms/task")
}
