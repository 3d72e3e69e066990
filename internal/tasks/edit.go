package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/store"
)

// ErrSubtaskNotFound is wrapped by errors about a subtask id that the named
// story does not have; test for it with errors.Is.
var ErrSubtaskNotFound = errors.New("unknown subtask id")

// edit replaces data[start:end] with text. An insertion has start == end.
type edit struct {
	start, end int
	text       string
}

// applyEdits returns a copy of data with every edit applied. Edits refer to
// offsets in the original data and must not overlap; insertions at the same
// offset keep the order in which they were listed, which is how callers
// append several new keys at one place, and go before a removal starting
// there, so a key can be added where another is cut.
func applyEdits(data []byte, edits []edit) ([]byte, error) {
	sorted := append([]edit(nil), edits...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.start != b.start {
			return a.start < b.start
		}
		return a.start == a.end && b.start != b.end
	})
	var out bytes.Buffer
	out.Grow(len(data) + 256)
	at := 0
	for _, e := range sorted {
		if e.start < at || e.end < e.start || e.end > len(data) {
			// Overlapping edits would corrupt the file; this is a bug in
			// ralph, never the user's doing, so refuse to write anything.
			return nil, fmt.Errorf("internal error: overlapping edits at byte %d", e.start)
		}
		out.Write(data[at:e.start])
		out.WriteString(e.text)
		at = e.end
	}
	out.Write(data[at:])
	return out.Bytes(), nil
}

// readTaskFile reads a task file for editing and returns its permission bits
// so the rewritten file keeps them.
func readTaskFile(path string) ([]byte, fs.FileMode, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read task file: %w", err)
	}
	data, err := inputlimit.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read task file: %w", err)
	}
	return data, info.Mode().Perm(), nil
}

// writeIfChanged replaces the file atomically when the content changed and
// leaves it alone otherwise, so a no-op update does not disturb its
// modification time or wake file watchers.
func writeIfChanged(path string, old, updated []byte, perm fs.FileMode) error {
	if bytes.Equal(old, updated) {
		return nil
	}
	if err := store.WriteFileAtomic(path, updated, perm); err != nil {
		return fmt.Errorf("write task file: %w", err)
	}
	return nil
}

// timestamp is how every format records a moment: RFC 3339 in UTC to the
// second, which sorts as text and matches seed 000's example.
func timestamp(now time.Time) string { return now.UTC().Format(time.RFC3339) }

// eolOf returns the line ending new lines should use: CRLF when the file's
// first line ends in CRLF, LF otherwise.
func eolOf(data []byte) string {
	if i := bytes.IndexByte(data, '\n'); i > 0 && data[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// validateStatus rejects a status outside the four of the model before any
// file is touched.
func validateStatus(s Status) error {
	if !s.Valid() {
		return fmt.Errorf("invalid status %q: want %s, %s, %s or %s", s, StatusNotStarted, StatusInProgress, StatusBlocked, StatusComplete)
	}
	return nil
}

// displayName names the input in errors: its path, or what it is when the
// data did not come from a named file.
func displayName(path, what string) string {
	if path == "" {
		return what
	}
	return path
}

func storyNotFound(path, id string) error {
	return fmt.Errorf("%s: %w %q: no story has that id", path, ErrStoryNotFound, id)
}
