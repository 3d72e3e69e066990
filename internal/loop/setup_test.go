package loop

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/report"
)

// A kill between the setup commit's `git add` and its commit leaves ralph's
// new files staged but never committed. The next start takes them for
// ralph's own (not a person's edits, which it refuses to commit) and
// commits them in the setup commit. The crash test that kills ralph at
// random instants found the window (CI, seed 1795511165534634866).
func TestSetupAfterAKillBetweenAddAndCommit(t *testing.T) {
	ws := newBenchWorkspace(t)
	ctx := context.Background()
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", ws.Root}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return string(out)
	}
	git("add", "prd.md")
	git("commit", "-qm", "start")
	if _, err := ws.EnsureStateFiles(time.Now()); err != nil {
		t.Fatal(err)
	}
	// What CommitPaths had done when the kill came: the add, not the commit.
	git("add", "--", ".ralph")
	if !strings.Contains(git("status", "--porcelain"), "A  .ralph/guardrails.md") {
		t.Fatalf("the setup is not staged as new:\n%s", git("status", "--porcelain"))
	}
	prd := filepath.Join(ws.Root, "prd.md")
	if err := PrepareCheckout(ctx, ws, prd, ws.Path("IMPLEMENTATION_PLAN.md"), func(report.Kind, string, report.Payload) {}); err != nil {
		t.Fatalf("the start after the kill refused: %v", err)
	}
	if files := git("show", "--name-only", "--format=", "HEAD"); !strings.Contains(files, ".ralph/guardrails.md") {
		t.Errorf("the setup commit holds %q, want ralph's files", files)
	}
	if st := git("status", "--porcelain", "--", ".ralph/guardrails.md"); st != "" {
		t.Errorf("guardrails.md after the start: %q, want committed", st)
	}
}
