package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// scenarioDeadline bounds one scenario on one executor: seconds on an
// idle machine, several times that on a loaded 2-core one under -race.
const scenarioDeadline = 4 * time.Minute

// world is one scenario's repository and every process it started, under
// one temporary folder: repo is the person's checkout (for Temporal also
// the worker's host and the integration host), scenario the fake agent's
// script.
type world struct {
	t        *testing.T
	dir      string
	repo     string
	scenario string
	ralph    string
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

// code is the exit code of an exited process, -1 when a signal ended it.
func (p *proc) code() int { return p.cmd.ProcessState.ExitCode() }

// killed reports whether a signal (the crash point's SIGKILL) ended p.
func (p *proc) killed() bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func newWorld(t *testing.T) *world {
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
	w := &world{t: t, dir: dir, repo: filepath.Join(dir, "a"), scenario: filepath.Join(dir, "scenario.json"), ralph: ralph,
		deadline: time.Now().Add(scenarioDeadline)}
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, filepath.Join(dir, "logs"), w.repo} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "gitconfig"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.env = cleanEnv("HOME="+home, "GIT_CONFIG_GLOBAL="+filepath.Join(home, "gitconfig"))
	t.Cleanup(w.cleanup)
	return w
}

// cleanEnv is this process's environment without what would reach the
// user's git configuration, a Temporal server of theirs or a ralph
// setting, plus extra; the race runtime's second of sleep at exit off.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") || strings.HasPrefix(name, "RALPH_") || strings.HasPrefix(name, "TEMPORAL_") ||
			name == "HOME" || name == "XDG_CONFIG_HOME" || name == "GORACE" || name == "AGENT_CMD" || name == fakeagent.EnvScenario {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid", "GORACE="+clitest.NoExitSleep(), "TZ=UTC"), extra...)
}

// cleanup prints what every process said when the scenario failed, then
// kills them and whatever an agent left running in the scenario's folder.
func (w *world) cleanup() {
	if w.t.Failed() {
		for _, p := range w.procs {
			w.t.Logf("──── %s, log %s ────\n%s", p.name, p.log, clip(p.output(), 20000))
		}
	}
	for i := len(w.procs) - 1; i >= 0; i-- {
		p := w.procs[i]
		if !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			w.t.Errorf("%s did not end 10s after SIGKILL", p.name)
		}
	}
	for _, pid := range processesIn(w.dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// start starts a background process in its own process group, its output
// in logs/NAME.log; extra is added to the world's environment.
func (w *world) start(name, dir string, extra []string, bin string, args ...string) *proc {
	w.t.Helper()
	logPath := filepath.Join(w.dir, "logs", fmt.Sprintf("%s-%d.log", name, len(w.procs)))
	f, err := os.Create(logPath)
	if err != nil {
		w.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, append(slices.Clone(w.env), extra...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		w.t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	w.procs = append(w.procs, p)
	return p
}

// within is how long a wait of limit may take without passing the
// scenario's deadline.
func (w *world) within(limit time.Duration) time.Duration {
	return max(0, min(limit, time.Until(w.deadline)))
}

// waitFor polls cond until it holds, failing the scenario after limit
// with what it waited for and cond's last word.
func (w *world) waitFor(what string, limit time.Duration, cond func() (bool, string)) {
	w.t.Helper()
	var last string
	if !wait.Within(w.within(limit), func() (ok bool) { ok, last = cond(); return ok }) {
		w.t.Fatalf("waited %s for %s; last: %s", limit, what, last)
	}
}

// waitLog waits until p's output matches re and returns the match.
func (w *world) waitLog(p *proc, re string, limit time.Duration) []string {
	w.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	w.waitFor(fmt.Sprintf("%s to print %q", p.name, re), limit, func() (bool, string) {
		out := p.output()
		if m = rx.FindStringSubmatch(out); m != nil {
			return true, ""
		}
		if p.exited() {
			w.t.Fatalf("%s ended (%v) without printing %q:\n%s", p.name, p.err, re, clip(out, 8000))
		}
		return false, clip(out, 2000)
	})
	return m
}

// waitEnd waits until p exits.
func (w *world) waitEnd(p *proc, limit time.Duration) {
	w.t.Helper()
	w.waitFor(p.name+" to end", limit, func() (bool, string) { return p.exited(), clip(p.output(), 2000) })
}

// writeFiles writes files (path below the repository: content).
func (w *world) writeFiles(files map[string]string) {
	w.t.Helper()
	for name, content := range files {
		p := filepath.Join(w.repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) git(dir string, args ...string) string {
	w.t.Helper()
	out, code := w.run(dir, "git", args...)
	if code != 0 {
		w.t.Fatalf("git %s in %s: exit %d\n%s", strings.Join(args, " "), dir, code, out)
	}
	return strings.TrimSpace(out)
}

// run runs a command to its end and returns its output and exit code (-1
// when it could not start or did not end in time).
func (w *world) run(dir, name string, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), w.within(2*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, w.env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fmt.Sprintf("%s did not end in time\n%s", name, out), -1
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		return err.Error(), -1
	}
	return string(out), 0
}

// landed lists the tasks of the target's commits (their Ralph-Task
// trailers), oldest first, one entry per commit.
func (w *world) landed() []string {
	w.t.Helper()
	var ids []string
	for _, line := range strings.Split(w.git(w.repo, "log", "--reverse", "--format=%(trailers:key=Ralph-Task,valueonly)", "main"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			ids = append(ids, line)
		}
	}
	return ids
}

// board is the task file's stories by id, as `ralph status --json` says
// where each is.
func (w *world) board() (map[string]status.Story, error) {
	out, code := w.run(w.repo, w.ralph, "status", "--json")
	if code != 0 {
		return nil, fmt.Errorf("ralph status --json: exit %d: %s", code, clip(out, 2000))
	}
	var doc status.Report
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("ralph status --json printed no status document (%v):\n%s", err, clip(out, 2000))
	}
	board := map[string]status.Story{}
	for _, s := range doc.Board {
		board[s.ID] = s
	}
	return board, nil
}

// event is the part of a journal line a scenario reads.
type event struct {
	Seq  int            `json:"seq"`
	Task string         `json:"task"`
	Kind string         `json:"kind"`
	Text string         `json:"text"`
	Data map[string]any `json:"data"`
}

// journal reads the repository's journal (.ralph/events.jsonl); a torn
// last line (someone is writing it) is left for the next read.
func (w *world) journal() []event {
	b, err := os.ReadFile(filepath.Join(w.repo, ".ralph", "events.jsonl"))
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
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
