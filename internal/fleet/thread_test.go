package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/workspace"
)

// threadRig is a checkout with one thread, t1, saved in a given phase, and
// a CheckoutHost whose RunThread is the real thread runner over it (as `ralph
// thread NAME` runs it), with a loop port the test scripts.
type threadRig struct {
	ws   *workspace.Workspace
	host *CheckoutHost
	t    thread.Thread
	loop *blockingLoop
	// ran records the commands the host ran, in order.
	ran []string
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func newThreadRig(t *testing.T, p thread.Phase) *threadRig {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the thread workflow tests but is not in PATH: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "init", "-q", "-b", "master")
	gitIn(t, dir, "config", "user.name", "Ralph Test")
	gitIn(t, dir, "config", "user.email", "ralph@example.com")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := ws.EnsureStateFiles(now); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "initial")
	th, err := thread.New("t1", "greet the user", thread.ModeMethodical, now)
	if err != nil {
		t.Fatal(err)
	}
	th.Phase = thread.PhaseState{Type: p}
	th.Baseline = &thread.Baseline{Branch: "master", CommitSHA: gitIn(t, dir, "rev-parse", "HEAD"), CapturedAt: now}
	if err := os.MkdirAll(thread.Dir(ws.Dir(), "t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := thread.AddSpec(ws.Dir(), "t1", []byte("# Greeting\n\n### [ ] US-001: Write hello\n- [ ] hello.txt says hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	th.SpecVersion = v
	if err := thread.Save(ws.Dir(), &th); err != nil {
		t.Fatal(err)
	}
	g := &threadRig{ws: ws, t: th, loop: &blockingLoop{started: make(chan struct{}, 1)}}
	g.host = &CheckoutHost{Name: "h1", RalphDir: ws.Dir(), Poll: 10 * time.Millisecond,
		RunThread: func(ctx context.Context, in ThreadCommandInput) error {
			g.ran = append(g.ran, in.Name)
			cur, err := thread.Load(ws.Dir(), in.ThreadID)
			if err != nil {
				return err
			}
			spec := func(name string) (agent.Spec, error) {
				return agent.Spec{Name: "fake", Headless: []string{"true"}}, nil
			}
			r := thread.NewRunner(ctx, ws, thread.Settings{}, cur, thread.Env{
				Events:       report.NewEmitter(thread.MachineName, "t1", 0, nil),
				Now:          func() time.Time { return now },
				WorkDir:      func() (string, error) { return dir, nil },
				ResolveAgent: spec,
				NamedAgent:   func(name, _ string) (agent.Spec, error) { return spec(name) },
				LoopOptions: func(_ context.Context, a agent.Spec, prd string, n int) (loop.Options, error) {
					return loop.Options{Agent: a, PRDPath: filepath.Join(dir, prd), MaxIterations: n}, nil
				},
				Ports: thread.Ports{Loop: g.loop},
			}, thread.Options{})
			return r.Do(in.Name, in.Command.Text, nil)
		}}
	return g
}

// blockingLoop is a loop that runs until its context ends, as a loop does
// that Ctrl+C (or a cancelled activity) stops.
type blockingLoop struct{ started chan struct{} }

func (b *blockingLoop) Build(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return loop.Report{RunID: "run-1", Iterations: 1}, loop.ErrInterrupted
}

func (g *threadRig) onDisk(t *testing.T) thread.Phase {
	t.Helper()
	th, err := thread.Load(g.ws.Dir(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	return th.Phase.Type
}

func (g *threadRig) env(s *testsuite.WorkflowTestSuite) *testsuite.TestWorkflowEnvironment {
	env := s.NewTestWorkflowEnvironment()
	g.host.Signal = func(_ context.Context, name string, p any) { env.SignalWorkflow(name, p) }
	RegisterHosted(env, g.host)
	return env
}

// update sends a checkpoint Update and reports how it ended: refused by
// the validator (rejected), or accepted with the status it completed with.
type updateResult = hostedUpdate[ThreadStatus]

func sendCheckpoint(env *testsuite.TestWorkflowEnvironment, id string, cmd ThreadCommand, res *updateResult) {
	res.send(env, UpdateCheckpoint, id, cmd)
}

func queryStatus(t *testing.T, env *testsuite.TestWorkflowEnvironment) ThreadStatus {
	t.Helper()
	return queryHosted[ThreadStatus](t, env)
}

// A checkpoint Update is taken only in the phase that allows it: commit
// sent to a thread under review is refused by the validator before it is
// accepted, naming what the phase allows, and nothing moves; approve is
// accepted, the host's runner takes it (and prepares the commit, which
// Approved does by itself), and the thread waits at the Commit checkpoint,
// which commit then passes... here abandon ends it, ending the workflow.
func TestThreadCheckpointRefusedInTheWrongPhaseAcceptedInTheRight(t *testing.T) {
	g := newThreadRig(t, thread.PhasePendingReview)
	var s testsuite.WorkflowTestSuite
	env := g.env(&s)
	var early ThreadStatus
	var commit, approve, abandon updateResult
	var afterRefusal, afterApprove ThreadStatus
	env.RegisterDelayedCallback(func() {
		early = queryStatus(t, env)
		sendCheckpoint(env, "u1", ThreadCommand{Verb: "commit", By: "ann"}, &commit)
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		afterRefusal = queryStatus(t, env)
		sendCheckpoint(env, "u2", ThreadCommand{Verb: "approve", By: "ann"}, &approve)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		afterApprove = queryStatus(t, env)
		sendCheckpoint(env, "u3", ThreadCommand{Verb: "abandon", By: "ann"}, &abandon)
	}, time.Hour)
	env.ExecuteWorkflow(ThreadWorkflow, ThreadInput{ThreadID: "t1", Placement: Placement{Host: "h1", Shared: "ralph"}, Thread: g.t})

	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not end after abandon")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	if early.Phase != thread.PhasePendingReview || early.WaitsFor != string(thread.CheckpointApprove) ||
		!slices.Contains(early.Allowed, "approve") || !slices.Contains(early.Verbs, "approve") || slices.Contains(early.Allowed, "commit") {
		t.Errorf("status under review: %+v", early)
	}
	if commit.rejected == nil || commit.accepted {
		t.Fatalf("commit in PendingReview was not refused by the validator: %+v", commit)
	}
	for _, want := range []string{"PendingReview", `"commit"`, "approve", "request-changes", "abandon"} {
		if !strings.Contains(commit.rejected.Error(), want) {
			t.Errorf("the refusal %q does not name %s", commit.rejected, want)
		}
	}
	if afterRefusal.Phase != thread.PhasePendingReview || len(afterRefusal.Commands) != 0 {
		t.Errorf("the refused commit changed the thread: %+v", afterRefusal)
	}
	if !approve.accepted || approve.err != nil || approve.status.Phase != thread.PhaseReadyToCommit {
		t.Fatalf("approve: %+v", approve)
	}
	if afterApprove.Phase != thread.PhaseReadyToCommit || afterApprove.WaitsFor != string(thread.CheckpointCommit) || !slices.Contains(afterApprove.Allowed, "commit") {
		t.Errorf("status after approve: %+v", afterApprove)
	}
	if _, err := os.Stat(filepath.Join(thread.Dir(g.ws.Dir(), "t1"), "commit_msg.txt")); err != nil {
		t.Errorf("the host's runner did not prepare the commit message: %v", err)
	}
	if !abandon.accepted || abandon.status.Phase != thread.PhaseAbandoned {
		t.Errorf("abandon: %+v", abandon)
	}
	if got := g.onDisk(t); got != thread.PhaseAbandoned {
		t.Errorf("thread on disk is %s, want Abandoned", got)
	}
	if !slices.Equal(g.ran, []string{"approve", "abandon"}) {
		t.Errorf("the host ran %q, want approve then abandon (a refused command never reaches it)", g.ran)
	}
	var final thread.Thread
	if err := env.GetWorkflowResult(&final); err != nil || final.Phase.Type != thread.PhaseAbandoned {
		t.Errorf("result %+v, %v", final.Phase, err)
	}
}

// The workflow begins with the start command's step, checked like an
// Update: a start the phase refuses fails the workflow at once, and the
// host runs nothing.
func TestThreadStartRefusedInTheWrongPhase(t *testing.T) {
	g := newThreadRig(t, thread.PhasePendingReview)
	var s testsuite.WorkflowTestSuite
	env := g.env(&s)
	env.ExecuteWorkflow(ThreadWorkflow, ThreadInput{ThreadID: "t1", Placement: Placement{Host: "h1", Shared: "ralph"}, Thread: g.t, Start: ThreadCommand{Verb: "start"}})
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), "does not accept \"start\"") {
		t.Fatalf("start in PendingReview: %v", err)
	}
	if len(g.ran) != 0 || g.onDisk(t) != thread.PhasePendingReview {
		t.Errorf("the host ran %q; thread is %s", g.ran, g.onDisk(t))
	}
}

// Pause while the loop runs on the host: the Update is accepted in
// Running (which the host's progress made the workflow's phase), it
// cancels the host's activity, the runner stops the loop as Ctrl+C does
// and the thread is Paused; resume runs the loop again.
func TestThreadPauseStopsTheLoopOnTheHost(t *testing.T) {
	g := newThreadRig(t, thread.PhasePaused)
	var s testsuite.WorkflowTestSuite
	env := g.env(&s)
	var pauseEarly, pause, abandon updateResult
	var running ThreadStatus
	env.RegisterDelayedCallback(func() {
		// Resume, then wait until the host's loop runs.
		sendCheckpoint(env, "resume", ThreadCommand{Verb: "resume"}, &updateResult{})
	}, time.Second)
	env.RegisterDelayedCallback(func() {
		<-g.loop.started
		running = queryStatus(t, env)
		sendCheckpoint(env, "p", ThreadCommand{Verb: "pause", By: "bob"}, &pause)
	}, 2*time.Second)
	env.RegisterDelayedCallback(func() {
		sendCheckpoint(env, "p2", ThreadCommand{Verb: "pause"}, &pauseEarly)
		sendCheckpoint(env, "a", ThreadCommand{Verb: "abandon"}, &abandon)
	}, time.Hour)
	env.ExecuteWorkflow(ThreadWorkflow, ThreadInput{ThreadID: "t1", Placement: Placement{Host: "h1", Shared: "ralph", Heartbeat: time.Second}, Thread: g.t})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if running.Working != "resume" {
		t.Errorf("status while the loop runs: %+v", running)
	}
	if !pause.accepted || pause.err != nil || pause.status.Phase != thread.PhasePaused {
		t.Errorf("pause: %+v", pause)
	}
	if pauseEarly.rejected == nil || !strings.Contains(pauseEarly.rejected.Error(), "Paused") {
		t.Errorf("a second pause of a paused thread: %+v", pauseEarly)
	}
	if !slices.Equal(g.ran, []string{"resume", "abandon"}) {
		t.Errorf("the host ran %q", g.ran)
	}
}

// devServer starts the Temporal dev server that scripts/install-temporal.sh
// builds, on a free port of 127.0.0.1, and returns a client of it.
func devServer(t *testing.T) client.Client {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", ".tools", "temporal", "temporal"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the Temporal dev server is not built at %s (%v): run `make temporal` (scripts/install-temporal.sh) once", bin, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--ui-port", "0", "--log-level", "warn")
	var log strings.Builder
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var c client.Client
	answers := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err = client.DialContext(ctx, client.Options{HostPort: addr, Namespace: "default",
			Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
		return err == nil
	}
	if !wait.Within(wait.Long, answers) {
		t.Fatalf("the dev server at %s did not answer in %s: %v\n%s", addr, wait.Long, err, log.String())
	}
	t.Cleanup(c.Close)
	return c
}

// On a real Temporal server, with a worker on the shared queue and one on
// the thread's host queue: the thread's workflow starts with resume, the
// host's loop runs and its progress makes the workflow's phase Running; a
// second start of the same thread is refused; a checkpoint the phase does
// not allow is refused with the validator's reason; pause is accepted,
// stops the loop through the heartbeat and leaves the thread Paused on the
// host; abandon ends the workflow.
func TestThreadOnDevServer(t *testing.T) {
	g := newThreadRig(t, thread.PhasePaused)
	c := devServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.host.Client = c
	shared := "ralph-thread-test"
	ws := worker.New(c, shared, worker.Options{})
	RegisterHosted(ws, nil)
	wh := worker.New(c, HostQueue(shared, "h1"), worker.Options{})
	RegisterHosted(wh, g.host)
	for _, w := range []worker.Worker{ws, wh} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	in := ThreadInput{ThreadID: "t1", Placement: Placement{Host: "h1", Shared: shared, Heartbeat: 2 * time.Second}, Thread: g.t, Start: ThreadCommand{Verb: "resume", By: "ann"}}
	run, err := StartThread(ctx, c, in)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.loop.started:
	case <-ctx.Done():
		t.Fatal("the host's loop never started")
	}
	var st ThreadStatus
	running := func() bool { st, err = QueryThread(ctx, c, "t1"); return err == nil && st.Phase == thread.PhaseRunning }
	if !wait.Within(wait.Long, running) {
		t.Fatalf("the workflow never saw the thread Running: %+v, %v", st, err)
	}
	if st.Working != "resume" || !slices.Equal(st.Allowed, []string{"abandon", "pause"}) {
		t.Errorf("status while the loop runs: %+v", st)
	}
	if _, err := StartThread(ctx, c, in); !errors.Is(err, ErrThreadRunning) || !strings.Contains(err.Error(),
		"thread t1 is workflow ralph-thread-t1; give it commands with `ralph thread approve|pause|abandon|... t1` (see it: ralph thread show t1)") {
		t.Errorf("a second start of the thread: %v, want ErrThreadRunning saying how to command it", err)
	}
	_, err = SendCheckpoint(ctx, c, "t1", ThreadCommand{Verb: "approve"})
	var refused *Refused
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "Running") {
		t.Fatalf("approve while the loop runs: %v", err)
	}
	began := time.Now()
	h, err := SendCheckpoint(ctx, c, "t1", ThreadCommand{Verb: "pause", By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Get(ctx, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("pause took %v from the Update to the thread Paused on the host", time.Since(began).Round(time.Millisecond))
	if st.Phase != thread.PhasePaused || g.onDisk(t) != thread.PhasePaused {
		t.Errorf("after pause: workflow %s, disk %s", st.Phase, g.onDisk(t))
	}
	_, err = SendCheckpoint(ctx, c, "t1", ThreadCommand{Verb: "commit"})
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "allowed in Paused: abandon, reconfigure, resume") {
		t.Errorf("commit in Paused: %v", err)
	}
	if h, err = SendCheckpoint(ctx, c, "t1", ThreadCommand{Verb: "abandon", By: "ann"}); err != nil {
		t.Fatal(err)
	}
	var final thread.Thread
	if err := run.Get(ctx, &final); err != nil || final.Phase.Type != thread.PhaseAbandoned {
		t.Fatalf("the workflow ended with %v, %v", final.Phase, err)
	}
	if g.onDisk(t) != thread.PhaseAbandoned {
		t.Errorf("thread on disk is %s", g.onDisk(t))
	}
}
