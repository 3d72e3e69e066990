package app_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/tasks"
)

// The task file comes from --tasks, then --prd, then [tasks], then what
// the workspace holds (the markdown PRD when it holds nothing).
func TestTaskSourcePrecedence(t *testing.T) {
	dir := repo(t)
	a := open(t, dir, "[tasks]\nsource = \"prd-json\"\n")
	for _, c := range []struct {
		name, tasksFlag, prdFlag string
		kind                     tasks.Kind
		path                     string
	}{
		{"--prd wins over config", "", "docs/prd.md", tasks.KindMarkdown, "docs/prd.md"},
		{"[tasks] source", "", "", tasks.KindJSON, "prd.json"},
	} {
		src, err := a.TaskSource(c.tasksFlag, c.prdFlag)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if src.Kind() != c.kind || src.Path() != filepath.Join(dir, c.path) {
			t.Errorf("%s: %s at %s, want %s at %s", c.name, src.Kind(), src.Path(), c.kind, c.path)
		}
	}
	a = open(t, dir, "[build]\nprd = \"plans/prd.md\"\n")
	src, err := a.TaskSource("", "")
	if err != nil || src.Kind() != tasks.KindMarkdown || src.Path() != filepath.Join(dir, "plans/prd.md") {
		t.Errorf("an empty workspace: %v, %v; want the markdown PRD [build] prd names", src, err)
	}
}

// A --tasks that names no file is the command line's mistake: a usage
// error (exit 2) that says what to name.
func TestTaskSourceRefusesAMissingTasksFile(t *testing.T) {
	dir := repo(t)
	_, err := open(t, dir, "").TaskSource("nothing.json", "")
	var ue *errs.UsageError
	if !errors.As(err, &ue) {
		t.Fatalf("TaskSource(--tasks nothing.json) = %v, want a usage error", err)
	}
	if want := "--tasks nothing.json: no such file: name an existing PRD (.md), prd.json or progress.txt, or use --tasks beads for the beads database"; err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}
