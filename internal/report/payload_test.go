package report

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/gitx"
)

// shapes pairs each emitter's payload with the data map the release
// before typed payloads wrote for it (the emitters' map literals, zero
// values included): the journal's "data" object must not change.
var shapes = []struct {
	name string
	p    Payload
	old  map[string]any
}{
	{"loop transition", Transition{Detail: "checks failed"}, map[string]any{"detail": "checks failed"}},
	{"thread transition", Transition{Thread: "t1", Source: "human"}, map[string]any{"thread": "t1", "source": "human"}},
	{"engine run", Run{Workers: 2, Target: "main", Worktrees: "/w"}, map[string]any{"workers": 2, "target": "main", "worktrees": "/w"}},
	{"session run, new", Run{Dir: "s/1", Resumed: Ptr(false)}, map[string]any{"dir": "s/1", "resumed": false}},
	{"fleet retry", Run{Retried: &Retried{LogBytes: 0, Iteration: 0, Retry: 2}}, map[string]any{"log_bytes": 0, "iteration": 0, "retry": 2}},
	{"banner", Iteration{Turn: &Turn{Iteration: 3, Task: "US-1"}, Agent: "claude"}, map[string]any{"iteration": 3, "task": "US-1", "agent": "claude"}},
	{"planning banner", Iteration{Turn: &Turn{Iteration: 1}, Agent: "claude"}, map[string]any{"iteration": 1, "task": "", "agent": "claude"}},
	{"session turn", Iteration{Role: "executor", Agent: "codex", Name: "exec-1"}, map[string]any{"role": "executor", "agent": "codex", "name": "exec-1"}},
	{"iteration end", Iteration{Turn: &Turn{Iteration: 2, Task: "US-1"}, End: &End{IterationEnd: true, Status: "failed",
		Tokens: agent.Usage{InputTokens: 5}, Commits: []gitx.Commit{{Hash: "abc", Subject: "s"}}, Failed: &Failed{FailingChecks: []string{"test"}}}},
		map[string]any{"iteration_end": true, "iteration": 2, "task": "US-1", "status": "failed", "duration_ms": 0,
			"tokens": agent.Usage{InputTokens: 5}, "cost_usd_estimate": 0.0, "commits": []gitx.Commit{{Hash: "abc", Subject: "s"}}, "reason": "",
			"failing_checks": []string{"test"}, "failed_at_start_too": nil}},
	{"iteration end, accepted", Iteration{Turn: &Turn{Iteration: 2, Task: "US-1"}, End: &End{IterationEnd: true, Status: "done", Accepted: &Accepted{Verdict: "agent_word"}}},
		map[string]any{"iteration_end": true, "iteration": 2, "task": "US-1", "status": "done", "duration_ms": 0, "tokens": agent.Usage{},
			"cost_usd_estimate": 0.0, "commits": nil, "reason": "", "verdict": "agent_word", "evidence": nil}},
	{"agent output", AgentOutput{Line: ""}, map[string]any{"line": ""}},
	{"heartbeat", Heartbeat{Line: "… working"}, map[string]any{"line": "… working"}},
	{"check", Check{Name: "test", Passed: Ptr(false), DurationMS: new(int64), Tests: &TestCounts{Failed: 1},
		TestDiff: &TestDiff{Broken: []string{"TestA"}}, FailedAtStart: true},
		map[string]any{"name": "test", "passed": false, "duration_ms": 0, "tests": map[string]int{"passed": 0, "failed": 1, "skipped": 0},
			"fixed": nil, "broken": []string{"TestA"}, "still_failing": nil, "new": nil, "gone": nil, "failed_at_start": true}},
	{"thread check", Check{Name: "lint", Passed: Ptr(true)}, map[string]any{"name": "lint", "passed": true}},
	{"session start tests", Check{Protected: []string{"a_test.go"}}, map[string]any{"protected": []string{"a_test.go"}}},
	{"verdict", Verdict{Outcome: "verified", Evidence: []string{"e"}}, map[string]any{"outcome": "verified", "evidence": []string{"e"}, "failing": nil}},
	{"commit", Commit{Iteration: 1, Commit: "abc", Status: "done", Judged: &Judged{Verdict: "verified"}},
		map[string]any{"iteration": 1, "commit": "abc", "status": "done", "verdict": "verified", "evidence": nil, "failing": nil}},
	{"landed", Commit{State: "landed", Commit: "abc", Branch: "main"}, map[string]any{"state": "landed", "commit": "abc", "branch": "main"}},
	{"blocker", Blocker{State: "blocked", Type: "transient", Reason: "r", RequiresHuman: Ptr(false)},
		map[string]any{"state": "blocked", "type": "transient", "reason": "r", "requires_human": false}},
	{"sent back", Blocker{State: "sent_back", Reason: "r", Conflicts: new([]string), Attempts: 1},
		map[string]any{"state": "sent_back", "reason": "r", "conflicts": nil, "attempts": 1}},
	{"limit", Limit{Agent: "claude", Until: "2026-11-28T10:00:00Z"}, map[string]any{"agent": "claude", "until": "2026-11-28T10:00:00Z"}},
	{"run limit", Limit{Ending: &Ending{Outcome: "budget_exhausted"}}, map[string]any{"outcome": "budget_exhausted", "reason": ""}},
	{"session limit", Limit{Role: "executor", Agent: "claude", ResetsAt: &time.Time{}, WaitSeconds: 60},
		map[string]any{"role": "executor", "agent": "claude", "resets_at": time.Time{}, "wait_seconds": 60.0}},
	{"limit wait ended", Wait{Wait: "limit", State: "ended", WaitedMS: new(int64)}, map[string]any{"wait": "limit", "state": "ended", "waited_ms": 0}},
	{"limit wait, no agent free", Wait{Wait: "limit", State: "started", Until: "u", Agent: new(string)},
		map[string]any{"wait": "limit", "state": "started", "until": "u", "agent": ""}},
	{"paused", Wait{Paused: true, By: "ann", ID: "c1", State: "IMPLEMENT"}, map[string]any{"paused": true, "by": "ann", "id": "c1", "state": "IMPLEMENT"}},
	{"questions", Wait{Questions: []string{"Q1"}}, map[string]any{"questions": []string{"Q1"}}},
	{"checkout changed", Warning{CheckoutChanged: []string{"a"}, Tasks: new([]string)}, map[string]any{"checkout_changed": []string{"a"}, "tasks": nil}},
	{"resumed", Note{Paused: Ptr(false)}, map[string]any{"paused": false}},
	{"build summary", Summary{Outcome: "complete", Complete: Ptr(false), Iterations: new(int), Blocked: new([]string), Build: &Build{}},
		map[string]any{"complete": false, "stories_completed": 0, "stories_total": 0, "stories_verified": 0, "stories_agent_word": 0,
			"stories_done_before": 0, "iterations": 0, "final_commit": "", "elapsed_ms": 0, "blocked": nil, "failing_checks": nil,
			"outcome": "complete", "reason": ""}},
	{"parallel summary", Summary{Outcome: "complete", Iterations: new(int), Blocked: new([]string), Landings: &Landings{Landed: 2}},
		map[string]any{"outcome": "complete", "landed": 2, "needs_review": nil, "blocked": nil, "left": 0, "iterations": 0}},
	{"thread summary", Summary{Thread: map[string]any{"id": "t1"}}, map[string]any{"thread": map[string]any{"id": "t1"}}},
	{"control", Control{ID: "c1", Command: "skip", By: "ann", Status: "taken", Task: new(string)},
		map[string]any{"id": "c1", "command": "skip", "by": "ann", "status": "taken", "task": ""}},
}

// Every kind's payload writes the data object its emitters wrote as a
// map, and reads back from it unchanged: journals of either release
// read the same.
func TestPayloadsKeepTheDataShape(t *testing.T) {
	for _, c := range shapes {
		got, err := json.Marshal(Event{Kind: c.p.Kind(), Data: c.p})
		if err != nil {
			t.Fatal(c.name, err)
		}
		want, _ := json.Marshal(map[string]any{"v": 0, "seq": 0, "time": time.Time{}, "machine": "", "kind": c.p.Kind(), "data": c.old})
		if !sameJSON(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
		// Byte for byte: scripts and people grep the journal's lines.
		var w wire
		json.Unmarshal(got, &w)
		if old, _ := json.Marshal(c.old); string(w.Data) != string(old) {
			t.Errorf("%s: data\n got %s\nwant %s", c.name, w.Data, old)
		}
		var back Event
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(c.name, err)
		}
		if reflect.TypeOf(back.Data) != reflect.TypeOf(c.p) {
			t.Errorf("%s: the old line reads back as %#v, want %#v", c.name, back.Data, c.p)
		}
		// A list written as null reads as no list, and is written back
		// as null: the line keeps its keys.
		if again, _ := json.Marshal(back); !sameJSON(again, want) {
			t.Errorf("%s: read back and written again:\n got %s\nwant %s", c.name, again, want)
		}
	}
}

// An event's line is the one the release before typed payloads wrote:
// the envelope's fields in their order, the data's keys sorted.
func TestEventLineKeepsItsBytes(t *testing.T) {
	ev := Event{V: 1, Seq: 3, Time: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC), Run: "r", Machine: "control", Kind: KindControl,
		Data: Control{ID: "c1", Command: "hint", By: "cli", Status: "applied", Text: "t", ContextAdded: "t"}, Text: "control: hint\n"}
	got, _ := json.Marshal(ev)
	want := `{"v":1,"seq":3,"time":"2026-11-28T09:00:00Z","run":"r","machine":"control","kind":"control",` +
		`"data":{"by":"cli","command":"hint","context_added":"t","id":"c1","status":"applied","text":"t"},"text":"control: hint\n"}`
	if string(got) != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
}

// Kinds is the one list of kinds: each has its payload type, and each
// type says its kind.
func TestEveryKindHasItsPayload(t *testing.T) {
	if got := slices.Sorted(maps.Keys(payloads)); !slices.Equal(got, slices.Sorted(slices.Values(Kinds))) {
		t.Fatalf("payload types for %v, kinds %v", got, Kinds)
	}
	for k, decode := range payloads {
		p, err := decode([]byte("{}"))
		if err != nil || p.Kind() != k {
			t.Errorf("%s decodes to %T of kind %s (%v)", k, p, p.Kind(), err)
		}
	}
}

// A journal line of an older or a newer ralph reads, and is written back
// as it was: keys the payload does not know, a zero an emitter wrote,
// data that does not fit its kind's type, an unknown kind.
func TestOldAndNewJournalLinesRoundTrip(t *testing.T) {
	for _, line := range []string{
		`{"v":1,"seq":1,"time":"2026-11-28T09:00:00Z","run":"r","machine":"loop","kind":"check","data":{"name":"test","passed":true,"flaky":3},"text":"  ✓ test\n"}`,
		`{"v":1,"seq":2,"time":"2026-11-28T09:00:00Z","run":"r","machine":"engine","kind":"run","data":{"workers":0,"target":"main"}}`,
		`{"v":1,"seq":3,"time":"2026-11-28T09:00:00Z","run":"r","machine":"loop","kind":"iteration","data":{"iteration":"three","task":"US-1"}}`,
		`{"v":1,"seq":4,"time":"2026-11-28T09:00:00Z","run":"r","machine":"loop","kind":"teleport","data":{"to":"mars"}}`,
		`{"v":1,"seq":5,"time":"2026-11-28T09:00:00Z","run":"r","worker":"w1","machine":"loop","kind":"transition","from":"A","to":"B","trigger":"t","data":{"detail":"d","origin_run":"loop-1"}}`,
		`{"v":1,"seq":6,"time":"2026-11-28T09:00:00Z","machine":"loop","kind":"note","data":[1,2]}`,
	} {
		var ev Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(ev)
		if !sameJSON(got, []byte(line)) {
			t.Errorf("read and written back:\n got %s\nwant %s", got, line)
		}
	}
	var ev Event
	json.Unmarshal([]byte(`{"v":1,"kind":"check","data":{"name":"test","passed":false,"duration_ms":1200}}`), &ev)
	if c, ok := ev.Data.(Check); !ok || c.Name != "test" || *c.Passed || *c.DurationMS != 1200 {
		t.Errorf("a check line reads as %#v", ev.Data)
	}
}

// FuzzEventDecode: whatever a journal line holds, reading it never
// panics, and an event read and written back reads the same again.
func FuzzEventDecode(f *testing.F) {
	for _, c := range shapes {
		b, _ := json.Marshal(Event{Kind: c.p.Kind(), Data: c.p})
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"wait","data":{"left_ms":null,"agent":"","x":{"y":[1]}}}`))
	f.Add([]byte(`{"kind":"summary","data":{"build":1,"stories_total":"x","origin_run":7}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var ev Event
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		once, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("%s reads but does not write: %v", line, err)
		}
		var again Event
		if err := json.Unmarshal(once, &again); err != nil {
			t.Fatalf("%s written as %s, which does not read: %v", line, once, err)
		}
		twice, _ := json.Marshal(again)
		if !sameJSON(once, twice) {
			t.Fatalf("%s\n written as %s\n then as   %s", line, once, twice)
		}
	})
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
