package fleet

import (
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ralphloop/ralph/internal/landing"
)

// A task whose loop was in flight when a person stopped the run is marked
// to resume on its host; one that had not reached a host is not.
func TestBuildStopMarksInFlightTasksToResume(t *testing.T) {
	r := &run{st: &RunState{Tasks: []*Task{
		{ID: "A", State: landing.Working, Host: "h2", Base: "b", Attempt: 1},
		{ID: "B", State: landing.Cooling, Host: "h1", Base: "b", Attempt: 2},
		{ID: "C", State: landing.Preparing, Attempt: 1},
	}}, inFlight: 3}
	r.st.Stopping = true
	for _, id := range []string{"A", "B", "C"} {
		r.apply(stepDone{task: id, event: landing.Stopped, err: temporal.NewCanceledError()})
	}
	for id, want := range map[string]bool{"A": true, "B": true, "C": false} {
		task := r.task(id)
		if task.State != landing.Ready || task.Resume != want {
			t.Errorf("%s: state %s, resume %v; want ready, resume %v", id, task.State, task.Resume, want)
		}
	}
	if r.inFlight != 0 {
		t.Errorf("in flight %d after every coroutine reported", r.inFlight)
	}
}

// A build that goes on from a stopped one works a task marked to resume
// on the host that holds its worktree, with the same attempt and without
// a Prepare (which would reset its branch and start its loop over); other
// tasks are prepared as usual.
func TestBuildResumesStoppedTasksOnTheirHost(t *testing.T) {
	env, f := wfNewEnv(t, wfStories("A", "B")...)
	in := wfInput(2)
	in.State = &RunState{RunID: "r1", Target: "main", Tasks: []*Task{
		{ID: "A", Title: "story A", State: landing.Ready, Host: "h2", Base: "base-A", Attempt: 1, Resume: true, Branch: "ralph/r1/A"},
		{ID: "B", Title: "story B", State: landing.Ready, Branch: "ralph/r1/B"},
	}}
	env.ExecuteWorkflow(BuildWorkflow, in)
	st := wfResult(t, env)
	if st.Outcome != "complete" {
		t.Fatalf("outcome %q (%s)", st.Outcome, st.Reason)
	}
	if n := f.count("prepare", "A"); n != 0 {
		t.Errorf("A was prepared %d times: its worktree and loop on h2 would start over", n)
	}
	works := f.ofKind("work", "A")
	if len(works) != 1 || works[0].work.Attempt != 1 || works[0].queue != HostQueue("q", "h2") {
		t.Fatalf("A's Work calls: %+v; want one, attempt 1, on %s", works, HostQueue("q", "h2"))
	}
	if f.count("prepare", "B") != 1 {
		t.Errorf("B prepared %d times, want 1", f.count("prepare", "B"))
	}
	if a := wfTask(st, "A"); a.Resume || a.Attempt != 1 || a.State != landing.Landed {
		t.Errorf("A ends %+v", *a)
	}
}
