package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// State ralph reads back (state.json, thread.json, run records) is refused
// when it is nested deeper or is larger than any document ralph writes, so
// a damaged file gets a clear message rather than a parser's.
func TestReadJSONRefusesNestedAndHugeDocuments(t *testing.T) {
	dir := t.TempDir()
	nested := filepath.Join(dir, "state.json")
	if err := os.WriteFile(nested, []byte(`{"schema_version": 1, "tasks": `+strings.Repeat("[", 5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	_, err := ReadJSON(nested, 1, &v)
	if want := nested + ": nesting deeper than 100 levels at line 1: ralph refuses it"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("nested: err = %v, want it to start with %q", err, want)
	}

	huge := filepath.Join(dir, "run.json")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 20<<20); err != nil {
		t.Fatal(err)
	}
	_, err = ReadJSON(huge, 1, &v)
	if want := huge + ": 20.0 MB is larger than the 16.0 MB ralph reads"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("huge: err = %v, want it to start with %q", err, want)
	}
}
