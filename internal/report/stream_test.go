package report

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeJournal writes events with texts of many lengths, some longer than
// a reader's piece, and a torn line at the end; it returns the events
// whole lines hold.
func writeJournal(t *testing.T, p string) []Event {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var want []Event
	var b strings.Builder
	for i := 1; i <= 400; i++ {
		n := rng.IntN(2000)
		if i%50 == 0 {
			n = readChunk + rng.IntN(3*readChunk) // spans pieces
		}
		ev := Event{V: SchemaVersion, Seq: int64(i), Kind: KindAgentOutput, Machine: "loop", Text: strings.Repeat("x", n)}
		line, _ := json.Marshal(ev)
		b.Write(line)
		b.WriteByte('\n')
		if i%7 == 0 {
			b.WriteString("{\"timestamp\":\"an older shape\"}\n\n")
		}
		want = append(want, ev)
	}
	b.WriteString(`{"v":1,"seq":401,"kind":"note","te`) // being written
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return want
}

// The journal is read a piece at a time, forwards and from the end, and
// both give exactly the whole lines, whatever their lengths.
func TestJournalReadInPieces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	want := writeJournal(t, p)
	r := &JournalReader{Path: p}
	var got []int64
	if err := r.Scan(func(ev Event) error { got = append(got, ev.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[0] != 1 || got[len(got)-1] != int64(len(want)) {
		t.Fatalf("Scan read %d events (%v…), want %d", len(got), got[:min(3, len(got))], len(want))
	}
	// The torn line is read once it is whole.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprint(f, "xt\":\"hi\"}\n")
	f.Close()
	evs, err := r.Next()
	if err != nil || len(evs) != 1 || evs[0].Seq != 401 || evs[0].Text != "hi" {
		t.Fatalf("after the torn line was finished: %+v, %v", evs, err)
	}
	for _, n := range []int{1, 5, 49, 50, 51, 399, 401, 1000} {
		tail, last, err := TailJournal(p, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if last != 401 {
			t.Fatalf("tail %d: last seq %d, want 401", n, last)
		}
		if len(tail) != min(n, 401) {
			t.Fatalf("tail %d: %d events", n, len(tail))
		}
		for i, ev := range tail {
			if wantSeq := int64(401 - len(tail) + 1 + i); ev.Seq != wantSeq {
				t.Fatalf("tail %d: event %d has seq %d, want %d", n, i, ev.Seq, wantSeq)
			}
			if ev.Seq <= 400 && len(ev.Text) != len(want[ev.Seq-1].Text) {
				t.Fatalf("tail %d: event %d has %d bytes of text, want %d", n, ev.Seq, len(ev.Text), len(want[ev.Seq-1].Text))
			}
		}
	}
	every50 := func(ev Event) bool { return ev.Seq%50 == 0 }
	tail, _, _ := TailJournal(p, 3, every50)
	if len(tail) != 3 || tail[0].Seq != 300 || tail[2].Seq != 400 {
		t.Fatalf("the last 3 events kept: %v", tail)
	}
}

// A line longer than MaxLine is skipped, forwards and from the end, and
// the lines around it are read.
func TestJournalSkipsOverlongLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	var b strings.Builder
	for i, n := range []int{10, MaxLine + 10, 10} {
		line, _ := json.Marshal(Event{V: SchemaVersion, Seq: int64(i + 1), Kind: KindNote, Text: strings.Repeat("y", n)})
		b.Write(line)
		b.WriteByte('\n')
	}
	os.WriteFile(p, []byte(b.String()), 0o644)
	evs, err := (&JournalReader{Path: p}).Next()
	if err != nil || len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 3 {
		t.Fatalf("forwards: %d events, %v", len(evs), err)
	}
	tail, _, err := TailJournal(p, 10, nil)
	if err != nil || len(tail) != 2 || tail[0].Seq != 1 || tail[1].Seq != 3 {
		t.Fatalf("from the end: %d events, %v", len(tail), err)
	}
}
