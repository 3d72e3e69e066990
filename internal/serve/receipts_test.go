package serve

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

// TestReceiptsFromTheJournal reads receipts from the lines the loop
// writes (internal/loop: iteration banners, printCheck, the commit line,
// printIteration of a failed attempt) and the iteration records it keeps.
func TestReceiptsFromTheJournal(t *testing.T) {
	w := newWorkspace(t, "app", status.Report{})
	ts := newServer(t, w.Local)
	say := func(kind report.Kind, task string, attempt int, text string, data map[string]any) {
		w.em.Emit(report.Event{Kind: kind, Task: task, Attempt: attempt, Text: text, Data: data})
	}
	say(report.KindIteration, "US-001", 1, "\n── iteration 1/10 · US-001: One · attempt 1/2 · agent fake ──\n", nil)
	say(report.KindCheck, "US-001", 1, "  ✓ check tests (3ms)\n", nil)
	say(report.KindCommit, "US-001", 1, "✓ iteration 1: US-001 done and verified · commit 4175cae\n", nil)
	say(report.KindIteration, "US-002", 1, "\n── iteration 2/10 · US-002: Two · attempt 1/2 · agent fake ──\n", nil)
	say(report.KindCheck, "US-002", 1, "  ✗ check tests (5ms)\n", nil)
	say(report.KindCheck, "US-002", 1, "    │ FAIL tests/sub.sh\n", nil)
	say(report.KindIteration, "", 0, "✗ iteration 2: US-002 tests_failed · 610ms · 0 commits · tests failed\n",
		map[string]any{"iteration": 2, "task": "US-002", "status": "tests_failed", "duration_ms": 609, "reason": "tests failed"})
	say(report.KindIteration, "US-002", 2, "\n── iteration 3/10 · US-002: Two · attempt 2/2 · agent fake ──\n", nil)
	say(report.KindCheck, "US-002", 2, "  ✓ check tests (4ms)\n", nil)
	say(report.KindCommit, "US-002", 2, "✓ iteration 3: US-002 done and verified · commit 4b2ea81\n", nil)
	say(report.KindIteration, "US-003", 1, "\n── iteration 4/10 · US-003: Three · attempt 1/2 · agent fake ──\n", nil)
	say(report.KindBlocker, "US-003", 1, "⛔ US-003 blocked (permanent): needs an API key\n", nil)
	if err := w.j.Err(); err != nil {
		t.Fatal(err)
	}
	// The records of iterations 1 and 3 hold their tokens and cost.
	runs := filepath.Join(filepath.Dir(w.Journal), "runs", "run-1")
	os.MkdirAll(runs, 0o755)
	os.WriteFile(filepath.Join(runs, "iter-1.json"), []byte(`{"task_id":"US-001","duration_ms":1200,"status":"done","tokens":{"input":800,"output":50},"cost_usd_estimate":0.01}`), 0o644)
	os.WriteFile(filepath.Join(runs, "iter-3.json"), []byte(`{"task_id":"US-002","duration_ms":900,"status":"done","tokens":{"input":900,"output":60},"cost_usd_estimate":0.02}`), 0o644)

	var rc Receipts
	if code := get(t, ts.URL+"/api/receipts", &rc); code != 200 {
		t.Fatalf("GET /api/receipts: %d", code)
	}
	if len(rc.Stories) != 3 || len(rc.Iterations) != 4 {
		t.Fatalf("receipts: %+v", rc)
	}
	one, two, three := rc.Stories[0], rc.Stories[1], rc.Stories[2]
	if one.Task != "US-001" || one.State != "done" || one.Attempts != 1 || one.Commit != "4175cae" || one.DurationMillis != 1200 ||
		one.Tokens != (Usage{Input: 800, Output: 50}) || one.CostUSD != 0.01 || len(one.Checks) != 1 || one.Checks[0] != (Check{Name: "tests", Passed: 1, Last: "passed"}) {
		t.Errorf("US-001: %+v", one)
	}
	if two.State != "done" || two.Attempts != 2 || two.Commit != "4b2ea81" || two.DurationMillis != 609+900 || two.Tokens.Input != 900 ||
		len(two.Checks) != 1 || two.Checks[0] != (Check{Name: "tests", Passed: 1, Failed: 1, Last: "passed"}) {
		t.Errorf("US-002: %+v", two)
	}
	if three.State != "blocked" || three.Reason != "needs an API key" || three.Commit != "" {
		t.Errorf("US-003: %+v", three)
	}
	if it := rc.Iterations[1]; it.Iteration != 2 || it.Status != "tests_failed" || it.DurationMillis != 609 {
		t.Errorf("iteration 2: %+v", it)
	}

	// What is appended later is added to what was read before.
	say(report.KindIteration, "US-003", 2, "\n── iteration 5/10 · US-003: Three · attempt 2/2 · agent fake ──\n", nil)
	say(report.KindCommit, "US-003", 2, "✓ iteration 5: US-003 done and verified · commit 2a65bca\n", nil)
	var later Receipts
	get(t, ts.URL+"/api/receipts", &later)
	if three := later.Stories[2]; three.State != "done" || three.Attempts != 2 || three.Commit != "2a65bca" || three.Reason != "" {
		t.Errorf("US-003 after its second attempt: %+v", three)
	}
}
