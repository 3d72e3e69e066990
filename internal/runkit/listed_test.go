package runkit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ralphloop/ralph/internal/gitx"
)

// listingRepo is the real repository as a ListingGit, counting the
// statuses CommitListed asks for.
type listingRepo struct {
	*gitx.Repo
	statuses int
}

func (l *listingRepo) HeadFiles() (string, string, bool) { return gitx.ReadHead(l.Dir) }

func (l *listingRepo) Snapshot(ctx context.Context) (gitx.Snapshot, error) {
	l.statuses++
	return l.Repo.Snapshot(ctx)
}

// CommitListed knows the tree after its commit without a status only when
// git ran nothing of its own and the staging held no repository of its
// own; otherwise it asks, and the tree it returns is git's either way.
func TestCommitListedAsksForTheTreeOnlyWhenGitCannotVouch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, dir string)
		statuses int
		dirty    []string
	}{
		{name: "plain files", statuses: 0},
		{name: "a post-commit hook", statuses: 1, dirty: []string{"hooked.txt"}, setup: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", "post-commit"), []byte("#!/bin/sh\necho h > hooked.txt\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "an embedded repository", statuses: 1, dirty: []string{"nest"}, setup: func(t *testing.T, dir string) {
			nest := filepath.Join(dir, "nest")
			for _, args := range [][]string{{"init", "-q", nest}, {"-C", nest, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "n"}} {
				if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			if err := os.WriteFile(filepath.Join(nest, "inside.txt"), []byte("i\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t)
			if tc.setup != nil {
				tc.setup(t, r.Dir)
			}
			if err := os.WriteFile(filepath.Join(r.Dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			g := &listingRepo{Repo: r}
			after, _, err := CommitListed(ctx, g, Message{Subject: "US-001"}, nil, filepath.Join(t.TempDir(), "trace"))
			if err != nil {
				t.Fatal(err)
			}
			if g.statuses != tc.statuses {
				t.Errorf("%d statuses after the commit, want %d", g.statuses, tc.statuses)
			}
			head, _ := r.Head(ctx)
			if after.Head != head || after.Branch != "main" || !slices.Equal(after.Dirty, tc.dirty) {
				t.Errorf("tree after the commit %+v; want HEAD %s on main, dirty %v", after, head, tc.dirty)
			}
		})
	}
}
