package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/workspace"
)

// The host's activities run here in the SDK's activity test environment:
// no server, but activity.RecordHeartbeat, heartbeat details and
// ApplicationError types behave as on a worker. Every git operation is
// real: two clones of one repository (hosts "a" and "b") and a bare
// repository between them as the exchange remote.

const (
	hostRun = "r1"
	hostPRD = ".agents/tasks/prd.md"
)

// hostPRDText has three stories; US-001 and US-002 change the same line
// of shared.txt when a test asks them to conflict.
const hostPRDText = `# PRD

### [ ] US-001: first story
- [ ] works

### [ ] US-002: second story
- [ ] works

### [ ] US-003: third story
- [ ] works
`

// hostRig is a run's setup as ` + "`ralph build --engine temporal`" + ` leaves it
// before the workflow starts: repository a with the PRD committed, the
// run's tip pushed to the exchange as ralph/<run>/main, and a second
// clone b.
type hostRig struct {
	t          *testing.T
	a, b       *Host
	exchange   string
	tip        string // the run's tip on the exchange at the start
	aWT, bWT   string // the hosts' worktree roots
	behaviours map[string]hostBehaviour

	mu  sync.Mutex
	got []loop.Options // what the task loops were given, in order
}

// hostBehaviour is what a fake task loop does instead of an agent.
type hostBehaviour func(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error)

var hostGitEnv sync.Once

func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// hostGitOK runs git and says whether it succeeded (a ref that may be
// missing).
func hostGitOK(dir string, args ...string) (string, bool) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

func newHostRig(t *testing.T) *hostRig {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the host tests but is not in PATH: %v", err)
	}
	hostGitEnv.Do(func() {
		// The person's git config (signing, hooks, default branch) stays
		// out. Set once for the process, not with t.Setenv, so the tests
		// run in parallel: each has its own repositories.
		os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
		os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	})
	t.Parallel()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	aDir, bDir, exchange := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "exchange.git")
	if err := os.MkdirAll(filepath.Join(aDir, ".agents", "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostGit(t, aDir, "init", "-q", "-b", "main")
	hostGit(t, aDir, "config", "user.name", "Ralph Test")
	hostGit(t, aDir, "config", "user.email", "ralph@example.com")
	hostWrite(t, filepath.Join(aDir, hostPRD), hostPRDText)
	hostWrite(t, filepath.Join(aDir, "shared.txt"), "one\ntwo\nthree\n")
	wsA, err := workspace.Open(ctx, aDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wsA.EnsureStateFiles(time.Now()); err != nil {
		t.Fatal(err)
	}
	hostGit(t, aDir, "add", "-A")
	hostGit(t, aDir, "commit", "-q", "-m", "initial")
	hostGit(t, base, "init", "-q", "--bare", exchange)
	hostGit(t, aDir, "push", "-q", exchange, "HEAD:refs/heads/"+TipBranch(hostRun, "main"))
	hostGit(t, base, "clone", "-q", aDir, bDir)
	hostGit(t, bDir, "config", "user.name", "Ralph Test")
	hostGit(t, bDir, "config", "user.email", "ralph@example.com")
	wsB, err := workspace.Open(ctx, bDir)
	if err != nil {
		t.Fatal(err)
	}
	r := &hostRig{t: t, exchange: exchange, aWT: filepath.Join(base, "wt-a"), bWT: filepath.Join(base, "wt-b"), behaviours: map[string]hostBehaviour{}}
	r.tip = hostGit(t, aDir, "rev-parse", "HEAD")
	r.a = r.host("a", wsA, r.aWT)
	r.b = r.host("b", wsB, r.bWT)
	return r
}

func (r *hostRig) host(name string, ws *workspace.Workspace, wt string) *Host {
	return &Host{
		Name: name, WS: ws, Exchange: r.exchange, WorktreeRoot: wt,
		HeartbeatEvery: 5 * time.Millisecond,
		LoopOptions: func(*workspace.Workspace, tasks.Source) loop.Options {
			return loop.Options{MaxRetries: 2}
		},
		Build: r.build,
	}
}

// build stands for the task loop: by default what a loop does once its
// agent verified the story (the story's file, the story ticked in the
// worktree's PRD, a line in progress.md, one commit on the branch).
func (r *hostRig) build(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
	r.mu.Lock()
	r.got = append(r.got, opts)
	do := r.behaviours[opts.OnlyStory]
	r.mu.Unlock()
	if do != nil {
		return do(ctx, ws, opts)
	}
	return r.complete(func(dir string) {
		hostWrite(r.t, filepath.Join(dir, strings.ToLower(opts.OnlyStory)+".txt"), opts.OnlyStory+"\n")
	})(ctx, ws, opts)
}

// complete is a loop that verifies its story after edit.
func (r *hostRig) complete(edit func(dir string)) hostBehaviour {
	return func(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
		edit(ws.Root)
		if err := opts.Source.MarkDone(opts.OnlyStory, "", time.Now()); err != nil {
			return loop.Report{}, err
		}
		f, err := os.OpenFile(filepath.Join(ws.Root, ".ralph", "progress.md"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return loop.Report{}, err
		}
		fmt.Fprintf(f, "%s done by its worker\n", opts.OnlyStory)
		f.Close()
		hostGit(r.t, ws.Root, "add", "-A")
		hostGit(r.t, ws.Root, "commit", "-q", "-m", opts.OnlyStory+": work")
		return loop.Report{Outcome: loop.OutcomeComplete, Iterations: 1}, nil
	}
}

func (r *hostRig) on(task string, do hostBehaviour) {
	r.mu.Lock()
	r.behaviours[task] = do
	r.mu.Unlock()
}

func (r *hostRig) lastOptions() loop.Options {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		r.t.Fatal("no task loop ran")
	}
	return r.got[len(r.got)-1]
}

// hostExec runs one activity of h in a fresh activity test environment
// (setup adjusts it first) and decodes its result.
func hostExec[T any](t *testing.T, fn any, in any, setup ...func(*testsuite.TestActivityEnvironment)) (T, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(fn)
	for _, f := range setup {
		f(env)
	}
	var out T
	val, err := env.ExecuteActivity(fn, in)
	if err != nil {
		return out, err
	}
	if val != nil && val.HasValue() {
		if err := val.Get(&out); err != nil {
			t.Fatalf("decoding the activity's result: %v", err)
		}
	}
	return out, err
}

func hostWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exchangeRef is where branch is on the exchange, "" when it is not.
func (r *hostRig) exchangeRef(branch string) string {
	out, ok := hostGitOK(r.exchange, "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	if !ok {
		return ""
	}
	return out
}

func (r *hostRig) exchangeTip() string { return r.exchangeRef(TipBranch(hostRun, "main")) }

// prepare and work run a task's attempt on h to a verified branch.
func (r *hostRig) prepare(h *Host, task string, attempt int) PrepareResult {
	r.t.Helper()
	res, err := hostExec[PrepareResult](r.t, h.Prepare, PrepareInput{RunID: hostRun, Target: "main", Task: task, Attempt: attempt})
	if err != nil {
		r.t.Fatalf("Prepare %s on %s: %v", task, h.Name, err)
	}
	return res
}

func (r *hostRig) work(h *Host, task string, attempt int, setup ...func(*testsuite.TestActivityEnvironment)) (WorkResult, error) {
	r.t.Helper()
	return hostExec[WorkResult](r.t, h.Work, WorkInput{RunID: hostRun, Target: "main", PRD: hostPRD, Task: task, Attempt: attempt, Feedback: "land it this time"}, setup...)
}

// verified prepares and works task on h and returns what Land needs.
func (r *hostRig) verified(h *Host, task string) LandInput {
	r.t.Helper()
	prep := r.prepare(h, task, 1)
	res, err := r.work(h, task, 1)
	if err != nil || res.Outcome != WorkVerified {
		r.t.Fatalf("Work %s on %s = %+v, %v; want verified", task, h.Name, res, err)
	}
	return LandInput{RunID: hostRun, Target: "main", PRD: hostPRD, Task: task, Title: task + " story",
		Base: prep.Base, Head: res.Head, Attempt: 1, Host: h.Name, Token: "land-" + hostRun + "-" + task + "-1"}
}

func (r *hostRig) land(h *Host, in LandInput) LandResult {
	r.t.Helper()
	res, err := hostExec[LandResult](r.t, h.Land, in)
	if err != nil {
		r.t.Fatalf("Land %s: %v", in.Task, err)
	}
	return res
}

// hostEvents reads a host's journal.
func hostEvents(t *testing.T, h *Host) []report.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(h.WS.Dir(), "events.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []report.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev report.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("a journal line is not an event: %v: %s", err, sc.Text())
		}
		out = append(out, ev)
	}
	return out
}

func hostAppErr(t *testing.T, err error, wantType string) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("error = %v; want an ApplicationError of type %s", err, wantType)
	}
	if app.Type() != wantType || !app.NonRetryable() {
		t.Fatalf("ApplicationError type %q, non-retryable %v; want type %q, non-retryable: %v", app.Type(), app.NonRetryable(), wantType, err)
	}
	return app
}

// Board reads the stories at the run's tip on the exchange: a person's
// uncommitted edit of the task file in the checkout is not the run's, and
// a story ticked on the tip is done.
func TestHostBoardReadsTheTipOnTheExchange(t *testing.T) {
	r := newHostRig(t)
	// The person edits the task file in a without committing it.
	local := filepath.Join(r.a.WS.Root, hostPRD)
	hostWrite(t, local, strings.Replace(hostPRDText, "[ ] US-001", "[x] US-001", 1)+"\n### [ ] US-009: only local\n")
	stories, err := hostExec[[]Story](t, r.a.Board, BoardInput{RunID: hostRun, Target: "main", PRD: hostPRD})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range stories {
		ids = append(ids, s.ID)
		if s.Done {
			t.Errorf("%s is done on the board, but not at the run's tip", s.ID)
		}
	}
	if !slices.Equal(ids, []string{"US-001", "US-002", "US-003"}) {
		t.Fatalf("Board = %v; want the tip's US-001..US-003, not the checkout's working copy", ids)
	}
	if stories[1].Title != "second story" {
		t.Errorf("US-002's title = %q", stories[1].Title)
	}

	// The tip moves on the exchange (another host landed US-002).
	other := filepath.Join(t.TempDir(), "other")
	hostGit(t, r.exchange, "clone", "-q", "-b", TipBranch(hostRun, "main"), r.exchange, other)
	hostWrite(t, filepath.Join(other, hostPRD), strings.Replace(hostPRDText, "[ ] US-002", "[x] US-002", 1))
	hostGit(t, other, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q", "-am", "US-002 landed")
	hostGit(t, other, "push", "-q", "origin", "HEAD:refs/heads/"+TipBranch(hostRun, "main"))
	stories, err = hostExec[[]Story](t, r.a.Board, BoardInput{RunID: hostRun, Target: "main", PRD: hostPRD})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stories {
		if (s.ID == "US-002") != s.Done {
			t.Errorf("after the tip moved, %s done = %v; want only US-002 done", s.ID, s.Done)
		}
	}
}

// Prepare on host b makes the task's worktree under b's root, on the
// task's branch at the tip; a second attempt after the tip moved starts
// from the new tip and keeps the first attempt's commit and its
// uncommitted files on refs.
func TestHostPrepareCutsFromTheTipAndKeepsEarlierAttempts(t *testing.T) {
	r := newHostRig(t)
	res := r.prepare(r.b, "US-001", 1)
	if res.Host != "b" || res.Base != r.tip {
		t.Fatalf("Prepare = %+v; want host b and base %s (the exchange tip)", res, r.tip)
	}
	path := filepath.Join(r.bWT, hostRun, "US-001")
	if got := hostGit(t, path, "rev-parse", "--show-toplevel"); got != path {
		t.Fatalf("the worktree is at %s; want %s under b's worktree root", got, path)
	}
	if br := hostGit(t, path, "rev-parse", "--abbrev-ref", "HEAD"); br != landing.Branch(hostRun, "US-001") {
		t.Errorf("the worktree is on %s; want %s", br, landing.Branch(hostRun, "US-001"))
	}
	if head := hostGit(t, path, "rev-parse", "HEAD"); head != r.tip {
		t.Errorf("the worktree is at %s; want the tip %s", head, r.tip)
	}
	if _, err := os.Stat(filepath.Join(r.aWT, hostRun, "US-001")); err == nil {
		t.Error("host a got a worktree for a task prepared on b")
	}

	// The first attempt committed something and left a file uncommitted.
	hostWrite(t, filepath.Join(path, "first.txt"), "first attempt\n")
	hostGit(t, path, "add", "first.txt")
	hostGit(t, path, "commit", "-q", "-m", "first attempt")
	first := hostGit(t, path, "rev-parse", "HEAD")
	hostWrite(t, filepath.Join(path, "wip.txt"), "not committed\n")

	// Meanwhile another task landed: the tip moved.
	hostWrite(t, filepath.Join(r.a.WS.Root, "landed.txt"), "landed\n")
	hostGit(t, r.a.WS.Root, "add", "landed.txt")
	hostGit(t, r.a.WS.Root, "commit", "-q", "-m", "US-003 landed")
	hostGit(t, r.a.WS.Root, "push", "-q", r.exchange, "HEAD:refs/heads/"+TipBranch(hostRun, "main"))
	newTip := r.exchangeTip()

	res = r.prepare(r.b, "US-001", 2)
	if res.Host != "b" || res.Base != newTip {
		t.Fatalf("second Prepare = %+v; want host b and base %s (the new tip)", res, newTip)
	}
	if head := hostGit(t, path, "rev-parse", "HEAD"); head != newTip {
		t.Errorf("attempt 2 starts at %s; want the new tip %s", head, newTip)
	}
	if br := hostGit(t, path, "rev-parse", "--abbrev-ref", "HEAD"); br != landing.Branch(hostRun, "US-001") {
		t.Errorf("attempt 2 is on %s; want %s", br, landing.Branch(hostRun, "US-001"))
	}
	for _, f := range []string{"first.txt", "wip.txt"} {
		if _, err := os.Stat(filepath.Join(path, f)); err == nil {
			t.Errorf("attempt 2 starts with %s of attempt 1 in its worktree", f)
		}
	}
	kept := "refs/ralph/attempts/" + hostRun + "/US-001/1"
	if got, _ := hostGitOK(r.b.WS.Root, "rev-parse", kept+"^"); got != first {
		t.Errorf("%s^ = %q; want attempt 1's commit %s", kept, got, first)
	}
	if got, ok := hostGitOK(r.b.WS.Root, "show", kept+":wip.txt"); !ok || got != "not committed" {
		t.Errorf("attempt 1's uncommitted wip.txt is not kept on %s: %q", kept, got)
	}
}

// A verified attempt's branch is on the exchange at the head Work
// returns; the loop was given the task, a home of its own per attempt,
// the feedback, and a limit wait that ends the activity at once.
func TestHostWorkVerifiedPushesTheBranch(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-002", 1)
	res, err := r.work(r.b, "US-002", 1)
	if err != nil || res.Outcome != WorkVerified || res.Iterations != 1 {
		t.Fatalf("Work = %+v, %v; want verified after 1 iteration", res, err)
	}
	path := filepath.Join(r.bWT, hostRun, "US-002")
	if head := hostGit(t, path, "rev-parse", "HEAD"); res.Head != head || head == r.tip {
		t.Errorf("Head = %s; want the worktree's new commit %s", res.Head, head)
	}
	if got := r.exchangeRef(landing.Branch(hostRun, "US-002")); got != res.Head {
		t.Errorf("the exchange has %s at %q; want %s", landing.Branch(hostRun, "US-002"), got, res.Head)
	}
	opts := r.lastOptions()
	if opts.OnlyStory != "US-002" {
		t.Errorf("the loop worked on %q; want only US-002", opts.OnlyStory)
	}
	if want := filepath.Join(r.b.WS.Dir(), "runs", hostRun, "workers", "US-002", "1"); opts.Home != want {
		t.Errorf("the loop's home is %s; want %s", opts.Home, want)
	}
	if opts.SharedHome != r.b.WS.Dir() {
		t.Errorf("the loop's shared home is %s; want the host's %s", opts.SharedHome, r.b.WS.Dir())
	}
	if opts.MaxLimitWait <= 0 || opts.MaxLimitWait > time.Millisecond {
		t.Errorf("MaxLimitWait = %v; want > 0 and tiny (the workflow waits out limits on a timer)", opts.MaxLimitWait)
	}
	if opts.Feedback != "land it this time" {
		t.Errorf("Feedback = %q; want the WorkInput's", opts.Feedback)
	}
	if opts.MaxIterations != 3 {
		t.Errorf("MaxIterations = %d; want the host's retries + 1 = 3", opts.MaxIterations)
	}
	if want := filepath.Join(path, filepath.FromSlash(hostPRD)); opts.PRDPath != want {
		t.Errorf("the loop's PRD is %s; want the worktree's %s", opts.PRDPath, want)
	}
}

// Every agent at a usage limit ends the attempt with the earliest reset
// of the host's cooldowns, for the workflow's durable timer.
func TestHostWorkLimitedReturnsTheEarliestReset(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	soon := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	r.on("US-001", func(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
		cd := runkit.OpenCooldowns(r.b.WS.Dir())
		if err := cd.Set("claude", soon.Add(3*time.Hour), "limit"); err != nil {
			return loop.Report{}, err
		}
		if err := cd.Set("codex", soon, "limit"); err != nil {
			return loop.Report{}, err
		}
		return loop.Report{Outcome: loop.OutcomeError, Iterations: 1}, fmt.Errorf("iteration 1: %w", loop.ErrAllLimited)
	})
	res, err := r.work(r.b, "US-001", 1)
	if err != nil {
		t.Fatalf("Work: %v; a usage limit is an outcome, not a failure", err)
	}
	if res.Outcome != WorkLimited || !res.Until.Equal(soon) {
		t.Fatalf("Work = %+v; want limited until %s (codex's reset, the earliest)", res, soon)
	}
	if r.exchangeRef(landing.Branch(hostRun, "US-001")) != "" {
		t.Error("a limited attempt pushed its branch")
	}
}

// An agent that cannot run at all fails the activity with a type no retry
// can fix.
func TestHostWorkAgentCannotRunIsNotRetried(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	r.on("US-001", func(context.Context, *workspace.Workspace, loop.Options) (loop.Report, error) {
		return loop.Report{}, fmt.Errorf("iteration 1: %w", &agent.EnvError{Agent: "claude", Kind: agent.EnvAuth, Detail: "401", Hint: "claude login"})
	})
	_, err := r.work(r.b, "US-001", 1)
	hostAppErr(t, err, ErrTypeAgentCannotRun)
}

// A cancellation (it reaches the activity through its heartbeat) stops
// the task's loop: the attempt ends as cancelled, nothing is pushed.
func TestHostWorkCancelStopsTheLoop(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	started := make(chan struct{})
	r.on("US-001", func(ctx context.Context, _ *workspace.Workspace, _ loop.Options) (loop.Report, error) {
		close(started)
		select {
		case <-ctx.Done():
			return loop.Report{Outcome: loop.OutcomeInterrupted, Iterations: 1}, loop.ErrInterrupted
		case <-time.After(wait.Long):
			return loop.Report{}, errors.New("the loop was never cancelled")
		}
	})
	// The test environment cannot cancel an activity itself; the
	// worker's background context is where the activity's context
	// comes from, so cancelling it is what a cancellation does.
	bg, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-started; cancel() }()
	res, err := r.work(r.b, "US-001", 1, func(env *testsuite.TestActivityEnvironment) {
		env.SetWorkerOptions(worker.Options{BackgroundActivityContext: bg})
	})
	if err == nil {
		t.Fatalf("Work = %+v; want it to end as cancelled", res)
	}
	// On a worker the SDK reports it as a CanceledError; the test
	// environment wraps the context's error as it is. The loop itself
	// ended by its context, not its fallback: that, not a bound on the
	// time it took, shows the cancellation reached it.
	if !temporal.IsCanceledError(err) && !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Errorf("Work's error = %v; want a cancellation", err)
	}
	if r.exchangeRef(landing.Branch(hostRun, "US-001")) != "" {
		t.Error("a cancelled attempt pushed its branch")
	}
}

// A blocked loop is an outcome with its reason.
func TestHostWorkBlockedSaysWhy(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	r.on("US-001", func(context.Context, *workspace.Workspace, loop.Options) (loop.Report, error) {
		return loop.Report{Outcome: loop.OutcomeMaxIterations, Iterations: 3, Reason: "the tests still fail after 3 attempts"}, nil
	})
	res, err := r.work(r.b, "US-001", 1)
	if err != nil || res.Outcome != WorkBlocked || res.Reason != "the tests still fail after 3 attempts" || res.Iterations != 3 {
		t.Fatalf("Work = %+v, %v; want blocked with the loop's reason", res, err)
	}
}

// Work on a host that lost the task's worktree fails for good: the
// workflow prepares the task again, elsewhere if need be.
func TestHostWorkWorktreeGone(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	if err := os.RemoveAll(filepath.Join(r.bWT, hostRun, "US-001")); err != nil {
		t.Fatal(err)
	}
	_, err := r.work(r.b, "US-001", 1)
	hostAppErr(t, err, ErrTypeWorktreeGone)
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.got); n != 0 {
		t.Errorf("a loop ran %d times without a worktree", n)
	}
}

// A running attempt heartbeats its progress, and a retry that finds the
// details of a lost attempt says so in the host's journal.
func TestHostWorkHeartbeatsAndJournalsARetry(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	slow := r.complete(func(dir string) { hostWrite(t, filepath.Join(dir, "us-001.txt"), "x\n") })
	var mu sync.Mutex
	var beats []Heartbeat
	r.on("US-001", func(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
		opts.Sink.Emit(report.Event{Kind: report.KindAgentOutput, Text: "twelve bytes"})
		// The loop runs until the attempt has heartbeat: not for a guess
		// at several heartbeat periods.
		if !wait.Within(wait.Long, func() bool { mu.Lock(); defer mu.Unlock(); return len(beats) > 0 }) {
			t.Error("Work never heartbeat while its loop ran: a dead host would go unnoticed until the attempt's timeout")
		}
		return slow(ctx, ws, opts)
	})
	res, err := r.work(r.b, "US-001", 1, func(env *testsuite.TestActivityEnvironment) {
		env.SetHeartbeatDetails(Heartbeat{Iteration: 4, LogBytes: 4096})
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
			var hb Heartbeat
			if d.Get(&hb) == nil {
				mu.Lock()
				beats = append(beats, hb)
				mu.Unlock()
			}
		})
	})
	if err != nil || res.Outcome != WorkVerified {
		t.Fatalf("Work = %+v, %v; want verified", res, err)
	}
	mu.Lock()
	n := len(beats)
	mu.Unlock()
	if n == 0 {
		t.Fatal("Work never heartbeat: a dead host would go unnoticed until the attempt's timeout")
	}
	var retried bool
	for _, ev := range hostEvents(t, r.b) {
		if strings.Contains(ev.Text, "retried after its worker was lost") && ev.Task == "US-001" && ev.Worker == "b" {
			retried = true
			if !strings.Contains(ev.Text, "iteration 4") || !strings.Contains(ev.Text, "4096 bytes") {
				t.Errorf("the retry event does not say where the lost attempt was: %q", ev.Text)
			}
		}
	}
	if !retried {
		t.Error("b's journal does not say the attempt was retried after its worker was lost")
	}
}

// A retry by the very worker process that ran the last attempt does not
// say its worker was lost: it is alive, and says so.
func TestHostWorkRetryByALiveWorker(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	r.on("US-001", r.complete(func(dir string) { hostWrite(t, filepath.Join(dir, "us-001.txt"), "x\n") }))
	res, err := r.work(r.b, "US-001", 1, func(env *testsuite.TestActivityEnvironment) {
		env.SetHeartbeatDetails(Heartbeat{Iteration: 2, LogBytes: 100, Worker: r.b.identity()})
	})
	if err != nil || res.Outcome != WorkVerified {
		t.Fatalf("Work = %+v, %v; want verified", res, err)
	}
	var said string
	for _, ev := range hostEvents(t, r.b) {
		if strings.HasPrefix(ev.Text, "↻ retried") || strings.Contains(ev.Text, "] ↻ retried") {
			said = ev.Text
		}
	}
	if strings.Contains(said, "lost") || !strings.Contains(said, "its worker b is alive") {
		t.Errorf("the retry by the live worker says %q; want it alive, not lost", said)
	}
}

// A first attempt (no heartbeat details) is not journaled as a retry.
func TestHostWorkFirstAttemptIsNoRetry(t *testing.T) {
	r := newHostRig(t)
	r.prepare(r.b, "US-001", 1)
	if _, err := r.work(r.b, "US-001", 1); err != nil {
		t.Fatal(err)
	}
	for _, ev := range hostEvents(t, r.b) {
		if strings.Contains(ev.Text, "retried") {
			t.Errorf("a first attempt journaled %q", ev.Text)
		}
	}
}

// A verified task lands on the exchange's tip as one commit with its
// trailers and token, the PRD ticked and progress.md a line longer; a's
// main follows; the task branch is gone; nothing but ralph/ branches is
// on the exchange. Landing again with the same token (a retry after a
// crash) finds the landing and makes no second commit.
func TestHostLandOneCommitOnceAndOnlyRalphBranches(t *testing.T) {
	r := newHostRig(t)
	in := r.verified(r.b, "US-001")
	progressBefore := hostGit(t, r.a.WS.Root, "show", r.tip+":.ralph/progress.md")
	res := r.land(r.a, in)
	if !res.Landed || res.Commit == "" {
		t.Fatalf("Land = %+v; want landed", res)
	}
	tip := r.exchangeTip()
	if tip != res.Commit {
		t.Fatalf("the exchange tip is %s; want the landing commit %s", tip, res.Commit)
	}
	if parent := hostGit(t, r.a.WS.Root, "rev-parse", tip+"^"); parent != r.tip {
		t.Errorf("the landing's parent is %s; want the old tip %s (one commit per task)", parent, r.tip)
	}
	msg := hostGit(t, r.a.WS.Root, "log", "-1", "--format=%B", tip)
	for _, want := range []string{"US-001: US-001 story", "Ralph-Task: US-001", "Ralph-Run: " + hostRun, "Ralph-Commit: " + in.Token} {
		if !strings.Contains(msg, want) {
			t.Errorf("the landing's message lacks %q:\n%s", want, msg)
		}
	}
	if got := hostGit(t, r.a.WS.Root, "show", tip+":us-001.txt"); got != "US-001" {
		t.Errorf("us-001.txt at the tip = %q", got)
	}
	prd := hostGit(t, r.a.WS.Root, "show", tip+":"+hostPRD)
	if !strings.Contains(prd, "### [x] US-001") || !strings.Contains(prd, "### [ ] US-002") {
		t.Errorf("the PRD at the tip does not have US-001 (alone) checked:\n%s", prd)
	}
	progress := hostGit(t, r.a.WS.Root, "show", tip+":.ralph/progress.md")
	added := strings.TrimPrefix(progress, progressBefore)
	if added == progress || !strings.Contains(added, "US-001") {
		t.Errorf("progress.md at the tip has no line for US-001 added:\n%s", progress)
	}
	if strings.Contains(progress, "done by its worker") {
		t.Error("the worker's own progress.md edit landed too; the queue writes the task's line")
	}
	if main := hostGit(t, r.a.WS.Root, "rev-parse", "main"); main != tip {
		t.Errorf("a's main is %s; want it fast-forwarded to %s", main, tip)
	}
	if _, err := os.Stat(filepath.Join(r.a.WS.Root, "us-001.txt")); err != nil {
		t.Errorf("a's checkout of main lacks the landed file: %v", err)
	}
	if got := r.exchangeRef(landing.Branch(hostRun, "US-001")); got != "" {
		t.Errorf("the task branch is still on the exchange at %s", got)
	}
	for _, ref := range strings.Fields(hostGit(t, r.exchange, "for-each-ref", "--format=%(refname)", "refs/heads/")) {
		if !strings.HasPrefix(ref, "refs/heads/ralph/") {
			t.Errorf("the exchange has %s: ralph pushes only ralph/ branches without push_target", ref)
		}
	}

	// The landing activity is retried after a crash that lost its result.
	again := r.land(r.a, in)
	if !again.Landed || again.Commit != res.Commit {
		t.Fatalf("second Land = %+v; want landed at the same commit %s", again, res.Commit)
	}
	if n := hostGit(t, r.a.WS.Root, "rev-list", "--count", r.tip+".."+r.exchangeTip()); n != "1" {
		t.Errorf("%s commits on the tip after landing once and retrying; want 1", n)
	}
}

// A landing whose host died after the exchange's tip moved, before a's
// main followed and the task branch was deleted: the retry finds the
// landing by its token and finishes the job without a second commit.
func TestHostLandRetryAfterCrashFinishesTheLanding(t *testing.T) {
	r := newHostRig(t)
	in := r.verified(r.b, "US-001")
	head := r.exchangeRef(landing.Branch(hostRun, "US-001"))
	res := r.land(r.a, in)
	if !res.Landed {
		t.Fatalf("Land = %+v", res)
	}
	// Back to the moment of the crash.
	hostGit(t, r.a.WS.Root, "reset", "-q", "--hard", r.tip)
	hostGit(t, r.exchange, "update-ref", "refs/heads/"+landing.Branch(hostRun, "US-001"), head)

	again := r.land(r.a, in)
	if !again.Landed || again.Commit != res.Commit || r.exchangeTip() != res.Commit {
		t.Fatalf("retried Land = %+v, exchange tip %s; want landed at %s", again, r.exchangeTip(), res.Commit)
	}
	if main := hostGit(t, r.a.WS.Root, "rev-parse", "main"); main != res.Commit {
		t.Errorf("a's main is %s after the retry; want %s", main, res.Commit)
	}
	if got := r.exchangeRef(landing.Branch(hostRun, "US-001")); got != "" {
		t.Errorf("the task branch is left on the exchange at %s after the retried landing", got)
	}
}

// A task branch deleted from the exchange by hand sends the task back
// (the workflow prepares it again) instead of failing the landing for
// good; the tip stays.
func TestHostLandBranchGoneSendsBack(t *testing.T) {
	r := newHostRig(t)
	in := r.verified(r.b, "US-001")
	hostGit(t, r.exchange, "update-ref", "-d", "refs/heads/"+landing.Branch(hostRun, "US-001"))
	res := r.land(r.a, in)
	if res.Landed || !strings.Contains(res.Reason, landing.Branch(hostRun, "US-001")) {
		t.Fatalf("Land = %+v; want sent back, naming the missing branch", res)
	}
	if tip := r.exchangeTip(); tip != r.tip {
		t.Errorf("the tip moved to %s without the task's branch", tip)
	}
}

// Tasks are prepared side by side on one host (its worker runs several
// activities at once): each gets its worktree and branch.
func TestHostPrepareSideBySide(t *testing.T) {
	r := newHostRig(t)
	ids := []string{"US-001", "US-002", "US-003", "US-004", "US-005", "US-006"}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			_, errs[i] = hostExec[PrepareResult](t, r.b.Prepare, PrepareInput{RunID: hostRun, Target: "main", Task: id, Attempt: 1})
		})
	}
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil {
			t.Errorf("Prepare %s beside the others: %v", id, errs[i])
			continue
		}
		if br := hostGit(t, filepath.Join(r.bWT, hostRun, id), "rev-parse", "--abbrev-ref", "HEAD"); br != landing.Branch(hostRun, id) {
			t.Errorf("%s's worktree is on %s", id, br)
		}
	}
}

// With push_target the exchange also gets the target branch.
func TestHostLandPushTarget(t *testing.T) {
	r := newHostRig(t)
	r.a.PushTarget = true
	res := r.land(r.a, r.verified(r.b, "US-001"))
	if !res.Landed {
		t.Fatalf("Land = %+v", res)
	}
	if got := r.exchangeRef("main"); got != res.Commit {
		t.Errorf("the exchange's main is %q; want the landing %s with push_target", got, res.Commit)
	}
}

// Two tasks changing the same line: the second is sent back with the
// conflicting file and the tip stays where the first landed.
func TestHostLandConflictSendsBack(t *testing.T) {
	r := newHostRig(t)
	for _, task := range []string{"US-001", "US-002"} {
		r.on(task, r.complete(func(dir string) {
			hostWrite(t, filepath.Join(dir, "shared.txt"), "one\n"+task+" was here\nthree\n")
		}))
	}
	first := r.verified(r.b, "US-001")
	second := r.verified(r.b, "US-002")
	landed := r.land(r.a, first)
	if !landed.Landed {
		t.Fatalf("Land US-001 = %+v", landed)
	}
	res := r.land(r.a, second)
	if res.Landed || !slices.Contains(res.Conflicts, "shared.txt") || res.Reason == "" {
		t.Fatalf("Land US-002 = %+v; want sent back with a conflict in shared.txt", res)
	}
	if tip := r.exchangeTip(); tip != landed.Commit {
		t.Errorf("the tip moved to %s after a conflict; want %s", tip, landed.Commit)
	}
	if got := hostGit(t, r.a.WS.Root, "show", landed.Commit+":shared.txt"); !strings.Contains(got, "US-001 was here") {
		t.Errorf("shared.txt at the tip = %q", got)
	}
}

// A check that fails on the integrated result sends the task back, names
// the check, and moves neither the tip nor a's main.
func TestHostLandFailingCheckMovesNothing(t *testing.T) {
	r := newHostRig(t)
	r.a.Checks = []check.Check{
		{Name: "builds", Kind: check.KindTypecheck, Run: "true"},
		{Name: "no-us-001", Kind: check.KindTest, Run: "test ! -f us-001.txt"},
	}
	res := r.land(r.a, r.verified(r.b, "US-001"))
	if res.Landed || !strings.Contains(res.Reason, `"no-us-001"`) {
		t.Fatalf("Land = %+v; want sent back naming the check no-us-001", res)
	}
	if tip := r.exchangeTip(); tip != r.tip {
		t.Errorf("the tip moved to %s past a failing check", tip)
	}
	if main := hostGit(t, r.a.WS.Root, "rev-parse", "main"); main != r.tip {
		t.Errorf("a's main moved to %s past a failing check", main)
	}
}

// A check that fails on the integrated result with a long output sends
// the task back with a one-line reason, for the terminal and the run's
// state, and the failed check in the one feedback format, for the next
// attempt's prompt.
func TestHostLandSendsBackTheCheckFeedback(t *testing.T) {
	r := newHostRig(t)
	r.a.Checks = []check.Check{{Name: "no-us-001", Kind: check.KindTest,
		Run: `test ! -f us-001.txt || { i=0; while [ $i -lt 3000 ]; do echo "scanning $i"; i=$((i+1)); done; echo "us-001.txt must not exist"; exit 1; }`}}
	res := r.land(r.a, r.verified(r.b, "US-001"))
	if res.Landed || strings.Contains(res.Reason, "\n") || res.Reason != `check "no-us-001" failed after integration on main (check "no-us-001" passed on the tip and fails now)` {
		t.Fatalf("Land = %+v; want sent back with a one-line reason naming the check", res)
	}
	for _, want := range []string{"Check \"no-us-001\" (`test ! -f us-001.txt", "exited with code 1.\n", "lines above left out\n", "us-001.txt must not exist\n```\n"} {
		if !strings.Contains(res.Feedback, want) {
			t.Errorf("LandResult.Feedback lacks %q:\n%s", want, res.Feedback)
		}
	}
	if strings.Contains(res.Feedback, "scanning 0\n") || len(res.Feedback) > check.FeedbackLimit+1024 {
		t.Errorf("LandResult.Feedback keeps more than the end of the output (%d bytes)", len(res.Feedback))
	}
}

// A person's own commit on a's main is never overwritten: main stays, a
// warning says where the run's work is, and the exchange tip moves.
func TestHostLandKeepsAPersonsCommit(t *testing.T) {
	r := newHostRig(t)
	hostWrite(t, filepath.Join(r.a.WS.Root, "mine.txt"), "mine\n")
	hostGit(t, r.a.WS.Root, "add", "mine.txt")
	hostGit(t, r.a.WS.Root, "commit", "-q", "-m", "a person's commit")
	mine := hostGit(t, r.a.WS.Root, "rev-parse", "HEAD")
	res := r.land(r.a, r.verified(r.b, "US-001"))
	if !res.Landed || r.exchangeTip() != res.Commit {
		t.Fatalf("Land = %+v, exchange tip %s; want landed on the exchange", res, r.exchangeTip())
	}
	if main := hostGit(t, r.a.WS.Root, "rev-parse", "main"); main != mine {
		t.Errorf("a's main moved from the person's commit %s to %s", mine, main)
	}
	var warned bool
	for _, ev := range hostEvents(t, r.a) {
		warned = warned || (ev.Kind == report.KindWarning && strings.Contains(ev.Text, TipBranch(hostRun, "main")))
	}
	if !warned {
		t.Error("no warning says a's main was not moved and where the run's work is")
	}
	// The run's work is only on the exchange: a complete run keeps it.
	if _, err := hostExec[struct{}](t, r.a.Finish, FinishInput{RunID: hostRun, Target: "main", Complete: true}); err != nil {
		t.Fatal(err)
	}
	if tip := r.exchangeTip(); tip != res.Commit {
		t.Errorf("Finish removed the tip branch (%q) that holds the only copy of the run's work", tip)
	}
}

// Cleanup takes a landed task's worktree and branch off its host.
func TestHostCleanupRemovesWorktreeAndBranch(t *testing.T) {
	r := newHostRig(t)
	r.land(r.a, r.verified(r.b, "US-001"))
	path := filepath.Join(r.bWT, hostRun, "US-001")
	if _, err := hostExec[struct{}](t, r.b.Cleanup, CleanupInput{RunID: hostRun, Task: "US-001"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worktree %s is still there: %v", path, err)
	}
	if strings.Contains(hostGit(t, r.b.WS.Root, "worktree", "list"), path) {
		t.Error("git still lists the task's worktree")
	}
	if _, ok := hostGitOK(r.b.WS.Root, "rev-parse", "--verify", "-q", "refs/heads/"+landing.Branch(hostRun, "US-001")); ok {
		t.Error("the task branch is still on host b")
	}
	// Cleaning up twice (a retried activity) is no error.
	if _, err := hostExec[struct{}](t, r.b.Cleanup, CleanupInput{RunID: hostRun, Task: "US-001"}); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
}

// Finish removes the integration worktree; the tip branch leaves the
// exchange only when the run is complete.
func TestHostFinishRemovesIntegrationAndTipWhenComplete(t *testing.T) {
	r := newHostRig(t)
	landed := r.land(r.a, r.verified(r.b, "US-001"))
	integ := filepath.Join(r.aWT, hostRun, ".integration")
	if _, err := os.Stat(integ); err != nil {
		t.Fatalf("no integration worktree after a landing: %v", err)
	}
	if _, err := hostExec[struct{}](t, r.a.Finish, FinishInput{RunID: hostRun, Target: "main", Complete: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(integ); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the integration worktree is still there: %v", err)
	}
	if tip := r.exchangeTip(); tip != landed.Commit {
		t.Errorf("an incomplete run's tip on the exchange is %q; want it kept at %s", tip, landed.Commit)
	}
	if _, err := hostExec[struct{}](t, r.a.Finish, FinishInput{RunID: hostRun, Target: "main", Complete: true}); err != nil {
		t.Fatal(err)
	}
	if tip := r.exchangeTip(); tip != "" {
		t.Errorf("a complete run's tip branch is still on the exchange at %s", tip)
	}
	if main := hostGit(t, r.a.WS.Root, "rev-parse", "main"); main != landed.Commit {
		t.Errorf("a's main is %s; want the run's work %s", main, landed.Commit)
	}
}

// A check that already fails on the tip does not hold a landing back
// when the landing breaks nothing more: the story lands, and the result
// says the check still fails, so that the run is not complete.
func TestHostLandNextToACheckThatFailedOnTheTip(t *testing.T) {
	r := newHostRig(t)
	r.a.Checks = []check.Check{{Name: "legacy", Kind: check.KindTest, Run: "false"}}
	res := r.land(r.a, r.verified(r.b, "US-001"))
	if !res.Landed || !slices.Equal(res.Failing, []string{"legacy"}) {
		t.Fatalf("Land = %+v; want landed, with legacy still failing", res)
	}
}

// A check the landing breaks sends it back, saying it passed on the tip.
func TestHostLandBreakingACheckThatPassedOnTheTip(t *testing.T) {
	r := newHostRig(t)
	r.a.Checks = []check.Check{{Name: "no-us-001", Kind: check.KindTest, Run: "test ! -f us-001.txt"}}
	if res := r.land(r.a, r.verified(r.b, "US-001")); res.Landed || !strings.Contains(res.Reason, "passed on the tip and fails now") {
		t.Fatalf("Land = %+v; want sent back: the check passed on the tip", res)
	}
}

// A story whose agent always fails is blocked by the task loop's own
// rules (two failed attempts, [loop] max_retries), and Work says so as an
// outcome, at once: an error would be retried by Temporal's retry policy
// (20 times, with backoff), holding the worker slot while the build never
// ends. The loop is the real one, its agent a real process that exits 1.
func TestHostWorkFailingAgentBlocksTheStory(t *testing.T) {
	r := newHostRig(t)
	r.b.Build = nil // loop.Build
	r.b.LoopOptions = func(*workspace.Workspace, tasks.Source) loop.Options {
		return loop.Options{MaxRetries: 2, Agent: agent.Spec{Name: "broken", Headless: []string{"sh", "-c", "echo 'something broke' >&2; exit 1"}, Format: agent.FormatPlain}}
	}
	r.prepare(r.b, "US-001", 1)
	res, err := r.work(r.b, "US-001", 1)
	if err != nil {
		t.Fatalf("Work = %+v, %v; want an outcome, not an error Temporal retries", res, err)
	}
	if res.Outcome != WorkBlocked {
		t.Fatalf("Work = %+v; want the story blocked", res)
	}
	if !strings.Contains(res.Reason, "exited with code 1") || res.Iterations < 2 {
		t.Errorf("Work = %+v; want the story's blocker (the agent's exit) and its two failed attempts", res)
	}
	blocked := false
	for _, ev := range hostEvents(t, r.b) {
		b, ok := ev.Data.(report.Blocker)
		blocked = blocked || (ev.Machine == MachineName && ok && ev.Task == "US-001" && b.State == "blocked")
	}
	if !blocked {
		t.Error("the host's journal does not say the story was blocked")
	}
	if r.exchangeRef(landing.Branch(hostRun, "US-001")) != "" {
		t.Error("a blocked story's branch was pushed to the exchange")
	}
}

// The board the workflow starts from carries a person's block kept in
// the integration host's workspace (ralph block, given to an earlier run
// or while none went), so the run starts with that task blocked.
func TestBoardCarriesAPersonsBlock(t *testing.T) {
	r := newHostRig(t)
	c := control.New(control.Block, control.ByCLI, time.Now())
	c.Task, c.Text = "US-002", "waiting for the API key"
	if err := (control.Folder{Dir: r.a.WS.Path("control")}).Hold(c); err != nil {
		t.Fatal(err)
	}
	stories, err := hostExec[[]Story](t, r.a.Board, BoardInput{RunID: hostRun, Target: "main", PRD: hostPRD})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stories {
		want := ""
		if s.ID == "US-002" {
			want = "blocked by cli: waiting for the API key"
		}
		if s.Held != want {
			t.Errorf("%s held %q, want %q", s.ID, s.Held, want)
		}
	}
}

// An agent (or a person) with the exchange remote in reach moves the
// run's tip outside ralph (issue 26 item 7). A move to a commit where a
// check fails that passed where ralph left the tip stops the run with an
// error Temporal does not retry, naming both commits and how to put the
// branch back; a move whose checks pass as before is taken as the new
// start, said, and landings go on from it.
func TestHostLandNoticesTheTipMovedOutsideRalph(t *testing.T) {
	for _, tc := range []struct {
		name, write string
		stops       bool
	}{
		{"to a failing commit", "bad.txt", true},
		{"to a passing commit", "fine.txt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHostRig(t)
			r.a.Checks = []check.Check{{Name: "no-bad", Kind: check.KindTest, Run: "test ! -f bad.txt"}}
			if res := r.land(r.a, r.verified(r.b, "US-001")); !res.Landed {
				t.Fatalf("Land US-001 = %+v", res)
			}
			left := r.exchangeTip()
			// Someone else's commit on the run's tip branch.
			clone := filepath.Join(t.TempDir(), "elsewhere")
			hostGit(t, r.a.WS.Root, "clone", "-q", "--branch", TipBranch(hostRun, "main"), r.exchange, clone)
			hostWrite(t, filepath.Join(clone, tc.write), "x\n")
			hostGit(t, clone, "add", tc.write)
			hostGit(t, clone, "-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "-m", "outside ralph")
			hostGit(t, clone, "push", "-q", "--force", "origin", "HEAD:refs/heads/"+TipBranch(hostRun, "main"))
			moved := r.exchangeTip()

			in := r.verified(r.b, "US-002")
			res, err := hostExec[LandResult](t, r.a.Land, in)
			if !tc.stops {
				if err != nil || !res.Landed {
					t.Fatalf("Land US-002 = %+v, %v; want landed on the moved tip", res, err)
				}
				if parent := hostGit(t, r.a.WS.Root, "rev-parse", res.Commit+"^"); parent != moved {
					t.Errorf("US-002 landed on %s; want on the moved tip %s", parent, moved)
				}
				saidIt := false
				for _, ev := range hostEvents(t, r.a) {
					saidIt = saidIt || strings.Contains(ev.Text, "moved outside ralph from "+left[:7])
				}
				if !saidIt {
					t.Error("the journal does not say the tip moved outside ralph")
				}
				return
			}
			ae := hostAppErr(t, err, ErrTypeTargetMoved)
			for _, want := range []string{left[:7], moved[:7], `"no-bad" fails`, "git push --force", left + ":refs/heads/" + TipBranch(hostRun, "main")} {
				if !strings.Contains(ae.Message(), want) {
					t.Errorf("the error does not say %q:\n%s", want, ae.Message())
				}
			}
			if tip := r.exchangeTip(); tip != moved {
				t.Errorf("the tip is %s; want it left at %s for the person", tip, moved)
			}
			// A restart judges it the same way: ralph's record of where
			// it left the tip is kept.
			if _, err := hostExec[LandResult](t, r.a.Land, in); err == nil {
				t.Error("a second Land went on from the failing tip")
			}
		})
	}
}

// The integrating host's own main (which catchUp keeps at the run's tip)
// moved outside ralph, by an agent in a worktree of the checkout or by
// hand: to a commit where a check fails that passes on the run's tip, the
// run stops naming both commits, as the local engine does on its target;
// to a passing commit, landings go on and main is left where it is.
func TestHostLandNoticesTheCheckoutsTargetMovedOutsideRalph(t *testing.T) {
	for _, tc := range []struct {
		name, write string
		stops       bool
	}{
		{"to a failing commit", "bad.txt", true},
		{"to a passing commit", "fine.txt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHostRig(t)
			r.a.Checks = []check.Check{{Name: "no-bad", Kind: check.KindTest, Run: "test ! -f bad.txt"}}
			if res := r.land(r.a, r.verified(r.b, "US-001")); !res.Landed {
				t.Fatalf("Land US-001 = %+v", res)
			}
			left := r.exchangeTip()
			root := r.a.WS.Root
			if main := hostGit(t, root, "rev-parse", "main"); main != left {
				t.Fatalf("main here is %s; want catchUp to have left it at the run's tip %s", main, left)
			}
			// An agent's commit on main, made without touching the
			// checkout's files (as from a worktree).
			blob := hostGitIn(t, root, "x\n", "hash-object", "-w", "--stdin")
			tree := hostGitIn(t, root, hostGit(t, root, "ls-tree", "main")+"\n100644 blob "+blob+"\t"+tc.write+"\n", "mktree")
			moved := hostGit(t, root, "commit-tree", tree, "-p", "main", "-m", "outside ralph")
			hostGit(t, root, "update-ref", "refs/heads/main", moved)

			res, err := hostExec[LandResult](t, r.a.Land, r.verified(r.b, "US-002"))
			if !tc.stops {
				if err != nil || !res.Landed {
					t.Fatalf("Land US-002 = %+v, %v; want landed", res, err)
				}
				if main := hostGit(t, root, "rev-parse", "main"); main != moved {
					t.Errorf("main is %s; want it left at the move %s", main, moved)
				}
				return
			}
			ae := hostAppErr(t, err, ErrTypeTargetMoved)
			for _, want := range []string{"main moved outside ralph from " + left[:7], moved[:7], `"no-bad" fails`, "git update-ref refs/heads/main " + left + " " + moved} {
				if !strings.Contains(ae.Message(), want) {
					t.Errorf("the error does not say %q:\n%s", want, ae.Message())
				}
			}
			if main := hostGit(t, root, "rev-parse", "main"); main != moved {
				t.Errorf("main is %s; want it left at %s for the person", main, moved)
			}
			if tip := r.exchangeTip(); tip != left {
				t.Errorf("the run's tip moved to %s; want nothing landed after the move (%s)", tip, left)
			}
		})
	}
}

// hostGitIn runs git in dir with stdin and returns its trimmed output.
func hostGitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
