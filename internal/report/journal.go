package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/ralphloop/ralph/internal/store"
)

// journalTail is how much of the journal's end is read to find its last
// seq or a repaired event: other writers share the log, so the line looked
// for is not always the last one.
const journalTail = 256 << 10

// Journal appends every event to the journal file (.ralph/events.jsonl).
// A torn last line left by a kill is cut before the next append.
type Journal struct {
	Path string

	mu  sync.Mutex
	err error
}

// Emit implements Sink. The first failed append is kept for Err.
func (j *Journal) Emit(ev Event) {
	if err := store.AppendJSONLine(j.Path, ev); err != nil {
		j.mu.Lock()
		if j.err == nil {
			j.err = err
		}
		j.mu.Unlock()
	}
}

// Err returns the first append that failed, nil when every one succeeded
// (or j is nil: no journal, no failed append).
func (j *Journal) Err() error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// tail returns the complete lines at the end of the journal, oldest first.
// A missing journal has none.
func tail(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var start int64
	if fi, err := f.Stat(); err == nil && fi.Size() > journalTail {
		start = fi.Size() - journalTail
	}
	b, err := io.ReadAll(io.NewSectionReader(f, start, journalTail))
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(b, []byte("\n"))
	// The last piece is a torn line or empty; the first may be cut by
	// the window.
	lines = lines[:len(lines)-1]
	if start > 0 && len(lines) > 0 {
		lines = lines[1:]
	}
	return lines, nil
}

// seqOf is the seq of an envelope line; 0 for lines of the shapes an
// older ralph wrote, which have none.
func seqOf(line []byte) (seq int64, run string) {
	var h struct {
		V   int    `json:"v"`
		Seq int64  `json:"seq"`
		Run string `json:"run"`
	}
	if json.Unmarshal(line, &h) != nil || h.V == 0 {
		return 0, ""
	}
	return h.Seq, h.Run
}

// LastSeq returns the highest seq at the end of the journal at path: the
// next event continues from it. 0 for a missing journal or one written by
// an older ralph only.
func LastSeq(path string) (int64, error) {
	lines, err := tail(path)
	var last int64
	for _, l := range lines {
		s, _ := seqOf(l)
		last = max(last, s)
	}
	return last, err
}

// Repair appends want to the journal unless its tail already holds it
// (same run and seq): the half of an emit that a kill between saving the
// state and appending the line lost.
func Repair(path string, want Event) error {
	lines, err := tail(path)
	if err != nil {
		return err
	}
	for _, l := range lines {
		if s, run := seqOf(l); s == want.Seq && run == want.Run {
			return nil
		}
	}
	return store.AppendJSONLine(path, want)
}
