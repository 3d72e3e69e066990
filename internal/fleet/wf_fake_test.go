package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// The build workflow's unit tests run it in the SDK's test environment:
// no server, a mocked clock that jumps over timers, and the four
// activities mocked by wfFake, which records every call with the
// workflow time and a global order, so a test can say what ran when.

// wfCall is one activity execution (a retry is a new call).
type wfCall struct {
	kind   string // prepare, work, land
	task   string
	queue  string
	start  int // order of the start among every start and end
	end    int
	wfTime time.Time // the workflow clock at the start
	work   WorkInput
}

type wfFake struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	stories []Story

	// hold is how long (real time) every Land call takes: a landing that
	// lasts gives a queue that would land two at once the time to show it.
	hold time.Duration
	// overlapWork holds a Work call until a second one runs, so that
	// attempts that may overlap are seen to, however slow the machine; the
	// first hold that comes to its deadline ends the holding.
	overlapWork   bool
	overlapGaveUp bool
	// onPrepare, onWork and onLand replace the default results (prepared
	// on host h1, verified, landed); n counts this task's calls of the
	// activity, from 1. A nil result means the default.
	onPrepare func(in PrepareInput, n int) (*PrepareResult, error)
	onWork    func(in WorkInput, n int) (*WorkResult, error)
	onLand    func(in LandInput, n int) (*LandResult, error)

	mu                      sync.Mutex
	seq                     int
	calls                   []*wfCall
	working, maxWorking     int
	landing, maxLanding     int
	boardCalls              int
	counts                  map[string]int // kind/task -> calls
	finished                []FinishInput
	landed                  map[string]int // task -> successful landings
	limitedAt, limitedUntil time.Time      // the workflow time of the first limit, and its reset
	limitedSeq              int            // the order of the first limit among starts and ends
}

// wfNewEnv is a test environment with Build registered under its name
// (continue-as-new names it) and the activities mocked by a wfFake.
func wfNewEnv(t *testing.T, stories ...Story) (*testsuite.TestWorkflowEnvironment, *wfFake) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: BuildWorkflow})
	f := &wfFake{t: t, env: env, stories: stories, counts: map[string]int{}, landed: map[string]int{}}
	// The names must be registered before they can be mocked; the stubs
	// fail loudly if a mock is missing.
	notMocked := errors.New("activity not mocked")
	env.RegisterActivityWithOptions(func(context.Context, BoardInput) ([]Story, error) { return nil, notMocked }, activity.RegisterOptions{Name: ActivityBoard})
	env.RegisterActivityWithOptions(func(context.Context, PrepareInput) (PrepareResult, error) { return PrepareResult{}, notMocked }, activity.RegisterOptions{Name: ActivityPrepare})
	env.RegisterActivityWithOptions(func(context.Context, WorkInput) (WorkResult, error) { return WorkResult{}, notMocked }, activity.RegisterOptions{Name: ActivityWork})
	env.RegisterActivityWithOptions(func(context.Context, LandInput) (LandResult, error) { return LandResult{}, notMocked }, activity.RegisterOptions{Name: ActivityLand})
	env.RegisterActivityWithOptions(func(context.Context, CleanupInput) error { return notMocked }, activity.RegisterOptions{Name: ActivityCleanup})
	env.RegisterActivityWithOptions(func(context.Context, FinishInput) error { return notMocked }, activity.RegisterOptions{Name: ActivityFinish})
	env.OnActivity(ActivityBoard, mock.Anything, mock.Anything).Return(f.board)
	env.OnActivity(ActivityPrepare, mock.Anything, mock.Anything).Return(f.prepare)
	env.OnActivity(ActivityWork, mock.Anything, mock.Anything).Return(f.work)
	env.OnActivity(ActivityLand, mock.Anything, mock.Anything).Return(f.land)
	env.OnActivity(ActivityCleanup, mock.Anything, mock.Anything).Return(f.cleanup)
	env.OnActivity(ActivityFinish, mock.Anything, mock.Anything).Return(f.finishRun)
	return env, f
}

// wfInput is a build of the fake's stories on queue q.
func wfInput(workers int) BuildInput {
	return BuildInput{RunID: "r1", Target: "main", PRD: "prd.json", Workers: workers, LandAttempts: 3,
		Shared: "q", Integration: IntegrationQueue("q"), HostTimeout: time.Minute, Heartbeat: time.Minute}
}

func wfStories(ids ...string) []Story {
	var out []Story
	for _, id := range ids {
		out = append(out, Story{ID: id, Title: "story " + id})
	}
	return out
}

func (f *wfFake) begin(ctx context.Context, kind, task string) *wfCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	c := &wfCall{kind: kind, task: task, queue: activity.GetInfo(ctx).TaskQueue, start: f.seq, wfTime: f.env.Now()}
	f.calls = append(f.calls, c)
	f.counts[kind+"/"+task]++
	return c
}

func (f *wfFake) end(c *wfCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	c.end = f.seq
}

func (f *wfFake) count(kind, task string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[kind+"/"+task]
}

// ofKind returns the calls of one activity (and one task unless "").
func (f *wfFake) ofKind(kind, task string) []*wfCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*wfCall
	for _, c := range f.calls {
		if c.kind == kind && (task == "" || c.task == task) {
			out = append(out, c)
		}
	}
	return out
}

func (f *wfFake) board(_ context.Context, in BoardInput) ([]Story, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boardCalls++
	return f.stories, nil
}

func (f *wfFake) prepare(ctx context.Context, in PrepareInput) (PrepareResult, error) {
	c := f.begin(ctx, "prepare", in.Task)
	defer f.end(c)
	if f.onPrepare != nil {
		res, err := f.onPrepare(in, f.count("prepare", in.Task))
		if err != nil || res != nil {
			return deref(res), err
		}
	}
	return PrepareResult{Host: "h1", Base: "base-" + in.Task}, nil
}

func (f *wfFake) work(ctx context.Context, in WorkInput) (WorkResult, error) {
	c := f.begin(ctx, "work", in.Task)
	c.work = in
	defer f.end(c)
	f.mu.Lock()
	f.working++
	f.maxWorking = max(f.maxWorking, f.working)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.working--
		f.mu.Unlock()
	}()
	if f.overlapWork {
		f.awaitWorkOverlap()
	}
	if f.onWork != nil {
		res, err := f.onWork(in, f.count("work", in.Task))
		if res != nil && res.Outcome == WorkLimited {
			f.mu.Lock()
			if f.limitedAt.IsZero() {
				f.limitedAt, f.limitedUntil, f.limitedSeq = f.env.Now(), res.Until, f.seq
			}
			f.mu.Unlock()
		}
		if err != nil || res != nil {
			return deref(res), err
		}
	}
	return WorkResult{Outcome: WorkVerified, Head: "head-" + in.Task, Iterations: 1}, nil
}

func (f *wfFake) awaitWorkOverlap() {
	f.mu.Lock()
	gaveUp := f.overlapGaveUp
	f.mu.Unlock()
	if gaveUp {
		return
	}
	if !wait.Within(wait.Long, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.maxWorking >= 2 }) {
		f.mu.Lock()
		f.overlapGaveUp = true
		f.mu.Unlock()
	}
}

func (f *wfFake) land(ctx context.Context, in LandInput) (LandResult, error) {
	c := f.begin(ctx, "land", in.Task)
	defer f.end(c)
	f.mu.Lock()
	f.landing++
	f.maxLanding = max(f.maxLanding, f.landing)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.landing--
		f.mu.Unlock()
	}()
	time.Sleep(f.hold)
	res := &LandResult{Landed: true, Commit: "commit-" + in.Task}
	if f.onLand != nil {
		r, err := f.onLand(in, f.count("land", in.Task))
		if err != nil {
			return LandResult{}, err
		}
		if r != nil {
			res = r
		}
	}
	if res.Landed {
		f.mu.Lock()
		f.landed[in.Task]++
		f.mu.Unlock()
	}
	return *res, nil
}

func (f *wfFake) cleanup(ctx context.Context, in CleanupInput) error {
	f.end(f.begin(ctx, "cleanup", in.Task))
	return nil
}

func (f *wfFake) finishRun(ctx context.Context, in FinishInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished = append(f.finished, in)
	return nil
}

func deref[T any](p *T) T {
	if p == nil {
		var z T
		return z
	}
	return *p
}

// wfResult is the run's final state; the workflow must have completed
// without error.
func wfResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) *RunState {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the workflow failed: %v", err)
	}
	var st RunState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	// move records an edge the task machine refused: a workflow bug.
	for _, c := range st.Controls {
		if strings.Contains(c, "cannot take") {
			t.Errorf("the workflow tried an edge the task machine lacks: %s", c)
		}
	}
	return &st
}

// wfStatus queries the run's status, as `ralph status` does.
func wfStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) Status {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	if err != nil {
		t.Fatalf("query status: %v", err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func wfTask(st *RunState, id string) *Task {
	for _, t := range st.Tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// wfStates is "A=landed B=blocked ..." for failure messages.
func wfStates(st *RunState) string {
	s := ""
	for _, t := range st.Tasks {
		s += fmt.Sprintf("%s=%s ", t.ID, t.State)
	}
	return s
}

// wfUpdate sends a control Update and records how it ended.
type wfUpdate struct {
	accepted, rejected, completed bool
	err                           error
	result                        any
}

func wfSendUpdate(env *testsuite.TestWorkflowEnvironment, id string, cmd Command) *wfUpdate {
	u := &wfUpdate{}
	env.UpdateWorkflow(UpdateControl, id, &testsuite.TestUpdateCallback{
		OnAccept:   func() { u.accepted = true },
		OnReject:   func(err error) { u.rejected, u.err = true, err },
		OnComplete: func(r any, err error) { u.completed, u.result = true, r; u.err = err },
	}, cmd)
	return u
}
