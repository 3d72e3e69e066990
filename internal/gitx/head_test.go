package gitx

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ReadHead reads what git itself says of HEAD and the branch, in every
// layout it accepts: an unborn branch, a loose ref, a packed one, a
// detached HEAD, a branch with a slash, a linked work tree; and it gives
// up (ok false) where only git can tell.
func TestReadHeadAgreesWithGit(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	agree := func(what, dir string) {
		t.Helper()
		head, branch, ok := ReadHead(dir)
		repo := &Repo{Dir: dir, Runner: ExecRunner{}}
		snap, err := repo.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || head != snap.Head || branch != snap.Branch {
			t.Errorf("%s: ReadHead = %q, %q, %v; git says %q, %q", what, head, branch, ok, snap.Head, snap.Branch)
		}
	}
	agree("unborn branch", r.Dir)
	write(t, r, "a.txt", "a\n")
	gitT(t, r.Dir, "add", "-A")
	gitT(t, r.Dir, "commit", "-qm", "one")
	agree("loose ref", r.Dir)
	gitT(t, r.Dir, "pack-refs", "--all")
	agree("packed ref", r.Dir)
	write(t, r, "a.txt", "b\n")
	gitT(t, r.Dir, "commit", "-qam", "two")
	agree("loose ref over a packed one", r.Dir)
	gitT(t, r.Dir, "checkout", "-q", "-b", "feature/x")
	agree("branch with a slash", r.Dir)
	gitT(t, r.Dir, "checkout", "-q", "--detach")
	agree("detached HEAD", r.Dir)
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, r.Dir, "worktree", "add", "-q", "-b", "side", wt)
	agree("linked work tree", wt)
	write(t, &Repo{Dir: wt}, "w.txt", "w\n")
	gitT(t, wt, "add", "-A")
	gitT(t, wt, "commit", "-qm", "in the work tree")
	agree("linked work tree after a commit", wt)

	if err := os.WriteFile(filepath.Join(r.Dir, ".git", "HEAD"), []byte("ref: refs/remotes/origin/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := ReadHead(r.Dir); ok {
		t.Errorf("HEAD naming a ref outside refs/heads read as ok")
	}
	os.WriteFile(filepath.Join(r.Dir, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(r.Dir, ".git", "refs", "heads", "main"), []byte("not a hash\n"), 0o644)
	if _, _, ok := ReadHead(r.Dir); ok {
		t.Errorf("a ref file that is not a hash read as ok")
	}
	os.Mkdir(filepath.Join(r.Dir, ".git", "reftable"), 0o755)
	if _, _, ok := ReadHead(r.Dir); ok {
		t.Errorf("a reftable repository read as ok")
	}
	if _, _, ok := ReadHead(t.TempDir()); ok {
		t.Errorf("a folder outside any repository read as ok")
	}
}

// AddAllListed stages like AddAll and names every path it staged: new,
// changed, removed, with spaces and quotes as they are.
func TestAddAllListedNamesWhatItStaged(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "keep.txt", "k\n")
	write(t, r, "gone.txt", "g\n")
	write(t, r, "changed.txt", "c\n")
	gitT(t, r.Dir, "add", "-A")
	gitT(t, r.Dir, "commit", "-qm", "one")
	os.Remove(filepath.Join(r.Dir, "gone.txt"))
	write(t, r, "changed.txt", "c2\n")
	write(t, r, "dir/it's new.txt", "n\n")
	got, err := r.AddAllListed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"changed.txt", "dir/it's new.txt", "gone.txt"}
	if !slices.Equal(got, want) {
		t.Errorf("AddAllListed = %q, want %q", got, want)
	}
	if snap, _ := r.Snapshot(ctx); strings.Join(snap.Added, ",") != "dir/it's new.txt" {
		t.Errorf("the new file is not staged: %+v", snap)
	}
	if again, err := r.AddAllListed(ctx); err != nil || len(again) != 0 {
		t.Errorf("a second AddAllListed = %q, %v; want nothing staged", again, err)
	}
}

func FuzzParseAddVerbose(f *testing.F) {
	f.Add([]byte("add 'a'\nremove 'b c'\n"))
	f.Add([]byte("add ''\nadd 'x\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, p := range parseAddVerbose(out) {
			if p == "" || strings.Contains(p, "\n") {
				t.Errorf("parsed path %q", p)
			}
		}
	})
}
