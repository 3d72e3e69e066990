package loop

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralphloop/ralph/internal/gitx"
)

// The tree COMMIT left is the next IMPLEMENT's starting point without a
// git status only while nothing ralph knows of can have changed it: the
// very next iteration, the same task file, no pause or approval since.
func TestTheTreeCommitLeftIsKeptOnlyWhileNothingCanHaveChangedIt(t *testing.T) {
	ctx := context.Background()
	taskFile := filepath.Join(t.TempDir(), "prd.md")
	write := func(s string) {
		if err := os.WriteFile(taskFile, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		between func(tr *trees)
		next    int
		asks    bool
	}{
		{"the next iteration", func(*trees) {}, 2, false},
		{"an iteration later", func(*trees) {}, 3, true},
		{"the task file changed", func(*trees) { write("### [x] US-001: x\n") }, 2, true},
		{"a pause or an approval", (*trees).invalidate, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			write("### [ ] US-001: x\n")
			g := newFakeGit(t)
			tr := newTrees(g, t.TempDir())
			left := gitx.Snapshot{Head: "h1", Branch: "main"}
			tr.recordCommit(ctx, &IterationRecord{Iteration: 1}, treeCommit{pre: left, after: left}, commitDone{start: "h1", taskFile: taskFile})
			tc.between(&tr)
			snap, err := tr.before(ctx, tc.next, taskFile)
			if err != nil {
				t.Fatal(err)
			}
			asked := g.called("Snapshot") == 1
			if asked != tc.asks || (snap.Head == "h1") == tc.asks {
				t.Errorf("git status asked: %v (tree at %s); want %v", asked, snap.Head, tc.asks)
			}
		})
	}
}
