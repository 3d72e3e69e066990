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

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/role"
)

// Metrics are a session's counters, derived from its transition log alone.
// They are never stored: ComputeMetrics recomputes them from the log, so
// they cannot drift from what actually happened.
type Metrics struct {
	SessionID string `json:"session_id"`
	// State is the To of the last event; "" when there is none.
	State string `json:"state"`
	// TimeInStateMillis maps a state name to the time spent in it. Only
	// states that were entered appear.
	TimeInStateMillis map[string]int64 `json:"time_in_state_ms"`
	// TaskAttempts counts executor runs that ended: executor_completed
	// events plus invalid_response events from Executing.
	TaskAttempts int `json:"task_attempts"`
	// TaskSuccesses counts reviewer_completed events whose verdict is
	// Qualified.
	TaskSuccesses int `json:"task_successes"`
	// TaskFailures counts reviewer_completed events whose verdict is
	// Failed, executor_completed events whose status is blocked, and
	// invalid_response events from Executing or Reviewing.
	TaskFailures int `json:"task_failures"`
	// SuccessRate and FailureRate are shares of TaskSuccesses+TaskFailures;
	// both are 0 when there is no outcome yet, and otherwise sum to 1.
	SuccessRate float64 `json:"success_rate"`
	FailureRate float64 `json:"failure_rate"`
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
// oldest first. The events are assumed to belong to one session (the
// caller filters by SessionID); the first event's id names it. now closes
// the time spent in the current state of a session that has not ended.
// Time differences that run backwards, as after a clock change, count as
// zero rather than as negative time.
func ComputeMetrics(events []loop.TransitionEvent, now time.Time) Metrics {
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

	selected := map[string]bool{}
	for i, e := range events {
		tr := e.Transition
		if tr.To != "" {
			switch {
			case i+1 < len(events):
				m.TimeInStateMillis[tr.To] += millisBetween(e.Timestamp, events[i+1].Timestamp)
			case !ended:
				m.TimeInStateMillis[tr.To] += millisBetween(e.Timestamp, now)
			}
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
				m.TaskFailures++
			}
		case ReviewerCompleted:
			switch {
			case is(role.VerdictQualified):
				m.TaskSuccesses++
			case is(role.VerdictFailed):
				m.TaskFailures++
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
				m.TaskFailures++
			case Reviewing:
				m.TaskFailures++
			}
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
func ReadTransitions(path string) ([]loop.TransitionEvent, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var events []loop.TransitionEvent
	lines := bytes.Split(b, []byte{'\n'})
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e loop.TransitionEvent
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
// reworks and their frequency, Q&A cycles, planner runs and goal checks,
// then the time in each state that had any, in the order of States (any
// state name outside States follows, sorted).
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
	fmt.Fprintf(&b, "Reworks: %d (%.2f per selected task)\n", m.Reworks, m.ReworkFrequency)
	fmt.Fprintf(&b, "Q&A cycles: %d; planner runs: %d; goal checks: %d\n", m.QACycles, m.PlannerRuns, m.GoalChecks)

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
