package notify

import (
	"encoding/json"
	"time"
)

// SchemaVersion is the version of the JSON payload, its "schema_version".
const SchemaVersion = 1

// Payload is the JSON document a generic webhook receives as its body and
// a command receives on its standard input. docs/watching.md documents it; its
// fields only ever grow.
type Payload struct {
	SchemaVersion int       `json:"schema_version"`
	Event         string    `json:"event"`
	Time          time.Time `json:"time"`
	Workspace     string    `json:"workspace"`
	Run           string    `json:"run,omitempty"`
	Machine       string    `json:"machine,omitempty"`
	Worker        string    `json:"worker,omitempty"`
	Task          string    `json:"task,omitempty"`
	Summary       string    `json:"summary"`
	Outcome       string    `json:"outcome,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	JournalSeq    int64     `json:"journal_seq,omitempty"`
	Details       any       `json:"details,omitempty"`
	Test          bool      `json:"test,omitempty"`
}

// payload renders n for the workspace at root.
func payload(n Notification, workspace string) []byte {
	p := Payload{SchemaVersion: SchemaVersion, Event: n.Event, Time: n.Time.UTC(), Workspace: workspace,
		Run: n.Run, Machine: n.Machine, Worker: n.Worker, Task: n.Task, Summary: n.Summary,
		Outcome: n.Outcome, Reason: n.Reason, JournalSeq: n.Seq, Test: n.Test}
	if len(n.Details) > 0 {
		p.Details = n.Details
	}
	b, err := json.Marshal(p)
	if err != nil {
		// Details hold plain values from events; should one not marshal,
		// the notification still goes, without them.
		p.Details = nil
		b, _ = json.Marshal(p)
	}
	return b
}
