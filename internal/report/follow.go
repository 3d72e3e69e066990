package report

import (
	"bufio"
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

// The journal holds every line of agent output, so it grows to hundreds
// of megabytes; readers take it a piece at a time so that what a reader
// holds does not grow with the journal.
const (
	// readChunk is how much of the journal a reader holds at once.
	readChunk = 256 << 10
	// MaxLine is the longest journal line a reader takes; a longer one
	// (no event ralph writes is) is skipped rather than held.
	MaxLine = 8 << 20
)

// JournalReader reads a journal from its start and then whatever is
// appended to it, one complete line at a time: the views (`ralph watch`,
// `ralph serve`, `ralph mcp`) follow a run through it from any process.
// Lines of older shapes (no v) and of newer versions are skipped.
type JournalReader struct {
	Path string

	off int64
}

// Offset is where the reader has read to: the end of the last complete
// line it passed on.
func (r *JournalReader) Offset() int64 { return r.off }

// Next returns the events appended since the last call, in the order
// they were written. A journal that does not exist yet has none; one
// that shrank (replaced) is read again from its start. Next holds them
// all: a reader of a journal of any size uses Scan.
func (r *JournalReader) Next() ([]Event, error) {
	var evs []Event
	err := r.Scan(func(ev Event) error {
		evs = append(evs, ev)
		return nil
	})
	return evs, err
}

// Scan calls fn with each event appended since the last call, in the
// order they were written, reading the journal a piece at a time. A torn
// last line is left for the next call. An error of fn ends the scan after
// the event it was given.
func (r *JournalReader) Scan(fn func(Event) error) error {
	return r.ScanRaw(func(line []byte) error {
		if ev, ok := ParseLine(line); ok {
			return fn(ev)
		}
		return nil
	})
}

// ScanRaw is Scan for a reader that parses lines itself: fn gets each
// complete line appended since the last call, whatever its shape.
func (r *JournalReader) ScanRaw(fn func(line []byte) error) error {
	f, err := os.Open(r.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < r.off {
		r.off = 0
	}
	_, err = ScanLines(f, r.off, fi.Size(), func(line []byte, end int64) error {
		r.off = end
		return fn(line)
	})
	return err
}

// ScanLines calls fn with each complete line of f between the offsets
// from and to (without its newline) and the offset just past it, holding
// at most readChunk bytes, or one line of up to MaxLine. A longer line is
// skipped whole. It returns the offset past the last complete line: a
// torn line at the end is not passed on.
func ScanLines(f io.ReaderAt, from, to int64, fn func(line []byte, end int64) error) (int64, error) {
	if to <= from {
		return from, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, to-from), readChunk)
	pos, start := from, from // start: where the line being read began
	var long []byte          // a line longer than the reader's buffer
	skip := false            // a line longer than MaxLine
	for {
		piece, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			pos += int64(len(piece))
			start = pos
			line := piece[:len(piece)-1]
			if long != nil {
				skip = skip || len(long)+len(line) > MaxLine
				line = append(long, line...)
				long = nil
			}
			if skip {
				skip = false
				continue
			}
			if ferr := fn(line, pos); ferr != nil {
				return pos, ferr
			}
		case errors.Is(err, bufio.ErrBufferFull):
			// The line goes on past the buffer: keep it whole, up to
			// MaxLine; past that it is dropped.
			if !skip && len(long)+len(piece) <= MaxLine {
				long = append(long, piece...)
			} else {
				skip, long = true, nil
			}
			pos += int64(len(piece))
		case errors.Is(err, io.EOF):
			// What is left has no newline yet: a line still being
			// written, read again by the next call.
			return start, nil
		default:
			return start, err
		}
	}
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

// Follow calls fn with every event of the journal at path whose seq is
// greater than after, then with each one appended, polling every poll,
// until ctx ends (nil) or fn fails (its error). Several runs may share a
// journal; their events come in the order they were written.
func Follow(ctx context.Context, path string, after int64, poll time.Duration, fn func(Event) error) error {
	r := &JournalReader{Path: path}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		err := r.Scan(func(ev Event) error {
			if ev.Seq <= after {
				return nil
			}
			return fn(ev)
		})
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
