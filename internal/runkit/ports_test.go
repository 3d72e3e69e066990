package runkit

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/internal/check"
)

func TestRunAllStopsAtFirstFailure(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "third-ran")
	checks := []check.Check{
		{Name: "one", Run: "true"},
		{Name: "two", Run: "exit 1"},
		{Name: "three", Run: "touch " + marker},
	}
	results, ok := RunAll(context.Background(), ExecChecks{}, dir, checks)
	if ok || len(results) != 2 || results[1].Check.Name != "two" || !results[0].Passed() {
		t.Errorf("RunAll = %+v, %v; want two results, the second failing", results, ok)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("RunAll ran a check after a failure")
	}

	results, ok = RunAll(context.Background(), ExecChecks{}, dir, checks[:1])
	if !ok || len(results) != 1 {
		t.Errorf("RunAll(passing) = %+v, %v", results, ok)
	}
	if results, ok := RunAll(context.Background(), ExecChecks{}, dir, nil); !ok || results != nil {
		t.Errorf("RunAll(nil) = %+v, %v; want nil, true", results, ok)
	}
}
