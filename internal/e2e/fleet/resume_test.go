package fleet

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/harness"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// `ralph stop` while agents work, then `ralph build` again: the new build
// goes on from the stopped run (its id, its landed tasks), and the tasks
// whose loops were in flight resume on their host with the same attempt,
// their loops picking up their saved state, instead of starting over.
// Every story lands exactly once.
func TestFleetStopThenBuildResumes(t *testing.T) {
	r := newFleetRun(t)
	r.startServer()
	r.makeRepos()
	wa := r.Start("worker-a", r.a, nil, r.Ralph, "worker", "--host", "a", "--integrate")
	r.WaitLog(wa, `ralph worker a: polling`, time.Minute)
	build := r.Start("build", r.a, nil, r.Ralph, "build", "--workers", "2")
	runID := r.WaitLog(build, `ralph: build (\S+) started on Temporal`, time.Minute)[1]
	r.WaitLog(wa, `── iteration 1/`, time.Minute)

	out, code := r.ralphRun(r.a, "stop")
	if code != 0 || !strings.Contains(out, "stopping") {
		t.Fatalf("ralph stop: exit %d, %q", code, out)
	}
	r.WaitFor("the first build to end", time.Minute, func() (bool, string) { return build.Exited(), build.Output() })
	if !strings.Contains(build.Output(), "ralph: interrupted") {
		t.Errorf("the stopped build's last words:\n%s", harness.Clip(build.Output(), 3000))
	}
	// The tasks whose agents the stop interrupted: their worktrees hold
	// work, which the next build must resume, not prepare afresh.
	inFlight := map[string]bool{}
	for _, m := range regexp.MustCompile(`\[a (\S+)\]\s+■ interrupted: iteration \d+ recorded as interrupted`).FindAllStringSubmatch(wa.Output(), -1) {
		inFlight[m[1]] = true
	}
	interrupted := len(inFlight)
	if interrupted == 0 {
		t.Fatalf("worker a recorded no interrupted iteration: the stop did not reach an attempt in flight\n%s", harness.Clip(wa.Output(), 4000))
	}

	// The hosts may still be saving the attempts when the follower ends:
	// a build started meanwhile is told to wait, then resumes.
	var again *proc
	r.WaitFor("a second ralph build to start", time.Minute, func() (bool, string) {
		p := r.Start("build-again", r.a, nil, r.Ralph, "build", "--workers", "2")
		wait.Within(r.Within(time.Minute), func() bool { return p.Exited() || strings.Contains(p.Output(), "started on Temporal") })
		if strings.Contains(p.Output(), "started on Temporal") {
			again = p
			return true, ""
		}
		return false, p.Output()
	})
	if !strings.Contains(again.Output(), "ralph: resuming build "+runID) {
		t.Errorf("the second build did not resume run %s:\n%s", runID, harness.Clip(again.Output(), 3000))
	}
	r.WaitFor("the resumed build to end", 3*time.Minute, func() (bool, string) { return again.Exited(), harness.Clip(again.Output(), 2000) })
	if again.Err != nil || !strings.Contains(again.Output(), "complete: 6 tasks landed") {
		t.Fatalf("the resumed build: %v\n%s", again.Err, harness.Clip(again.Output(), 4000))
	}
	log := wa.Output()
	if n := len(regexp.MustCompile(`resuming run \S+ in IMPLEMENT`).FindAllString(log, -1)); n < interrupted {
		t.Errorf("%d loops were interrupted but %d resumed from their saved state:\n%s", interrupted, n, harness.Clip(log, 6000))
	}
	prepared := map[string]int{}
	for _, m := range regexp.MustCompile(`\[a (\S+)\] ▶ prepared attempt`).FindAllStringSubmatch(log, -1) {
		prepared[m[1]]++
	}
	// A task the stop caught in its Prepare, before its agent started, has
	// nothing in its worktree to keep and may be prepared again.
	for id := range inFlight {
		if n := prepared[id]; n != 1 {
			t.Errorf("%s was prepared %d times: a task stopped in flight must resume in its worktree, not be prepared (reset) again\n%s", id, n, harness.Clip(log, 6000))
		}
	}
	var tasks []string
	for _, line := range strings.Split(r.Git(r.a, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", "main"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			tasks = append(tasks, line)
		}
	}
	slices.Sort(tasks)
	var want []string
	for _, s := range stories {
		want = append(want, s.id)
	}
	if !slices.Equal(tasks, want) {
		t.Errorf("main's Ralph-Task commits are for %v; want each story once", tasks)
	}
}
