package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileAtomicReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for _, content := range []string{"one", "two"} {
		if err := WriteFileAtomic(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if string(got) != content {
			t.Fatalf("content = %q, want %q", got, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries, want only state.json (temp files must be gone)", len(entries))
	}
}

func TestWriteFileAtomicFailureKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := WriteFileAtomic(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A folder in place of the target makes the rename fail.
	bad := filepath.Join(dir, "sub")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "x"), nil, 0o644)
	if err := WriteFileAtomic(bad, []byte("new"), 0o644); err == nil {
		t.Fatal("rename over a non-empty folder succeeded")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temp file %s left behind", e.Name())
		}
	}
}

func TestWriteIfMissingNeverOverwrites(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b.md")
	wrote, err := WriteIfMissing(p, []byte("first"), 0o644)
	if err != nil || !wrote {
		t.Fatalf("first write: wrote=%v err=%v", wrote, err)
	}
	wrote, err = WriteIfMissing(p, []byte("second"), 0o644)
	if err != nil || wrote {
		t.Fatalf("second write: wrote=%v err=%v", wrote, err)
	}
	got, _ := os.ReadFile(p)
	if string(got) != "first" {
		t.Fatalf("existing file changed to %q", got)
	}
}

type doc struct {
	SchemaVersion int    `json:"schema_version"`
	Name          string `json:"name"`
}

func TestReadJSONRefusesNewerSchema(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.json")
	os.WriteFile(p, []byte(`{"schema_version": 9, "name": "x"}`), 0o644)
	var d doc
	_, err := ReadJSON(p, 1, &d)
	var se *SchemaError
	if !errors.As(err, &se) || se.Found != 9 {
		t.Fatalf("err = %v, want SchemaError for version 9", err)
	}
	if d.Name != "" {
		t.Fatal("document was decoded despite the refusal")
	}
	if !strings.Contains(err.Error(), "upgrade ralph") {
		t.Fatalf("message %q does not say what to do", err)
	}
}

func TestReadJSONReportsLineAndColumn(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.json")
	os.WriteFile(p, []byte("{\n  \"schema_version\": 1,\n  \"name\": oops\n}\n"), 0o644)
	var d doc
	_, err := ReadJSON(p, 1, &d)
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v, want a message naming line 3", err)
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d.json")
	if err := WriteJSON(p, doc{SchemaVersion: 1, Name: "run"}); err != nil {
		t.Fatal(err)
	}
	var d doc
	v, err := ReadJSON(p, 1, &d)
	if err != nil || v != 1 || d.Name != "run" {
		t.Fatalf("got %+v v=%d err=%v", d, v, err)
	}
}

func TestAppendJSONLineAppends(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	AppendJSONLine(p, map[string]int{"a": 1})
	AppendJSONLine(p, map[string]int{"a": 2})
	got, _ := os.ReadFile(p)
	if string(got) != "{\"a\":1}\n{\"a\":2}\n" {
		t.Fatalf("log = %q", got)
	}
}

func TestTryLockRefusesSecondHolderAndNamesFirst(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	l, err := TryLock(p, "ralph build")
	if err != nil {
		t.Fatal(err)
	}
	_, err = TryLock(p, "ralph build")
	if !IsLocked(err) {
		t.Fatalf("second lock: err = %v, want LockedError", err)
	}
	if !strings.Contains(err.Error(), "ralph build") || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("refusal %q does not name the holder", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := TryLock(p, "ralph plan")
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
	if _, err := os.Stat(p); err != nil {
		t.Fatal("lock file was removed; it must stay so flock keeps one inode")
	}
}

// A crash in the middle of an append leaves a torn last line; the next
// append cuts it off, so every line of the log stays valid JSON.
func TestAppendJSONLineCutsATornLastLine(t *testing.T) {
	for _, tc := range []struct{ name, before, want string }{
		{"torn after complete lines", "{\"n\":1}\n{\"n\":", "{\"n\":1}\n{\"n\":2}\n"},
		{"only a torn line", "{\"n\":", "{\"n\":2}\n"},
		{"intact", "{\"n\":1}\n", "{\"n\":1}\n{\"n\":2}\n"},
		{"missing file", "", "{\"n\":2}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "events.jsonl")
			if tc.before != "" {
				if err := os.WriteFile(p, []byte(tc.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := AppendJSONLine(p, map[string]int{"n": 2}); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if string(got) != tc.want {
				t.Fatalf("file = %q, want %q", got, tc.want)
			}
		})
	}
	// A torn line longer than the scan buffer is cut too.
	p := filepath.Join(t.TempDir(), "events.jsonl")
	long := "{\"n\":1}\n{\"s\":\"" + strings.Repeat("x", 200_000)
	if err := os.WriteFile(p, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendJSONLine(p, map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "{\"n\":1}\n{\"n\":2}\n" {
		t.Fatalf("file = %.80q…, want the torn 200 KB line cut", got)
	}
}

// Only the leftovers of an atomic replace are removed: NAME.DIGITS.tmp
// next to an existing NAME.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"state.json", "state.json.123456.tmp", "prd.md.99.tmp", "notes.tmp", "state.json.x1.tmp", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveStaleTemps(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := "keep.txt notes.tmp prd.md.99.tmp state.json state.json.x1.tmp"
	if got := strings.Join(left, " "); got != want {
		t.Fatalf("left %q, want %q (only state.json's leftover removed)", got, want)
	}
	if err := RemoveStaleTemps(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing folder: %v", err)
	}
}
