// Package store holds ralph's persistence primitives: atomic file writes,
// versioned JSON documents, append-only logs and the workspace lock.
//
// Every write of state goes through WriteFileAtomic so that a crash or a kill
// at any instant leaves either the old or the new content on disk, never a
// torn file.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/redact"
)

// Counts of the durable writes this process made, for the tests and
// benchmarks that hold the loop to a number of writes per iteration: each
// durable atomic write costs two fsyncs (the file and its folder), which is
// most of ralph's own time between two agent runs. Records written with
// WriteRecord are counted apart: they make no fsync.
var atomicWrites, recordWrites, fsyncs atomic.Int64

// WriteCounts returns how many durable atomic writes (WriteFileAtomic,
// WriteJSON) and fsyncs (of files and folders) this process has made.
func WriteCounts() (writes, syncs int64) { return atomicWrites.Load(), fsyncs.Load() }

// RecordCounts returns how many records (WriteRecord, WriteJSONRecord)
// this process has written.
func RecordCounts() int64 { return recordWrites.Load() }

// WriteFileAtomic replaces path with data. It writes a unique temporary file
// in the same folder, fsyncs it, renames it over path and fsyncs the folder,
// so readers see the old or the new content and never a mix, and a power
// loss after it returns keeps the new content. The temporary file is
// removed when any step fails. State goes through it: state.json, the
// cooldowns, parallel.json, the task file, whatever a resumed run decides
// from.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	atomicWrites.Add(1)
	return replace(path, data, perm, true)
}

// WriteRecord replaces path with data atomically but not durably: a
// temporary file renamed over path, with no fsync. It is for records and
// logs that no resumed run decides from (runs/<id>/run.json, iter-N.json,
// prompt files, the file naming a running agent's process group).
//
// Why that is safe: the kills ralph must survive (DESIGN §5, what the crash
// tests do at every transition and at random instants) end the process, not
// the machine. A rename is atomic in the kernel the moment it returns, so a
// killed ralph leaves either the old record or the whole new one, exactly
// as with WriteFileAtomic; the data not yet on the disk is in the page
// cache, which outlives the process. Only a power loss or a kernel crash
// can lose a record written this way (or, on some filesystems, leave it
// empty), and then state.json, which is written with full fsyncs, still
// says where the run is: the record is rewritten or shown as missing, never
// trusted over the state. A record of processes (a process group) is moot
// after a power loss anyway: the processes are gone with the machine.
// Skipping the two fsyncs takes about 0.7 ms per write off ralph's time
// between two agent runs on the machine the README measures.
func WriteRecord(path string, data []byte, perm os.FileMode) error {
	recordWrites.Add(1)
	return replace(path, data, perm, false)
}

func replace(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if durable {
		fsyncs.Add(1)
		if err := tmp.Sync(); err != nil {
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmpName, path); err != nil {
		return err
	}
	ok = true
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// RemoveStaleTemps deletes the temporary files a kill in the middle of
// WriteFileAtomic left in dir: files named NAME.DIGITS.tmp next to an
// existing NAME. The caller must hold the lock of the writers of dir, so
// that no write is in flight. A leftover would otherwise be committed with
// the next task by `git add --all`.
func RemoveStaleTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".tmp")
		if !ok || e.IsDir() {
			continue
		}
		i := strings.LastIndexByte(name, '.')
		if i <= 0 || strings.Trim(name[i+1:], "0123456789") != "" || name[i+1:] == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name[:i])); err != nil {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// SyncDir makes a rename or a new directory entry durable: without it a
// power loss can forget the entry even though the file data reached the
// disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	fsyncs.Add(1)
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// WriteIfMissing creates path with data unless a file already exists there.
// It reports whether it wrote. Existing files are never touched, which is
// what lets `ralph init` run safely on a workspace that already has state.
func WriteIfMissing(path string, data []byte, perm os.FileMode) (bool, error) {
	if _, err := os.Lstat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return false, nil
		}
		return false, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}

// AppendFile appends data to path, creating it when missing. Logs are
// append-only: nothing in ralph rewrites a log line once written.
func AppendFile(path string, data []byte) error {
	// A named pipe in place of the file would block the open, or the
	// write, for as long as nobody reads it: it is refused, before the
	// open and again after it (O_NONBLOCK: the open itself never waits).
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return inputlimit.NotRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return err
		}
		return inputlimit.NotRegular(path, fi.Mode())
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// AppendJSONLine appends v as one line of JSON to path. A torn last line,
// left by a crash in the middle of an earlier append, is cut off first, so
// that every complete line of the log stays valid JSON.
func AppendJSONLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := CutTornLine(path); err != nil {
		return err
	}
	return AppendFile(path, append(b, '\n'))
}

// CutTornLine truncates path after its last newline when it does not end
// with one. A missing or empty file is left alone.
func CutTornLine(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	// Scan back in chunks for the last newline.
	buf := make([]byte, 64*1024)
	end := fi.Size()
	for end > 0 {
		start := max(end-int64(len(buf)), 0)
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return f.Truncate(start + int64(i) + 1)
		}
		end = start
	}
	return f.Truncate(0)
}

// SchemaError reports a document written by a newer ralph than this one.
// It is refused rather than guessed at, because rewriting it would lose the
// fields this version does not know.
type SchemaError struct {
	Path    string
	Found   int
	Current int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("%s has schema_version %d, newer than this ralph understands (%d): upgrade ralph", e.Path, e.Found, e.Current)
}

// WriteJSON writes v as indented JSON atomically and durably
// (WriteFileAtomic). The caller's type must carry its own schema_version
// field; WriteJSON does not add one.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(b, '\n'), 0o644)
}

// WriteJSONRecord is WriteJSON for a record: atomic, not durable
// (WriteRecord says why that is enough for records).
func WriteJSONRecord(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	// A record can quote text that never went through the agent's
	// redacted output (a PRD criterion that holds a secret): mask every
	// secret whatever field holds it.
	b = redact.Default().JSON(b)
	return WriteRecord(path, append(b, '\n'), 0o644)
}

// ReadJSON reads a versioned JSON document into v. A document whose
// schema_version is newer than current is refused with a *SchemaError and v
// is left untouched; a missing schema_version is read as version 0 so that
// callers can migrate it.
func ReadJSON(path string, current int, v any) (version int, err error) {
	b, err := inputlimit.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if err := inputlimit.CheckJSON(path, b); err != nil {
		return 0, err
	}
	var head struct {
		SchemaVersion int `json:"schema_version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return 0, fmt.Errorf("%s: %w", path, describeJSONError(b, err))
	}
	if head.SchemaVersion > current {
		return head.SchemaVersion, &SchemaError{Path: path, Found: head.SchemaVersion, Current: current}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return head.SchemaVersion, fmt.Errorf("%s: %w", path, describeJSONError(b, err))
	}
	return head.SchemaVersion, nil
}

// describeJSONError adds line and column to a JSON syntax error, because a
// byte offset alone does not help a person fix a file by hand.
func describeJSONError(b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return err
	}
	line, col := LineCol(b, off)
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

// LineCol converts a byte offset into a 1-based line and column.
func LineCol(b []byte, off int64) (line, col int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	before := b[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}
