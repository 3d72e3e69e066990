package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/report"
)

// got renders what a stream of events notifies, one line each, in the
// shape: event [task] outcome: summary.
func derived(evs ...report.Event) string {
	d := newDeriver()
	seen := map[string]bool{}
	var lines []string
	for i, ev := range evs {
		if ev.Seq == 0 {
			ev.Seq = int64(i + 1)
		}
		if ev.Run == "" {
			ev.Run = "r"
		}
		for _, x := range d.derive(ev) {
			if seen[x.key] {
				continue
			}
			seen[x.key] = true
			lines = append(lines, fmt.Sprintf("%s|%s|%s|%s", x.Event, x.Task, x.Outcome, x.Summary))
		}
	}
	return strings.Join(lines, "\n")
}

func tr(machine, from, to, trigger string, data map[string]any) report.Event {
	return report.Event{Machine: machine, Kind: report.KindTransition, From: from, To: to, Trigger: trigger, Data: readData(report.KindTransition, data)}
}

func say(machine string, kind report.Kind, text string, data map[string]any) report.Event {
	return report.Event{Machine: machine, Kind: kind, Text: text, Data: readData(kind, data)}
}

// readData is data as a journal line holds it, read back: what a
// notifier that follows a journal gets.
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

func TestDerivedNotifications(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	waitStart := say("loop", report.KindWait, "  ⏸ all agents are limited (codex until 13:00); waiting for the earliest reset\n",
		map[string]any{"wait": "limit", "state": "started", "until": "2026-03-01T13:00:00Z", "agent": "codex"})
	waitStart.Time = at
	waitEnd := say("loop", report.KindWait, "  ▶ the usage-limit wait is over after 12m0s: going on\n", map[string]any{"wait": "limit", "state": "ended", "waited_ms": 720000.0})
	waitEnd.Time = at.Add(12 * time.Minute)
	for _, tc := range []struct {
		name string
		evs  []report.Event
		want string
	}{
		{"loop done", []report.Event{tr("loop", "STORY_SELECT", "EXIT", "all_complete", nil)},
			"run_finished||done|run r finished: done (all stories complete)"},
		{"loop iteration limit at STORY_SELECT", []report.Event{
			say("loop", report.KindLimit, "■ reached 3 iterations with 2 stories left\n", map[string]any{"outcome": "max_iterations", "reason": "reached 3 iterations with 2 stories left"}),
			tr("loop", "STORY_SELECT", "EXIT", "budget_exhausted", nil)},
			"run_finished||limit|run r finished: limit (reached 3 iterations with 2 stories left)"},
		{"loop budget", []report.Event{
			say("loop", report.KindLimit, "■ budget reached: 10000 tokens\n", map[string]any{"outcome": "budget", "reason": "budget reached: 10000 tokens"}),
			tr("loop", "IMPLEMENT", "EXIT", "budget_exhausted", map[string]any{"detail": "budget reached: 10000 tokens"})},
			"run_finished||budget|run r finished: budget (budget reached: 10000 tokens)"},
		{"loop interrupted", []report.Event{tr("loop", "IMPLEMENT", "STOPPED", "interrupted", map[string]any{"detail": "interrupted in IMPLEMENT during iteration 2"})},
			"run_finished||interrupted|run r finished: interrupted (interrupted in IMPLEMENT during iteration 2)"},
		{"loop error", []report.Event{tr("loop", "TEST", "STOPPED", "agent_cannot_run", nil)},
			"run_finished||error|run r finished: error (the agent cannot run; fix it, then ralph build)"},
		{"loop usage limits", []report.Event{tr("loop", "IMPLEMENT", "STOPPED", "all_agents_limited", nil)},
			"run_finished||limit|run r finished: limit (every agent is at its usage limit; resume later)"},
		// Every story done while a check still fails (exit 5) is never
		// told as done; the hand-kept copy of the loop's outcomes had
		// missed it.
		{"loop ends with a check failing", []report.Event{
			say("loop", report.KindLimit, "■ every story is done, but \"test\" fails\n", map[string]any{"outcome": "checks_failing", "reason": `every story is done, but "test" fails`}),
			tr("loop", "STORY_SELECT", "EXIT", "all_complete", nil)},
			`run_finished||checks_failing|run r finished: checks_failing (every story is done, but "test" fails)`},
		{"parallel build ends with a check failing", []report.Event{
			{Machine: "engine", Kind: report.KindSummary, Text: "ralph: every task landed, but test still fails on main\n", Data: readData(report.KindSummary, map[string]any{"outcome": "checks_failing", "landed": 2})}},
			"run_finished||checks_failing|run r finished: checks_failing (every task landed, but test still fails on main)"},
		{"a resume is no end", []report.Event{tr("loop", "STOPPED", "IMPLEMENT", "resumed", nil)}, ""},
		{"a parallel worker's loop ending is not the run's", []report.Event{{Machine: "loop", Worker: "w1", Kind: report.KindTransition, To: "EXIT", Trigger: "all_complete"}}, ""},
		{"task blocked once though the worker and the engine both tell", []report.Event{
			{Machine: "loop", Worker: "w1", Task: "US-2", Kind: report.KindTransition, From: "TEST", To: "BLOCKER", Trigger: "tests_failed", Data: readData(report.KindTransition, map[string]any{"detail": "TestX failed"})},
			{Machine: "engine", Worker: "w1", Task: "US-2", Kind: report.KindBlocker, Text: "[w1 US-2] ■ not done: blocked\n", Data: readData(report.KindBlocker, map[string]any{"outcome": "needs_human"})}},
			"task_blocked|US-2||task US-2 is blocked: TestX failed"},
		{"merge queue: sent back is not news, needs review is", []report.Event{
			{Machine: "engine", Task: "US-3", Kind: report.KindBlocker, Text: "[queue US-3] ↻ sent back to a worker: conflict\n", Data: readData(report.KindBlocker, map[string]any{"state": "sent_back", "reason": "conflict", "conflicts": []string{"a.go"}})},
			{Machine: "engine", Task: "US-3", Kind: report.KindBlocker, Text: "[queue US-3] ✗ needs review after 3 attempts: conflict in a.go; its work is on branch ralph/r/US-3\n", Data: readData(report.KindBlocker, map[string]any{"state": "needs_review", "reason": "conflict in a.go", "conflicts": []string{"a.go"}, "branch": "ralph/r/US-3"})}},
			"task_needs_review|US-3||task US-3 needs review before it can land: conflict in a.go"},
		{"parallel build finished", []report.Event{say("engine", report.KindSummary, "ralph: needs_human: 2 tasks landed, 1 task left (needs review: US-3)\n", map[string]any{"outcome": "needs_human", "landed": 2})},
			"run_finished||blocked|run r finished: blocked (needs_human: 2 tasks landed, 1 task left (needs review: US-3))"},
		{"breaker", []report.Event{say("loop", report.KindWait, "  ⚡ circuit breaker OPEN: 3 iterations without progress; it lets one iteration try again after 5m0s\n", map[string]any{"breaker": "open", "reason": "3 iterations without progress"}),
			say("loop", report.KindWait, "  ⚡ circuit breaker open (3 iterations without progress)\n", map[string]any{"wait": "breaker", "state": "started", "reason": "3 iterations without progress"}),
			say("loop", report.KindWait, "  ⚡ circuit breaker half-open: one iteration may try\n", map[string]any{"breaker": "half_open"})},
			"breaker_opened|||the circuit breaker opened (3 iterations without progress): the run pauses before trying again"},
		{"loop limit wait starts once and ends with its end", []report.Event{waitStart,
			say("loop", report.KindWait, "  … waiting for a usage limit to reset: 5m left (until 13:00:00)\n", map[string]any{"wait": "limit", "state": "waiting", "left_ms": 300000.0}), waitStart, waitEnd,
			say("loop", report.KindAgentOutput, "more\n", nil)},
			"limit_wait_started|||every agent is at a usage limit: the run waits for a reset (until 13:00 UTC)\nlimit_wait_ended|||the usage-limit wait is over after 12m0s: the run goes on"},
		{"the text of an event is not read: a reworded line still notifies, a data-less one does not", []report.Event{
			say("loop", report.KindWait, "  ⚡ the breaker tripped\n", map[string]any{"breaker": "open", "reason": "no progress"}),
			say("loop", report.KindWait, "  ⚡ circuit breaker OPEN: 3 iterations without progress\n", nil),
			say("loop", report.KindWait, "  ⏸ all agents are limited; waiting for the earliest reset\n", nil)},
			"breaker_opened|||the circuit breaker opened (no progress): the run pauses before trying again"},
		{"loop ends blocked: the summary's reason", []report.Event{
			say("loop", report.KindSummary, "\nSummary:\n", map[string]any{"outcome": "needs_human", "reason": "only blocked stories are left: US-2", "stories_completed": 1}),
			tr("loop", "STORY_SELECT", "EXIT", "none_selectable", nil)},
			"run_finished||blocked|run r finished: blocked (only blocked stories are left: US-2)"},
		{"a run that ends while waiting says so once", []report.Event{waitStart, tr("loop", "IMPLEMENT", "STOPPED", "interrupted", nil)},
			"limit_wait_started|||every agent is at a usage limit: the run waits for a reset (until 13:00 UTC)\nrun_finished||interrupted|run r finished: interrupted (interrupted; ralph build resumes it)"},
		{"session limit wait", []report.Event{say("session", report.KindLimit, "ralph: limit; waiting 10m", map[string]any{"agent": "claude", "resets_at": at, "wait_seconds": 600.0}),
			tr("session", "Executing", "Reviewing", "executor_completed", nil)},
			"limit_wait_started|||every agent is at a usage limit: the run waits for a reset (until 12:00 UTC)\nlimit_wait_ended|||the usage-limit wait is over: the run goes on"},
		{"session question, told by its event and its transition, once", []report.Event{
			say("session", report.KindWait, "ralph: session r waits for a person to answer:\n", map[string]any{"questions": []any{"Q1"}}),
			tr("session", "Planning", "Stopped", "waiting_for_answers", map[string]any{"detail": "Q1"})},
			`waiting_for_person|||session r waits for a person to answer Q1: ralph answer Q1 "...", then ralph run --resume`},
		{"session complete and stopped", []report.Event{tr("session", "Reviewing", "Complete", "holistic_check_passed", nil)},
			"run_finished||done|run r finished: done (the goal check passed)"},
		{"session usage limit", []report.Event{tr("session", "Executing", "Stopped", "usage_limit", map[string]any{"detail": "claude is limited until 18:00"})},
			"run_finished||limit|run r finished: limit (claude is limited until 18:00)"},
		{"thread checkpoint", []report.Event{tr("thread", "Polishing", "PendingReview", "polish_done", map[string]any{"thread": "T-1"}),
			tr("thread", "Running", "Verifying", "run_done", map[string]any{"thread": "T-1"})},
			"waiting_for_person|||thread T-1 waits for a person's review (ralph thread approve)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := derived(tc.evs...); got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestDerivedFromARecordedBuild feeds the journal of a real build (ralph
// build 4 with ralph demo's scripted agent, testdata/build-limits.jsonl):
// the one agent hits a usage limit and the run waits for its reset, two
// iterations without progress open the circuit breaker, and the run ends
// at its iteration limit at STORY_SELECT, whose trigger is the budget's.
// What it notifies comes from the events' data as the loop writes it.
func TestDerivedFromARecordedBuild(t *testing.T) {
	d := newDeriver()
	var got []Notification
	err := (&report.JournalReader{Path: "testdata/build-limits.jsonl"}).Scan(func(ev report.Event) error {
		got = append(got, d.derive(ev)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, x := range got {
		lines = append(lines, x.Event+"|"+x.Outcome+"|"+x.Summary)
	}
	want := []string{
		"limit_wait_started||every agent is at a usage limit: the run waits for a reset (until 05:13 UTC)",
		"limit_wait_ended||the usage-limit wait is over after 2s: the run goes on",
		"breaker_opened||the circuit breaker opened (2 iterations without progress (no commit, no change)): the run pauses before trying again",
		"run_finished|limit|run 20261124-051349-229947 finished: limit (reached 4 iterations with 1 story left)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if fin := got[len(got)-1]; fin.Details["stories_completed"] != 2 || fin.Details["iterations"] != 4 {
		t.Errorf("run_finished details = %v; want the summary's 2 stories and 4 iterations", fin.Details)
	}
	if w := got[0]; w.Details["agent"] != "one" {
		t.Errorf("limit_wait_started details = %v; want the agent waited for", w.Details)
	}
}
