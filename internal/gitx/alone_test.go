package gitx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// hook writes an executable hook script into dir.
func hook(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// CommitAlone says alone only when git ran nothing of its own during the
// commit: every kind of commit hook, from .git/hooks or core.hooksPath,
// makes it false, and so does a trace it cannot use. The commit is made
// either way.
func TestCommitAloneSaysWhenGitRanAProgram(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, r *Repo)
		trace func(t *testing.T) string
		alone bool
	}{
		{name: "no hook", alone: true},
		{name: "pre-commit", setup: func(t *testing.T, r *Repo) { hook(t, filepath.Join(r.Dir, ".git", "hooks"), "pre-commit", "true") }},
		{name: "commit-msg", setup: func(t *testing.T, r *Repo) { hook(t, filepath.Join(r.Dir, ".git", "hooks"), "commit-msg", "true") }},
		{name: "post-commit", setup: func(t *testing.T, r *Repo) { hook(t, filepath.Join(r.Dir, ".git", "hooks"), "post-commit", "true") }},
		{name: "core.hooksPath", setup: func(t *testing.T, r *Repo) {
			hook(t, filepath.Join(r.Dir, ".husky"), "pre-commit", "true")
			gitT(t, r.Dir, "config", "core.hooksPath", ".husky")
		}},
		{name: "a sample hook is no hook", alone: true, setup: func(t *testing.T, r *Repo) {
			hook(t, filepath.Join(r.Dir, ".git", "hooks"), "pre-commit.sample", "exit 1")
		}},
		{name: "relative trace", trace: func(t *testing.T) string { return "trace.json" }},
		{name: "trace in a missing folder", trace: func(t *testing.T) string { return filepath.Join(t.TempDir(), "gone", "trace.json") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRepo(t)
			write(t, r, "a.txt", "a\n")
			commitAll(t, r, "one")
			if c.setup != nil {
				c.setup(t, r)
			}
			trace := filepath.Join(t.TempDir(), "trace.json")
			if c.trace != nil {
				trace = c.trace(t)
			}
			write(t, r, "b.txt", "b\n")
			if err := r.AddAll(ctx); err != nil {
				t.Fatal(err)
			}
			alone, err := r.CommitAlone(ctx, "two\n", trace)
			if err != nil {
				t.Fatal(err)
			}
			if alone != c.alone {
				t.Errorf("alone = %v, want %v", alone, c.alone)
			}
			if got := gitT(t, r.Dir, "log", "-1", "--format=%s"); got != "two" {
				t.Errorf("last commit %q, want the commit made", got)
			}
		})
	}
}

// A hook that changes the work tree is what CommitAlone exists to catch:
// the tree after the commit is then not the commit.
func TestCommitAloneCatchesAHookThatChangesTheTree(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	commitAll(t, r, "one")
	hook(t, filepath.Join(r.Dir, ".git", "hooks"), "post-commit", "echo stamp > stamp.txt")
	write(t, r, "b.txt", "b\n")
	if err := r.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	alone, err := r.CommitAlone(ctx, "two\n", filepath.Join(t.TempDir(), "trace.json"))
	if err != nil || alone {
		t.Fatalf("CommitAlone = %v, %v; want not alone", alone, err)
	}
	if s := snapshot(t, r); !reflect.DeepEqual(s.Dirty, []string{"stamp.txt"}) {
		t.Errorf("tree after the hook: %v", s.Dirty)
	}
}

func TestCommitAloneNothingToCommit(t *testing.T) {
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	commitAll(t, r, "one")
	alone, err := r.CommitAlone(context.Background(), "nothing\n", filepath.Join(t.TempDir(), "trace.json"))
	if !errors.Is(err, ErrNothingToCommit) || alone {
		t.Errorf("CommitAlone with nothing staged = %v, %v; want ErrNothingToCommit", alone, err)
	}
}

func TestRanAlone(t *testing.T) {
	const (
		start = `{"event":"start","sid":"S1","argv":["git","commit"]}` + "\n"
		exit0 = `{"event":"exit","sid":"S1","code":0}` + "\n"
	)
	cases := map[string]struct {
		trace string
		want  bool
	}{
		"clean":             {start + exit0, true},
		"empty":             {"", false},
		"no exit":           {start, false},
		"exit 1":            {start + `{"event":"exit","sid":"S1","code":1}` + "\n", false},
		"exit of a child":   {start + `{"event":"exit","sid":"S1/S2","code":0}` + "\n", false},
		"exit without code": {start + `{"event":"exit","sid":"S1"}` + "\n", false},
		"a child":           {start + `{"event":"child_start","sid":"S1","child_class":"hook","hook_name":"pre-commit"}` + "\n" + exit0, false},
		"a line not json":   {start + "garbage\n" + exit0, false},
		"a line not event":  {start + `{"sid":"S1"}` + "\n" + exit0, false},
	}
	for name, c := range cases {
		if got := ranAlone([]byte(c.trace)); got != c.want {
			t.Errorf("%s: ranAlone = %v, want %v", name, got, c.want)
		}
	}
}

// Whatever the trace holds, ranAlone never says alone about a trace that
// shows a child or no clean exit.
func FuzzRanAlone(f *testing.F) {
	f.Add([]byte(`{"event":"exit","sid":"S1","code":0}` + "\n"))
	f.Add([]byte(`{"event":"child_start","sid":"S1"}` + "\n" + `{"event":"exit","sid":"S1","code":0}`))
	f.Fuzz(func(t *testing.T, trace []byte) {
		if ranAlone(trace) && (strings.Contains(string(trace), "child_start") || !strings.Contains(string(trace), `"exit"`)) {
			t.Errorf("alone for %q", trace)
		}
	})
}

// Nested lists the repositories inside the tree that no staging empties:
// an untracked repository as its folder, and the same repository once
// committed as a gitlink with changes inside it.
func TestSnapshotNested(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, "a.txt", "a\n")
	commitAll(t, r, "one")
	nest := filepath.Join(r.Dir, "nest")
	if err := os.MkdirAll(nest, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, nest, "init", "-q", "-b", "main")
	write(t, r, "nest/b.txt", "b\n")
	gitT(t, nest, "add", "b.txt")
	gitT(t, nest, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "b")
	if s := snapshot(t, r); !reflect.DeepEqual(s.Nested, []string{"nest/"}) {
		t.Errorf("untracked repository: Nested %v, Dirty %v", s.Nested, s.Dirty)
	}
	staged, err := r.AddAllListed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(staged, []string{"nest/"}) {
		t.Errorf("staged %v, want the repository's folder", staged)
	}
	if _, err := r.Commit(ctx, "nest"); err != nil {
		t.Fatal(err)
	}
	write(t, r, "nest/c.txt", "c\n")
	if err := r.AddAll(ctx); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, r); !reflect.DeepEqual(s.Nested, []string{"nest"}) || !reflect.DeepEqual(s.Dirty, []string{"nest"}) {
		t.Errorf("a gitlink with changes inside after git add: Nested %v, Dirty %v", s.Nested, s.Dirty)
	}
	write(t, r, "plain.txt", "p\n")
	if s := snapshot(t, r); !reflect.DeepEqual(s.Nested, []string{"nest"}) {
		t.Errorf("a plain file is not nested: Nested %v", s.Nested)
	}
}

// parseStatus reads what git prints about paths an agent named: it never
// panics, and what it lists as nested is dirty.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("# branch.oid abc\x00# branch.head main\x001 .M S..U 160000 160000 160000 h h nest\x00? new/\x00? a b.txt\x00"))
	f.Add([]byte("2 R. N... 100644 100644 100644 h h R100 new\x00old\x00u UU N... 1 1 1 1 h h h c.txt\x00"))
	f.Add([]byte("1 .M  x\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		s, err := parseStatus(out)
		if err != nil {
			return
		}
		for _, p := range s.Nested {
			if !strings.Contains(strings.Join(s.Dirty, "\x00")+"\x00", p+"\x00") {
				t.Errorf("nested %q is not dirty: %v", p, s.Dirty)
			}
		}
	})
}
