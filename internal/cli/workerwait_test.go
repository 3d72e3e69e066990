package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/thread"
)

// devServerAddr starts the Temporal dev server that
// scripts/install-temporal.sh builds, on a free port of 127.0.0.1, and
// returns its address once it answers.
func devServerAddr(t *testing.T) string {
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
	var log syncBuffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	answers := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var c client.Client
		c, err = client.DialContext(ctx, client.Options{HostPort: addr, Namespace: "default",
			Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	if !wait.Within(wait.Long, answers) {
		t.Fatalf("the dev server at %s did not answer in %s: %v\n%s", addr, wait.Long, err, log.String())
	}
	return addr
}

// syncBuffer is a buffer that a command's goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bgRun runs one ralph command line in the background until ctx ends; it
// returns its output buffers and a channel with its exit code.
func bgRun(ctx context.Context, dir string, args ...string) (out, errb *syncBuffer, code chan int) {
	out, errb, code = &syncBuffer{}, &syncBuffer{}, make(chan int, 1)
	env := &Env{
		IO:         IO{In: strings.NewReader(""), Out: out, Err: errb},
		Getenv:     func(string) string { return "" },
		WorkDir:    func() (string, error) { return dir, nil },
		Now:        time.Now,
		Executable: func() (string, error) { return "", errors.New("no executable in tests") },
	}
	go func() { code <- Run(ctx, env, args) }()
	return out, errb, code
}

func waitText(t *testing.T, what string, buf *syncBuffer, want string, limit time.Duration) {
	t.Helper()
	if !wait.Within(limit, func() bool { return strings.Contains(buf.String(), want) }) {
		t.Fatalf("waited %v for %s to say %q; it says:\n%s", limit, what, want, buf.String())
	}
}

// A session on Temporal with no worker shows that it waits, and after
// [engine] worker_wait says which task queue no worker polls and the
// command that starts one; `ralph worker` starts in a checkout without
// [engine] exchange_remote (sessions need none), and the session then
// runs on it: the follow shows its state and the waiting stops.
func TestSessionOnTemporalSaysNoWorkerPolls(t *testing.T) {
	dir := newTestRepo(t)
	addr := devServerAddr(t)
	config := `schema_version = 1
[agent]
default = "stand-in"
[agents.stand-in]
command = ["sh", "-c", "sleep 30"]
[memory]
store = "file"
[engine]
address = "` + addr + `"
task_queue = "wwtest"
worker_wait = "2s"
`
	if err := os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".ralph", "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "config")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, stopRun := context.WithCancel(ctx)
	out, errb, code := bgRun(runCtx, dir, "run", "add a greeting", "--engine", "temporal", "--host", "ww1")
	waitText(t, "ralph run", out, "started on Temporal", 30*time.Second)
	waitText(t, "ralph run", errb, "for a worker on task queue wwtest", 30*time.Second)
	waitText(t, "ralph run", errb, "no worker polls task queue wwtest", 30*time.Second)
	if !strings.Contains(errb.String(), "`ralph worker --host ww1`") {
		t.Errorf("the warning does not say how to start a worker:\n%s", errb.String())
	}
	if strings.Count(errb.String(), "no worker polls") != 1 {
		t.Errorf("the warning is said more than once:\n%s", errb.String())
	}

	workerCtx, stopWorker := context.WithCancel(ctx)
	wout, werr, wcode := bgRun(workerCtx, dir, "worker", "--host", "ww1")
	waitText(t, "ralph worker", wout, "no [engine] exchange_remote: it runs this checkout's sessions and threads", 30*time.Second)
	// The session's state comes from its workflow, which only a worker
	// runs: the worker without an exchange remote ran it.
	waitText(t, "ralph run", out, "session ", 60*time.Second)
	said := errb.String()
	// Holding is the behaviour here: a run still without a worker says so
	// at every look at the pollers (every 2 s with worker_wait 2s), so 3 s
	// of silence is what "the waiting stopped" means. Nothing is synced on it.
	time.Sleep(3 * time.Second)
	if later := strings.TrimPrefix(errb.String(), said); strings.Contains(later, "waiting") {
		t.Errorf("ralph run still says it waits once the worker polls:\n%s", later)
	}
	stopRun()
	t.Logf("ralph run said:\n%s%s", out, errb)
	if c := <-code; c != ExitInterrupted {
		t.Errorf("ralph run stopped following with exit %d, want %d\n%s\n%s", c, ExitInterrupted, out, errb)
	}
	stopWorker()
	if c := <-wcode; c != 0 {
		t.Errorf("ralph worker ended with exit %d\n%s\n%s", c, wout, werr)
	}
}

// A build on Temporal whose hosts' workers poll the shared queue but none
// runs the merge queue (no `ralph worker --integrate`) waits on the
// integration queue: the follow says which queue no worker polls and that
// --integrate starts one, instead of showing nothing.
func TestBuildOnTemporalSaysNoIntegratingWorker(t *testing.T) {
	dir := temporalBuildRepo(t, "wwbuild")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	workerCtx, stopWorker := context.WithCancel(ctx)
	wout, werr, wcode := bgRun(workerCtx, dir, "worker", "--host", "wb1")
	waitText(t, "ralph worker", wout, "polling wwbuild, wwbuild@wb1 on", 30*time.Second)
	runCtx, stopRun := context.WithCancel(ctx)
	out, errb, code := bgRun(runCtx, dir, "build", "--engine", "temporal")
	waitText(t, "ralph build", errb, "no worker polls task queue wwbuild.integration", 60*time.Second)
	if !strings.Contains(errb.String(), "`ralph worker --integrate` in the one clone that lands the tasks") {
		t.Errorf("the warning does not say how to start the merge queue's worker:\n%s", errb.String())
	}
	if strings.Contains(errb.String(), "task queue wwbuild ") {
		t.Errorf("the shared queue has a worker, yet the build says it waits for one:\n%s", errb.String())
	}
	stopRun()
	t.Logf("ralph build said:\n%s%s", out, errb)
	if c := <-code; c != ExitInterrupted {
		t.Errorf("ralph build stopped following with exit %d, want %d\n%s\n%s", c, ExitInterrupted, out, errb)
	}
	stopWorker()
	if c := <-wcode; c != 0 {
		t.Errorf("ralph worker ended with exit %d\n%s\n%s", c, wout, werr)
	}
}

// ralph status of a build on Temporal that no worker runs: its status
// Query waits for a worker, and the wait is said on stderr, with the
// command that starts one.
func TestStatusOnTemporalSaysNoWorkerPolls(t *testing.T) {
	dir := temporalBuildRepo(t, "wwstatus")
	r := run(t, dir, nil, false, "build", "--engine", "temporal", "--detach")
	if r.code != 0 {
		t.Fatalf("ralph build --detach: %s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stCtx, stopStatus := context.WithCancel(ctx)
	out, errb, code := bgRun(stCtx, dir, "status", "--json")
	waitText(t, "ralph status", errb, "no worker polls task queue wwstatus after", 30*time.Second)
	if !strings.Contains(errb.String(), "`ralph worker --host HOST` in a clone of the repository") {
		t.Errorf("the warning does not say how to start a worker:\n%s", errb.String())
	}
	if out.String() != "" {
		t.Errorf("ralph status --json printed on stdout while it waited (its one document must stay alone):\n%s", out)
	}
	stopStatus()
	<-code
}

// temporalBuildRepo is a repository set up for builds on a fresh dev
// server: one story, a stand-in agent, an exchange remote, task queue
// queue and worker_wait = "2s".
func temporalBuildRepo(t *testing.T, queue string) string {
	t.Helper()
	dir := newTestRepo(t)
	addr := devServerAddr(t)
	exchange := filepath.Join(t.TempDir(), "exchange.git")
	gitT(t, dir, "init", "-q", "--bare", exchange)
	config := `schema_version = 1
[agent]
default = "stand-in"
[agents.stand-in]
command = ["true"]
[build]
require_plan = false
[memory]
store = "file"
[engine]
kind = "temporal"
address = "` + addr + `"
task_queue = "` + queue + `"
exchange_remote = "` + exchange + `"
worker_wait = "2s"
`
	for name, content := range map[string]string{".ralph/config.toml": config, ".agents/tasks/prd.md": "# PRD\n\n### [ ] US-001: Only\n- [ ] x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "config")
	return dir
}

// A command to a thread whose workflow no worker runs waits on the
// workflow's Query: the wait is said, with the queue and the command that
// starts the thread's host's worker, instead of hanging silently.
func TestThreadOnTemporalSaysNoWorkerPolls(t *testing.T) {
	dir := newTestRepo(t)
	addr := devServerAddr(t)
	config := "schema_version = 1\n[engine]\naddress = \"" + addr + "\"\ntask_queue = \"wwthread\"\nworker_wait = \"2s\"\n"
	if err := os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".ralph", "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "config")
	if r := run(t, dir, nil, false, "thread", "new", "--id", "a1", "T"); r.code != 0 {
		t.Fatalf("ralph thread new: %s", r)
	}
	// The thread's workflow runs on the server, as `ralph thread start
	// --engine temporal --host th1` leaves it, with no worker polling.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	th, err := thread.Load(filepath.Join(dir, ".ralph"), "a1")
	if err != nil {
		t.Fatal(err)
	}
	wf, err := fleet.StartThread(ctx, c, fleet.ThreadInput{ThreadID: "a1", Placement: fleet.Placement{Host: "th1", Shared: "wwthread"}, Thread: th})
	if err != nil {
		t.Fatal(err)
	}
	m := TemporalMarker{SchemaVersion: 1, WorkflowID: wf.GetID(), RunID: wf.GetRunID(), Host: "th1", TaskQueue: "wwthread", Address: addr, Namespace: "default", StartedAt: time.Now().UTC()}
	if err := store.WriteJSON(threadMarkerPath(filepath.Join(dir, ".ralph"), "a1"), m); err != nil {
		t.Fatal(err)
	}
	cmdCtx, stop := context.WithCancel(ctx)
	_, errb, code := bgRun(cmdCtx, dir, "thread", "abandon", "a1")
	waitText(t, "ralph thread abandon", errb, "no worker polls task queue wwthread after", 30*time.Second)
	if !strings.Contains(errb.String(), "`ralph worker --host th1` in this checkout") {
		t.Errorf("the warning does not say how to start the thread's worker:\n%s", errb.String())
	}
	stop()
	<-code
}
