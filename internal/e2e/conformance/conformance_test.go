package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/testing/harness"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/text"
)

// scenario is one behaviour every executor of the parallel core must
// have.
type scenario struct {
	name string
	run  func(w *world, x executor)
}

// scenarios are what TestConformance runs against every executor.
var scenarios = []scenario{
	{"dependencies", dependencies},
	{"conflict", conflict},
	{"integration-only-check", integrationOnlyCheck},
	{"target-moved", targetMoved},
	{"branch-deleted", branchDeleted},
	{"crash-land-applied", crashAt("land-applied")},
	{"crash-land-committed", crashAt("land-committed")},
	{"crash-land-checked", crashAt("land-checked")},
	{"crash-land-moved", crashAt("land-moved")},
	// A kill in a worker's loop, right after its task's commit: both
	// executors run the loop in the process the kill takes.
	{"crash-after-commit", crashAt("after-commit")},
	{"stop-resume", stopResume},
}

// TestConformance runs every scenario against every executor. Scenarios
// run side by side (each in its own folder, on Temporal each on its own
// task queue of the one dev server); go test's -parallel bounds how many.
func TestConformance(t *testing.T) {
	for _, x := range executors {
		t.Run(x.name(), func(t *testing.T) {
			t.Parallel()
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					s.run(newWorld(t), x)
				})
			}
		})
	}
}

var one, two, three = story{id: "US-001", file: "one.txt"}, story{id: "US-002", file: "two.txt"}, story{id: "US-003", file: "three.txt"}

// A task starts only once the tasks it depends on landed: US-003 depends
// on US-001, whose agent works until US-002 landed (so a worker is free)
// and a second more. US-003's agent records whether its worktree holds
// US-001's work (it is cut from the target's tip when it starts).
func dependencies(w *world, x executor) {
	dep := story{id: "US-003", file: "three.txt", depends: "US-001"}
	stories := []story{one, two, dep}
	w.make(x, repo{stories: stories, agent: []fakeagent.Invocation{
		work(first(one), one, waitLanded(two), fakeagent.Step{Sleep: "1s"}),
		work(first(two), two),
		work(first(dep), dep, fakeagent.Step{Run: `if [ -f one.txt ]; then echo yes; else echo no; fi > saw-one.txt`}),
	}})
	w.complete(x.build(w, 2, ""))
	w.assertLandedOnce(stories)
	landed := w.landed()
	if strings.Index(strings.Join(landed, " "), "US-001") > strings.Index(strings.Join(landed, " "), "US-003") {
		w.T.Errorf("main has %v: US-003 landed before US-001, which it depends on", landed)
	}
	if saw := w.Git(w.repo, "show", "main:saw-one.txt"); saw != "yes" {
		w.T.Errorf("US-003's agent started without US-001's work in its worktree (saw-one.txt: %q): it started before what it depends on landed", saw)
	}
}

// Two tasks change the same line: one lands, the other's landing
// conflicts and is sent back with the conflict in its next prompt; it is
// redone on the new tip and lands. Nothing is merged with a conflict
// strategy.
func conflict(w *world, x executor) {
	a, b := story{id: "US-001", file: "shared.txt"}, story{id: "US-002", file: "shared.txt"}
	redo := func(s story) fakeagent.Invocation {
		return fakeagent.Invocation{Match: sentBack(s, "its changes conflict"), Steps: []fakeagent.Step{
			{Append: "shared.txt", Content: s.id + " was here too\n"}, {CheckStory: s.id}, {Final: "redone on the new tip"}}}
	}
	change := func(s story) fakeagent.Invocation {
		return fakeagent.Invocation{Match: first(s), Steps: []fakeagent.Step{
			{Replace: "shared.txt", Old: "two", New: "two, says " + s.id}, {CheckStory: s.id}, {Final: "done"}}}
	}
	w.make(x, repo{stories: []story{a, b}, check: "#!/bin/sh\nexit 0\n", files: map[string]string{"shared.txt": "one\ntwo\nthree\n"},
		agent: []fakeagent.Invocation{redo(a), redo(b), change(a), change(b)}})
	w.complete(x.build(w, 2, ""))
	w.assertLandedOnce([]story{a, b})
	shared := w.Git(w.repo, "show", "main:shared.txt")
	var retried string
	for _, s := range []story{a, b} {
		if strings.Contains(shared, s.id+" was here too") {
			if retried != "" {
				w.T.Errorf("both tasks were redone after a conflict:\n%s", shared)
			}
			retried = s.id
		}
	}
	if retried == "" || !strings.Contains(shared, "two, says US-00") {
		w.T.Fatalf("main's shared.txt is not one task's change plus the other's redo after the conflict:\n%s", shared)
	}
	if evs := w.eventsOf(retried, "its changes conflict with work landed on main meanwhile, in shared.txt"); len(evs) == 0 {
		w.T.Errorf("the journal has no event of %s sent back for its conflict in shared.txt", retried)
	}
}

// Each task's check passes on its own branch, and fails once both are
// integrated: the second landing is sent back with the check's output in
// its next prompt, redone on the tip (where the first task's work is)
// and lands. main never reaches a commit whose check fails.
func integrationOnlyCheck(w *world, x executor) {
	stories := []story{one, two}
	check := "#!/bin/sh\nif [ -f one.txt ] && [ -f two.txt ]; then echo 'one.txt and two.txt are both here'; exit 1; fi\n"
	// Only a prompt that holds the failed check's output matches the
	// redo: the task whose landing was sent back (named by its branch,
	// ralph/<run>/<task> in both engines) is then done without its file,
	// which the other's landing made redundant.
	redo := fakeagent.Invocation{Match: "one.txt and two.txt are both here", Steps: []fakeagent.Step{
		{Run: `set -e; b=$(git symbolic-ref --short HEAD); id=${b##*/}; echo "$id" > "$id-redone.txt"
sed -i "/^### \[ \] $id:/{s/\[ \]/[x]/;n;s/- \[ \]/- [x]/}" .agents/tasks/prd.md`}, {Final: "redone without my file"}}}
	w.make(x, repo{stories: stories, check: check, agent: []fakeagent.Invocation{
		redo, work(first(one), one), work(first(two), two)}})
	w.complete(x.build(w, 2, ""))
	w.assertLandedOnce(stories)
	w.assertCheckedReflog()
	var retried string
	for _, s := range stories {
		if _, code := w.Run(w.repo, "git", "cat-file", "-e", "main:"+s.id+"-redone.txt"); code == 0 {
			retried = s.id
		}
	}
	if retried == "" {
		w.T.Fatalf("no task was redone after its integrated check failed:\n%s", w.Git(w.repo, "log", "--stat", "main"))
	}
	if evs := w.eventsOf(retried, `check "checks" failed after integration on main`); len(evs) == 0 {
		w.T.Errorf("the journal has no event of %s sent back for its check failing after integration", retried)
	}
}

// An agent moves the target outside ralph to a commit whose check fails:
// the run stops rather than send every good task back, naming where
// ralph left the target and where it is now, and leaves it there.
func targetMoved(w *world, x executor) {
	stories := []story{one, two}
	moved := w.flag("moved-to")
	move := fakeagent.Step{Run: fmt.Sprintf(`set -e
mkdir -p %q
blob=$(echo broken | git hash-object -w --stdin)
tree=$( (git ls-tree main; printf '100644 blob %%s\tbroken.txt\n' "$blob") | git mktree)
c=$(git commit-tree "$tree" -p main -m 'moved by an agent')
git update-ref refs/heads/main "$c"
echo "$c" > %q`, filepath.Dir(moved), moved)}
	w.make(x, repo{stories: stories, check: "#!/bin/sh\nif [ -f broken.txt ]; then echo broken; exit 1; fi\n",
		// US-002 is verified once main moved: whichever lands first
		// judges its landing against the moved target.
		agent: []fakeagent.Invocation{work(first(one), one, move), work(first(two), two, waitFlag(moved))}})
	b := x.build(w, 2, "")
	w.WaitEnd(b, 3*time.Minute)
	to, err := os.ReadFile(moved)
	if err != nil {
		w.T.Fatalf("US-001's agent did not move main: %v", err)
	}
	bad := strings.TrimSpace(string(to))
	from := w.Git(w.repo, "rev-parse", bad+"^")
	out := b.Output()
	if !b.Exited() || b.Code() == 0 {
		w.T.Errorf("the build went on to exit 0 after main was moved to %s, where the check fails; want it stopped:\n%s", text.ShortHash(bad), harness.Clip(out, 4000))
	}
	if !strings.Contains(out, "moved outside ralph from "+text.ShortHash(from)) || !strings.Contains(out, "to "+text.ShortHash(bad)) {
		w.T.Errorf("the build's output does not name both commits (from %s to %s):\n%s", text.ShortHash(from), text.ShortHash(bad), harness.Clip(out, 4000))
	}
	if tip := w.Git(w.repo, "rev-parse", "main"); tip != bad {
		w.T.Errorf("main is at %s; ralph leaves a target moved outside it where it is (%s)", text.ShortHash(tip), text.ShortHash(bad))
	}
}

// A task's branch is deleted (by hand) after it was verified and before
// it lands: the queue sends it back saying so, and it is redone and
// lands, never lost or landed empty. The check, in the integration
// worktree while the first task lands, waits until the other task is
// verified and deletes its branch where the executor's queue lands it
// from (the task's last commit is then on it).
func branchDeleted(w *world, x executor) {
	stories := []story{one, two}
	branches, deleted := x.branches(w), w.flag("deleted")
	check := fmt.Sprintf(`#!/bin/sh
prd=.agents/tasks/prd.md
if ! git symbolic-ref -q HEAD >/dev/null && [ ! -f %[1]q ]; then
  other=
  grep -q '^### \[x\] US-001:' $prd && ! grep -q '^### \[x\] US-002:' $prd && other=US-002
  grep -q '^### \[x\] US-002:' $prd && ! grep -q '^### \[x\] US-001:' $prd && other=US-001
  if [ -n "$other" ]; then
    i=0
    until ref=$(git --git-dir=%[2]q for-each-ref --format='%%(refname) %%(subject)' refs/heads/ralph/ | awk -v id=$other '$1 ~ "/" id "$" && $2 == id ":" {print $1}'); [ -n "$ref" ]; do
      i=$((i+1)); [ $i -gt 2400 ] && { echo "$other was never verified" >&2; exit 1; }; sleep 0.05
    done
    git --git-dir=%[2]q update-ref -d "$ref" || exit 1
    mkdir -p %[3]q && echo $other > %[1]q
  fi
fi
exit 0
`, deleted, branches, filepath.Dir(deleted))
	w.make(x, repo{stories: stories, check: check, agent: []fakeagent.Invocation{
		work(sentBack(one, "its branch"), one), work(sentBack(two, "its branch"), two),
		work(first(one), one), work(first(two), two),
	}})
	w.complete(x.build(w, 2, ""))
	id, err := os.ReadFile(deleted)
	if err != nil {
		w.T.Fatalf("no branch was deleted: the check did not run in the integration worktree while the first task landed (%v)", err)
	}
	w.assertLandedOnce(stories)
	if gone := strings.TrimSpace(string(id)); len(w.eventsOf(gone, "is gone")) == 0 {
		w.T.Errorf("the journal has no event of %s sent back because its branch is gone", gone)
	}
}

// crashAt kills the process that lands at point (RALPH_TEST_CRASH_AT;
// for after-commit, the process that runs the workers' loops, the same one),
// then resumes the run: every task lands exactly once and main never
// reaches a commit whose check fails.
func crashAt(point string) func(w *world, x executor) {
	return func(w *world, x executor) {
		stories := []story{one, two, three}
		w.make(x, repo{stories: stories, agent: []fakeagent.Invocation{work(first(one), one), work(first(two), two), work(first(three), three)}})
		b := x.build(w, 2, point)
		lander := x.lander(w, b)
		w.WaitFor("the process that lands to be killed at "+point+" or the build to end", 3*time.Minute, func() (bool, string) {
			return lander.Exited() || b.Exited(), harness.Clip(b.Output(), 2000)
		})
		// The build may end in the same instant its lander is killed:
		// the kill is looked for a little longer before it is missed.
		wait.Within(w.Within(10*time.Second), lander.Exited)
		if !lander.Exited() || !lander.Killed() {
			state := "still runs"
			if lander.Exited() {
				state = fmt.Sprint("exited: ", lander.Err)
			}
			w.T.Fatalf("RALPH_TEST_CRASH_AT=%s: %s (the process that lands) was not killed there (it %s); the build ended (%v) without the crash:\n%s",
				point, lander.Name, state, b.Err, harness.Clip(b.Output(), 3000))
		}
		w.complete(x.resume(w, b))
		w.assertLandedOnce(stories)
		w.assertCheckedReflog()
	}
}

// `ralph stop` while both tasks' agents work, then `ralph build` again:
// the run resumes and lands each task exactly once.
func stopResume(w *world, x executor) {
	stories := []story{one, two}
	gate := w.flag("go")
	agent := func(s story) fakeagent.Invocation {
		return work(first(s), s, raiseStep(w.flag("started-"+s.id)), waitFlag(gate))
	}
	w.make(x, repo{stories: stories, agent: []fakeagent.Invocation{agent(one), agent(two)}})
	b := x.build(w, 2, "")
	w.WaitFor("both agents to start", 2*time.Minute, func() (bool, string) {
		return w.raised("started-US-001") && w.raised("started-US-002"), harness.Clip(b.Output(), 2000)
	})
	out, code := w.Run(w.repo, w.Ralph, "stop")
	if code != 0 {
		w.T.Fatalf("ralph stop: exit %d\n%s", code, out)
	}
	w.WaitEnd(b, 2*time.Minute)
	if b.Code() == 0 || strings.Contains(b.Output(), "complete:") {
		w.T.Errorf("the stopped build: exit %d, want it interrupted, not complete:\n%s", b.Code(), harness.Clip(b.Output(), 3000))
	}
	if landed := w.landed(); len(landed) != 0 {
		w.T.Errorf("tasks landed although every agent waited when the run stopped: %v", landed)
	}
	w.raise("go")
	w.complete(x.resume(w, b))
	w.assertLandedOnce(stories)
}
