package fleet

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

// A story whose agent always exits 1, on a real dev server with two
// `ralph worker`s and `ralph build --workers 2`: the task loop's own rules
// block it after its failed attempts (never Temporal's retry policy,
// which ran the loop again with backoff up to 20 times while the build
// never ended), its slot goes to the other stories, which all land once,
// and the build ends by itself with exit 3 naming the blocked story and
// why, as the local engine does.
func TestFleetBuildEndsWithAFailingStoryBlocked(t *testing.T) {
	r := newFleetRun(t)
	r.startServer()
	r.makeRepos()
	failing := stories[len(stories)-1]
	sc := scenario()
	for i, inv := range sc.Invocations {
		if strings.Contains(inv.Match, failing.id) {
			sc.Invocations[i] = fakeagent.Invocation{Match: inv.Match, Exit: 1, Steps: []fakeagent.Step{{Say: "cannot do " + failing.id}}}
		}
	}
	if err := fakeagent.WriteScenario(r.scenario, sc); err != nil {
		t.Fatal(err)
	}

	wa := r.Start("worker-a", r.a, nil, r.Ralph, "worker", "--host", "a", "--integrate")
	wb := r.Start("worker-b", r.b, nil, r.Ralph, "worker", "--host", "b")
	r.WaitLog(wa, `ralph worker a: polling ralph, ralph@a, ralph\.integration`, time.Minute)
	r.WaitLog(wb, `ralph worker b: polling ralph, ralph@b on`, time.Minute)
	began := time.Now()
	out, code := r.ralphRun(r.a, "build", "--workers", "2")
	t.Logf("the build ended after %v", time.Since(began).Round(time.Second))
	if code != 3 {
		t.Fatalf("ralph build exited %d, want 3 (a person must decide):\n%s", code, out)
	}
	if !regexp.MustCompile(`needs_human: 5 tasks landed \(1 left: ` + failing.id + ` blocked\)`).MatchString(out) {
		t.Errorf("the build's end does not name %s blocked:\n%s", failing.id, out)
	}
	if !strings.Contains(out, "["+failing.id+"] blocked") || !strings.Contains(out, "exited with code 1") {
		t.Errorf("the follow does not show %s blocked with its agent's failure:\n%s", failing.id, out)
	}
	st, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range st.Tasks {
		want := "landed"
		if task.ID == failing.id {
			want = "blocked"
		}
		if string(task.State) != want {
			t.Errorf("%s ends %s, want %s", task.ID, task.State, want)
		}
		if task.ID == failing.id && task.Attempt != 1 {
			t.Errorf("%s had %d attempts of the run, want 1: its loop's attempts decide", task.ID, task.Attempt)
		}
	}
	// Temporal never retried the failing story's Work: a retry says so in
	// the host's journal.
	for _, repo := range []string{r.a, r.b} {
		for _, ev := range harness.Journal(repo) {
			if ev.Task == failing.id && strings.Contains(ev.Text, "retried after") {
				t.Errorf("Temporal retried %s's Work: %s", failing.id, ev.Text)
			}
		}
	}
}
