package fleet

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// wfRecord regenerates nothing: it adds the recorded histories that are
// missing from testdata/histories (see replay_test.go for why old ones
// stay). Run it with
//
//	go test ./internal/fleet -run TestRecordHistories -record
var wfRecord = flag.Bool("record", false, "record the build workflow's missing histories in testdata/histories against the Temporal dev server (`make temporal` builds it)")

// wfHistoryTag names the behaviour the recorded histories show. Bump it
// when Build changes (behind workflow.GetVersion) and run -record: the
// new behaviour's histories are added next to the old ones.
const wfHistoryTag = "v1"

// wfRecorder runs Build on a real dev server with fake activities under
// the activities' names (no git, no agent): only the workflow's side of
// the history matters for replay.
type wfRecorder struct {
	stories []Story
	// work decides a Work call; n counts the task's calls from 1.
	work func(in WorkInput, n int) WorkResult
	hold time.Duration // how long every Work call takes

	mu    sync.Mutex
	calls map[string]int
}

func (r *wfRecorder) register(w worker.Registry) {
	w.RegisterActivityWithOptions(func(context.Context, BoardInput) ([]Story, error) { return r.stories, nil }, activity.RegisterOptions{Name: ActivityBoard})
	w.RegisterActivityWithOptions(func(_ context.Context, in PrepareInput) (PrepareResult, error) {
		return PrepareResult{Host: "h1", Base: "base-" + in.Task}, nil
	}, activity.RegisterOptions{Name: ActivityPrepare})
	w.RegisterActivityWithOptions(func(ctx context.Context, in WorkInput) (WorkResult, error) {
		r.mu.Lock()
		r.calls[in.Task]++
		n := r.calls[in.Task]
		r.mu.Unlock()
		select {
		case <-time.After(r.hold):
		case <-ctx.Done():
			return WorkResult{}, ctx.Err()
		}
		if r.work != nil {
			return r.work(in, n), nil
		}
		return WorkResult{Outcome: WorkVerified, Head: "head-" + in.Task, Iterations: 1}, nil
	}, activity.RegisterOptions{Name: ActivityWork})
	w.RegisterActivityWithOptions(func(_ context.Context, in LandInput) (LandResult, error) {
		return LandResult{Landed: true, Commit: "commit-" + in.Task}, nil
	}, activity.RegisterOptions{Name: ActivityLand})
	w.RegisterActivityWithOptions(func(context.Context, CleanupInput) error { return nil }, activity.RegisterOptions{Name: ActivityCleanup})
	w.RegisterActivityWithOptions(func(context.Context, FinishInput) error { return nil }, activity.RegisterOptions{Name: ActivityFinish})
}

// TestRecordHistories records a build to done, a build paused, hinted and
// resumed, and a build through a usage limit, each as the JSON history
// ReplayWorkflowHistoryFromJSONFile reads (what `temporal workflow show
// --output json` prints).
func TestRecordHistories(t *testing.T) {
	if !*wfRecord {
		t.Skip("records histories only when asked: go test ./internal/fleet -run TestRecordHistories -record")
	}
	c := devServer(t)
	scenarios := []struct {
		name    string
		rec     *wfRecorder
		workers int
		drive   func(ctx context.Context, t *testing.T, id string)
	}{
		{name: "build-done", workers: 2, rec: &wfRecorder{stories: func() []Story {
			s := wfStories("A", "B", "C")
			s[2].DependsOn = []string{"A"}
			return s
		}()}},
		{name: "pause-hint-resume", workers: 1, rec: &wfRecorder{stories: wfStories("A", "B", "C"), hold: 300 * time.Millisecond},
			drive: func(ctx context.Context, t *testing.T, id string) {
				if _, err := Send(ctx, c, id, Command{Kind: CmdPause, By: "ana"}); err != nil {
					t.Fatalf("pause: %v", err)
				}
				if err := c.SignalWorkflow(ctx, id, "", SignalControl, Command{Kind: CmdHint, Text: "use the fast path"}); err != nil {
					t.Fatalf("hint: %v", err)
				}
				time.Sleep(time.Second)
				if _, err := Send(ctx, c, id, Command{Kind: CmdResume, By: "ana"}); err != nil {
					t.Fatalf("resume: %v", err)
				}
			}},
		{name: "usage-limit", workers: 2, rec: &wfRecorder{stories: wfStories("A", "B"), work: func(in WorkInput, n int) WorkResult {
			if in.Task == "A" && n == 1 {
				return WorkResult{Outcome: WorkLimited, Until: time.Now().Add(2 * time.Second), Reason: "claude: usage limit", Iterations: 1}
			}
			return WorkResult{Outcome: WorkVerified, Head: "head-" + in.Task, Iterations: 1}
		}}},
	}
	dir := filepath.Join("testdata", "histories")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			path := filepath.Join(dir, sc.name+"."+wfHistoryTag+".json")
			if _, err := os.Stat(path); err == nil {
				t.Logf("kept %s: a recorded history is never replaced", path)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			shared := "rec-" + sc.name
			sc.rec.calls = map[string]int{}
			for _, q := range []string{shared, HostQueue(shared, "h1"), IntegrationQueue(shared)} {
				w := worker.New(c, q, worker.Options{})
				if q == shared {
					w.RegisterWorkflowWithOptions(Build, workflow.RegisterOptions{Name: BuildWorkflow})
				}
				sc.rec.register(w)
				if err := w.Start(); err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
			}
			in := BuildInput{RunID: sc.name, Target: "main", PRD: "prd.json", Workers: sc.workers, LandAttempts: 3,
				Shared: shared, Integration: IntegrationQueue(shared), HostTimeout: time.Minute, Heartbeat: time.Minute}
			run, err := Start(ctx, c, in)
			if err != nil {
				t.Fatal(err)
			}
			if sc.drive != nil {
				sc.drive(ctx, t, run.GetID())
			}
			var st RunState
			if err := run.Get(ctx, &st); err != nil {
				t.Fatal(err)
			}
			if st.Outcome != "complete" {
				t.Fatalf("the recorded run ended %q (%s)", st.Outcome, st.Reason)
			}
			hist := &historypb.History{}
			it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatal(err)
				}
				hist.Events = append(hist.Events, ev)
			}
			b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("recorded %s: %d events", path, len(hist.Events))
		})
	}
}
