package report

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
)

// TailJournal returns the last n events of the journal at path that keep
// takes (nil: every one), oldest first, and the seq of the journal's last
// event. It reads from the end a piece at a time and stops when it has n,
// so that the tail of a journal of any size costs what the tail holds.
func TailJournal(path string, n int, keep func(Event) bool) (evs []Event, last int64, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	pos := fi.Size()
	var carry []byte // the start of a line cut by the piece before (later in the file)
	first := true    // the piece at the end: its last line may be torn
	skip := false    // carry outgrew MaxLine: drop the line
	lastSeen := false
	buf := make([]byte, readChunk)
	for pos > 0 && len(evs) < n {
		size := int64(len(buf))
		if pos < size {
			size = pos
		}
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil {
			return nil, 0, err
		}
		piece := append(append([]byte(nil), buf[:size]...), carry...)
		lines := bytes.Split(piece, []byte("\n"))
		if first {
			// Empty after the journal's last newline, or a line still
			// being written.
			lines, first = lines[:len(lines)-1], false
		}
		carry = nil
		drop := false // carry is a line longer than MaxLine
		if pos > 0 {
			// The first piece may begin inside a line: it is finished by
			// the next read.
			carry, lines = lines[0], lines[1:]
			if len(carry) > MaxLine || (len(lines) == 0 && skip) {
				carry, drop = nil, true
			}
		}
		for i := len(lines) - 1; i >= 0 && len(evs) < n; i-- {
			if (i == len(lines)-1 && skip) || len(lines[i]) > MaxLine {
				continue // a line too long to take, or its start
			}
			ev, ok := ParseLine(lines[i])
			if !ok {
				continue
			}
			if !lastSeen {
				last, lastSeen = ev.Seq, true
			}
			if keep == nil || keep(ev) {
				evs = append(evs, ev)
			}
		}
		if len(lines) > 0 {
			skip = false
		}
		skip = skip || drop
	}
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return evs, last, nil
}
