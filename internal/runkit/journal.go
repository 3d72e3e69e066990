package runkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
)

// RepairEvents appends want to the log at path unless one of its last
// lines already holds it: the write-ahead half of a transition whose log
// line a kill prevented. Other writers share the log (sessions, hints), so
// the search looks at the tail, not only the last line.
func RepairEvents(path string, want *TransitionEvent) error {
	if want == nil {
		return nil
	}
	line, err := json.Marshal(want)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if f != nil {
		defer f.Close()
		const tail = 256 << 10
		var start int64
		if fi, err := f.Stat(); err == nil && fi.Size() > tail {
			start = fi.Size() - tail
		}
		b, err := io.ReadAll(io.NewSectionReader(f, start, tail))
		if err != nil {
			return err
		}
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			if bytes.Equal(l, line) {
				return nil
			}
		}
	}
	return store.AppendJSONLine(path, want)
}

// TransitionEvent is one line of events.jsonl, in seed 002's shape.
type TransitionEvent struct {
	Timestamp  time.Time       `json:"timestamp"`
	SessionID  string          `json:"sessionId"`
	Transition TransitionEntry `json:"transition"`
}

// TransitionEntry is the transition part of an event line.
type TransitionEntry struct {
	From          string `json:"from"`
	To            string `json:"to"`
	Trigger       string `json:"trigger"`
	TaskID        string `json:"taskId,omitempty"`
	AttemptNumber int    `json:"attemptNumber,omitempty"`
	Detail        string `json:"detail,omitempty"`
}

// UnmarshalJSON reads a journal line of either shape: the envelope this
// ralph writes (only its transitions fill the fields; other kinds leave
// them empty) or seed 002's {timestamp, sessionId, transition} that an
// older ralph, sessions and hints write. Readers of the journal
// written by the previous release keep working.
func (e *TransitionEvent) UnmarshalJSON(b []byte) error {
	type plain TransitionEvent
	var head struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	if head.V == 0 {
		return json.Unmarshal(b, (*plain)(e))
	}
	var ev report.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return err
	}
	*e = TransitionEvent{Timestamp: ev.Time, SessionID: ev.Run}
	if ev.Kind == report.KindTransition {
		t, _ := ev.Data.(report.Transition)
		e.Transition = TransitionEntry{From: ev.From, To: ev.To, Trigger: ev.Trigger, TaskID: ev.Task, AttemptNumber: ev.Attempt, Detail: t.Detail}
	}
	return nil
}
