package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

// TestReceiptsFromTheJournal reads receipts from the events the loop
// writes (internal/loop: iteration banners, checks, the commit, the event
// that closes each iteration) and the iteration records it keeps. The
// texts are not the loop's: receipts read only the data.
func TestReceiptsFromTheJournal(t *testing.T) {
	w := newWorkspace(t, "app", status.Report{})
	ts := newServer(t, w.Local)
	say := func(kind report.Kind, task string, attempt int, text string, data map[string]any) {
		w.em.Emit(report.Event{Kind: kind, Task: task, Attempt: attempt, Text: text, Data: readData(kind, data)})
	}
	banner := func(n int, task string, attempt int) {
		say(report.KindIteration, task, attempt, "a banner\n", map[string]any{"iteration": n, "task": task, "agent": "fake"})
	}
	end := func(n int, task, status string, extra map[string]any) {
		data := map[string]any{"iteration_end": true, "iteration": n, "task": task, "status": status}
		for k, v := range extra {
			data[k] = v
		}
		say(report.KindIteration, task, 0, "", data)
	}
	check := func(task string, attempt int, name string, passed bool) {
		say(report.KindCheck, task, attempt, "a check\n", map[string]any{"name": name, "passed": passed, "duration_ms": 3})
	}
	commit := func(n int, task string, attempt int, hash string) {
		say(report.KindCommit, task, attempt, "a commit\n", map[string]any{"iteration": n, "commit": hash, "status": "done"})
	}
	banner(1, "US-001", 1)
	check("US-001", 1, "tests", true)
	commit(1, "US-001", 1, "4175cae0a1b2c3d4e5f60718293a4b5c6d7e8f90")
	end(1, "US-001", "done", nil)
	banner(2, "US-002", 1)
	check("US-002", 1, "tests", false)
	say(report.KindCheck, "US-002", 1, "    │ FAIL tests/sub.sh\n", nil)
	end(2, "US-002", "tests_failed", map[string]any{"duration_ms": 609, "reason": "tests failed"})
	banner(3, "US-002", 2)
	check("US-002", 2, "tests", true)
	commit(3, "US-002", 2, "4b2ea81")
	end(3, "US-002", "done", nil)
	banner(4, "US-003", 1)
	say(report.KindBlocker, "US-003", 1, "a blocker\n", map[string]any{"state": "blocked", "type": "permanent", "reason": "needs an API key"})
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
		one.Tokens != (Usage{InputTokens: 800, OutputTokens: 50}) || one.CostUSD != 0.01 || len(one.Checks) != 1 || one.Checks[0] != (Check{Name: "tests", Passed: 1, Last: "passed"}) {
		t.Errorf("US-001: %+v", one)
	}
	if two.State != "done" || two.Attempts != 2 || two.Commit != "4b2ea81" || two.DurationMillis != 609+900 || two.Tokens.InputTokens != 900 ||
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
	banner(5, "US-003", 2)
	commit(5, "US-003", 2, "2a65bca")
	end(5, "US-003", "done", map[string]any{"tokens": map[string]any{"input": 70}, "cost_usd_estimate": 0.5})
	var later Receipts
	get(t, ts.URL+"/api/receipts", &later)
	if three := later.Stories[2]; three.State != "done" || three.Attempts != 2 || three.Commit != "2a65bca" || three.Reason != "" ||
		three.Tokens.InputTokens != 70 || three.CostUSD != 0.5 {
		t.Errorf("US-003 after its second attempt: %+v", three)
	}
}

// TestReceiptsFromARecordedBuild reads the journal `ralph demo` wrote
// (testdata/demo.jsonl: a plan, then three stories, the second failing its
// check once), with no iteration records beside it: every figure comes
// from the events' data as the loop writes it.
func TestReceiptsFromARecordedBuild(t *testing.T) {
	w := newWorkspace(t, "demo", status.Report{})
	raw, err := os.ReadFile("testdata/demo.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.Journal, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, w.Local)
	var rc Receipts
	if code := get(t, ts.URL+"/api/receipts", &rc); code != 200 {
		t.Fatalf("GET /api/receipts: %d", code)
	}
	if len(rc.Stories) != 3 || len(rc.Iterations) != 4 {
		t.Fatalf("want 3 stories and 4 build iterations (not the planning one); got %+v", rc)
	}
	one, two, three := rc.Stories[0], rc.Stories[1], rc.Stories[2]
	if one.Task != "US-001" || one.State != "done" || one.Attempts != 1 || one.Commit != "f239ebd" || one.DurationMillis != 610 ||
		one.Tokens != (Usage{InputTokens: 841, OutputTokens: 59}) || one.CostUSD != 0.0012 || len(one.Checks) != 1 || one.Checks[0] != (Check{Name: "tests", Passed: 1, Last: "passed"}) {
		t.Errorf("US-001: %+v", one)
	}
	if two.Task != "US-002" || two.State != "done" || two.Attempts != 2 || two.Commit != "5cd5ee3" || two.DurationMillis != 613+336 ||
		two.Tokens != (Usage{InputTokens: 844 + 893, OutputTokens: 49 + 58}) || len(two.Checks) != 1 || two.Checks[0] != (Check{Name: "tests", Passed: 1, Failed: 1, Last: "passed"}) {
		t.Errorf("US-002: %+v", two)
	}
	if three.Task != "US-003" || three.State != "done" || three.Commit != "27602f6" {
		t.Errorf("US-003: %+v", three)
	}
	if it := rc.Iterations[1]; it.Iteration != 2 || it.Task != "US-002" || it.Status != "tests_failed" || it.DurationMillis != 613 || it.Tokens.InputTokens != 844 {
		t.Errorf("iteration 2: %+v", it)
	}
	if it := rc.Iterations[3]; it.Iteration != 4 || it.Status != "done" || it.Commit != "27602f6" || it.Attempt != 1 {
		t.Errorf("iteration 4: %+v", it)
	}
}

// A receipt says how ralph accepted a story, never done on the agent's
// claim: verified with its evidence, done on the agent's word, and in a
// parallel build accepted on its worker's branch until the merge queue
// lands it.
func TestReceiptsSayHowAStoryWasAccepted(t *testing.T) {
	w := newWorkspace(t, "app", status.Report{})
	ts := newServer(t, w.Local)
	emit := func(ev report.Event) { w.em.Emit(ev) }
	commit := func(worker, task, verdict string, evidence []string, extra map[string]any) {
		data := map[string]any{"iteration": 1, "commit": "abc1234", "status": "done", "verdict": verdict, "evidence": evidence}
		for k, v := range extra {
			data[k] = v
		}
		emit(report.Event{Kind: report.KindCommit, Worker: worker, Task: task, Data: readData(report.KindCommit, data), Text: "a commit\n"})
		emit(report.Event{Kind: report.KindIteration, Worker: worker, Task: task, Data: readData(report.KindIteration, map[string]any{"iteration_end": true, "iteration": 1, "task": task, "status": "done"})})
	}
	emit(report.Event{Kind: report.KindIteration, Task: "US-001", Data: readData(report.KindIteration, map[string]any{"iteration": 1, "task": "US-001"})})
	commit("", "US-001", "verified", []string{"TestA failed at the start and passes now (go test)"}, nil)
	emit(report.Event{Kind: report.KindIteration, Task: "US-002", Data: readData(report.KindIteration, map[string]any{"iteration": 1, "task": "US-002"})})
	commit("", "US-002", "agent_word", nil, nil)
	emit(report.Event{Kind: report.KindIteration, Worker: "w1", Task: "US-003", Data: readData(report.KindIteration, map[string]any{"iteration": 1, "task": "US-003"})})
	commit("w1", "US-003", "verified", []string{"check \"tests\" failed at the start and passes now"}, nil)
	if err := w.j.Err(); err != nil {
		t.Fatal(err)
	}
	var rc Receipts
	get(t, ts.URL+"/api/receipts", &rc)
	by := map[string]Receipt{}
	for _, r := range rc.Stories {
		by[r.Task] = r
	}
	if r := by["US-001"]; r.State != "verified" || r.Verdict != "verified" || len(r.Evidence) != 1 {
		t.Errorf("US-001: %+v; want verified with its evidence", r)
	}
	if r := by["US-002"]; r.State != "done_agent_word" {
		t.Errorf("US-002: %+v; want done on the agent's word", r)
	}
	if r := by["US-003"]; r.State != "awaiting_landing" {
		t.Errorf("US-003: %+v; want accepted on its branch, not landed yet", r)
	}
	// The merge queue lands it.
	emit(report.Event{Kind: report.KindCommit, Worker: "w1", Task: "US-003", Data: readData(report.KindCommit, map[string]any{"state": "landed", "commit": "def5678", "branch": "main"}), Text: "landed\n"})
	get(t, ts.URL+"/api/receipts", &rc)
	for _, r := range rc.Stories {
		if r.Task == "US-003" && (r.State != "landed" || r.Verdict != "verified") {
			t.Errorf("US-003 after landing: %+v; want landed, verified", r)
		}
	}
}

// A run stopped during an iteration leaves its story interrupted, not
// working: the stop's limit event and the end of a parallel build cut the
// iterations they leave open (receipts said "working" after a stop).
func TestReceiptsAfterAStop(t *testing.T) {
	w := newWorkspace(t, "app", status.Report{})
	ts := newServer(t, w.Local)
	w.em.Emit(report.Event{Kind: report.KindIteration, Task: "US-001", Attempt: 1, Data: readData(report.KindIteration, map[string]any{"iteration": 1, "task": "US-001"})})
	w.em.Emit(report.Event{Kind: report.KindAgentOutput, Task: "US-001", Text: "working on it\n"})
	var rc Receipts
	get(t, ts.URL+"/api/receipts", &rc)
	if len(rc.Stories) != 1 || rc.Stories[0].State != "working" {
		t.Fatalf("while its iteration goes: %+v", rc.Stories)
	}
	w.em.Emit(report.Event{Kind: report.KindLimit, Text: "■ stopped: iteration 1 recorded as interrupted\n",
		Data: readData(report.KindLimit, map[string]any{"outcome": "interrupted", "reason": "stopped in TEST during iteration 1"})})
	// A parallel build's worker, then the build's end.
	wk := report.NewEmitter("loop", "run-w1", 100, nil, w.j)
	wk.Emit(report.Event{Kind: report.KindIteration, Worker: "w1", Task: "US-002", Attempt: 1, Data: readData(report.KindIteration, map[string]any{"iteration": 1, "task": "US-002"})})
	report.NewEmitter("engine", "par-1", 200, nil, w.j).Emit(report.Event{Kind: report.KindSummary, Data: readData(report.KindSummary, map[string]any{"outcome": "interrupted"})})
	get(t, ts.URL+"/api/receipts", &rc)
	if len(rc.Stories) != 2 || rc.Stories[0].State != "interrupted" || rc.Stories[1].State != "interrupted" {
		t.Errorf("after the stop: %+v, want both interrupted", rc.Stories)
	}
	for _, it := range rc.Iterations {
		if it.Status != "interrupted" {
			t.Errorf("iteration %d of %s: %s, want interrupted", it.Iteration, it.Task, it.Status)
		}
	}
}

// readData is data as a journal line holds it, read back.
func readData(kind report.Kind, data map[string]any) report.Payload {
	if data == nil {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"kind": kind, "data": data})
	var ev report.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		panic(err)
	}
	return ev.Data
}
