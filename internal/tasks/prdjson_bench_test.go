package tasks

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkPRDJSONLoadAndSelect10k measures what the loop does before every
// iteration on a large prd.json: read and validate the whole file (ids,
// statuses, dependencies, cycles) and select the next story. Every story
// but the last is done and each depends on its predecessor, so validation
// walks a 10,000-long dependency chain and Select scans every story.
func BenchmarkPRDJSONLoadAndSelect10k(b *testing.B) {
	const storyCount = 10000
	var sb strings.Builder
	sb.WriteString("{\n  \"version\": 1,\n  \"project\": \"Benchmark\",\n  \"qualityGates\": [\"go test ./...\"],\n  \"stories\": [\n")
	for i := 1; i <= storyCount; i++ {
		status, deps := "done", "[]"
		if i == storyCount {
			status = "open"
		}
		if i > 1 {
			deps = fmt.Sprintf("[\"US-%05d\"]", i-1)
		}
		fmt.Fprintf(&sb, "    {\n      \"id\": \"US-%05d\",\n      \"title\": \"Story number %d\",\n", i, i)
		fmt.Fprintf(&sb, "      \"description\": \"As a user I want feature %d so that the benchmark has a description.\",\n", i)
		fmt.Fprintf(&sb, "      \"acceptanceCriteria\": [\"First criterion of story %d\", {\"text\": \"Second\", \"verify\": \"sh t%d.sh\"}],\n", i, i)
		fmt.Fprintf(&sb, "      \"dependsOn\": %s,\n      \"status\": %q,\n      \"updatedAt\": null\n    }", deps, status)
		if i < storyCount {
			sb.WriteString(",")
		}
		sb.WriteString("\n")
	}
	sb.WriteString("  ]\n}\n")
	path := filepath.Join(b.TempDir(), "prd.json")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	src := Open(KindJSON, path)
	wantID := fmt.Sprintf("US-%05d", storyCount)

	b.SetBytes(int64(sb.Len()))
	b.ReportAllocs()
	for b.Loop() {
		board, err := src.Load()
		if err != nil {
			b.Fatal(err)
		}
		sel, _, ok, _ := board.Select()
		if !ok || sel.Story.ID != wantID {
			b.Fatalf("Select() = %q, %v; want %q", sel.Story.ID, ok, wantID)
		}
	}
}
