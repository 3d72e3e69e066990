package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testNow is the moment every write in these tests happens at.
var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// testStamp is testNow as the task files record it.
const testStamp = "2026-11-22T10:00:00Z"

// writeTemp writes content to name inside a fresh temporary folder and
// returns the file's path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// replaceOnce replaces exactly one occurrence of old, failing the test when
// old occurs zero or several times, so expected texts are built from
// unambiguous edits of the input.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("replaceOnce: %q occurs %d times, want 1", old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// assertFile compares the whole file with want and shows both on mismatch.
func assertFile(t *testing.T, path, want string) {
	t.Helper()
	if got := readString(t, path); got != want {
		t.Errorf("file after edit:\n%s\nwant:\n%s\n(got %q)", got, want, got)
	}
}

// wantParseError asserts err is a *ParseError at line:col (col 0 skips the
// column check) whose message contains every phrase.
func wantParseError(t *testing.T, err error, line, col int, phrases ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one at line %d", line)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	if pe.Line != line || (col != 0 && pe.Column != col) {
		t.Errorf("error at %d:%d, want %d:%d (%v)", pe.Line, pe.Column, line, col, err)
	}
	for _, p := range phrases {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func mustLoad(t *testing.T, src Source) *Board {
	t.Helper()
	b, err := src.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return b
}

func storyIDs(b *Board) []string {
	ids := make([]string, len(b.Stories))
	for i := range b.Stories {
		ids[i] = b.Stories[i].ID
	}
	return ids
}
