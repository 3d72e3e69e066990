package worktree

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCopyIncluded(t *testing.T) {
	repo := newRepo(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "credentials"), "someone else's secret\n", 0o600)

	writeFile(t, filepath.Join(repo, ".gitignore"), ".env\n*.env\n*.local\nbuild/\n", 0o644)
	writeFile(t, filepath.Join(repo, IncludeFile), "# what an agent needs that git ignores\n\n.env\n*.env\nconfig/*.local\n!config/skip.local\nnotes.txt\nREADME\n", 0o644)
	git(t, repo, "add", ".gitignore", IncludeFile)
	git(t, repo, "commit", "-q", "-m", "ignore and include")

	writeFile(t, filepath.Join(repo, ".env"), "TOKEN=1\n", 0o600)
	writeFile(t, filepath.Join(repo, "config", "dev.local"), "dev\n", 0o644)
	writeFile(t, filepath.Join(repo, "config", "skip.local"), "excluded again\n", 0o644)
	writeFile(t, filepath.Join(repo, "notes.txt"), "the person's work in progress, not ignored\n", 0o644)
	writeFile(t, filepath.Join(repo, "build", "x.env"), "in an ignored folder\n", 0o644)
	writeFile(t, filepath.Join(repo, "existing.env"), "from the repository\n", 0o644)
	must(t, os.Symlink(filepath.Join(outside, "credentials"), filepath.Join(repo, "out.env")))
	must(t, os.Symlink("config/dev.local", filepath.Join(repo, "in.env")))
	must(t, os.Symlink("missing", filepath.Join(repo, "broken.env")))

	wt := Path(repo, "run", "US-001")
	addWorktree(t, repo, wt, "ralph/run/US-001")
	writeFile(t, filepath.Join(wt, "existing.env"), "the agent's edit\n", 0o644)

	rep, err := CopyIncluded(repo, wt)
	if err != nil {
		t.Fatalf("CopyIncluded: %v", err)
	}
	wantCopied := []string{".env", "build/x.env", "config/dev.local", "in.env"}
	if !reflect.DeepEqual(rep.Copied, wantCopied) {
		t.Errorf("copied %q, want %q", rep.Copied, wantCopied)
	}
	wantSkipped := []Skipped{
		{"broken.env", ReasonBrokenLink},
		{"existing.env", ReasonExists},
		{"out.env", ReasonOutside},
	}
	if !reflect.DeepEqual(rep.Skipped, wantSkipped) {
		t.Errorf("skipped %+v, want %+v", rep.Skipped, wantSkipped)
	}

	for name, want := range map[string]string{
		".env": "TOKEN=1\n", "config/dev.local": "dev\n", "in.env": "dev\n",
		"build/x.env": "in an ignored folder\n", "existing.env": "the agent's edit\n",
	} {
		got, err := os.ReadFile(filepath.Join(wt, name))
		if err != nil || string(got) != want {
			t.Errorf("the worktree's %s = %q (%v), want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"out.env", "config/skip.local", "notes.txt", "broken.env"} {
		if _, err := os.Lstat(filepath.Join(wt, name)); err == nil {
			t.Errorf("the worktree has %s; it must not be copied", name)
		}
	}
	if info, err := os.Stat(filepath.Join(wt, ".env")); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf(".env in the worktree: %v, %v; want mode 0600 as in the repository", info.Mode(), err)
	}
	if st := git(t, wt, "status", "--porcelain"); st != "" {
		t.Errorf("the copies show as changes in the worktree:\n%s", st)
	}

	// Again, as a resumed worker does: everything is there already.
	rep, err = CopyIncluded(repo, wt)
	if err != nil || len(rep.Copied) != 0 {
		t.Errorf("a second CopyIncluded copied %q (%v), want nothing", rep.Copied, err)
	}
}

// TestCopyIncludedNeverWritesThroughALinkInTheWorktree: a task's branch
// may commit a symbolic link where the repository has a folder.
func TestCopyIncludedNeverWritesThroughALinkInTheWorktree(t *testing.T) {
	repo := newRepo(t)
	elsewhere := t.TempDir()
	writeFile(t, filepath.Join(repo, ".gitignore"), "*.local\n", 0o644)
	writeFile(t, filepath.Join(repo, IncludeFile), "*.local\n", 0o644)
	writeFile(t, filepath.Join(repo, "config", "dev.local"), "dev\n", 0o644)
	wt := Path(repo, "run", "US-001")
	addWorktree(t, repo, wt, "ralph/run/US-001")
	must(t, os.Symlink(elsewhere, filepath.Join(wt, "config")))

	rep, err := CopyIncluded(repo, wt)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Skipped{{"config/dev.local", ReasonLinkInWorktree}}; !reflect.DeepEqual(rep.Skipped, want) || len(rep.Copied) != 0 {
		t.Errorf("report %+v, want only %+v", rep, want)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("CopyIncluded wrote outside the worktree: %v", entries)
	}
}

func TestCopyIncludedWithoutAList(t *testing.T) {
	repo := newRepo(t)
	writeFile(t, filepath.Join(repo, ".env"), "TOKEN=1\n", 0o600)
	wt := Path(repo, "run", "US-001")
	addWorktree(t, repo, wt, "ralph/run/US-001")
	rep, err := CopyIncluded(repo, wt)
	if err != nil || len(rep.Copied) != 0 || len(rep.Skipped) != 0 {
		t.Errorf("CopyIncluded without %s = %+v, %v; want nothing done", IncludeFile, rep, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
