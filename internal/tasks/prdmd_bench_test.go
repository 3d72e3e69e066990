package tasks

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseAndSelect10k measures what the loop does before every
// iteration on a large PRD: parse the whole file and pick the next story.
// Only the last of 10,000 stories is pending, so Next scans them all.
func BenchmarkParseAndSelect10k(b *testing.B) { benchParseAndSelect(b, 10000) }

// BenchmarkParseAndSelect100k is the same over 100,000 stories of three
// lines (4.6 MB, the size of issue 26's PRD, under the 16 MB limit).
// Selecting the next story must stay well under a second: the figure
// (ns/op) is in the README's performance section.
func BenchmarkParseAndSelect100k(b *testing.B) {
	const storyCount = 100000
	var sb strings.Builder
	sb.WriteString("# PRD: Benchmark\n\n")
	for i := 1; i <= storyCount; i++ {
		box := "x"
		if i == storyCount {
			box = " "
		}
		fmt.Fprintf(&sb, "### [%s] US-%06d: Story %d\n- [%s] Criterion %d\n\n", box, i, i, box, i)
	}
	data := []byte(sb.String())
	wantID := fmt.Sprintf("US-%06d", storyCount)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		prd, err := ParseMarkdown("prd.md", data)
		if err != nil {
			b.Fatal(err)
		}
		next, ok := prd.Next()
		if !ok || next.ID != wantID {
			b.Fatalf("Next() = %q, %v; want %q", next.ID, ok, wantID)
		}
	}
}

func benchParseAndSelect(b *testing.B, storyCount int) {
	var sb strings.Builder
	sb.WriteString("# PRD: Benchmark\n\nA large generated PRD.\n\n")
	for i := 1; i <= storyCount; i++ {
		box := "x"
		if i == storyCount {
			box = " "
		}
		fmt.Fprintf(&sb, "### [%s] US-%05d: Story number %d\n", box, i, i)
		fmt.Fprintf(&sb, "As a user I want feature %d so that the benchmark has a description.\n", i)
		fmt.Fprintf(&sb, "- [x] First criterion of story %d\n", i)
		fmt.Fprintf(&sb, "- [x] Second criterion of story %d\n", i)
		fmt.Fprintf(&sb, "- [ ] Third criterion of story %d\n\n", i)
	}
	data := []byte(sb.String())
	wantID := fmt.Sprintf("US-%05d", storyCount)

	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		prd, err := ParseMarkdown("prd.md", data)
		if err != nil {
			b.Fatal(err)
		}
		next, ok := prd.Next()
		if !ok || next.ID != wantID {
			b.Fatalf("Next() = %q, %v; want %q", next.ID, ok, wantID)
		}
	}
}
