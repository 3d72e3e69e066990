package conformance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// executor runs parallel builds of a prepared repository the way one
// engine does. Every scenario drives it through these methods only, so
// that what it checks is what a user of either engine sees.
type executor interface {
	name() string
	// config is the executor's part of .ralph/config.toml.
	config(w *world) string
	// build starts `ralph build --workers n` in the person's checkout.
	// crashAt, when set, is RALPH_TEST_CRASH_AT of the process that
	// lands tasks, so that it kills itself at that point.
	build(w *world, n int, crashAt string) *proc
	// lander is the process that lands the tasks of build b.
	lander(w *world, b *proc) *proc
	// resume brings back what a kill took and returns the build to
	// follow to its end: after a crash or a stop, the run goes on.
	resume(w *world, b *proc) *proc
	// branches is the git directory whose refs/heads/ralph/<run>/<task>
	// are the branches the merge queue lands tasks from.
	branches(w *world) string
}

// executors are every executor of the parallel core.
var executors = []executor{local{}, &temporalExec{}}

// local is the local engine: `ralph build --workers N` runs the workers
// and the merge queue in its own process.
type local struct{}

func (local) name() string             { return "local" }
func (local) config(w *world) string   { return "" }
func (local) branches(w *world) string { return filepath.Join(w.repo, ".git") }
func (local) lander(w *world, b *proc) *proc {
	return b
}

func (local) build(w *world, n int, crashAt string) *proc {
	var env []string
	if crashAt != "" {
		env = append(env, "RALPH_TEST_CRASH_AT="+crashAt)
	}
	return w.start("build", w.repo, env, w.ralph, "build", "--workers", strconv.Itoa(n))
}

func (l local) resume(w *world, b *proc) *proc {
	w.waitEnd(b, time.Minute)
	w.reap()
	return l.build(w, 2, "")
}

// temporalExec is the Temporal engine: a shared dev server, one `ralph
// worker` on the person's checkout (its host and the integration host)
// polling the scenario's own task queue, a bare exchange repository, and
// `ralph build --workers N` following the workflow.
type temporalExec struct{}

func (*temporalExec) name() string { return "temporal" }

func (*temporalExec) exchange(w *world) string { return filepath.Join(w.dir, "exchange.git") }

func (x *temporalExec) branches(w *world) string { return x.exchange(w) }

// queue is the scenario's task queue: its own workflow id on the shared
// server.
func queue(w *world) string {
	return "conf-" + strings.NewReplacer("/", "-", " ", "-", "@", "-").Replace(w.t.Name())
}

// config: a heartbeat of 2s timed out under -race on a loaded machine
// (the attempt was run again, or blocked); 5s is the fleet tests' own.
func (x *temporalExec) config(w *world) string {
	addr := devServer.address(w.t)
	if _, err := os.Stat(x.exchange(w)); err != nil {
		w.git(w.dir, "init", "-q", "--bare", x.exchange(w))
	}
	return fmt.Sprintf("[engine]\nkind = \"temporal\"\naddress = %q\ntask_queue = %q\nexchange_remote = %q\nheartbeat = \"5s\"\nhost_timeout = \"30s\"\n",
		addr, queue(w), x.exchange(w))
}

// worker is the scenario's running `ralph worker`, nil before the first
// build.
func (x *temporalExec) worker(w *world) *proc {
	for i := len(w.procs) - 1; i >= 0; i-- {
		if strings.HasPrefix(w.procs[i].name, "worker") {
			return w.procs[i]
		}
	}
	return nil
}

func (x *temporalExec) startWorker(w *world, crashAt string) *proc {
	var env []string
	if crashAt != "" {
		env = append(env, "RALPH_TEST_CRASH_AT="+crashAt)
	}
	p := w.start("worker", w.repo, env, w.ralph, "worker", "--host", "a", "--integrate")
	w.waitLog(p, `ralph worker a: polling`, time.Minute)
	return p
}

func (x *temporalExec) build(w *world, n int, crashAt string) *proc {
	if p := x.worker(w); p == nil || p.exited() || crashAt != "" {
		if p != nil && !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		x.startWorker(w, crashAt)
	}
	// A build started while the hosts still save the attempts of a
	// stopped run is told to wait: it is started again until it runs.
	var b *proc
	w.waitFor("ralph build to start on Temporal", 2*time.Minute, func() (bool, string) {
		b = w.start("build", w.repo, nil, w.ralph, "build", "--workers", strconv.Itoa(n))
		wait.Within(w.within(time.Minute), func() bool { return b.exited() || strings.Contains(b.output(), "started on Temporal") })
		return strings.Contains(b.output(), "started on Temporal"), b.output()
	})
	return b
}

func (x *temporalExec) lander(w *world, b *proc) *proc { return x.worker(w) }

func (x *temporalExec) resume(w *world, b *proc) *proc {
	// The build follower goes on; what the killed worker left running
	// is stopped by the restarted worker's resumed loops.
	if p := x.worker(w); p == nil || p.exited() {
		x.startWorker(w, "")
	}
	if b.exited() {
		return x.build(w, 2, "")
	}
	return b
}

// reap kills what a killed ralph left running in the scenario's folder
// (its agents, its checks): the resumed run stops leftovers itself; this
// only keeps the machine's processes from piling up.
func (w *world) reap() {
	for _, pid := range processesIn(w.dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// devServer is the Temporal dev server every scenario shares, started by
// the first that needs it and stopped by TestMain.
var devServer = &server{}

type server struct {
	once sync.Once
	addr string
	cmd  *exec.Cmd
	dir  string
	err  error
}

// address starts the server once and returns its address, failing the
// test (never skipping it) when it cannot run.
func (s *server) address(t interface {
	Helper()
	Fatalf(string, ...any)
}) string {
	t.Helper()
	s.once.Do(func() { s.err = s.start() })
	if s.err != nil {
		t.Fatalf("the Temporal executor needs the dev server: %v", s.err)
	}
	return s.addr
}

func (s *server) start() error {
	root, err := clitest.RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, ".tools", "temporal", "temporal")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no Temporal CLI at %s: run `make temporal` (scripts/install-temporal.sh builds the pinned one; `make test` runs it first): %v", bin, err)
	}
	if s.dir, err = os.MkdirTemp("", "ralph-conformance-temporal-"); err != nil {
		return err
	}
	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		logf, err := os.Create(filepath.Join(s.dir, fmt.Sprintf("server-%d.log", try)))
		if err != nil {
			return err
		}
		cmd := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--ui-port", "0", "--log-level", "warn")
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.dir, cleanEnv(), logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
		s.cmd = cmd
		up := func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			return answers(addr)
		}
		if wait.Within(time.Minute, up) {
			select {
			case <-exited:
				// Another process may have taken the port: another try.
				if try < 3 {
					continue
				}
				out, _ := os.ReadFile(logf.Name())
				return fmt.Errorf("the dev server exited:\n%s", clip(string(out), 4000))
			default:
				s.addr = addr
				return nil
			}
		}
		s.stop()
		return fmt.Errorf("the dev server did not answer on %s within a minute", addr)
	}
}

// answers reports whether the server's default namespace answers.
func answers(addr string) bool {
	quiet := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quiet})
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	return err == nil
}

func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
