package crash

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
)

// The extra runs of the checks with the start's versions of protected
// files put back happen in the work tree itself. A kill while those
// versions are in place must not leave them there, must not change the
// judgement, and must never get into a commit: the next start puts the
// work back before anything reads the tree, resumes in TEST, and judges
// the same way (US-001 weakened its test: sent back and blocked; US-002
// changed an existing test honestly: verified and committed once).

const evidenceCheck = `#!/bin/sh
# The project's tests, one per file in tests/, reported as TAP.
echo "TAP version 13"
n=0
status=0
for t in tests/*.sh; do
  n=$((n + 1))
  if sh "$t" >/dev/null 2>&1; then echo "ok $n - $t"; else echo "not ok $n - $t"; status=1; fi
done
echo "1..$n"
exit $status
`

func evidenceRepo(t *testing.T, h *crashHarness) (repo, scenario string) {
	t.Helper()
	repo = t.TempDir()
	files := map[string]string{
		".agents/tasks/prd.md": "# PRD\n\n### [ ] US-001: One\n- [ ] one.sh prints 1\n\n### [ ] US-002: Two\n- [ ] two.sh prints 2\n",
		"run-tests.sh":         evidenceCheck,
		"one.sh":               "echo 0\n",
		"two.sh":               "echo 0\n",
		"tests/one.sh":         "[ \"$(sh one.sh)\" = 1 ]\n",
		"tests/two.sh":         "[ \"$(sh two.sh)\" = 2 ]\n",
		".ralph/config.toml": `[agent]
default = "fake"
timeout = "30s"
[build]
require_plan = false
[loop]
max_retries = 1
[agents.fake]
command = ["` + h.fakeagent + `"]
[[checks]]
name = "tests"
kind = "test"
run = "sh run-tests.sh"
format = "tap"
timeout = "30s"
`,
	}
	for rel, body := range files {
		p := filepath.Join(repo, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc := fakeagent.Scenario{Invocations: []fakeagent.Invocation{
		{Match: "Story: US-001:", Steps: []fakeagent.Step{
			{Write: "tests/one.sh", Content: "true\n"}, {CheckStory: "US-001"}, {Final: "US-001 done"}}},
		{Match: "Story: US-002:", Steps: []fakeagent.Step{
			{Write: "two.sh", Content: "echo 2\n"},
			{Write: "tests/two.sh", Content: "[ \"$(sh two.sh)\" = 2 ] && [ -n \"$(sh two.sh)\" ]\n"},
			{CheckStory: "US-002"}, {Final: "US-002 done"}}},
	}}
	b, _ := json.Marshal(sc)
	scenario = filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(scenario, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "tests first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(h.env(scenario, 0), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return repo, scenario
}

func TestCrashDuringTheRunWithTheStartsFiles(t *testing.T) {
	h := newCrashHarness(t)
	points := []string{"overlay-applied@1", "overlay-restored@1", "overlay-applied@2", "overlay-restored@2"}
	// And after every transition of the same build: the judgement
	// resumes wherever the kill came.
	for n := 1; n <= 14; n++ {
		points = append(points, "after-"+strconv.Itoa(n))
	}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			repo, scenario := evidenceRepo(t, h)
			run := func(crashAt string) (string, int, bool) {
				cmd := exec.Command(h.ralph, "build", "10")
				cmd.Dir = repo
				cmd.Env = append(h.env(scenario, 0), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
				if n, ok := strings.CutPrefix(crashAt, "after-"); ok {
					cmd.Env = append(cmd.Env, "RALPH_TEST_CRASH_AFTER="+n)
				} else if crashAt != "" {
					cmd.Env = append(cmd.Env, "RALPH_TEST_CRASH_AT="+crashAt)
				}
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				cmd.WaitDelay = 10 * time.Second
				err := cmd.Run()
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					ws, ok := ee.Sys().(syscall.WaitStatus)
					return out.String(), ee.ExitCode(), ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
				}
				return out.String(), 0, false
			}
			out, _, killed := run(point)
			if !killed {
				// The transitions are counted, not timed: a build that
				// ends before one of them has fewer than this list, and
				// the point would test nothing. It fails rather than
				// skips, so that the list is made to match the run.
				t.Fatalf("the kill at %s did not come (the build ended first): nothing was tested\n%s", point, clipOut(out))
			}
			out, code, killed := run("")
			if killed || code != 3 {
				t.Fatalf("the resumed build: exit %d (killed %v), want 3 (US-001 blocked)\n%s", code, killed, clipOut(out))
			}
			git := func(args ...string) string {
				cmd := exec.Command("git", args...)
				cmd.Dir = repo
				b, _ := cmd.CombinedOutput()
				return string(b)
			}
			log := git("log", "--format=%s")
			if strings.Count(log, "US-002: Two") != 1 || strings.Contains(log, "US-001") {
				t.Errorf("history %q: want US-002 committed once and US-001 never", log)
			}
			// No start version left in the tree, none committed.
			two, _ := os.ReadFile(filepath.Join(repo, "tests", "two.sh"))
			if !strings.Contains(string(two), "-n") {
				t.Errorf("tests/two.sh is %q: the start's version was left in place of US-002's", two)
			}
			if show := git("show", "HEAD:tests/two.sh"); !strings.Contains(show, "-n") {
				t.Errorf("the commit holds tests/two.sh = %q, not US-002's version", show)
			}
			one, _ := os.ReadFile(filepath.Join(repo, "tests", "one.sh"))
			if strings.TrimSpace(string(one)) == "true" {
				t.Errorf("US-001's weakened test is in the tree after it was blocked")
			}
			if st := git("status", "--porcelain", "--", "tests", "one.sh", "two.sh"); st != "" {
				t.Errorf("work left in the tree:\n%s", st)
			}
			if _, err := os.Stat(filepath.Join(repo, ".ralph", "runs")); err == nil {
				if m, _ := filepath.Glob(filepath.Join(repo, ".ralph", "runs", "*", "overlay", "manifest.json")); len(m) > 0 {
					t.Errorf("an overlay is still recorded as in place: %v", m)
				}
			}
		})
	}
}
