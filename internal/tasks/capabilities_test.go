package tasks

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestKindForPath is the one table of how a path names a task source; the
// CLI's --tasks, --prd and [tasks] path and Detect all go through it, so
// `build --tasks X` and `status --tasks X` can never disagree.
func TestKindForPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("repo/.beads/issues.jsonl", "")
	write("plain/readme", "")
	write("snarktank/progress.txt", "## Codebase Patterns\n- free text log\n")
	write("sniffed-json", "  {\"userStories\": []}")
	write("sniffed-yaml", "stories:\n  - id: A\n")
	write("notes", "# PRD\n### [ ] US-001: x\n")

	tests := []struct {
		path string
		want Kind
	}{
		{"prd.md", KindMarkdown},
		{"PRD.MARKDOWN", KindMarkdown},
		{"prd.json", KindJSON},
		{".agents/tasks/prd.json", KindJSON},
		{"progress.txt", KindProgress},
		{"snarktank/progress.txt", KindProgress},
		// Any .txt, existing or not: BMAD's file is a .txt, and a missing
		// one gets the setup template rather than "no such file".
		{"sprint.txt", KindProgress},
		{"stories.yaml", KindProgress},
		{"stories.yml", KindProgress},
		{"repo/.beads", KindBeads},
		{"repo", KindBeads},
		{"new/.beads", KindBeads},
		{"plain", ""},
		{"sniffed-json", KindJSON},
		{"sniffed-yaml", KindProgress},
		{"notes", KindMarkdown},
		{"missing-without-extension", KindMarkdown},
	}
	for _, tt := range tests {
		if got := KindForPath(filepath.Join(dir, tt.path)); got != tt.want {
			t.Errorf("KindForPath(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestCapabilities is the table of what each format can do; the loop and
// the CLI ask for these instead of switching on Kind.
func TestCapabilities(t *testing.T) {
	type caps struct{ ticked, template, metrics, creatable, planned, primer, claimer, picker bool }
	tests := []struct {
		src  Source
		want caps
	}{
		{Open(KindMarkdown, "prd.md"), caps{ticked: true, creatable: true, planned: true}},
		{Open(KindJSON, "prd.json"), caps{}},
		{Open(KindProgress, "progress.txt"), caps{template: true, metrics: true, creatable: true}},
		{Open(KindBeads, ".beads"), caps{creatable: true, primer: true, claimer: true, picker: true}},
		{Open("xml", "tasks.xml"), caps{}},
	}
	for _, tt := range tests {
		var got caps
		_, got.ticked = tt.src.(AgentTicked)
		_, got.template = tt.src.(SetupTemplater)
		_, got.metrics = tt.src.(MetricsRecorder)
		_, got.creatable = tt.src.(Creatable)
		_, got.planned = tt.src.(Planned)
		_, got.primer = tt.src.(Primer)
		_, got.claimer = tt.src.(Claimer)
		_, got.picker = tt.src.(Picker)
		if got != tt.want {
			t.Errorf("%s: capabilities %+v, want %+v", tt.src.Kind(), got, tt.want)
		}
	}
	if c := Open(KindProgress, "progress.txt").(SetupTemplater); c.SetupTemplate() != ProgressTemplate() {
		t.Error("the progress file's setup template is not the one ralph init --bmad writes")
	}
}

// TestSetupTemplateSpeaksTheUsersWords: the template lands in the user's
// own file, so it must not name the design documents ("seed 000").
func TestSetupTemplateSpeaksTheUsersWords(t *testing.T) {
	if m := regexp.MustCompile(`(?i)\bseeds?\b|\bbrooks\b`).FindString(ProgressTemplate()); m != "" {
		t.Errorf("the progress.txt template says %q", m)
	}
}
