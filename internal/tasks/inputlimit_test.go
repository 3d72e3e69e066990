package tasks

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// nested returns a task file of about size bytes that opens one collection
// inside the other all the way, as a corrupted or hostile file would.
func nested(prefix, open string, size int) string {
	return prefix + strings.Repeat(open, (size-len(prefix))/len(open))
}

// A deeply nested task file is refused with a message naming the file, the
// line and the limit, and is left as it is. Without the bound, goccy/go-yaml
// needed 15 GB and 40 s for 200 KB of "[" before it gave up.
func TestDeeplyNestedTaskFilesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		kind                Kind
		line                int
	}{
		{"progress 10KB", "progress.txt", nested("# state\nstories: ", "[", 10<<10), KindProgress, 2},
		{"progress 200KB", "progress.txt", nested("stories: ", "[", 200<<10), KindProgress, 1},
		{"progress 500KB", "progress.txt", nested("stories: ", "[", 500<<10), KindProgress, 1},
		{"progress block 200KB", "progress.txt", nested("stories:\n", "- ", 200<<10), KindProgress, 2},
		{"progress flow mappings 200KB", "progress.txt", nested("stories: ", "{a: ", 200<<10), KindProgress, 1},
		{"prd.json 200KB", "prd.json", nested(`{"userStories": `, "[", 200<<10), KindJSON, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, tc.file, tc.content)
			src := Open(tc.kind, path)
			want := fmt.Sprintf("%s: nesting deeper than 100 levels at line %d: ralph refuses it; is the file corrupted?", path, tc.line)
			_, err := src.Load()
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Load: err = %v, want it to contain %q", err, want)
			}
			if err := src.SetState("1.1", StatusComplete, 0, nil, testNow); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("SetState: err = %v, want it to contain %q", err, want)
			}
			assertFile(t, path, tc.content)
		})
	}
}

// Task files larger than any real one are refused before they are read
// whole, whatever their format.
func TestHugeTaskFilesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		file string
		kind Kind
	}{{"progress.txt", KindProgress}, {"prd.json", KindJSON}, {"prd.md", KindMarkdown}} {
		path := writeTemp(t, tc.file, "")
		if err := os.Truncate(path, 17<<20); err != nil {
			t.Fatal(err)
		}
		_, err := Open(tc.kind, path).Load()
		if want := path + ": 17.0 MB is larger than the 16.0 MB ralph reads"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.file, err, want)
		}
	}
	big := strings.Repeat("- [ ] task-1: x\n", (17<<20)/16)
	if _, err := ParseTasksMD("tasks.md", []byte(big)); err == nil || !strings.Contains(err.Error(), "tasks.md: 17.0 MB is larger") {
		t.Errorf("ParseTasksMD: err = %v, want a refusal", err)
	}
}

// BenchmarkNestedProgressRefused measures the refusal of the 500 KB file of
// the report through the real load path: it must take milliseconds.
func BenchmarkNestedProgressRefused(b *testing.B) {
	content := nested("stories: ", "[", 500<<10)
	path := b.TempDir() + "/progress.txt"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	src := Open(KindProgress, path)
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if _, err := src.Load(); err == nil {
			b.Fatal("accepted")
		}
	}
}
