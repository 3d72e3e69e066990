package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/redact"
)

type collect struct{ evs []Event }

func (c *collect) Emit(ev Event) { c.evs = append(c.evs, ev) }

// The text sink shows exactly what the runner meant a person to read,
// whatever the lines were cut into; the JSON sink one object per line.
func TestTextAndJSONSinks(t *testing.T) {
	var text, js bytes.Buffer
	e := NewEmitter("loop", "run-1", 0, func() time.Time { return time.Unix(0, 0) }, Text{&text}, JSONLines{&js}, nil)
	e.Emit(Event{Kind: KindNote, Text: "ralph: hello\n"})
	fmt.Fprint(e.Writer(KindAgentOutput), "  │ one\n  │ two\n\r\033[K")
	if want := "ralph: hello\n  │ one\n  │ two\n\r\033[K"; text.String() != want {
		t.Errorf("text sink wrote %q, want %q", text.String(), want)
	}
	lines := strings.Split(strings.TrimSuffix(js.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("JSON sink wrote %d lines, want 4:\n%s", len(lines), js.String())
	}
	for i, l := range lines {
		var ev Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if ev.V != SchemaVersion || ev.Seq != int64(i+1) || ev.Run != "run-1" || ev.Machine != "loop" {
			t.Errorf("line %d envelope: %s", i+1, l)
		}
	}
	if !strings.Contains(lines[1], `"line":"  │ one"`) {
		t.Errorf("agent line event lacks its line: %s", lines[1])
	}
}

// Events emitted from many goroutines get distinct, increasing seqs in the
// order the sinks see them.
func TestEmitterConcurrentSeq(t *testing.T) {
	c := &collect{}
	e := NewEmitter("loop", "r", 10, nil, c)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				e.Writer(KindAgentOutput).Write([]byte("x\n"))
			}
		})
	}
	wg.Wait()
	if len(c.evs) != 400 {
		t.Fatalf("%d events, want 400", len(c.evs))
	}
	for i, ev := range c.evs {
		if ev.Seq != int64(11+i) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, 11+i)
		}
	}
}

// A failed persist keeps the event from the sinks: the state and the
// journal never disagree the other way round.
func TestEmitAfterPersistFails(t *testing.T) {
	c := &collect{}
	e := NewEmitter("loop", "r", 0, nil, c)
	if _, err := e.EmitAfter(Event{Kind: KindTransition}, func(Event) error { return os.ErrPermission }); err == nil {
		t.Fatal("EmitAfter hid the persist error")
	}
	if len(c.evs) != 0 {
		t.Errorf("the sinks got an event whose state was not saved")
	}
}

// The journal's seq goes on from its last numbered line, past lines of an
// older ralph and a torn last line; Repair appends a lost event once.
func TestJournalSeqAndRepair(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	old := `{"timestamp":"2024-01-01T00:00:00Z","sessionId":"x","transition":{"from":"INIT","to":"MEMORY_LOAD","trigger":"start"}}` + "\n"
	os.WriteFile(p, []byte(old), 0o644)
	if n, err := LastSeq(p); err != nil || n != 0 {
		t.Fatalf("LastSeq of an old journal = %d, %v; want 0", n, err)
	}
	j := &Journal{Path: p}
	e := NewEmitter("loop", "r1", 0, nil, j)
	e.Emit(Event{Kind: KindNote, Text: "a\n"})
	lost, _ := e.EmitAfter(Event{Kind: KindTransition, From: "A", To: "B"}, func(Event) error { return nil })
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"v":1,"seq":9`) // a torn append
	f.Close()
	if n, _ := LastSeq(p); n != 2 {
		t.Fatalf("LastSeq = %d, want 2", n)
	}
	// The kill happened after the state held seq 3 but before its line.
	lost.Seq = 3
	for range 2 {
		if err := Repair(p, lost); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(p)
	if got := strings.Count(string(b), `"seq":3`); got != 1 {
		t.Errorf("the repaired event is in the journal %d times, want once:\n%s", got, b)
	}
	for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if !json.Valid([]byte(l)) {
			t.Errorf("line %d is not JSON: %q", i+1, l)
		}
	}
	if n, _ := LastSeq(p); n != 3 {
		t.Errorf("LastSeq after repair = %d, want 3", n)
	}
	if j.Err() != nil {
		t.Error(j.Err())
	}
}

// An agent's display sends a line's text and its newline in two writes:
// JSON readers must still get one event per line, and a terminal status
// line redrawn in place passes at once.
func TestWriterMakesOneEventPerLine(t *testing.T) {
	var got []Event
	em := NewEmitter("loop", "r", 0, nil, sinkFunc(func(e Event) { got = append(got, e) }))
	w := em.Writer(KindAgentOutput)
	w.Write([]byte("hello"))
	w.Write([]byte("\n"))
	w.Write([]byte("\r\033[K  … working · 3s"))
	w.Write([]byte("two\nthree"))
	w.Flush()
	var texts []string
	for _, e := range got {
		texts = append(texts, e.Text)
	}
	want := []string{"hello\n", "\r\033[K  … working · 3s", "two\n", "three"}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", texts, want)
	}
}

type sinkFunc func(Event)

func (f sinkFunc) Emit(e Event) { f(e) }

// A worker's loop events join the parallel run's stream: numbered in its
// one sequence under its run id, keeping the machine, worker and task that
// said them, and the loop's own run id as origin_run.
func TestForwardRenumbersAWorkersEvents(t *testing.T) {
	var got collect
	run := NewEmitter("engine", "par-1", 10, nil, &got)
	worker := NewEmitter("loop", "loop-7", 0, nil, sinkFunc(func(ev Event) {
		ev.Worker, ev.Task = "w2", "US-003"
		run.Forward(ev)
	}))
	run.Emit(Event{Kind: KindRun, Text: "start\n"})
	worker.Emit(Event{Kind: KindTransition, From: "IMPLEMENT", To: "TEST", Data: Transition{Detail: "k"}})
	run.Emit(Event{Kind: KindSummary})
	if len(got.evs) != 3 {
		t.Fatalf("got %d events", len(got.evs))
	}
	for i, ev := range got.evs {
		if ev.Seq != int64(11+i) || ev.Run != "par-1" {
			t.Errorf("event %d: seq %d run %q; want %d in par-1", i, ev.Seq, ev.Run, 11+i)
		}
	}
	f := got.evs[1]
	if f.Machine != "loop" || f.Worker != "w2" || f.Task != "US-003" || f.From != "IMPLEMENT" || f.OriginRun != "loop-7" || f.Data != (Transition{Detail: "k"}) {
		t.Errorf("forwarded event = %+v", f)
	}
	if b, _ := json.Marshal(f); !strings.Contains(string(b), `"data":{"detail":"k","origin_run":"loop-7"}`) {
		t.Errorf("the forwarded line does not name its origin run in its data: %s", b)
	}
}

// Two writers of one journal (a run, and a command given from another
// terminal, each with its own Journal and emitter) never give two events
// the same seq, and seqs grow in the order lines are written: a reader
// that resumes after a seq misses nothing.
func TestWritersOfOneJournalNeverShareASeq(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	run := NewEmitter("loop", "r1", 0, nil, &Journal{Path: p})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A new emitter per command, as the CLI makes, starting from
			// the seq it read before the others wrote.
			after, _ := LastSeq(p)
			other := NewEmitter("control", "", after, nil, &Journal{Path: p})
			for i := 0; i < 25; i++ {
				other.Emit(Event{Kind: KindControl})
			}
		}()
	}
	for i := 0; i < 100; i++ {
		run.Emit(Event{Kind: KindNote})
	}
	wg.Wait()
	var evs []Event
	err := (&JournalReader{Path: p}).Scan(func(ev Event) error { evs = append(evs, ev); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 200 {
		t.Fatalf("the journal holds %d events, want 200", len(evs))
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d; want %d (seqs unique and in the order written)", i+1, ev.Seq, i+1)
		}
	}
}

// The journal reader takes whatever bytes a file holds (a torn line, an
// older shape, an editor's damage) without failing, and passes on only
// envelopes it knows, each once, however the bytes arrive.
func FuzzJournalReader(f *testing.F) {
	f.Add([]byte("{\"v\":1,\"seq\":1,\"kind\":\"note\"}\n{\"v\":1,\"seq\":2,\"kin"), 7)
	f.Add([]byte("{\"timestamp\":\"x\"}\n{\"v\":9,\"seq\":3}\n\n{\"v\":1,\"seq\":4,\"kind\":\"commit\"}\n"), 3)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		p := filepath.Join(t.TempDir(), "events.jsonl")
		if split < 0 {
			split = -split
		}
		split %= len(data) + 1
		os.WriteFile(p, data[:split], 0o644)
		r := &JournalReader{Path: p}
		first, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p, data, 0o644)
		rest, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		all, _ := (&JournalReader{Path: p}).Next()
		if got := len(first) + len(rest); got != len(all) {
			t.Errorf("read in two pieces: %d events; at once: %d", got, len(all))
		}
		for _, ev := range append(first, rest...) {
			if ev.V < 1 || ev.V > SchemaVersion {
				t.Errorf("an event of version %d was passed on", ev.V)
			}
		}
	})
}

// BenchmarkEmitToJournal is the cost of one event written to the journal
// under its lock (what numbering across writers costs every event).
func BenchmarkEmitToJournal(b *testing.B) {
	p := filepath.Join(b.TempDir(), "events.jsonl")
	em := NewEmitter("loop", "r1", 0, nil, &Journal{Path: p})
	ev := Event{Kind: KindAgentOutput, Text: "→ tool: Bash sh check.sh\n", Data: AgentOutput{Line: "→ tool: Bash sh check.sh"}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		em.Emit(ev)
	}
}

// A journal that keeps writing after another writer left a torn line (a
// process killed mid-append) cuts it first, although it skips reading the
// file while the journal is as long as its own last append left it; a
// batch lands in order, with consecutive seqs.
func TestJournalCutsATornLineOfAnotherWriter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	j := &Journal{Path: p}
	e := NewEmitter("loop", "r1", 0, nil, j)
	e.Emit(Event{Kind: KindNote, Text: "a\n"})
	e.Emit(Event{Kind: KindNote, Text: "b\n"})
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"v":1,"seq":3,"run":"other"`) // killed mid-append
	f.Close()
	evs, err := e.EmitAllAfter([]Event{{Kind: KindTransition, From: "A", To: "B"}, {Kind: KindNote, Text: "c\n"}}, func(evs []Event) error {
		if len(evs) != 2 || evs[1].Seq != evs[0].Seq+1 {
			t.Errorf("persist got %+v, want two events with consecutive seqs", evs)
		}
		return nil
	})
	if err != nil || j.Err() != nil {
		t.Fatal(err, j.Err())
	}
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("journal has %d lines, want 4:\n%s", len(lines), b)
	}
	for i, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("line %d is not JSON (the torn line was not cut): %q", i+1, l)
		}
	}
	if !strings.Contains(lines[2], `"to":"B"`) || !strings.Contains(lines[3], `"text":"c\n"`) || evs[0].Seq != 3 {
		t.Errorf("the batch is not last, in order, from seq 3: %+v\n%s", evs, b)
	}
}

// TestEmitterMasksSecrets: an event whose text or data quotes a secret
// (a PRD criterion that holds one) reaches no sink with it.
func TestEmitterMasksSecrets(t *testing.T) {
	const secret = "tok-0123456789abcdef"
	t.Setenv("REPORT_TEST_TOKEN", secret)
	redact.AddNames() // recompute the default Redactor from the environment
	t.Cleanup(func() { redact.AddNames() })
	var text, js bytes.Buffer
	e := NewEmitter("loop", "r", 0, nil, Text{&text}, JSONLines{&js})
	data := Warning{Dropped: []string{"a.txt holds " + secret}}
	got := e.Emit(Event{Kind: KindWarning, Text: "AC-1: a.txt holds " + secret + "\n", Data: data})
	if strings.Contains(text.String()+js.String(), secret) || !strings.Contains(js.String(), "a.txt holds [REDACTED]") {
		t.Errorf("a sink got the secret:\n%s%s", text.String(), js.String())
	}
	if strings.Contains(got.Text, secret) || data.Dropped[0] != "a.txt holds "+secret || got.Data.(Warning).Dropped[0] != "a.txt holds "+redact.Mask {
		t.Errorf("the stamped event keeps the secret, or the caller's data was changed: %+v, %v", got, data)
	}
}
