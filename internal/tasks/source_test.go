package tasks

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	const (
		yamlProgress = "stories:\n  - id: A\n"
		logProgress  = "## Codebase Patterns\n- use stories: wisely\n"
		json         = `{"userStories": [{"id": "A"}]}`
		md           = "### [ ] US-001: A\n"
	)
	tests := []struct {
		name     string
		files    map[string]string
		explicit string
		wantKind Kind
		wantPath string // relative to root
	}{
		{"progress.txt wins", map[string]string{"progress.txt": yamlProgress, "prd.json": json, "PRD.md": md}, "", KindProgress, "progress.txt"},
		{"snarktank's progress log is not a task file", map[string]string{"progress.txt": logProgress, "prd.json": json}, "", KindJSON, "prd.json"},
		{"prd.json in root before .agents", map[string]string{"prd.json": json, ".agents/tasks/prd.json": json}, "", KindJSON, "prd.json"},
		{".agents/tasks/prd.json", map[string]string{".agents/tasks/prd.json": json, "PRD.md": md}, "", KindJSON, ".agents/tasks/prd.json"},
		{"markdown default", map[string]string{"PRD.md": md}, "", KindMarkdown, "PRD.md"},
		{"explicit path beats everything", map[string]string{"progress.txt": yamlProgress, "docs/tasks.json": json}, "docs/tasks.json", KindJSON, "docs/tasks.json"},
		{"explicit markdown that does not exist yet", map[string]string{"prd.json": json}, "new.md", KindMarkdown, "new.md"},
		{"explicit yaml", nil, "state.yaml", KindProgress, "state.yaml"},
		{"explicit file sniffed as JSON", map[string]string{"tasks": "\n  " + json}, "tasks", KindJSON, "tasks"},
		{"explicit file sniffed as YAML", map[string]string{"state.txt": yamlProgress}, "state.txt", KindProgress, "state.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(root, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			src, err := Detect(root, tt.explicit, "PRD.md")
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if src.Kind() != tt.wantKind || src.Path() != filepath.Join(root, filepath.FromSlash(tt.wantPath)) {
				t.Errorf("Detect = %s %s, want %s %s", src.Kind(), src.Path(), tt.wantKind, tt.wantPath)
			}
		})
	}
	t.Run("nothing found", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "progress.txt"), []byte(logProgress), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Detect(root, "", "PRD.md")
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("error = %v, want one wrapping fs.ErrNotExist", err)
		}
		for _, name := range []string{"progress.txt", "prd.json", filepath.Join(".agents", "tasks", "prd.json"), "PRD.md"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name %s", err, name)
			}
		}
	})
}

func TestOpenUnknownKind(t *testing.T) {
	src := Open("xml", "tasks.xml")
	if src.Kind() != "xml" || src.Path() != "tasks.xml" {
		t.Errorf("Kind, Path = %q, %q", src.Kind(), src.Path())
	}
	if _, err := src.Load(); err == nil || !strings.Contains(err.Error(), `unknown task file kind "xml"`) {
		t.Errorf("Load = %v", err)
	}
	if src.MarkDone("A", "", testNow) == nil || src.SetState("A", StatusComplete, 0, nil, testNow) == nil {
		t.Error("writes of an unknown kind succeeded")
	}
}

func TestMarkdownSource(t *testing.T) {
	path := writeTemp(t, "prd.md", examplePRD)
	src := Open(KindMarkdown, path)
	if src.Kind() != KindMarkdown || src.Path() != path {
		t.Errorf("Kind, Path = %q, %q", src.Kind(), src.Path())
	}
	b := mustLoad(t, src)
	if b.Kind != KindMarkdown || !reflect.DeepEqual(storyIDs(b), []string{"US-001", "US-002", "BUG-7"}) {
		t.Fatalf("board = %+v", b)
	}
	for _, s := range b.Stories {
		if s.Done != (s.Status == StatusComplete) {
			t.Errorf("story %s: Done %v but Status %s", s.ID, s.Done, s.Status)
		}
	}
	if sel, _, ok, _ := b.Select(); !ok || sel.TaskID() != "US-001" {
		t.Errorf("Select = %q, %v", sel.TaskID(), ok)
	}

	if err := src.MarkDone("US-001", "", testNow); err != nil {
		t.Fatal(err)
	}
	// ralph ticks the story and its criteria when it accepts it.
	want := strings.Replace(examplePRD, "### [ ] US-001", "### [x] US-001", 1)
	want = strings.Replace(want, "- [ ] Acceptance criterion 1", "- [x] Acceptance criterion 1", 1)
	assertFile(t, path, want)

	// The checkbox cannot say in progress or blocked: those change nothing.
	for _, status := range []Status{StatusInProgress, StatusBlocked} {
		if err := src.SetState("US-002", status, 2, &Blocker{Reason: "r"}, testNow); err != nil {
			t.Fatal(err)
		}
	}
	assertFile(t, path, want)
	if err := src.SetState("US-002", StatusNotStarted, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want = strings.Replace(want, "### [x] US-002", "### [ ] US-002", 1)
	assertFile(t, path, want)
	if err := src.SetState("US-002", StatusComplete, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want = strings.Replace(want, "### [ ] US-002", "### [x] US-002", 1)
	assertFile(t, path, want)

	if err := src.MarkDone("US-404", "", testNow); !errors.Is(err, ErrStoryNotFound) || !strings.Contains(err.Error(), path) {
		t.Errorf("MarkDone unknown story: %v", err)
	}
	if err := src.SetState("US-404", StatusBlocked, 0, nil, testNow); !errors.Is(err, ErrStoryNotFound) {
		t.Errorf("SetState unknown story: %v", err)
	}
	if err := src.MarkDone("US-001", "1", testNow); !errors.Is(err, ErrSubtaskNotFound) {
		t.Errorf("MarkDone with a subtask: %v", err)
	}
	if err := src.SetState("US-001", "closed", 0, nil, testNow); err == nil {
		t.Error("SetState with an invalid status succeeded")
	}
	assertFile(t, path, want)
}

func TestMarkdownVerifySuffix(t *testing.T) {
	prd := mustParse(t, lines(
		"### [ ] US-001: A",
		"- [ ] add works (verify: `sh tests/add.sh`)",
		"- [x] parens (inside) work (verify: `test \"$(echo a)\" = a`)",
		"- [ ] double backticks (verify: ``echo `date` ``)",
		"- [ ] spaces around (verify:   `make t`  )",
		"- [ ] no command (verify: )",
		"- [ ] not at the end (verify: `x`) then more",
		"- [ ] unclosed (verify: `x)",
		"- [ ] (verify: `only a command`)",
		"- [ ] mentions (verify: `a`) twice (verify: `b`)",
	))
	want := []Criterion{
		{Text: "add works", Verify: "sh tests/add.sh", Line: 2},
		{Text: "parens (inside) work", Verify: `test "$(echo a)" = a`, Done: true, Line: 3},
		{Text: "double backticks", Verify: "echo `date`", Line: 4},
		{Text: "spaces around", Verify: "make t", Line: 5},
		{Text: "no command (verify: )", Line: 6},
		{Text: "not at the end (verify: `x`) then more", Line: 7},
		{Text: "unclosed (verify: `x)", Line: 8},
		{Text: "(verify: `only a command`)", Verify: "only a command", Line: 9},
		{Text: "mentions (verify: `a`) twice", Verify: "b", Line: 10},
	}
	if got := prd.Stories[0].Criteria; !reflect.DeepEqual(got, want) {
		t.Errorf("criteria:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseErrorColumn(t *testing.T) {
	tests := []struct {
		err  ParseError
		want string
	}{
		{ParseError{Path: "prd.json", Line: 3, Column: 7, Msg: "bad", Hint: "fix"}, "prd.json:3:7: bad; fix"},
		{ParseError{Line: 3, Column: 7, Msg: "bad"}, "line 3, column 7: bad"},
		{ParseError{Path: "p", Column: 7, Msg: "bad"}, "p: bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
