package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/worktree"
)

// ralph clean removes what a finished parallel run left: every worktree
// (uncommitted changes kept on a ref first), the branches whose work is on
// the target, and a branch whose task is done by other means (its tip
// kept); a branch with work that never landed stays, named.
func TestCleanRemovesWhatAFinishedRunLeft(t *testing.T) {
	r := newRig(t, stories(3, nil))
	ctx := context.Background()
	root := r.ws.Root
	wtRoot := filepath.Join(filepath.Dir(root), "wt")
	main := r.git("rev-parse", "main")
	cut := func(task string) string {
		path := worktree.PathUnder(wtRoot, "r1", task)
		if err := landing.Cut(ctx, r.ws.Repo, path, "ralph/r1/"+task, main, "refs/ralph/attempts/r1/"+task+"/0", worktree.Marker{Repo: root, Run: "r1", Task: task}); err != nil {
			t.Fatal(err)
		}
		return path
	}
	merged := cut("US-001") // no commit of its own: everything is on main
	unlanded := cut("US-002")
	os.WriteFile(filepath.Join(unlanded, "two.txt"), []byte("two\n"), 0o644)
	gitT(t, unlanded, "add", "two.txt")
	gitT(t, unlanded, "commit", "-qm", "US-002 work")
	os.WriteFile(filepath.Join(unlanded, "wip.txt"), []byte("wip\n"), 0o644)
	superseded := cut("US-003")
	os.WriteFile(filepath.Join(superseded, "three.txt"), []byte("three\n"), 0o644)
	gitT(t, superseded, "add", "three.txt")
	gitT(t, superseded, "commit", "-qm", "US-003 work")
	reg := &Registry{RunID: "r1", Target: "main", Finished: true, Tasks: map[string]*TaskRecord{}}
	if err := reg.save(r.ws.Dir()); err != nil {
		t.Fatal(err)
	}

	plan, err := PlanClean(ctx, r.ws, wtRoot, "main", func(task string) bool { return task == "US-003" })
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Keep) != 1 || plan.Keep[0].Name != "ralph/r1/US-002" || !strings.Contains(plan.Keep[0].Why, "git log main..ralph/r1/US-002") {
		t.Errorf("kept %+v; want the unlanded branch, with how to look at it", plan.Keep)
	}
	var dirty string
	for _, it := range plan.Remove {
		if it.Dirty {
			dirty = it.SetAsideRef
		}
	}
	if len(plan.Remove) != 5 || dirty == "" {
		t.Fatalf("remove %+v; want 3 worktrees (one dirty) and 2 branches", plan.Remove)
	}
	if err := plan.Apply(ctx, r.ws); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{merged, unlanded, superseded} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	if out := r.git("branch", "--list", "ralph/*"); strings.TrimSpace(out) != "ralph/r1/US-002" {
		t.Errorf("branches left: %q; want only the unlanded one", out)
	}
	if got := r.git("show", dirty+":wip.txt"); got != "wip" {
		t.Errorf("the uncommitted wip.txt kept at %s = %q", dirty, got)
	}
	if got := r.git("log", "-1", "--format=%s", "refs/ralph/abandoned/r1/US-003"); got != "US-003 work" {
		t.Errorf("the superseded branch's tip is not kept: %q", got)
	}
}

// A run that has not finished is not cleaned: the next build resumes it.
func TestCleanRefusesAnUnfinishedRun(t *testing.T) {
	r := newRig(t, stories(3, nil))
	reg := &Registry{RunID: "r1", Target: "main", Tasks: map[string]*TaskRecord{}}
	if err := reg.save(r.ws.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := PlanClean(context.Background(), r.ws, "", "main", nil); err == nil || !strings.Contains(err.Error(), "has not finished") {
		t.Fatalf("PlanClean = %v; want a refusal naming the unfinished run", err)
	}
}
