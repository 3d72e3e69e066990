package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/gofrs/flock"
	"github.com/ralphloop/ralph/internal/store"
)

// journalTail is how much of the journal's end is read to find its last
// seq or a repaired event: other writers share the log, so the line looked
// for is not always the last one.
const journalTail = 256 << 10

// Journal appends every event to the journal file (.ralph/events.jsonl).
// A torn last line left by a kill is cut before the next append.
//
// Several writers share a journal: runs in other processes, a command
// given from another terminal. An Emitter numbers its events under the
// journal's lock (claim), so that a seq names one event of the journal,
// which is what a reader resuming after a seq (`ralph serve`'s
// Last-Event-ID) relies on.
type Journal struct {
	Path string

	mu  sync.Mutex
	err error
	// claimed serialises this process's writers of the journal; lock is
	// the lock between processes (the kernel's, on the journal file).
	claimed sync.Mutex
	lock    *flock.Flock
	// size and last are the journal's size and highest seq when this
	// Journal last wrote: an unchanged size means no one else wrote
	// since, and the tail need not be read again.
	size, last int64
	// wrote is the journal's size right after this Journal's last
	// append, whose line was whole: while the file is still that long,
	// no one has written since and no torn line can be there to cut.
	wrote int64
}

// Emit implements Sink: it appends ev as it is, numbered by whoever
// emitted it. The first failed append is kept for Err.
func (j *Journal) Emit(ev Event) {
	j.claimed.Lock()
	defer j.claimed.Unlock()
	j.lockFile()
	defer j.unlockFile()
	j.append([]Event{ev})
}

// append writes evs, one line each, in one write. A torn last line that a
// killed writer left is cut first; when the journal is as long as this
// Journal's own last complete append left it, it has none, and the file
// is not read for it.
func (j *Journal) append(evs []Event) {
	if len(evs) == 0 {
		return
	}
	var buf []byte
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			j.fail(err)
			return
		}
		buf = append(append(buf, b...), '\n')
	}
	known := false
	if fi, err := os.Stat(j.Path); err == nil && fi.Size() == j.wrote {
		known = true
	} else if err := store.CutTornLine(j.Path); err != nil {
		j.fail(err)
		return
	}
	if err := store.AppendFile(j.Path, buf); err != nil {
		j.fail(err)
		return
	}
	if known {
		j.wrote += int64(len(buf))
	} else if fi, err := os.Stat(j.Path); err == nil {
		j.wrote = fi.Size()
	} else {
		j.wrote = -1
	}
	j.size, j.last = j.wrote, max(j.last, evs[len(evs)-1].Seq)
}

func (j *Journal) fail(err error) {
	j.mu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.mu.Unlock()
}

// lockFile takes the lock between processes. A journal that cannot be
// locked (its folder is gone) is written without it: the append then
// says what is wrong.
func (j *Journal) lockFile() {
	if j.lock == nil {
		j.lock = flock.New(j.Path)
	}
	if err := j.lock.Lock(); err != nil {
		j.lock = nil
	}
}

func (j *Journal) unlockFile() {
	if j.lock != nil {
		j.lock.Unlock()
	}
}

// claim returns the seq the next event gets, greater than after and than
// every seq in the journal, and keeps the journal locked until unlock:
// the event is written (appendLocked) before anyone else may number one.
func (j *Journal) claim(after int64) (seq int64, unlock func()) {
	j.claimed.Lock()
	j.lockFile()
	if fi, err := os.Stat(j.Path); err == nil && fi.Size() != j.size {
		last, _ := LastSeq(j.Path)
		j.size, j.last = fi.Size(), last
	}
	return max(after, j.last) + 1, func() {
		j.unlockFile()
		j.claimed.Unlock()
	}
}

// appendLocked writes evs while the journal is claimed.
func (j *Journal) appendLocked(evs []Event) { j.append(evs) }

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
