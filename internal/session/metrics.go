package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/runkit"
)

// Metrics are a session's counters, derived from its transition log and
// its question queue. They are never stored: ComputeMetrics recomputes
// them, so they cannot drift from what actually happened.
type Metrics struct {
	SessionID string `json:"session_id"`
	// State is the To of the last event; "" when there is none.
	State string `json:"state"`
	// TimeInStateMillis maps a state name to the time spent in it, not
	// counting WaitingMillis. Only states that were entered appear.
	TimeInStateMillis map[string]int64 `json:"time_in_state_ms"`
	// WaitingMillis is the time the session waited for a person to
	// answer its questions: from a question's asking until the session
	// resumed after its answer. It is no state's time: the session was
	// stopped, not planning.
	WaitingMillis int64 `json:"waiting_ms"`
	// TaskAttempts counts executor runs that ended: executor_completed
	// events plus invalid_response events from Executing.
	TaskAttempts int `json:"task_attempts"`
	// TaskSuccesses counts the tasks whose last attempt the reviewer
	// Qualified, however many attempts they took.
	TaskSuccesses int `json:"task_successes"`
	// TaskFailures counts the tasks whose last attempt failed (a Failed
	// verdict, a blocked executor, an invalid executor or reviewer result)
	// in a session that has ended: they were given up. While the session
	// runs, such a task is in rework, not failed.
	TaskFailures int `json:"task_failures"`
	// SuccessRate and FailureRate are shares of TaskSuccesses+TaskFailures;
	// both are 0 when there is no outcome yet, and otherwise sum to 1.
	SuccessRate float64 `json:"success_rate"`
	FailureRate float64 `json:"failure_rate"`
	// FailedAttempts counts the attempts that did not pass, whatever
	// became of their task: Failed verdicts, blocked executors and
	// invalid executor or reviewer results.
	FailedAttempts int `json:"failed_attempts"`
	// Reworks counts reviewer_completed events whose verdict is Failed.
	Reworks int `json:"reworks"`
	// ReworkFrequency is Reworks per distinct task id selected
	// (task_selected events); 0 when no task was selected.
	ReworkFrequency float64 `json:"rework_frequency"`
	// QACycles counts planner_completed events whose status is
	// needs_qa_cycle.
	QACycles int `json:"qa_cycles"`
	// PlannerRuns counts planner_completed events plus invalid_response
	// events from Planning.
	PlannerRuns int `json:"planner_runs"`
	// GoalChecks counts holistic_check_passed and holistic_check_failed
	// events.
	GoalChecks int `json:"goal_checks"`
	// StartedAt is the time of the first event; zero when there is none.
	StartedAt time.Time `json:"started_at"`
	// EndedAt is set when the last event ends the session: it enters
	// Failed, or its trigger is holistic_check_passed.
	EndedAt *time.Time `json:"ended_at,omitempty"`
	// DurationMillis runs from the first event to EndedAt, or to now when
	// the session has not ended.
	DurationMillis int64 `json:"duration_ms"`
}

// ComputeMetrics derives a session's metrics from its transition events,
// oldest first, and its questions for a person (LoadQuestions). The events
// are assumed to belong to one session (the caller filters by SessionID);
// the first event's id names it. now closes the time spent in the current
// state of a session that has not ended. Time differences that run
// backwards, as after a clock change, count as zero rather than as
// negative time.
func ComputeMetrics(events []runkit.TransitionEvent, questions []Question, now time.Time) Metrics {
	m := Metrics{TimeInStateMillis: map[string]int64{}}
	if len(events) == 0 {
		return m
	}
	first, last := events[0], events[len(events)-1]
	m.SessionID = first.SessionID
	m.State = last.Transition.To
	m.StartedAt = first.Timestamp

	ended := last.Transition.To == string(Failed) || last.Transition.Trigger == string(HolisticCheckPassed)
	end := now
	if ended {
		t := last.Timestamp
		m.EndedAt = &t
		end = t
	}
	m.DurationMillis = millisBetween(first.Timestamp, end)

	waits := personWaits(events, questions, end)
	selected := map[string]bool{}
	// passed holds each task's last outcome: true when it was Qualified.
	passed := map[string]bool{}
	failed := func(task string) {
		m.FailedAttempts++
		passed[task] = false
	}
	for i, e := range events {
		tr := e.Transition
		if tr.To != "" && (i+1 < len(events) || !ended) {
			until := end
			if i+1 < len(events) {
				until = events[i+1].Timestamp
			}
			waited := overlapMillis(waits, e.Timestamp, until)
			m.TimeInStateMillis[tr.To] += millisBetween(e.Timestamp, until) - waited
			m.WaitingMillis += waited
		}

		word := leadingWord(tr.Detail)
		is := func(w string) bool { return strings.EqualFold(word, w) }
		switch Trigger(tr.Trigger) {
		case TaskSelected:
			if tr.TaskID != "" {
				selected[tr.TaskID] = true
			}
		case ExecutorCompleted:
			m.TaskAttempts++
			if is(role.StatusBlocked) {
				failed(tr.TaskID)
			}
		case ReviewerCompleted:
			switch {
			case is(role.VerdictQualified):
				passed[tr.TaskID] = true
			case is(role.VerdictFailed):
				failed(tr.TaskID)
				m.Reworks++
			}
		case PlannerCompleted:
			m.PlannerRuns++
			if is(role.StatusNeedsQACycle) {
				m.QACycles++
			}
		case HolisticCheckPassed, HolisticCheckFailed:
			m.GoalChecks++
		case InvalidResponse:
			switch State(tr.From) {
			case Planning:
				m.PlannerRuns++
			case Executing:
				m.TaskAttempts++
				failed(tr.TaskID)
			case Reviewing:
				failed(tr.TaskID)
			}
		}
	}
	// A task that passed on rework is a success; one whose last attempt
	// failed is a failure only once the session gave up on it by ending.
	for _, ok := range passed {
		switch {
		case ok:
			m.TaskSuccesses++
		case ended:
			m.TaskFailures++
		}
	}
	for k, v := range m.TimeInStateMillis {
		if v == 0 {
			delete(m.TimeInStateMillis, k)
		}
	}
	if n := m.TaskSuccesses + m.TaskFailures; n > 0 {
		m.SuccessRate = float64(m.TaskSuccesses) / float64(n)
		m.FailureRate = float64(m.TaskFailures) / float64(n)
	}
	if len(selected) > 0 {
		m.ReworkFrequency = float64(m.Reworks) / float64(len(selected))
	}
	return m
}

// span is a stretch of time, from start to end.
type span struct{ start, end time.Time }

// personWaits returns the stretches the session waited for a person,
// merged and in order. A question's wait runs from its asking until the
// first event at or after its answer, which is the session resuming; an
// open question, or an answer not yet resumed from, waits until end.
func personWaits(events []runkit.TransitionEvent, questions []Question, end time.Time) []span {
	var waits []span
	for _, q := range questions {
		until := end
		if q.AnsweredAt != nil {
			for _, e := range events {
				if !e.Timestamp.Before(*q.AnsweredAt) {
					until = e.Timestamp
					break
				}
			}
		}
		if until.After(q.AskedAt) {
			waits = append(waits, span{q.AskedAt, until})
		}
	}
	slices.SortFunc(waits, func(a, b span) int { return a.start.Compare(b.start) })
	var merged []span
	for _, w := range waits {
		if n := len(merged); n > 0 && !w.start.After(merged[n-1].end) {
			if w.end.After(merged[n-1].end) {
				merged[n-1].end = w.end
			}
			continue
		}
		merged = append(merged, w)
	}
	return merged
}

// overlapMillis is how much of [a, b) the waits cover, in milliseconds.
func overlapMillis(waits []span, a, b time.Time) int64 {
	var ms int64
	for _, w := range waits {
		start, end := w.start, w.end
		if start.Before(a) {
			start = a
		}
		if end.After(b) {
			end = b
		}
		ms += millisBetween(start, end)
	}
	return ms
}

// millisBetween is b-a in milliseconds, never negative.
func millisBetween(a, b time.Time) int64 {
	return max(b.Sub(a).Milliseconds(), 0)
}

// leadingWord is the status or verdict word a Detail starts with: the
// run of letters, digits, '_' and '-' before the first other character,
// so that "Failed: tests fail" gives "Failed".
func leadingWord(detail string) string {
	detail = strings.TrimSpace(detail)
	end := strings.IndexFunc(detail, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-')
	})
	if end < 0 {
		return detail
	}
	return detail[:end]
}

// ReadTransitions reads a transition log of JSON lines, oldest first. A
// missing file is no events and no error. Blank lines are skipped. A last
// line that has no trailing newline and is not valid JSON is a write torn
// by a crash and is ignored; an invalid line anywhere else is an error
// naming the file and the 1-based line, because the log is append-only
// and such a line means it was edited or corrupted.
func ReadTransitions(path string) ([]runkit.TransitionEvent, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var events []runkit.TransitionEvent
	lines := bytes.Split(b, []byte{'\n'})
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e runkit.TransitionEvent
		if err := json.Unmarshal(line, &e); err != nil {
			// The last element of the split is what follows the final
			// newline: non-empty only when the last write was cut short.
			if i == len(lines)-1 {
				break
			}
			return events, fmt.Errorf("%s:%d: not a valid transition event (%v): the log is append-only, so repair or delete this line by hand", path, i+1, err)
		}
		events = append(events, e)
	}
	return events, nil
}

// Text is a human summary of the metrics, a few lines ending in a newline:
// the state and duration, task outcomes with their rates as percentages,
// reworks and their frequency, failed attempts, Q&A cycles, planner runs
// and goal checks, the time spent waiting for a person if any, then the
// time in each state that had any, in the order of States (any state name
// outside States follows, sorted).
func (m Metrics) Text() string {
	var b strings.Builder
	name := "Session"
	if m.SessionID != "" {
		name += " " + m.SessionID
	}
	dur := time.Duration(m.DurationMillis) * time.Millisecond
	switch {
	case m.State == "":
		fmt.Fprintf(&b, "%s: no transitions yet\n", name)
		return b.String()
	case m.EndedAt != nil:
		fmt.Fprintf(&b, "%s: %s, ended after %s\n", name, m.State, humanDuration(dur))
	default:
		fmt.Fprintf(&b, "%s: %s, running for %s\n", name, m.State, humanDuration(dur))
	}

	fmt.Fprintf(&b, "Tasks: %d succeeded, %d failed", m.TaskSuccesses, m.TaskFailures)
	if m.TaskSuccesses+m.TaskFailures > 0 {
		fmt.Fprintf(&b, " (%s success, %s failure)", percentText(m.SuccessRate), percentText(m.FailureRate))
	}
	fmt.Fprintf(&b, " over %d executor %s\n", m.TaskAttempts, pluralWord(m.TaskAttempts, "run", "runs"))
	fmt.Fprintf(&b, "Reworks: %d (%.2f per selected task); failed attempts: %d\n", m.Reworks, m.ReworkFrequency, m.FailedAttempts)
	fmt.Fprintf(&b, "Q&A cycles: %d; planner runs: %d; goal checks: %d\n", m.QACycles, m.PlannerRuns, m.GoalChecks)
	if m.WaitingMillis > 0 {
		fmt.Fprintf(&b, "Waiting for a person's answers: %s\n", humanDuration(time.Duration(m.WaitingMillis)*time.Millisecond))
	}

	var names []string
	for _, s := range States {
		if m.TimeInStateMillis[string(s)] > 0 {
			names = append(names, string(s))
		}
	}
	var others []string
	for k, v := range m.TimeInStateMillis {
		if v > 0 && !slices.Contains(States, State(k)) {
			others = append(others, k)
		}
	}
	slices.Sort(others)
	names = append(names, others...)
	if len(names) > 0 {
		b.WriteString("Time in state:\n")
		width := 0
		for _, n := range names {
			width = max(width, len(n))
		}
		for _, n := range names {
			d := time.Duration(m.TimeInStateMillis[n]) * time.Millisecond
			fmt.Fprintf(&b, "  %-*s  %s\n", width, n, humanDuration(d))
		}
	}
	return b.String()
}

// humanDuration rounds d to a precision that suits its size: whole
// milliseconds under a second, tenths of a second under a minute, whole
// seconds under an hour and whole minutes beyond, as in 350ms, 4.2s, 1m5s
// and 2h3m.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
}

func percentText(r float64) string { return fmt.Sprintf("%.0f%%", r*100) }

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
