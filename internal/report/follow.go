package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// KindControl is a control command given or taken (package control): who
// gave it, what it was, and whether a run took it.
const KindControl Kind = "control"

// JournalReader reads a journal from its start and then whatever is
// appended to it, one complete line at a time: the views (`ralph watch`,
// `ralph serve`, `ralph mcp`) follow a run through it from any process.
// Lines of older shapes (no v) and of newer versions are skipped.
type JournalReader struct {
	Path string

	off     int64
	partial []byte
}

// Next returns the events appended since the last call, in the order
// they were written. A journal that does not exist yet has none; one
// that shrank (replaced) is read again from its start.
func (r *JournalReader) Next() ([]Event, error) {
	f, err := os.Open(r.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < r.off {
		r.off, r.partial = 0, nil
	}
	if fi.Size() == r.off {
		return nil, nil
	}
	b, err := io.ReadAll(io.NewSectionReader(f, r.off, fi.Size()-r.off))
	if err != nil {
		return nil, err
	}
	r.off += int64(len(b))
	b = append(r.partial, b...)
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		r.partial = b
		return nil, nil
	}
	r.partial = append([]byte(nil), b[end+1:]...)
	var evs []Event
	for _, line := range bytes.Split(b[:end], []byte("\n")) {
		if ev, ok := ParseLine(line); ok {
			evs = append(evs, ev)
		}
	}
	return evs, nil
}

// ParseLine reads one journal line; ok is false for a line that is not
// an envelope this ralph knows (empty, torn, older shape, newer version).
func ParseLine(line []byte) (Event, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Event{}, false
	}
	var ev Event
	if json.Unmarshal(line, &ev) != nil || ev.V == 0 || ev.V > SchemaVersion {
		return Event{}, false
	}
	return ev, true
}

// ReadJournal returns the events of the journal at path whose seq is
// greater than after, oldest first.
func ReadJournal(path string, after int64) ([]Event, error) {
	r := &JournalReader{Path: path}
	evs, err := r.Next()
	out := evs[:0]
	for _, ev := range evs {
		if ev.Seq > after {
			out = append(out, ev)
		}
	}
	return out, err
}

// Follow calls fn with every event of the journal at path whose seq is
// greater than after, then with each one appended, polling every poll,
// until ctx ends (nil) or fn fails (its error). Several runs may share a
// journal; their events come in the order they were written.
func Follow(ctx context.Context, path string, after int64, poll time.Duration, fn func(Event) error) error {
	r := &JournalReader{Path: path}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		evs, err := r.Next()
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Seq <= after {
				continue
			}
			if err := fn(ev); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
