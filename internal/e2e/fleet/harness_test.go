package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ralphloop/ralph/internal/fakeagent"
	rfleet "github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// testDeadline bounds the whole test: it takes well under a minute
// normally, and several times that on a loaded 2-core machine under -race.
const testDeadline = 6 * time.Minute

// story is one story of the PRD and the file its agent writes.
type story struct{ id, file string }

var stories = []story{
	{"US-001", "one.txt"}, {"US-002", "two.txt"}, {"US-003", "three.txt"},
	{"US-004", "four.txt"}, {"US-005", "five.txt"}, {"US-006", "six.txt"},
}

func prd() string {
	var b strings.Builder
	b.WriteString("# PRD: the Temporal engine's integration test\n")
	for _, s := range stories {
		fmt.Fprintf(&b, "\n### [ ] %s: Write %s\n- [ ] %s holds %s\n", s.id, s.file, s.file, s.id)
	}
	return b.String()
}

// checkScript is the repository's check: a story the task file marks done
// must have its file, holding its id. The target branch may only ever be
// at a commit where it passes.
func checkScript() string {
	var pairs []string
	for _, s := range stories {
		pairs = append(pairs, s.file+":"+s.id)
	}
	return `#!/bin/sh
fail=0
for n in ` + strings.Join(pairs, " ") + `; do
  f=${n%%:*}; id=${n#*:}
  if grep -q "^### \[x\] $id:" .agents/tasks/prd.md && ! grep -qx "$id" "$f" 2>/dev/null; then
    echo "$id is done but $f does not hold $id"; fail=1
  fi
done
exit $fail
`
}

// agentSleep is how long each story's agent works before it writes its
// file: long enough to kill a worker in the middle of an attempt.
const agentSleep = "5s"

// orphanStays makes an agent whose worker is gone (its parent is no
// longer a `ralph worker`) stay a minute longer, well past the end of the
// run, so that only ralph stopping the agent its killed worker left
// (the resumed loop's leftover cleanup) ends it in time.
const orphanStays = `pp=$(awk '{print $4}' /proc/$PPID/stat); case "$(tr '\0' ' ' < /proc/$pp/cmdline)" in *" worker "*) ;; *) sleep 60 ;; esac`

func scenario() fakeagent.Scenario {
	sc := fakeagent.Scenario{Format: "claude"}
	for _, s := range stories {
		sc.Invocations = append(sc.Invocations, fakeagent.Invocation{Match: "Story: " + s.id + ":", Steps: []fakeagent.Step{
			{Say: "working on " + s.id}, {Sleep: agentSleep}, {Run: orphanStays},
			{Write: s.file, Content: s.id + "\n"}, {CheckStory: s.id}, {Final: s.id + " done"}}})
	}
	return sc
}

// fleetRun is one test's world: a dev server, the repositories and every
// process the test started, all under one temporary folder.
type fleetRun struct {
	t        *testing.T
	dir      string
	a, b     string // the two clones: a is the person's checkout and the integration host
	exchange string // the bare repository task branches travel through
	pushLog  string // every ref update pushed to the exchange, by its update hook
	scenario string
	ralph    string
	temporal string
	addr     string
	env      []string
	deadline time.Time
	procs    []*proc
}

// proc is a background process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *proc) String() string {
	if !p.exited() {
		return p.name + " (running, pid " + strconv.Itoa(p.cmd.Process.Pid) + ")"
	}
	if p.err == nil {
		return p.name + " (exit 0)"
	}
	return p.name + " (" + p.err.Error() + ")"
}

func newFleetRun(t *testing.T) *fleetRun {
	t.Helper()
	clitest.NeedGit(t)
	ralph, err := exec.LookPath("ralph")
	if err != nil {
		t.Fatalf("ralph is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	r := &fleetRun{t: t, dir: dir, a: filepath.Join(dir, "a"), b: filepath.Join(dir, "b"), exchange: filepath.Join(dir, "exchange.git"),
		pushLog: filepath.Join(dir, "pushed.log"), scenario: filepath.Join(dir, "scenario.json"), ralph: ralph,
		deadline: time.Now().Add(testDeadline)}
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "gitconfig"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// This process's environment without what would reach the user's git
	// configuration, a Temporal server or cloud account of theirs, or a
	// ralph setting; the race runtime's second of sleep at every exit off.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") || strings.HasPrefix(name, "RALPH_") || strings.HasPrefix(name, "TEMPORAL_") ||
			name == "HOME" || name == "XDG_CONFIG_HOME" || name == "GORACE" || name == "AGENT_CMD" || name == fakeagent.EnvScenario {
			continue
		}
		r.env = append(r.env, kv)
	}
	r.env = append(r.env, "HOME="+home, "GIT_CONFIG_GLOBAL="+filepath.Join(home, "gitconfig"), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid",
		"GORACE="+clitest.NoExitSleep(), "TZ=UTC")
	t.Cleanup(r.cleanup)
	return r
}

// cleanup prints what every process said when the test failed, then kills
// them all (server, workers, build) and whatever agent a killed worker
// left in the test's folder.
func (r *fleetRun) cleanup() {
	if r.t.Failed() {
		for _, p := range r.procs {
			r.t.Logf("──── %s, log %s ────\n%s", p, p.log, clip(p.output(), 30000))
		}
		if r.addr != "" {
			for _, what := range []string{"describe", "show"} {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				out, _ := exec.CommandContext(ctx, r.temporal, "workflow", what, "--workflow-id", rfleet.BuildID("ralph", "main"), "--address", r.addr).CombinedOutput()
				cancel()
				r.t.Logf("──── temporal workflow %s (the build workflow) ────\n%s", what, clip(string(out), 30000))
			}
		}
	}
	for i := len(r.procs) - 1; i >= 0; i-- {
		p := r.procs[i]
		if !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			r.t.Errorf("%s did not end 10s after SIGKILL", p.name)
		}
	}
	for _, pid := range processesIn(r.dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// start starts a background process in its own process group, its output
// in logs/NAME.log.
func (r *fleetRun) start(name, dir, bin string, args ...string) *proc {
	r.t.Helper()
	logPath := filepath.Join(r.dir, "logs", name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, r.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		r.t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	r.procs = append(r.procs, p)
	return p
}

// within is how long a wait of limit may take without passing the test's
// deadline.
func (r *fleetRun) within(limit time.Duration) time.Duration {
	return min(limit, time.Until(r.deadline))
}

// waitFor polls cond until it holds, failing the test after limit with
// what it waited for and cond's last word.
func (r *fleetRun) waitFor(what string, limit time.Duration, cond func() (bool, string)) {
	r.t.Helper()
	var last string
	if !wait.Within(r.within(limit), func() (ok bool) { ok, last = cond(); return ok }) {
		r.t.Fatalf("waited %s for %s; last: %s", limit, what, last)
	}
}

// waitLog waits until p's output matches re and returns the match.
func (r *fleetRun) waitLog(p *proc, re string, limit time.Duration) []string {
	r.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	r.waitFor(fmt.Sprintf("%s to print %q", p.name, re), limit, func() (bool, string) {
		out := p.output()
		if m = rx.FindStringSubmatch(out); m != nil {
			return true, ""
		}
		if p.exited() {
			r.t.Fatalf("%s ended (%v) without printing %q:\n%s", p.name, p.err, re, clip(out, 8000))
		}
		return false, clip(out, 2000)
	})
	return m
}

// startServer starts the Temporal dev server on a free port of
// 127.0.0.1, in memory, and waits until its default namespace answers.
func (r *fleetRun) startServer() {
	r.t.Helper()
	root, err := clitest.RepoRoot()
	if err != nil {
		r.t.Fatal(err)
	}
	r.temporal = filepath.Join(root, ".tools", "temporal", "temporal")
	if _, err := os.Stat(r.temporal); err != nil {
		r.t.Fatalf("the Temporal engine's integration test needs the Temporal dev server at %s: run `make temporal` "+
			"(scripts/install-temporal.sh builds the pinned Temporal CLI, about 4 minutes the first time; `make test` runs it first): %v", r.temporal, err)
	}
	for try := 1; ; try++ {
		port := freePort(r.t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p := r.start(fmt.Sprintf("temporal-%d", try), r.dir, r.temporal, "server", "start-dev", "--headless",
			"--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--ui-port", "0", "--log-level", "warn")
		err := r.waitServer(addr, p, time.Minute)
		if err == nil {
			r.addr = addr
			return
		}
		// Another process may have taken the port between freePort and
		// the server's bind: a server that exited gets another try.
		if p.exited() && try < 3 {
			r.t.Logf("the dev server on %s exited (%v); trying another port:\n%s", addr, p.err, clip(p.output(), 2000))
			continue
		}
		r.t.Fatalf("the Temporal dev server (%s) did not answer on %s: %v\n%s", r.temporal, addr, err, clip(p.output(), 8000))
	}
}

func (r *fleetRun) waitServer(addr string, p *proc, limit time.Duration) error {
	quiet := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var last error
	up := func() bool {
		if p.exited() {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quiet})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			c.Close()
		}
		last = err
		return err == nil
	}
	if !wait.Within(r.within(limit), up) {
		return fmt.Errorf("not up after %s: %v", limit, last)
	}
	if p.exited() {
		return fmt.Errorf("the server exited: %v", p.err)
	}
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// makeRepos makes repository a (the person's checkout, configured for
// the Temporal engine), the bare exchange repository with a hook that
// logs every ref pushed to it, and b, a clone of a: the second host.
func (r *fleetRun) makeRepos() {
	r.t.Helper()
	if err := fakeagent.WriteScenario(r.scenario, scenario()); err != nil {
		r.t.Fatal(err)
	}
	config := fmt.Sprintf(`[agent]
default = "fake"
[build]
require_plan = false
[memory]
store = "file"
[agents.fake]
command = [%q, "__demo-agent", "--scenario", %q]
format = "claude"
[[checks]]
name = "stories"
run = "sh check.sh"
[engine]
kind = "temporal"
address = %q
exchange_remote = %q
heartbeat = "5s"
host_timeout = "30s"
`, r.ralph, r.scenario, r.addr, r.exchange)
	files := map[string]string{
		".agents/tasks/prd.md": prd(),
		".ralph/config.toml":   config,
		"check.sh":             checkScript(),
		"README.md":            "# fleet test\n",
	}
	for name, content := range files {
		p := filepath.Join(r.a, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git(r.a, "init", "-q", "-b", "main")
	r.git(r.a, "add", "-A")
	r.git(r.a, "commit", "-q", "-m", "initial")
	r.git(r.dir, "init", "-q", "--bare", r.exchange)
	hook := "#!/bin/sh\necho \"$1\" >> " + r.pushLog + "\n"
	if err := os.WriteFile(filepath.Join(r.exchange, "hooks", "update"), []byte(hook), 0o755); err != nil {
		r.t.Fatal(err)
	}
	r.git(r.dir, "clone", "-q", r.a, r.b)
}

func (r *fleetRun) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// ralphRun runs a ralph command to its end and returns its output and
// exit code.
func (r *fleetRun) ralphRun(dir string, args ...string) (string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), r.within(2*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, r.ralph, args...)
	cmd.Dir, cmd.Env = dir, r.env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.t.Fatalf("ralph %s did not end in time\n%s", strings.Join(args, " "), out)
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		r.t.Fatalf("ralph %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), 0
}

// status is `ralph status --json` in a: the run's state from the
// workflow's status Query.
func (r *fleetRun) status() (rfleet.Status, error) {
	out, code := r.ralphRun(r.a, "status", "--json")
	var st rfleet.Status
	if code != 0 {
		return st, fmt.Errorf("ralph status --json: exit %d: %s", code, clip(out, 2000))
	}
	// The document is the one a local build has (schema_version 1),
	// with the run's own state under temporal.
	var doc status.Report
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return st, fmt.Errorf("ralph status --json printed no status document (%v):\n%s", err, clip(out, 2000))
	}
	if doc.SchemaVersion != status.SchemaVersion || doc.Engine != status.EngineTemporal || doc.Temporal == nil || doc.Parallel == nil || doc.Board == nil {
		return st, fmt.Errorf("ralph status --json is not the status document of a build on Temporal (schema_version %d, engine %q, temporal and parallel present: %v %v):\n%s",
			doc.SchemaVersion, doc.Engine, doc.Temporal != nil, doc.Parallel != nil, clip(out, 2000))
	}
	tp := doc.Temporal
	st.RunID, st.Target, st.Workers, st.Outcome, st.Reason = doc.RunID, doc.Parallel.Target, doc.Parallel.Workers, doc.Outcome, doc.Reason
	st.Paused, st.Stopping, st.Controls, st.Generation, st.HistoryLength, st.Iterations = doc.Paused != nil, tp.Stopping, tp.Controls, tp.Generation, tp.HistoryLength, doc.Iteration
	for _, t := range tp.Tasks {
		st.Tasks = append(st.Tasks, &rfleet.Task{ID: t.ID, State: landing.TaskState(t.State), Host: t.Host, Attempt: t.Attempt,
			Branch: t.Branch, Commit: t.Commit, Reason: t.Reason, Skipped: t.Skipped, HeldBy: t.HeldBy})
	}
	return st, nil
}

// waitStatus polls the run's status until cond holds.
func (r *fleetRun) waitStatus(what string, limit time.Duration, cond func(rfleet.Status) bool) rfleet.Status {
	r.t.Helper()
	var st rfleet.Status
	r.waitFor(what, limit, func() (bool, string) {
		var err error
		if st, err = r.status(); err != nil {
			return false, err.Error()
		}
		if cond(st) {
			return true, ""
		}
		b, _ := json.Marshal(st)
		return false, string(b)
	})
	return st
}

// event is the part of a journal line the test reads.
type event struct {
	Seq     int            `json:"seq"`
	Run     string         `json:"run"`
	Worker  string         `json:"worker"`
	Machine string         `json:"machine"`
	Task    string         `json:"task"`
	Kind    string         `json:"kind"`
	Text    string         `json:"text"`
	Data    map[string]any `json:"data"`
}

// journal reads a host's journal (.ralph/events.jsonl); a torn last line
// (the host is writing it) is left for the next read.
func journal(repo string) []event {
	b, err := os.ReadFile(filepath.Join(repo, ".ralph", "events.jsonl"))
	if err != nil {
		return nil
	}
	var out []event
	for _, line := range strings.Split(string(b), "\n") {
		var ev event
		if json.Unmarshal([]byte(line), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}

// processesIn lists the processes whose working directory is dir or
// below it (Linux; elsewhere none).
func processesIn(dir string) []int {
	return processes(func(pid int) bool {
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		if err != nil {
			return false
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		return cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))
	})
}

// processesWith lists the live processes whose command line holds s.
func processesWith(s string) []int {
	return processes(func(pid int) bool { return strings.Contains(cmdline(pid), s) })
}

func processes(match func(pid int) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		if match(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid is a process that has not exited (a zombie
// nobody reaped has).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")), " ")
}

func describe(pids []int) string {
	var parts []string
	for _, p := range pids {
		cwd, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "cwd"))
		parts = append(parts, fmt.Sprintf("%d in %s: %s", p, cwd, cmdline(p)))
	}
	return strings.Join(parts, "\n")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
