package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

// story is one story of a scenario's PRD: its id, title, the file its
// agent writes, and the stories it depends on.
type story struct {
	id, file string
	depends  string
}

func (s story) title() string { return "Write " + s.file }

func prd(stories []story) string {
	var b strings.Builder
	b.WriteString("# PRD: a conformance scenario\n")
	for _, s := range stories {
		fmt.Fprintf(&b, "\n### [ ] %s: %s\n- [ ] %s holds %s\n", s.id, s.title(), s.file, s.id)
		if s.depends != "" {
			fmt.Fprintf(&b, "Depends: %s\n", s.depends)
		}
	}
	return b.String()
}

// doneHasFile is a check that passes on a tree where every story the PRD
// marks done has its file: the target may only ever be at such a commit.
func doneHasFile(stories []story) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, s := range stories {
		fmt.Fprintf(&b, "if grep -q '^### \\[x\\] %s:' .agents/tasks/prd.md && [ ! -f %s ]; then echo '%s is done without %s'; exit 1; fi\n", s.id, s.file, s.id, s.file)
	}
	return b.String()
}

// work is an agent invocation that does story s: steps before its work,
// then its file, the story ticked, and its final word.
func work(match string, s story, before ...fakeagent.Step) fakeagent.Invocation {
	steps := append(slices.Clone(before), fakeagent.Step{Write: s.file, Content: s.id + "\n"}, fakeagent.Step{CheckStory: s.id}, fakeagent.Step{Final: s.id + " done"})
	return fakeagent.Invocation{Match: match, Steps: steps}
}

// first is the prompt of a story's attempts; sentBack that of an attempt
// after its landing was sent back (verify.SentBack), which both engines
// must put in it, with why.
func first(s story) string { return "Story: " + s.id + ":" }
func sentBack(s story, why string) string {
	return "attempt at " + s.id + " was verified on its own branch but could not land on main: " + why
}

// repo is what a scenario builds: its stories, its check and its agent.
type repo struct {
	stories []story
	check   string
	files   map[string]string
	agent   []fakeagent.Invocation
}

// make writes the repository for executor x and commits it on main.
func (w *world) make(x executor, r repo) {
	w.T.Helper()
	if err := fakeagent.WriteScenario(w.scenario, fakeagent.Scenario{Format: "claude", Invocations: r.agent}); err != nil {
		w.T.Fatal(err)
	}
	check := r.check
	if check == "" {
		check = doneHasFile(r.stories)
	}
	config := fmt.Sprintf(`[agent]
default = "fake"
timeout = "90s"
[build]
require_plan = false
min_free_disk = 1
[memory]
store = "file"
[agents.fake]
command = [%q, "__demo-agent", "--scenario", %q]
format = "claude"
[[checks]]
name = "checks"
run = "sh check.sh"
`, w.Ralph, w.scenario) + x.config(w)
	files := map[string]string{".agents/tasks/prd.md": prd(r.stories), ".ralph/config.toml": config, "check.sh": check, "README.md": "# conformance\n"}
	for k, v := range r.files {
		files[k] = v
	}
	w.WriteFiles(w.repo, files)
	w.Git(w.repo, "init", "-q", "-b", "main")
	w.Git(w.repo, "add", "-A")
	w.Git(w.repo, "commit", "-q", "-m", "initial")
}

// complete follows build b to its end and fails the scenario unless it
// exits 0.
func (w *world) complete(b *proc) string {
	w.T.Helper()
	w.WaitEnd(b, 3*time.Minute)
	if b.Code() != 0 {
		w.T.Fatalf("ralph build: %v, want exit 0 (every task landed):\n%s", b.Err, harness.Clip(b.Output(), 6000))
	}
	return b.Output()
}

// assertLandedOnce checks that the target holds exactly one commit for
// each of the stories, that `ralph status --json` says each landed, and
// that the checkout is clean on main.
func (w *world) assertLandedOnce(stories []story) {
	w.T.Helper()
	got := w.landed()
	var want []string
	for _, s := range stories {
		want = append(want, s.id)
	}
	sorted := slices.Sorted(slices.Values(got))
	if !slices.Equal(sorted, want) {
		w.T.Errorf("the commits on main are for %v; want each of %v exactly once:\n%s", got, want, w.Git(w.repo, "log", "--format=%h %s", "main"))
	}
	board, err := w.board()
	if err != nil {
		w.T.Error(err)
	}
	for _, s := range stories {
		if st := board[s.id].State; st != "landed" {
			w.T.Errorf("ralph status --json: %s is %q (%s), want landed", s.id, st, board[s.id].Reason)
		}
	}
	if st := w.Git(w.repo, "status", "--porcelain"); st != "" {
		w.T.Errorf("the checkout is not clean after the run:\n%s", st)
	}
	if b := w.Git(w.repo, "branch", "--show-current"); b != "main" {
		w.T.Errorf("the checkout is on %q, want main", b)
	}
}

// assertCheckedReflog runs the check on every commit main was ever at:
// the target only ever moves to a commit whose checks passed.
func (w *world) assertCheckedReflog() {
	w.T.Helper()
	tree := filepath.Join(w.Dir, "reflog-tree")
	for _, c := range strings.Fields(w.Git(w.repo, "rev-list", "--reflog", "main")) {
		os.RemoveAll(tree)
		w.Git(w.repo, "worktree", "add", "-q", "--detach", tree, c)
		out, code := w.Run(tree, "sh", "check.sh")
		w.Git(w.repo, "worktree", "remove", "--force", tree)
		if code != 0 {
			w.T.Errorf("main was at %s, where the check fails: %s", c[:12], strings.TrimSpace(out))
		}
	}
}

// eventsOf are the journal's events of task whose text holds s.
func (w *world) eventsOf(task, s string) []harness.Event {
	var out []harness.Event
	for _, ev := range w.journal() {
		if ev.Task == task && strings.Contains(ev.Text, s) {
			out = append(out, ev)
		}
	}
	return out
}

// flag is a file outside the repository that an agent or a check
// touches, and the test or another agent waits on.
func (w *world) flag(name string) string { return filepath.Join(w.Dir, "flags", name) }

func (w *world) raise(name string) {
	w.T.Helper()
	if err := os.MkdirAll(filepath.Dir(w.flag(name)), 0o755); err != nil {
		w.T.Fatal(err)
	}
	if err := os.WriteFile(w.flag(name), nil, 0o644); err != nil {
		w.T.Fatal(err)
	}
}

func (w *world) raised(name string) bool {
	_, err := os.Stat(w.flag(name))
	return err == nil
}

// waitFlag is a shell step that waits (with a deadline) until the flag
// exists.
func waitFlag(path string) fakeagent.Step {
	return fakeagent.Step{Run: fmt.Sprintf(`i=0; while [ ! -f %q ]; do i=$((i+1)); [ $i -gt 2400 ] && { echo "waited 2 minutes for %s" >&2; exit 1; }; sleep 0.05; done`, path, filepath.Base(path))}
}

// raiseStep is a shell step that makes the flag.
func raiseStep(path string) fakeagent.Step {
	return fakeagent.Step{Run: fmt.Sprintf(`mkdir -p %q && touch %q`, filepath.Dir(path), path)}
}

// waitLanded is a shell step that waits (with a deadline) until story s
// has landed on main.
func waitLanded(s story) fakeagent.Step {
	return fakeagent.Step{Run: fmt.Sprintf(`i=0; until git log --format='%%(trailers:key=Ralph-Task,valueonly)' main | grep -qx %s; do i=$((i+1)); [ $i -gt 2400 ] && { echo "waited 2 minutes for %s to land" >&2; exit 1; }; sleep 0.05; done`, s.id, s.id)}
}
