package loop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
)

// A kill of ralph during its own git add leaves index.lock in a parallel
// worker's worktree, and git then refuses every commit there: the resumed
// worker removes it (its worktree is ralph's and its leftovers are
// stopped), says so, and the story is committed instead of blocked.
func TestResumedWorkerRemovesTheIndexLockAKillLeft(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "repo")
	git := func(in string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", in}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	git(root, "init", "-q", "-b", "main")
	git(root, "config", "user.name", "t")
	git(root, "config", "user.email", "t@example.invalid")
	if err := os.WriteFile(filepath.Join(root, "prd.md"), []byte("### [ ] US-001: One\n- [ ] one.txt exists\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(root, "add", "-A")
	git(root, "commit", "-qm", "start")
	wt := filepath.Join(dir, "worktrees", "r", "US-001")
	git(root, "worktree", "add", "-q", "-b", "ralph/r/US-001", wt, "main")
	if err := worktree.Mark(wt, worktree.Marker{Repo: root, Run: "r", Task: "US-001"}); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(context.Background(), wt)
	if err != nil {
		t.Fatal(err)
	}
	started, goOn := filepath.Join(dir, "started"), filepath.Join(dir, "go")
	script := `if [ -f ` + goOn + ` ]; then echo one > one.txt; sed -i 's/- \[ \] one/- [x] one/' prd.md; echo '<promise>COMPLETE</promise>'; else touch ` + started + `; sleep 60; fi`
	out := &lines{}
	opts := Options{MaxIterations: 3, PRDPath: filepath.Join(wt, "prd.md"), OnlyStory: "US-001", Sink: out, AgentTimeout: time.Minute,
		Agent: agent.Spec{Name: "sh", Headless: []string{"sh", "-c", script}, Format: agent.FormatPlain}}

	// The first run is stopped while its agent works.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := Build(ctx, ws, opts); done <- err }()
	wait.Until(t, 30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "the agent starts")
	cancel()
	<-done

	lock := filepath.Join(git(wt, "rev-parse", "--absolute-git-dir"), "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Build(context.Background(), ws, opts)
	if err != nil {
		t.Fatalf("the resumed build: %v\n%s", err, out.text())
	}
	if !strings.Contains(out.text(), "ralph: removed "+lock) {
		t.Errorf("the resumed run does not say it removed %s:\n%s", lock, out.text())
	}
	if got := git(wt, "log", "-1", "--format=%s"); !strings.Contains(got, "US-001") {
		t.Errorf("the last commit is %q; want US-001's (report %+v):\n%s", got, rep, out.text())
	}
}
