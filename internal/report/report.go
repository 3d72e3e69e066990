// Package report holds ralph's events and the sinks that consume them.
//
// Runners never print: they emit events through an Emitter, and sinks
// render them: the terminal text today's users know (Text), one JSON object
// per line for `--json` (JSONLines), and the journal .ralph/events.jsonl
// (Journal). Every machine uses the one envelope, Event.
package report

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"time"
)

// SchemaVersion is the version of the event envelope, its "v" field.
// Readers skip lines whose v is newer than they know.
const SchemaVersion = 1

// Kind says what an event is about. The set is closed: a consumer can
// switch on it.
type Kind string

// The kinds of events.
const (
	KindTransition  Kind = "transition"     // the machine moved: from, to, trigger
	KindRun         Kind = "run"            // a run started, resumed or committed its setup
	KindIteration   Kind = "iteration"      // an iteration started (the banner) or ended (data.iteration_end)
	KindAgentOutput Kind = "agent_output"   // one line the agent showed
	KindHeartbeat   Kind = "heartbeat"      // a silent agent or check is still alive
	KindCheck       Kind = "check"          // one of ralph's checks ran
	KindVerdict     Kind = "verdict"        // a reviewer's judgement
	KindCommit      Kind = "commit"         // ralph committed a task's work
	KindBlocker     Kind = "blocker"        // a task was blocked or retried out of a block
	KindLimit       Kind = "limit"          // an agent hit a usage limit, or a run limit ended the run
	KindWait        Kind = "wait"           // the run waits (cooldown, breaker)
	KindWarning     Kind = "warning"        // something went wrong but the run goes on
	KindNote        Kind = "note"           // anything else a person is told
	KindSummary     Kind = "summary"        // the end of a run
	KindDenied      Kind = "sandbox_denied" // the sandbox's proxy refused a connection
)

// Kinds are every kind of event, in the order above, then control: the
// one list a consumer offers or checks them from (ralph mcp's filter).
var Kinds = []Kind{
	KindTransition, KindRun, KindIteration, KindAgentOutput, KindHeartbeat,
	KindCheck, KindVerdict, KindCommit, KindBlocker, KindLimit,
	KindWait, KindWarning, KindNote, KindSummary, KindControl, KindDenied,
}

// Event is one fact about a run, in the envelope every machine shares.
// Text is the line a person reads, exactly as the terminal shows it
// (newline included); Data holds the same fact for programs, typed by
// its kind (payload.go).
type Event struct {
	V       int       `json:"v"`
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	Run     string    `json:"run,omitempty"`
	Worker  string    `json:"worker,omitempty"`
	Machine string    `json:"machine"`
	From    string    `json:"from,omitempty"`
	To      string    `json:"to,omitempty"`
	Trigger string    `json:"trigger,omitempty"`
	Task    string    `json:"task,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Kind    Kind      `json:"kind"`
	Data    Payload   `json:"data,omitempty"`
	Text    string    `json:"text,omitempty"`
	// OriginRun is the run of another emitter an event was forwarded
	// from (Forward); its data's "origin_run".
	OriginRun string `json:"-"`
	// extra are the data's keys its payload does not hold, as read from
	// a journal: written back as they were.
	extra map[string]json.RawMessage
}

// Sink consumes events. Emit is called with the Emitter's lock held, so a
// sink sees events one at a time, in seq order.
type Sink interface {
	Emit(Event)
}

// Text writes each event's line (Render): the terminal output.
type Text struct{ W io.Writer }

// Emit implements Sink.
func (t Text) Emit(ev Event) {
	if s := Render(ev); s != "" {
		io.WriteString(t.W, s)
	}
}

// JSONLines writes each event as one JSON object on its own line.
type JSONLines struct{ W io.Writer }

// Emit implements Sink.
func (j JSONLines) Emit(ev Event) {
	b, err := json.Marshal(ev)
	if err != nil {
		return // an Event always marshals; Data holds plain values only
	}
	j.W.Write(append(b, '\n'))
}

// Emitter stamps events (v, seq, time, run, machine, worker; the kind
// of their payload and the line it renders to when the call site gave
// none) and hands them to its sinks. It is safe for concurrent use:
// agent output arrives from other goroutines than the runner's.
type Emitter struct {
	mu sync.Mutex
	// journal, when one of the sinks is a journal, numbers the events:
	// other processes (a second run, a command from another terminal)
	// append to the same file, and a seq must name one event only.
	journal *Journal
	seq     int64
	run     string
	machine string
	worker  string
	now     func() time.Time
	sinks   []Sink
}

// NewEmitter returns an emitter for one run of machine whose first event
// gets seq after+1 (after is the journal's last seq, see LastSeq). Nil
// sinks are skipped; now nil means time.Now.
func NewEmitter(machine, run string, after int64, now func() time.Time, sinks ...Sink) *Emitter {
	if now == nil {
		now = time.Now
	}
	e := &Emitter{machine: machine, run: run, seq: after, now: now}
	for _, s := range sinks {
		if s == nil {
			continue
		}
		if j, ok := s.(*Journal); ok && j != nil && e.journal == nil {
			e.journal = j
			continue
		}
		e.sinks = append(e.sinks, s)
	}
	return e
}

// number gives the events of evs consecutive seqs. With a journal the
// numbers are taken under the journal's lock, after every seq in it, and
// the journal stays locked until done is called with the events as they
// are to be written (nil: not written).
func (e *Emitter) number(evs []Event) (done func([]Event)) {
	if e.journal == nil {
		for i := range evs {
			e.seq++
			evs[i].Seq = e.seq
		}
		return func([]Event) {}
	}
	seq, unlock := e.journal.claim(e.seq)
	for i := range evs {
		evs[i].Seq = seq + int64(i)
	}
	e.seq = seq + int64(len(evs)) - 1
	return func(evs []Event) {
		e.journal.appendLocked(evs)
		unlock()
	}
}

// SetWorker names the worker every later event comes from.
func (e *Emitter) SetWorker(w string) {
	e.mu.Lock()
	e.worker = w
	e.mu.Unlock()
}

// Skip makes the next event's seq greater than seq: an event written to
// the journal by a repair keeps its number.
func (e *Emitter) Skip(seq int64) {
	e.mu.Lock()
	e.seq = max(e.seq, seq)
	e.mu.Unlock()
}

// Emit stamps ev, hands it to every sink and returns it as stamped.
func (e *Emitter) Emit(ev Event) Event {
	ev, _ = e.EmitAfter(ev, nil)
	return ev
}

// EmitAfter stamps ev, calls persist with it, and only when persist
// succeeds hands it to the sinks. A runner saves its state (which records
// the event, to repair the journal after a kill) in persist, so that the
// state never lags the journal.
func (e *Emitter) EmitAfter(ev Event, persist func(Event) error) (Event, error) {
	var save func([]Event) error
	if persist != nil {
		save = func(evs []Event) error { return persist(evs[0]) }
	}
	evs, err := e.EmitAllAfter([]Event{ev}, save)
	return evs[0], err
}

// EmitAllAfter is EmitAfter for events that one save of a runner's state
// records together: they get consecutive seqs in their order, persist is
// called once with all of them stamped, and only when it succeeds are
// they handed to the sinks, in order. No other event comes between them.
func (e *Emitter) EmitAllAfter(evs []Event, persist func([]Event) error) ([]Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	evs = slices.Clone(evs)
	done := e.number(evs)
	now := e.now().UTC()
	for i := range evs {
		ev := &evs[i]
		ev.V, ev.Run, ev.Machine = SchemaVersion, e.run, e.machine
		if ev.Time.IsZero() {
			ev.Time = now
		}
		if ev.Worker == "" {
			ev.Worker = e.worker
		}
		if ev.Kind == "" && ev.Data != nil {
			ev.Kind = ev.Data.Kind()
		}
		ev.Text = Render(*ev)
		redactEvent(ev)
	}
	if persist != nil {
		if err := persist(evs); err != nil {
			done(nil)
			return evs, err
		}
	}
	done(evs)
	for _, ev := range evs {
		for _, s := range e.sinks {
			s.Emit(ev)
		}
	}
	return evs, nil
}

// Forward numbers an event another emitter stamped (a worker's loop) in
// this emitter's sequence and run, and hands it to the sinks. Its machine,
// worker, task and the rest stay as they were, so the run's one stream
// tells which machine and worker said it; the other run's id goes into
// OriginRun.
func (e *Emitter) Forward(ev Event) Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	evs := []Event{ev}
	done := e.number(evs)
	ev = evs[0]
	if ev.Run != "" && ev.Run != e.run {
		ev.OriginRun = ev.Run
	}
	ev.V, ev.Run = SchemaVersion, e.run
	if ev.Time.IsZero() {
		ev.Time = e.now().UTC()
	}
	done([]Event{ev})
	for _, s := range e.sinks {
		s.Emit(ev)
	}
	return ev
}

// Writer returns a writer that emits each line written to it as an event
// of kind, Text holding the line with its newline. A write's last piece
// without a newline is emitted as it is, so that a terminal status line
// ("\r\033[K  … agent working · 5s") reaches the text sink unchanged.
// Empty writes emit nothing.
func (e *Emitter) Writer(kind Kind) *LineWriter { return &LineWriter{e: e, kind: kind} }

// LineWriter turns what is written to it into one event per line: a
// writer that sends a line's text and its newline in two writes still
// makes one event. Text that starts with a carriage return (a terminal
// status line redrawn in place) is passed on at once, as written. Flush
// emits a last line that has no newline.
type LineWriter struct {
	e    *Emitter
	kind Kind
	mu   sync.Mutex
	buf  []byte
}

func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 0 && w.buf[0] == '\r' {
		// A status line redrawn in place never ends with a newline.
		w.e.Emit(Event{Kind: w.kind, Text: string(w.buf)})
		w.buf = w.buf[:0]
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

func (w *LineWriter) emit(line []byte) {
	w.e.Emit(Event{Kind: w.kind, Text: string(line),
		Data: w.data(string(bytes.TrimRight(line, "\r\n")))})
}

// data is a line's payload: the lines of a heartbeat writer are status
// lines, every other writer's what an agent showed.
func (w *LineWriter) data(line string) Payload {
	if w.kind == KindHeartbeat {
		return Heartbeat{Line: line}
	}
	return AgentOutput{Line: line}
}

// Flush emits what is left of a line without a newline.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}
