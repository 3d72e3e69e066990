package crash

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/testing/harness"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// parallelPRD has four stories; US-004 depends on US-002.
const parallelPRD = `# PRD: parallel crash test

### [ ] US-001: Write one
- [ ] one.txt exists

### [ ] US-002: Write two
- [ ] two.txt exists

### [ ] US-003: Write three
- [ ] three.txt exists

### [ ] US-004: Write four
- [ ] four.txt exists
Depends: US-002
`

// parallelCheck passes on a tree where every story the PRD marks done has
// its file: the target branch must never be at a commit where it fails.
const parallelCheck = `#!/bin/sh
for n in one:US-001 two:US-002 three:US-003 four:US-004; do
  f=${n%%:*}; id=${n#*:}
  if grep -q "^### \[x\] $id" .agents/tasks/prd.md && [ ! -f $f.txt ]; then echo "$id done without $f.txt"; exit 1; fi
done
exit 0
`

func parallelScenario() fakeagent.Scenario {
	story := func(id, file string) fakeagent.Invocation {
		return fakeagent.Invocation{Match: "Story: " + id + ":", Steps: []fakeagent.Step{
			{Sleep: "150ms"}, {Say: "writing"}, {Write: file, Content: id + "\n"},
			{Sleep: "100ms"}, {Say: "checking"}, {CheckStory: id}, {Final: id + " done"}}}
	}
	return fakeagent.Scenario{Invocations: []fakeagent.Invocation{
		story("US-001", "one.txt"), story("US-002", "two.txt"), story("US-003", "three.txt"), story("US-004", "four.txt"),
	}}
}

func (h *crashHarness) newParallelCase(t *testing.T) *crashCase {
	t.Helper()
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	c := &crashCase{h: h, repo: filepath.Join(dir, "repo"), scenario: filepath.Join(dir, "scenario.json")}
	config := fmt.Sprintf("[agent]\ndefault = \"fake\"\n[build]\nrequire_plan = false\nmin_free_disk = 1\n[memory]\nstore = \"file\"\n[agents.fake]\ncommand = [%q]\n"+
		"[[checks]]\nname = \"tests\"\nrun = \"sh check.sh\"\n", h.fakeagent)
	c.initRepo(t, map[string]string{".agents/tasks/prd.md": parallelPRD, ".ralph/config.toml": config, "check.sh": parallelCheck}, "Crash Test", "crash@example.invalid")
	if err := fakeagent.WriteScenario(c.scenario, parallelScenario()); err != nil {
		t.Fatal(err)
	}
	return c
}

// buildParallel runs `ralph build --workers 2`, with RALPH_TEST_CRASH_AT
// set to point when given, or killed after killAfter when that is set.
func (c *crashCase) buildParallel(t *testing.T, point string, killAfter time.Duration) buildResult {
	t.Helper()
	env := c.h.env(c.scenario, 0)
	if point != "" {
		env = append(env, "RALPH_TEST_CRASH_AT="+point)
	}
	return c.runRalph(t, []string{"build", "--workers", "2"}, env, killAfter)
}

// reapParallel waits for what the killed ralph left running in the
// repository or its worktrees to end (the resumed run stops what is left
// anyway; this only keeps the test's processes from piling up).
func (c *crashCase) reapParallel(t *testing.T) {
	t.Helper()
	wt := filepath.Join(filepath.Dir(c.repo), ".ralph-worktrees")
	left := func() []int { return append(harness.ProcessesIn(c.repo), harness.ProcessesIn(wt)...) }
	if wait.Within(5*time.Second, func() bool { return len(left()) == 0 }) {
		return
	}
	for _, p := range left() {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// assertParallelEnd checks what a parallel run must leave, however often
// it was killed: every story landed exactly once as one commit, the
// checks pass at every commit the target was ever at, the checkout is
// clean on main, and no worktree or ralph branch is left.
func (c *crashCase) assertParallelEnd(t *testing.T, out string) {
	t.Helper()
	subjects := strings.Fields(strings.TrimSpace(c.git(t, "log", "--format=%s", "--grep=^US-", "main")))
	var ids []string
	for _, s := range subjects {
		if strings.HasPrefix(s, "US-") {
			ids = append(ids, strings.TrimSuffix(s, ":"))
		}
	}
	sort.Strings(ids)
	if strings.Join(ids, " ") != "US-001 US-002 US-003 US-004" {
		t.Errorf("stories landed on main: %v; want each of the four once\n%s", ids, clipOut(out))
	}
	// Every commit main reached, in its reflog too, passes the check.
	for _, commit := range strings.Fields(c.git(t, "rev-list", "--reflog", "main")) {
		prd := c.git(t, "show", commit+":.agents/tasks/prd.md")
		files := c.git(t, "ls-tree", "--name-only", commit)
		for _, n := range [][2]string{{"US-001", "one.txt"}, {"US-002", "two.txt"}, {"US-003", "three.txt"}, {"US-004", "four.txt"}} {
			if strings.Contains(prd, "### [x] "+n[0]) && !strings.Contains(files, n[1]) {
				t.Errorf("main was at %s, where %s is done without %s: a commit whose check fails", commit[:12], n[0], n[1])
			}
		}
	}
	if st := strings.TrimSpace(c.git(t, "status", "--porcelain")); st != "" {
		t.Errorf("the checkout is not clean:\n%s", st)
	}
	if b := strings.TrimSpace(c.git(t, "branch", "--show-current")); b != "main" {
		t.Errorf("the checkout is on %q, want main", b)
	}
	if b := strings.TrimSpace(c.git(t, "branch", "--list", "ralph/*")); b != "" {
		t.Errorf("ralph branches left: %s\n%s", b, clipOut(out))
	}
	if n := strings.Count(c.git(t, "worktree", "list", "--porcelain"), "worktree "); n != 1 {
		t.Errorf("%d worktrees; want only the checkout", n)
	}
	if _, err := os.Stat(filepath.Join(c.repo, "four.txt")); err != nil {
		t.Errorf("the checkout lacks the last story's work: %v", err)
	}
}

// A parallel build killed at each step of landing a task, then run again,
// lands every task exactly once and never moves main to a commit whose
// checks fail.
func TestParallelCrashWhileLanding(t *testing.T) {
	h := newCrashHarness(t)
	for _, point := range []string{"land-applied", "land-committed", "land-checked", "land-moved", "land-moved@3"} {
		t.Run(point, func(t *testing.T) {
			c := h.newParallelCase(t)
			res := c.buildParallel(t, point, 0)
			if !res.killed {
				t.Fatalf("RALPH_TEST_CRASH_AT=%s: %s, want a SIGKILL\n%s", point, res, clipOut(res.out))
			}
			c.reapParallel(t)
			res = c.buildParallel(t, "", 0)
			if res.code != 0 || res.killed {
				t.Fatalf("the run after the kill: %s\n%s", res, clipOut(res.out))
			}
			c.assertParallelEnd(t, res.out)
		})
	}
}

// Killed at arbitrary moments (agents running in several worktrees, the
// queue integrating), again and again, the run still ends with every
// task landed once.
func TestParallelCrashAtRandomTimes(t *testing.T) {
	h := newCrashHarness(t)
	for _, after := range []time.Duration{250 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) {
			c := h.newParallelCase(t)
			kills := 0
			for range 3 {
				res := c.buildParallel(t, "", after)
				c.reapParallel(t)
				if !res.killed {
					if res.code != 0 {
						t.Fatalf("run: %s\n%s", res, clipOut(res.out))
					}
					break
				}
				kills++
			}
			if kills == 0 {
				// The first run ended before its kill: nothing crashed,
				// and passing would say a crash was survived.
				t.Fatalf("no run was killed after %s: nothing was tested", after)
			}
			res := c.buildParallel(t, "", 0)
			if res.code != 0 || res.killed {
				t.Fatalf("the last run: %s\n%s", res, clipOut(res.out))
			}
			c.assertParallelEnd(t, res.out)
		})
	}
}

// A parallel build killed at each step of landing a batch, then run
// again, lands every task exactly once and never moves main to a commit
// whose checks fail. Three workers finish together and the check takes a
// second in the merge queue's worktree: the first story lands alone, and
// the two verified meanwhile land as a batch, where the kill comes.
func TestParallelCrashWhileLandingABatch(t *testing.T) {
	h := newCrashHarness(t)
	for _, point := range []string{"batch-committed", "batch-checked", "batch-moved"} {
		t.Run(point, func(t *testing.T) {
			c := h.newParallelCase(t)
			slow := strings.Replace(parallelCheck, "exit 0\n", "case \"$PWD\" in *integration*) sleep 1;; esac\nexit 0\n", 1)
			if err := os.WriteFile(filepath.Join(c.repo, "check.sh"), []byte(slow), 0o644); err != nil {
				t.Fatal(err)
			}
			c.git(t, "commit", "-qam", "a check that takes a second on the queue's worktree")
			build := func(point string) buildResult {
				env := c.h.env(c.scenario, 0)
				if point != "" {
					env = append(env, "RALPH_TEST_CRASH_AT="+point)
				}
				return c.runRalph(t, []string{"build", "--workers", "3"}, env, 0)
			}
			res := build(point)
			if !res.killed {
				t.Fatalf("RALPH_TEST_CRASH_AT=%s: %s, want a SIGKILL\n%s", point, res, clipOut(res.out))
			}
			c.reapParallel(t)
			res = build("")
			if res.code != 0 || res.killed {
				t.Fatalf("the run after the kill: %s\n%s", res, clipOut(res.out))
			}
			c.assertParallelEnd(t, res.out)
		})
	}
}
