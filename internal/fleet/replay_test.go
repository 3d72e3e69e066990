package fleet

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Histories recorded on a real Temporal server (testdata/histories, by
// TestRecordHistories in wf_record_test.go) must replay on today's Build:
// a run in flight when a new ralph is deployed is carried on by the new
// code, which Temporal replays from the run's history. A change to what
// Build does (which activities or timers it starts, in which order, with
// which options) breaks that replay, so it must go through
// workflow.GetVersion, keeping the old path for old histories, as
// changeBoardAfterContinue in build.go does. After such a change, bump
// wfHistoryTag and run
//
//	go test ./internal/fleet -run TestRecordHistories -record
//
// It adds the histories of the new behaviour and leaves the old files as
// they are: they are what runs started by the old code look like, and the
// new code must still replay them. Never re-record an old file to make
// this test pass.

func wfHistories(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("%d recorded histories in testdata/histories, want at least 3: record them with go test ./internal/fleet -run TestRecordHistories -record", len(files))
	}
	return files
}

func wfReplay(fn any, file string) error {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: BuildWorkflow})
	quiet := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	return r.ReplayWorkflowHistoryFromJSONFile(quiet, file)
}

func TestReplayRecordedHistories(t *testing.T) {
	for _, f := range wfHistories(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := wfReplay(Build, f); err != nil {
				t.Errorf("Build no longer replays %s: %v\n(a change to Build must go through workflow.GetVersion; see the comment at the top of replay_test.go)", f, err)
			}
		})
	}
}

// wfExtraStep is Build changed the wrong way: it reads the task file a
// second time before anything else, without a version marker.
func wfExtraStep(ctx workflow.Context, in BuildInput) (*RunState, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: in.Integration, StartToCloseTimeout: time.Minute})
	var stories []Story
	if err := workflow.ExecuteActivity(actx, ActivityBoard, BoardInput{RunID: in.RunID, Target: in.Target, PRD: in.PRD}).Get(ctx, &stories); err != nil {
		return nil, err
	}
	return Build(ctx, in)
}

// wfOtherActivity is Build changed to call another activity first.
func wfOtherActivity(ctx workflow.Context, in BuildInput) (*RunState, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: in.Integration, StartToCloseTimeout: time.Minute})
	_ = workflow.ExecuteActivity(actx, ActivityFinish, FinishInput{RunID: in.RunID, Target: in.Target}).Get(ctx, nil)
	return Build(ctx, in)
}

// wfVersionedStep is the same change made the right way: behind
// workflow.GetVersion, old histories take the old path.
func wfVersionedStep(ctx workflow.Context, in BuildInput) (*RunState, error) {
	if workflow.GetVersion(ctx, "wf-test-board-twice", workflow.DefaultVersion, 1) == 1 {
		return wfExtraStep(ctx, in)
	}
	return Build(ctx, in)
}

// The replay test catches a change that breaks determinism, and lets the
// same change through when it is versioned.
func TestReplayFailsOnANonDeterministicChange(t *testing.T) {
	for _, f := range wfHistories(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			for name, fn := range map[string]any{"extra activity": wfExtraStep, "other activity": wfOtherActivity} {
				err := wfReplay(fn, f)
				if err == nil {
					t.Errorf("%s: replay succeeded, want a nondeterminism error", name)
				} else if !strings.Contains(err.Error(), "[TMPRL1100]") && !strings.Contains(strings.ToLower(err.Error()), "nondetermin") {
					// TMPRL1100 is the SDK's code of a nondeterminism error.
					t.Errorf("%s: replay failed with %v, want a nondeterminism error", name, err)
				}
			}
			if err := wfReplay(wfVersionedStep, f); err != nil {
				t.Errorf("the change behind workflow.GetVersion does not replay: %v", err)
			}
		})
	}
}
