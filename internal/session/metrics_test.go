package session

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/store"
)

var metricsT0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// ev builds an event at t0+sec seconds.
func metricsEvent(sec float64, from, to State, trig Trigger, task, detail string) loop.TransitionEvent {
	return loop.TransitionEvent{
		Timestamp: metricsT0.Add(time.Duration(sec * float64(time.Second))),
		SessionID: "s-1",
		Transition: loop.TransitionEntry{
			From: string(from), To: string(to), Trigger: string(trig), TaskID: task, Detail: detail,
		},
	}
}

// metricsSequence is a whole session that touches every counter: a Q&A
// cycle, an invalid planner result, two tasks with a rework, a blocked
// executor, invalid executor and reviewer results, a failed and a passed
// goal check.
func metricsSequence() []loop.TransitionEvent {
	return []loop.TransitionEvent{
		metricsEvent(0, Initializing, Planning, SessionResolved, "", "new session"),
		metricsEvent(10, Planning, Planning, PlannerCompleted, "", "needs_qa_cycle: which database?"),
		metricsEvent(30, Planning, Planning, InvalidResponse, "", "planner gave no JSON"),
		metricsEvent(40, Planning, Executing, PlannerCompleted, "", "completed"),
		metricsEvent(41, Executing, Executing, TaskSelected, "T1", ""),
		metricsEvent(61, Executing, Reviewing, ExecutorCompleted, "T1", "completed"),
		metricsEvent(71, Reviewing, Executing, ReviewerCompleted, "T1", "Failed: tests fail"),
		metricsEvent(72, Executing, Executing, TaskSelected, "T1", ""),
		metricsEvent(82, Executing, Reviewing, ExecutorCompleted, "T1", "completed"),
		metricsEvent(90, Reviewing, Executing, ReviewerCompleted, "T1", "Qualified"),
		metricsEvent(91, Executing, Executing, TaskSelected, "T2", ""),
		metricsEvent(100, Executing, Planning, ExecutorCompleted, "T2", "blocked: no db"),
		metricsEvent(110, Planning, Executing, PlannerCompleted, "", "completed"),
		metricsEvent(111, Executing, Executing, TaskSelected, "T2", ""),
		metricsEvent(120, Executing, Executing, InvalidResponse, "T2", "executor gave no JSON"),
		metricsEvent(121, Executing, Executing, TaskSelected, "T2", ""),
		metricsEvent(130, Executing, Reviewing, ExecutorCompleted, "T2", "completed"),
		metricsEvent(135, Reviewing, Executing, InvalidResponse, "T2", "reviewer gave no JSON"),
		metricsEvent(136, Executing, Executing, TaskSelected, "T2", ""),
		metricsEvent(140, Executing, Reviewing, ExecutorCompleted, "T2", "completed"),
		metricsEvent(150, Reviewing, Executing, ReviewerCompleted, "T2", "Qualified"),
		metricsEvent(151, Executing, Complete, NoTasksRemaining, "", ""),
		metricsEvent(160, Complete, Planning, HolisticCheckFailed, "", "failed: README missing"),
		metricsEvent(170, Planning, Executing, PlannerCompleted, "", "completed"),
		metricsEvent(171, Executing, Executing, TaskSelected, "T3", ""),
		metricsEvent(181, Executing, Reviewing, ExecutorCompleted, "T3", "completed"),
		metricsEvent(191, Reviewing, Executing, ReviewerCompleted, "T3", "Qualified"),
		metricsEvent(192, Executing, Complete, NoTasksRemaining, "", ""),
		metricsEvent(200, Complete, Complete, HolisticCheckPassed, "", "passed"),
	}
}

func TestMetricsCountersEndedSession(t *testing.T) {
	events := metricsSequence()
	now := metricsT0.Add(time.Hour) // must not matter: the session ended
	m := ComputeMetrics(events, nil, now)

	end := metricsT0.Add(200 * time.Second)
	want := Metrics{
		SessionID: "s-1",
		State:     "Complete",
		TimeInStateMillis: map[string]int64{
			"Planning":  (10 + 20 + 10 + 10 + 10) * 1000, // 0-40, 100-110, 160-170
			"Executing": (1 + 20 + 1 + 10 + 1 + 9 + 1 + 9 + 1 + 9 + 1 + 4 + 1 + 1 + 10 + 1) * 1000,
			"Reviewing": (10 + 8 + 5 + 10 + 10) * 1000,
			"Complete":  (9 + 8) * 1000,
		},
		TaskAttempts:    7, // 6 executor_completed + 1 invalid from Executing
		TaskSuccesses:   3, // T1 and T2 passed after failed attempts: successes
		TaskFailures:    0,
		SuccessRate:     1,
		FailureRate:     0,
		FailedAttempts:  4, // reviewer Failed, executor blocked, 2 invalid
		Reworks:         1,
		ReworkFrequency: 1.0 / 3,
		QACycles:        1,
		PlannerRuns:     5, // 4 planner_completed + 1 invalid from Planning
		GoalChecks:      2,
		StartedAt:       metricsT0,
		EndedAt:         &end,
		DurationMillis:  200_000,
	}
	if !reflect.DeepEqual(m, want) {
		gb, _ := json.MarshalIndent(m, "", "  ")
		wb, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("metrics:\n got %s\nwant %s", gb, wb)
	}
	var total int64
	for _, v := range m.TimeInStateMillis {
		total += v
	}
	if total != m.DurationMillis {
		t.Errorf("time in states sums to %d ms, duration is %d ms", total, m.DurationMillis)
	}
}

func TestMetricsRunningSession(t *testing.T) {
	events := metricsSequence()[:9] // last: executor_completed T1 at 82s
	now := metricsT0.Add(100 * time.Second)
	m := ComputeMetrics(events, nil, now)
	if m.EndedAt != nil {
		t.Fatalf("EndedAt = %v for a running session", m.EndedAt)
	}
	if m.State != "Reviewing" {
		t.Errorf("State = %q, want Reviewing", m.State)
	}
	if m.DurationMillis != 100_000 {
		t.Errorf("DurationMillis = %d, want 100000 (to now)", m.DurationMillis)
	}
	// The last event entered Reviewing at 82s; now is 100s.
	if got := m.TimeInStateMillis["Reviewing"]; got != (10+18)*1000 {
		t.Errorf("Reviewing = %d ms, want 28000", got)
	}
	if m.ReworkFrequency != 1 {
		t.Errorf("ReworkFrequency = %v, want 1 (one rework, one task)", m.ReworkFrequency)
	}
	text := m.Text()
	// T1 failed its review and is being reworked: not a failed task.
	if m.TaskFailures != 0 || m.FailedAttempts != 1 {
		t.Errorf("TaskFailures, FailedAttempts = %d, %d; want 0, 1", m.TaskFailures, m.FailedAttempts)
	}
	for _, s := range []string{"Session s-1: Reviewing, running for 1m40s", "Tasks: 0 succeeded, 0 failed over 2 executor runs", "Reworks: 1 (1.00 per selected task); failed attempts: 1", "Q&A cycles: 1; planner runs: 3; goal checks: 0"} {
		if !strings.Contains(text, s) {
			t.Errorf("Text() lacks %q:\n%s", s, text)
		}
	}
}

func TestMetricsEndedByFailure(t *testing.T) {
	events := []loop.TransitionEvent{
		metricsEvent(0, Initializing, Planning, SessionResolved, "", ""),
		metricsEvent(5, Planning, Failed, PlannerCompleted, "", "blocked: no credentials"),
	}
	m := ComputeMetrics(events, nil, metricsT0.Add(time.Hour))
	if m.EndedAt == nil || !m.EndedAt.Equal(metricsT0.Add(5*time.Second)) {
		t.Fatalf("EndedAt = %v, want t0+5s", m.EndedAt)
	}
	if m.DurationMillis != 5000 {
		t.Errorf("DurationMillis = %d, want 5000", m.DurationMillis)
	}
	if _, ok := m.TimeInStateMillis["Failed"]; ok {
		t.Errorf("time counted in the final Failed state: %v", m.TimeInStateMillis)
	}
	if m.PlannerRuns != 1 || m.QACycles != 0 {
		t.Errorf("PlannerRuns, QACycles = %d, %d; want 1, 0", m.PlannerRuns, m.QACycles)
	}
	if !strings.Contains(m.Text(), "Session s-1: Failed, ended after 5s") {
		t.Errorf("Text():\n%s", m.Text())
	}
}

func TestMetricsEmpty(t *testing.T) {
	now := metricsT0
	m := ComputeMetrics(nil, nil, now)
	want := Metrics{TimeInStateMillis: map[string]int64{}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("ComputeMetrics(nil) = %+v, want %+v", m, want)
	}
	if got := m.Text(); got != "Session: no transitions yet\n" {
		t.Errorf("Text() = %q", got)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "ended_at") {
		t.Errorf("empty metrics JSON has ended_at: %s", b)
	}
}

func TestMetricsClockGoingBackwards(t *testing.T) {
	events := []loop.TransitionEvent{
		metricsEvent(10, Initializing, Planning, SessionResolved, "", ""),
		metricsEvent(5, Planning, Executing, PlannerCompleted, "", "completed"),
	}
	m := ComputeMetrics(events, nil, metricsT0)
	if m.DurationMillis != 0 || len(m.TimeInStateMillis) != 0 {
		t.Errorf("negative time counted: duration %d, states %v", m.DurationMillis, m.TimeInStateMillis)
	}
}

func TestMetricsText(t *testing.T) {
	m := ComputeMetrics(metricsSequence(), nil, metricsT0)
	text := m.Text()
	want := []string{
		"Session s-1: Complete, ended after 3m20s",
		"Tasks: 3 succeeded, 0 failed (100% success, 0% failure) over 7 executor runs",
		"Reworks: 1 (0.33 per selected task); failed attempts: 4",
		"Q&A cycles: 1; planner runs: 5; goal checks: 2",
		"Time in state:",
	}
	for _, s := range want {
		if !strings.Contains(text, s) {
			t.Errorf("Text() lacks %q:\n%s", s, text)
		}
	}
	// States appear in the order of States, only those with time.
	order := []string{"Planning ", "Executing ", "Reviewing ", "Complete "}
	last := strings.Index(text, "Time in state:")
	for _, s := range order {
		i := strings.Index(text[last:], "  "+s)
		if i < 0 {
			t.Fatalf("Text() lacks state %q:\n%s", s, text)
		}
		last += i
	}
	for _, s := range []string{"Initializing", "Failed"} {
		if strings.Contains(text, s) {
			t.Errorf("Text() shows %s, which had no time:\n%s", s, text)
		}
	}
	if !strings.Contains(text, "  Planning   1m0s\n") {
		t.Errorf("Planning time not shown as 1m0s:\n%s", text)
	}
}

// A task that passed on rework is a success, not "1 failed (33%)"; a task
// is a failure when the session ended without it passing.
func TestMetricsTaskOutcomesAreFinalOutcomes(t *testing.T) {
	events := []loop.TransitionEvent{
		metricsEvent(0, Initializing, Planning, SessionResolved, "", ""),
		metricsEvent(1, Planning, Executing, PlannerCompleted, "", "completed"),
		metricsEvent(2, Executing, Executing, TaskSelected, "T1", ""),
		metricsEvent(3, Executing, Reviewing, ExecutorCompleted, "T1", "completed"),
		metricsEvent(4, Reviewing, Executing, ReviewerCompleted, "T1", "Failed: says hi"),
		metricsEvent(5, Executing, Executing, TaskSelected, "T1", ""),
		metricsEvent(6, Executing, Reviewing, ExecutorCompleted, "T1", "completed"),
		metricsEvent(7, Reviewing, Executing, ReviewerCompleted, "T1", "Qualified"),
		metricsEvent(8, Executing, Executing, TaskSelected, "T2", ""),
		metricsEvent(9, Executing, Reviewing, ExecutorCompleted, "T2", "completed"),
		metricsEvent(10, Reviewing, Executing, ReviewerCompleted, "T2", "Qualified"),
		metricsEvent(11, Executing, Complete, NoTasksRemaining, "", ""),
		metricsEvent(12, Complete, Complete, HolisticCheckPassed, "", "passed"),
	}
	m := ComputeMetrics(events, nil, metricsT0.Add(time.Hour))
	if m.TaskSuccesses != 2 || m.TaskFailures != 0 || m.SuccessRate != 1 || m.Reworks != 1 || m.FailedAttempts != 1 {
		t.Errorf("successes %d, failures %d, rate %v, reworks %d, failed attempts %d; want 2, 0, 1, 1, 1",
			m.TaskSuccesses, m.TaskFailures, m.SuccessRate, m.Reworks, m.FailedAttempts)
	}
	if !strings.Contains(m.Text(), "Tasks: 2 succeeded, 0 failed (100% success, 0% failure) over 3 executor runs") {
		t.Errorf("Text():\n%s", m.Text())
	}

	// T2 fails its last allowed attempt: the session ends Failed, and T2
	// is the one failed task.
	events = append(events[:10],
		metricsEvent(10, Reviewing, Executing, ReviewerCompleted, "T2", "Failed: no"),
		metricsEvent(11, Executing, Executing, TaskSelected, "T2", ""),
		metricsEvent(12, Executing, Reviewing, ExecutorCompleted, "T2", "completed"),
		metricsEvent(13, Reviewing, Failed, ReviewerCompleted, "T2", "Failed: still no"),
	)
	m = ComputeMetrics(events, nil, metricsT0.Add(time.Hour))
	if m.TaskSuccesses != 1 || m.TaskFailures != 1 || m.SuccessRate != 0.5 || m.Reworks != 3 {
		t.Errorf("successes %d, failures %d, rate %v, reworks %d; want 1, 1, 0.5, 3", m.TaskSuccesses, m.TaskFailures, m.SuccessRate, m.Reworks)
	}
}

// The hours a session waited for a person's answer are waiting, not
// Planning: the session was stopped.
func TestMetricsWaitingForAnAnswerIsNotPlanning(t *testing.T) {
	at := func(sec int) time.Time { return metricsT0.Add(time.Duration(sec) * time.Second) }
	answered := at(3600)
	events := []loop.TransitionEvent{
		metricsEvent(0, Initializing, Planning, SessionResolved, "", ""),
		metricsEvent(10, Planning, Planning, PlannerCompleted, "", "needs_qa_cycle: which port?"),
		// The questioner queued a question for a person at 12s and the
		// session stopped; it was answered at 1h and resumed at 2h.
		metricsEvent(7200, Initializing, Planning, SessionResolved, "", ""),
		metricsEvent(7205, Planning, Executing, PlannerCompleted, "", "completed"),
	}
	questions := []Question{{ID: "q-1", Text: "which port?", AskedAt: at(12), Answer: "8080", AnsweredAt: &answered}}
	m := ComputeMetrics(events, questions, at(7210))
	if got, want := m.TimeInStateMillis["Planning"], int64((10+2+5)*1000); got != want {
		t.Errorf("Planning = %dms, want %dms: the wait for the answer is not planning", got, want)
	}
	if got, want := m.WaitingMillis, int64((7200-12)*1000); got != want {
		t.Errorf("waiting = %dms, want %dms: from the question until the session resumed", got, want)
	}
	if !strings.Contains(m.Text(), "Waiting for a person's answers: 2h0m") {
		t.Errorf("Text():\n%s", m.Text())
	}

	// An open question waits until now; a second one asked meanwhile is
	// the same wait, not counted twice.
	events = events[:2]
	questions = []Question{{ID: "q-1", AskedAt: at(12)}, {ID: "q-2", AskedAt: at(13)}}
	m = ComputeMetrics(events, questions, at(112))
	if m.WaitingMillis != 100_000 || m.TimeInStateMillis["Planning"] != 12_000 {
		t.Errorf("waiting %dms, Planning %dms; want 100000 and 12000", m.WaitingMillis, m.TimeInStateMillis["Planning"])
	}
}

func TestMetricsHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                     "0s",
		350 * time.Millisecond:                "350ms",
		4249 * time.Millisecond:               "4.2s",
		65*time.Second + 400*time.Millisecond: "1m5s",
		2*time.Hour + 3*time.Minute + 20*time.Second: "2h3m",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func writeEventsFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func eventLines(t *testing.T, events []loop.TransitionEvent) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestMetricsReadTransitionsRoundTrip(t *testing.T) {
	events := metricsSequence()
	p := writeEventsFile(t, eventLines(t, events))
	got, err := ReadTransitions(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) {
		t.Fatalf("read %d events, want %d", len(got), len(events))
	}
	for i := range events {
		if !got[i].Timestamp.Equal(events[i].Timestamp) || got[i].Transition != events[i].Transition || got[i].SessionID != events[i].SessionID {
			t.Errorf("event %d = %+v, want %+v", i, got[i], events[i])
		}
	}
}

func TestMetricsReadTransitionsAppendJSONLine(t *testing.T) {
	// The log is written with store.AppendJSONLine; read what it writes.
	p := filepath.Join(t.TempDir(), "events.jsonl")
	for _, e := range metricsSequence()[:3] {
		if err := store.AppendJSONLine(p, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadTransitions(p)
	if err != nil || len(got) != 3 {
		t.Fatalf("ReadTransitions = %d events, %v; want 3, nil", len(got), err)
	}
}

func TestMetricsReadTransitionsTornLastLine(t *testing.T) {
	events := metricsSequence()[:4]
	content := eventLines(t, events) + `{"timestamp":"2025-03-01T10:01:00Z","sessionId":"s-1","transi`
	got, err := ReadTransitions(writeEventsFile(t, content))
	if err != nil {
		t.Fatalf("torn last line: %v", err)
	}
	if len(got) != 4 {
		t.Errorf("read %d events, want 4", len(got))
	}
}

func TestMetricsReadTransitionsLastLineWithoutNewline(t *testing.T) {
	// A complete last line that lacks only its newline is kept.
	content := strings.TrimSuffix(eventLines(t, metricsSequence()[:2]), "\n")
	got, err := ReadTransitions(writeEventsFile(t, content))
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadTransitions = %d events, %v; want 2, nil", len(got), err)
	}
}

func TestMetricsReadTransitionsInvalidMiddleLine(t *testing.T) {
	lines := strings.SplitAfter(eventLines(t, metricsSequence()[:4]), "\n")
	content := lines[0] + lines[1] + "{not json\n" + lines[2] + lines[3]
	p := writeEventsFile(t, content)
	_, err := ReadTransitions(p)
	if err == nil {
		t.Fatal("no error for an invalid line in the middle")
	}
	if !strings.HasPrefix(err.Error(), p+":3: ") {
		t.Errorf("error %q does not start with %q", err, p+":3: ")
	}
	if !strings.Contains(err.Error(), "repair or delete") {
		t.Errorf("error %q does not say what to do", err)
	}

	// An invalid last line that does end in a newline is not torn: it
	// was written whole, so it is an error too.
	p = writeEventsFile(t, lines[0]+"{not json\n")
	if _, err := ReadTransitions(p); err == nil || !strings.HasPrefix(err.Error(), p+":2: ") {
		t.Errorf("invalid complete last line: err = %v, want %s:2: ...", err, p)
	}
}

func TestMetricsReadTransitionsMissingAndEmpty(t *testing.T) {
	got, err := ReadTransitions(filepath.Join(t.TempDir(), "none.jsonl"))
	if got != nil || err != nil {
		t.Errorf("missing file: %v, %v; want nil, nil", got, err)
	}
	got, err = ReadTransitions(writeEventsFile(t, ""))
	if len(got) != 0 || err != nil {
		t.Errorf("empty file: %v, %v; want none, nil", got, err)
	}
	got, err = ReadTransitions(writeEventsFile(t, "\n\n"))
	if len(got) != 0 || err != nil {
		t.Errorf("blank lines: %v, %v; want none, nil", got, err)
	}
}
