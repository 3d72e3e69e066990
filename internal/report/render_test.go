package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
)

// renders are events as their runners emit them, without Text, and the
// line a person has always read for each (the wording the call sites
// composed before the payload words it).
var renders = []struct {
	ev   Event
	want string
}{
	{Event{Machine: "session", Run: "s1", From: "Executing", To: "Reviewing", Trigger: "task_done", Task: "T-1",
		Data: Transition{Detail: strings.Repeat("x", 130)}},
		"session s1: Executing → Reviewing (task_done, T-1: " + strings.Repeat("x", 120) + "…)\n"},
	{Event{Machine: "session", Run: "s1", From: "Initializing", To: "Planning", Trigger: "started", Data: Transition{}},
		"session s1: Initializing → Planning (started)\n"},
	{Event{Machine: "thread", Run: "t1", From: "Running", To: "Verifying", Trigger: "loop_done", Data: Transition{Thread: "t1", Source: "ralph"}},
		"thread t1: Running → Verifying\n"},
	{Event{Machine: "thread", Run: "t1", To: "Drafting", Trigger: "new", Data: Transition{Thread: "t1", Source: "human"}}, ""},
	{Event{Machine: "loop", From: "INIT", To: "MEMORY_LOAD", Trigger: "ok", Data: Transition{Detail: "why"}}, ""},
	{Event{Machine: "engine", Run: "r1", Data: Run{Workers: 2, Target: "main", Worktrees: "/w/r1"}},
		"ralph: parallel build r1: 2 workers landing on main; worktrees in /w/r1\n"},
	{Event{Machine: "session", Run: "s1", Data: Run{Resumed: Ptr(true), State: "Executing"}},
		"ralph: resuming session s1 at Executing\n"},
	{Event{Machine: "session", Run: "s1", Data: Run{Dir: ".ralph/sessions/s1", Resumed: Ptr(true)}}, ""},
	{Event{Machine: "fleet", Worker: "h1", Data: Run{Head: "0123456789abcdef", Branch: "ralph/r/T-1"}},
		"✓ verified on its branch · 0123456 pushed to the exchange\n"},
	{Event{Machine: "fleet", Worker: "h1", Data: Run{Retried: &Retried{LogBytes: 42, Iteration: 3, WorkerAlive: true}}},
		"↻ retried at iteration 3 (42 bytes of agent output): its worker h1 is alive, the attempt itself did not finish (a timeout or an error); the loop resumes from its saved state\n"},
	{Event{Machine: "fleet", Worker: "h1", Data: Run{Retried: &Retried{LogBytes: 42, Iteration: 3}}},
		"↻ retried after its worker was lost at iteration 3 (42 bytes of agent output): the loop resumes from its saved state\n"},
	{Event{Machine: "session", Data: Iteration{Role: "executor", Agent: "claude", Name: "executor-1"}}, "── executor · agent claude ──\n"},
	{Event{Machine: "thread", Data: Check{Name: "go test", Passed: Ptr(true)}}, "  ✓ go test\n"},
	{Event{Machine: "thread", Data: Check{Name: "lint", Passed: Ptr(false)}}, "  ✗ lint\n"},
	{Event{Machine: "session", Data: Check{Protected: []string{"a_test.go", "b_test.go"}}},
		"ralph: the task changed a_test.go, b_test.go; running the checks again with the start's versions against the new code\n"},
	{Event{Machine: "loop", Data: Check{Name: "test", Passed: Ptr(true)}}, ""},
	{Event{Machine: "engine", Task: "T-1", Data: Commit{State: "landed", Commit: "0123456789abcdef", Branch: "main"}},
		"[queue T-1] ✓ landed on main · commit 0123456\n"},
	{Event{Machine: "fleet", Task: "T-1", Data: Commit{State: "landed", Commit: "0123456789abcdef", Branch: "main"}},
		"queue: ✓ landed on main · commit 0123456\n"},
	{Event{Machine: "engine", Task: "T-1", Data: Commit{Commit: "0123456789abcdef", BeforeRestart: true}},
		"[queue T-1] landed before the restart · commit 0123456\n"},
	{Event{Machine: "fleet", Task: "T-1", Data: Commit{Commit: "0123456789abcdef", BeforeRestart: true}},
		"queue: landed before the restart · commit 0123456\n"},
	{Event{Machine: "loop", Task: "T-1", Data: Commit{Iteration: 2, Commit: "0123456789abcdef", Status: "partial", BeforeRestart: true}},
		"✓ iteration 2: T-1 was committed before the restart · commit 0123456\n"},
	{Event{Machine: "loop", Task: "T-1", Data: Commit{Iteration: 2, Commit: "0123456789abcdef", Status: "partial"}},
		"◐ iteration 2: T-1 partial work committed (0123456); a fresh agent continues\n"},
	{Event{Machine: "loop", Task: "T-1", Data: Commit{Iteration: 3, Status: "done", Judged: &Judged{Verdict: "verified"}}},
		"✓ iteration 3: T-1 done and verified · commit (none)\n"},
	{Event{Machine: "loop", Task: "T-1", Data: Commit{Iteration: 3, Commit: "0123456789abcdef", Status: "done", Judged: &Judged{Verdict: "agent_word"}}},
		"✓ iteration 3: T-1 done, agent's word · commit 0123456\n"},
	{Event{Machine: "loop", Data: Iteration{Turn: &Turn{Iteration: 4, Task: "T-1"}, End: &End{Status: "tests_failed", DurationMS: 1234, Commits: make([]gitx.Commit, 1), Reason: "check \"test\" exited with code 1"}}},
		"✗ iteration 4: T-1 tests_failed · 1.23s · 1 commit · check \"test\" exited with code 1\n"},
	{Event{Machine: "loop", Data: Iteration{Turn: &Turn{Iteration: 1}, End: &End{Status: "planned", DurationMS: 60000}}},
		"✓ iteration 1: planned · 1m0s · 0 commits\n"},
	{Event{Machine: "loop", Data: Iteration{Turn: &Turn{Iteration: 5, Task: "T-1"}, End: &End{Status: "open", DurationMS: 5}}},
		"· iteration 5: T-1 open · 10ms · 0 commits\n"},
	{Event{Machine: "loop", Data: Iteration{Turn: &Turn{Iteration: 5, Task: "T-1"}, End: &End{Status: "interrupted"}}},
		"■ iteration 5: T-1 interrupted · 0s · 0 commits\n"},
	{Event{Machine: "loop", Data: Iteration{Turn: &Turn{Iteration: 5, Task: "T-1"}, End: &End{Status: "done"}}}, ""},
	{Event{Machine: "loop", Data: Iteration{Turn: &Turn{Iteration: 5, Task: "T-1"}, End: &End{Status: "partial"}}}, ""},
	{Event{Machine: "loop", Data: Verdict{Outcome: "verified", Evidence: strings.Split("a b c d e f g h i j", " ")}},
		"  evidence: a\n  evidence: b\n  evidence: c\n  evidence: d\n  evidence: e\n  evidence: f\n  evidence: g\n  evidence: h\nand 2 more\n"},
	{Event{Machine: "loop", Data: Verdict{Outcome: "agent_word"}}, ""},
	{Event{Machine: "loop", Data: Wait{Wait: "breaker", State: "started", Until: "2026-11-28T10:11:12Z", Reason: "3 iterations without progress"}},
		"  ⚡ circuit breaker open (3 iterations without progress)\n"},
	{Event{Machine: "loop", Data: Wait{Breaker: "half_open"}}, "  ⚡ circuit breaker half-open: one iteration may try\n"},
	{Event{Machine: "loop", Data: Wait{Breaker: "open", Reason: "x", CooldownMS: Ptr(int64(1000))}}, ""},
	{Event{Machine: "loop", Data: Wait{Wait: "limit", State: "ended", WaitedMS: Ptr(int64(61500))}},
		"  ▶ the usage-limit wait is over after 1m2s: going on\n"},
	{Event{Machine: "loop", Data: Wait{Wait: "breaker", State: "waiting", LeftMS: Ptr(int64(1499)), Until: "2026-11-28T10:11:12Z"}},
		"  … circuit breaker cooling down: 1s left (until " + time.Date(2026, 11, 28, 10, 11, 12, 0, time.UTC).Local().Format("15:04:05") + ")\n"},
	{Event{Machine: "loop", Data: Wait{Wait: "limit", State: "waiting", LeftMS: Ptr(int64(1500)), Until: "2026-11-28T10:11:12Z"}},
		"  … waiting for a usage limit to reset: 2s left (until " + time.Date(2026, 11, 28, 10, 11, 12, 0, time.UTC).Local().Format("15:04:05") + ")\n"},
	{Event{Machine: "session", Data: Wait{WaitingFor: "usage limit of claude", LeftSeconds: Ptr(2.0)}}, ""},
	{Event{Machine: "engine", Task: "T-1", Data: Blocker{State: "sent_back", Reason: "a conflict"}},
		"[queue T-1] ↻ sent back to a worker: a conflict\n"},
	{Event{Machine: "fleet", Task: "T-1", Data: Blocker{State: "sent_back", Reason: "a conflict"}}, "queue: ↻ sent back: a conflict\n"},
	{Event{Machine: "engine", Worker: "w1", Task: "T-1", Data: Blocker{State: "blocked", Reason: "no worktree"}}, "[w1 T-1] ✗ no worktree\n"},
	{Event{Machine: "engine", Worker: "w1", Task: "T-1", Data: Blocker{State: "blocked", Reason: strings.Repeat("y", 310), Error: "boom"}},
		"[w1 T-1] ✗ the worker stopped: " + strings.Repeat("y", 300) + "…\n"},
	{Event{Machine: "engine", Worker: "w1", Task: "T-1", Data: Blocker{State: "blocked", Reason: "tests fail", Outcome: "needs_human", Branch: "ralph/r/T-1"}},
		"[w1 T-1] ■ not done: tests fail (its work stays on branch ralph/r/T-1)\n"},
	{Event{Machine: "engine", Task: "T-1", Data: Blocker{State: "blocked", Reason: "blocked by ann", ByControl: true, ByPerson: true}},
		"[T-1] ⛔ blocked by ann: `ralph unblock T-1` clears it\n"},
	{Event{Machine: "engine", Worker: "w2", Task: "T-1", Data: Blocker{State: "blocked", Reason: "blocked by ann", ByControl: true, Branch: "ralph/r/T-1"}},
		"[w2 T-1] ⛔ blocked by ann (its work stays on branch ralph/r/T-1)\n"},
	{Event{Machine: "engine", Task: "T-1", Data: Blocker{State: "needs_review", Reason: "x"}}, ""},
	{Event{Machine: "loop", Task: "T-1", Data: Blocker{State: "blocked", Type: "permanent", Reason: "x", RequiresHuman: Ptr(true)}},
		"⛔ T-1 blocked (permanent): x\n"},
	{Event{Machine: "loop", Data: Blocker{MovedBack: 2, Ref: "refs/ralph/x"}}, ""},
	{Event{Machine: "loop", Data: Limit{Agent: "claude", Until: "2026-11-28T10:11:12Z"}},
		"  ⏸ claude hit a usage limit: cooling down until " + time.Date(2026, 11, 28, 10, 11, 12, 0, time.UTC).Local().Format("15:04:05") + "\n"},
	{Event{Machine: "loop", Data: Limit{Ending: &Ending{Outcome: "budget", Reason: "budget reached: $5.00 of $5.00"}}},
		"■ budget reached: $5.00 of $5.00\n"},
	{Event{Machine: "fleet", Data: Limit{Until: "2026-11-28T10:11:12Z"}}, ""},
	{Event{Machine: "loop", Data: Note{Paused: Ptr(false)}}, "▶ resumed\n"},
	{Event{Machine: "session", Data: Note{Paused: Ptr(false)}}, "▶ resumed\n"},
	{Event{Machine: "engine", Data: Note{Task: "T-2"}}, "ralph: T-2 is claimed by another ralph: leaving it to it\n"},
	{Event{Machine: "session", Data: Note{PGID: 4242}}, "ralph: stopped the agent the killed session left running (process group 4242)\n"},
	{Event{Machine: "session", Data: Note{Process: "pid 7 (sleep)"}}, "ralph: stopped pid 7 (sleep), which had left the agent's process group\n"},
	{Event{Machine: "session", Run: "s1", Data: Summary{Complete: Ptr(true), Tasks: 1}}, "✓ session s1 complete: 1 task done, goal check passed\n"},
	{Event{Machine: "session", Data: Summary{Interrupted: true, State: "Executing"}}, ""},
	{Event{Machine: "thread", Data: Summary{Thread: map[string]any{"id": "t1"}}}, ""},
	{Event{Machine: "loop", Task: "T-1", Data: Control{Command: "skip", By: "ann", Status: "taken", Task: Ptr("T-1")}},
		"  ⇢ skip T-1 by ann: taken\n"},
	{Event{Machine: "engine", Task: "T-1", Data: Control{Command: "block", By: "ann", Status: "refused", Why: "it landed", Task: Ptr("T-1")}},
		"  ⇢ block T-1 by ann: refused: it landed\n"},
	{Event{Machine: "control", Data: Control{Command: "hint", By: "ann", Status: "queued"}}, ""},
	{Event{Machine: "loop", Data: Denied{Host: "evil.example", Port: 443}}, "⛔ sandbox: denied a connection to evil.example:443\n"},
	{Event{Machine: "session", Data: Denied{Host: "::1", Port: 8080}}, "⛔ sandbox: denied a connection to [::1]:8080\n"},
	{Event{Machine: "loop", Kind: KindNote, Text: "as the call site said\n", Data: Note{Paused: Ptr(false)}}, "as the call site said\n"},
}

func TestRenderWordsTheLineFromThePayload(t *testing.T) {
	for _, c := range renders {
		if got := Render(c.ev); got != c.want {
			t.Errorf("Render(%s %T %+v)\n = %q\nwant %q", c.ev.Machine, c.ev.Data, c.ev.Data, got, c.want)
		}
	}
}

// An event a call site gave only its payload carries the rendered line
// in the journal and on --json (its "text", as before the payload worded
// it), and the terminal shows it; a kind is taken from the payload.
func TestEmitterStoresTheRenderedLine(t *testing.T) {
	var term, lines bytes.Buffer
	em := NewEmitter("engine", "r1", 0, nil, Text{W: &term}, JSONLines{W: &lines})
	em.Emit(Event{Task: "T-1", Data: Commit{State: "landed", Commit: "0123456789abcdef", Branch: "main"}})
	em.Emit(Event{Kind: KindTransition, From: "a", To: "b", Trigger: "t"}) // a line for programs only
	const want = "[queue T-1] ✓ landed on main · commit 0123456\n"
	if term.String() != want {
		t.Errorf("terminal = %q, want %q", term.String(), want)
	}
	var got []Event
	for _, l := range bytes.Split(bytes.TrimSpace(lines.Bytes()), []byte("\n")) {
		var ev Event
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 2 || got[0].Kind != KindCommit || got[0].Text != want || got[1].Text != "" {
		t.Fatalf("--json lines = %s", lines.String())
	}
}

// Any journal line, read back, renders without a panic, to its own text
// when it has one.
func FuzzRender(f *testing.F) {
	for _, c := range renders {
		b, _ := json.Marshal(c.ev)
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"blocker","machine":"engine","data":{"state":"blocked","conflicts":null}}`))
	f.Add([]byte(`{"kind":"limit","machine":"loop","data":{"agent":"a","until":"not a time"}}`))
	f.Add([]byte(`{"kind":"control","machine":"loop","data":{"task":null,"status":7}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var ev Event
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		got := Render(ev)
		if ev.Text != "" && got != ev.Text {
			t.Fatalf("Render(%s) = %q, not its text", line, got)
		}
		if got != "" && !strings.HasSuffix(got, "\n") && ev.Text == "" {
			t.Fatalf("Render(%s) = %q: a rendered line ends with a newline", line, got)
		}
	})
}
