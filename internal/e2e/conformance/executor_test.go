package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/testing/harness"
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
	return w.Start("build", w.repo, env, w.Ralph, "build", "--workers", strconv.Itoa(n))
}

func (l local) resume(w *world, b *proc) *proc {
	w.WaitEnd(b, time.Minute)
	w.Reap()
	return l.build(w, 2, "")
}

// temporalExec is the Temporal engine: a shared dev server, one `ralph
// worker` on the person's checkout (its host and the integration host)
// polling the scenario's own task queue, a bare exchange repository, and
// `ralph build --workers N` following the workflow.
type temporalExec struct{}

func (*temporalExec) name() string { return "temporal" }

func (*temporalExec) exchange(w *world) string { return filepath.Join(w.Dir, "exchange.git") }

func (x *temporalExec) branches(w *world) string { return x.exchange(w) }

// queue is the scenario's task queue: its own workflow id on the shared
// server.
func queue(w *world) string {
	return "conf-" + strings.NewReplacer("/", "-", " ", "-", "@", "-").Replace(w.T.Name())
}

// config: a heartbeat of 2s timed out under -race on a loaded machine
// (the attempt was run again, or blocked); 5s is the fleet tests' own.
func (x *temporalExec) config(w *world) string {
	addr := devServer.address(w.T)
	if _, err := os.Stat(x.exchange(w)); err != nil {
		w.Git(w.Dir, "init", "-q", "--bare", x.exchange(w))
	}
	return fmt.Sprintf("[engine]\nkind = \"temporal\"\naddress = %q\ntask_queue = %q\nexchange_remote = %q\nheartbeat = \"5s\"\nhost_timeout = \"30s\"\n",
		addr, queue(w), x.exchange(w))
}

// worker is the scenario's running `ralph worker`, nil before the first
// build.
func (x *temporalExec) worker(w *world) *proc {
	for i := len(w.Procs) - 1; i >= 0; i-- {
		if strings.HasPrefix(w.Procs[i].Name, "worker") {
			return w.Procs[i]
		}
	}
	return nil
}

func (x *temporalExec) startWorker(w *world, crashAt string) *proc {
	var env []string
	if crashAt != "" {
		env = append(env, "RALPH_TEST_CRASH_AT="+crashAt)
	}
	p := w.Start("worker", w.repo, env, w.Ralph, "worker", "--host", "a", "--integrate")
	w.WaitLog(p, `ralph worker a: polling`, time.Minute)
	return p
}

func (x *temporalExec) build(w *world, n int, crashAt string) *proc {
	if p := x.worker(w); p == nil || p.Exited() || crashAt != "" {
		if p != nil {
			p.Kill()
		}
		x.startWorker(w, crashAt)
	}
	// A build started while the hosts still save the attempts of a
	// stopped run is told to wait: it is started again until it runs.
	var b *proc
	w.WaitFor("ralph build to start on Temporal", 2*time.Minute, func() (bool, string) {
		b = w.Start("build", w.repo, nil, w.Ralph, "build", "--workers", strconv.Itoa(n))
		wait.Within(w.Within(time.Minute), func() bool { return b.Exited() || strings.Contains(b.Output(), "started on Temporal") })
		return strings.Contains(b.Output(), "started on Temporal"), b.Output()
	})
	return b
}

func (x *temporalExec) lander(w *world, b *proc) *proc { return x.worker(w) }

func (x *temporalExec) resume(w *world, b *proc) *proc {
	// The build follower goes on; what the killed worker left running
	// is stopped by the restarted worker's resumed loops.
	if p := x.worker(w); p == nil || p.Exited() {
		x.startWorker(w, "")
	}
	if b.Exited() {
		return x.build(w, 2, "")
	}
	return b
}

// devServer is the Temporal dev server every scenario shares, started by
// the first that needs it and stopped by TestMain.
var devServer = &server{}

type server struct {
	once sync.Once
	dir  string
	srv  *harness.DevServer
	err  error
}

// address starts the server once and returns its address, failing the
// test (never skipping it) when it cannot run.
func (s *server) address(t interface {
	Helper()
	Fatalf(string, ...any)
}) string {
	t.Helper()
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "ralph-conformance-temporal-"); s.err == nil {
			s.srv, s.err = harness.StartDevServer(s.dir, harness.CleanEnv(), time.Minute)
		}
	})
	if s.err != nil {
		t.Fatalf("the Temporal executor needs the dev server: %v", s.err)
	}
	return s.srv.Addr
}

func (s *server) stop() {
	if s.srv != nil {
		s.srv.Proc.Kill()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
