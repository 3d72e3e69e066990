// Package harness is the world an end-to-end test of the ralph binary
// runs in: a temporary folder with its own HOME and git configuration, the
// background processes the test started (each with its log), waits on
// their output against one deadline, and a cleanup that leaves nothing
// running. The conformance suite and the Temporal engine's end-to-end
// tests build their scenarios on it; it is test code.
package harness

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
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// World is one test's folder and every process it started there.
type World struct {
	T        *testing.T
	Dir      string // the folder: home/, logs/ and whatever the test makes
	Ralph    string // the ralph binary (the test binary, put on PATH by clitest.Main)
	Env      []string
	Deadline time.Time
	Procs    []*Proc
}

// New makes a world whose waits all end by deadline from now. It fails
// the test, never skips it, without git or ralph on PATH.
func New(t *testing.T, deadline time.Duration) *World {
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
	w := &World{T: t, Dir: dir, Ralph: ralph, Deadline: time.Now().Add(deadline)}
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "gitconfig"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.Env = CleanEnv("HOME="+home, "GIT_CONFIG_GLOBAL="+filepath.Join(home, "gitconfig"))
	t.Cleanup(w.cleanup)
	return w
}

// Env is this process's environment without what would reach the
// user's git configuration, a Temporal server or cloud account of theirs,
// an agent or a ralph setting, plus extra; the race runtime's second of
// sleep at every exit (ralph's, the fake agent's) off.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") || strings.HasPrefix(name, "RALPH_") || strings.HasPrefix(name, "TEMPORAL_") ||
			name == "HOME" || name == "XDG_CONFIG_HOME" || name == "GORACE" || name == "AGENT_CMD" || name == fakeagent.EnvScenario {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "GIT_CONFIG_NOSYSTEM=1", "GORACE="+clitest.NoExitSleep()), extra...)
}

// CleanEnv is Env with a test author and committer for git, in UTC.
func CleanEnv(extra ...string) []string {
	return Env(append([]string{"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid", "TZ=UTC"}, extra...)...)
}

// cleanup prints what every process said when the test failed, then
// kills them and whatever an agent or a killed ralph left running in the
// world's folder. A test's own cleanup registered after New runs before
// it, while the processes still run.
func (w *World) cleanup() {
	if w.T.Failed() {
		for _, p := range w.Procs {
			w.T.Logf("──── %s, log %s ────\n%s", p, p.Log, Clip(p.Output(), 30000))
		}
	}
	for i := len(w.Procs) - 1; i >= 0; i-- {
		p := w.Procs[i]
		if !p.Exited() {
			_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		}
		select {
		case <-p.Done:
		case <-time.After(10 * time.Second):
			w.T.Errorf("%s did not end 10s after SIGKILL", p.Name)
		}
	}
	w.Reap()
}

// Reap kills what a killed ralph left running in the world's folder (its
// agents, its checks): a resumed run stops leftovers itself; this only
// keeps the machine's processes from piling up.
func (w *World) Reap() {
	for _, pid := range ProcessesIn(w.Dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Proc is a background process whose output goes to a log file.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
	Done chan struct{} // closed when it has exited
	Err  error         // what Wait returned, once Done
}

// Start starts bin in its own process group in dir with env, its output
// in the file logPath.
func Start(name, dir string, env []string, logPath, bin string, args ...string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, Done: make(chan struct{})}
	go func() {
		p.Err = cmd.Wait()
		f.Close()
		close(p.Done)
	}()
	return p, nil
}

// Exited reports whether p has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Output is what p has written so far.
func (p *Proc) Output() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// Code is the exit code of an exited process, -1 when a signal ended it.
func (p *Proc) Code() int { return p.Cmd.ProcessState.ExitCode() }

// Killed reports whether SIGKILL (a crash point's) ended p.
func (p *Proc) Killed() bool {
	ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (p *Proc) String() string {
	if !p.Exited() {
		return p.Name + " (running, pid " + strconv.Itoa(p.Cmd.Process.Pid) + ")"
	}
	if p.Err == nil {
		return p.Name + " (exit 0)"
	}
	return p.Name + " (" + p.Err.Error() + ")"
}

// Start starts a background process of the world, its output in
// logs/NAME-N.log; extra is added to the world's environment.
func (w *World) Start(name, dir string, extra []string, bin string, args ...string) *Proc {
	w.T.Helper()
	logPath := filepath.Join(w.Dir, "logs", fmt.Sprintf("%s-%d.log", name, len(w.Procs)))
	p, err := Start(name, dir, append(slices.Clone(w.Env), extra...), logPath, bin, args...)
	if err != nil {
		w.T.Fatal(err)
	}
	w.Procs = append(w.Procs, p)
	return p
}

// Within is how long a wait of limit may take without passing the
// world's deadline.
func (w *World) Within(limit time.Duration) time.Duration {
	return max(0, min(limit, time.Until(w.Deadline)))
}

// WaitFor polls cond until it holds, failing the test after limit with
// what it waited for and cond's last word.
func (w *World) WaitFor(what string, limit time.Duration, cond func() (bool, string)) {
	w.T.Helper()
	var last string
	if !wait.Within(w.Within(limit), func() (ok bool) { ok, last = cond(); return ok }) {
		w.T.Fatalf("waited %s for %s; last: %s", limit, what, last)
	}
}

// WaitLog waits until p's output matches re and returns the match.
func (w *World) WaitLog(p *Proc, re string, limit time.Duration) []string {
	w.T.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	w.WaitFor(fmt.Sprintf("%s to print %q", p.Name, re), limit, func() (bool, string) {
		out := p.Output()
		if m = rx.FindStringSubmatch(out); m != nil {
			return true, ""
		}
		if p.Exited() {
			w.T.Fatalf("%s ended (%v) without printing %q:\n%s", p.Name, p.Err, re, Clip(out, 8000))
		}
		return false, Clip(out, 2000)
	})
	return m
}

// WaitEnd waits until p exits.
func (w *World) WaitEnd(p *Proc, limit time.Duration) {
	w.T.Helper()
	w.WaitFor(p.Name+" to end", limit, func() (bool, string) { return p.Exited(), Clip(p.Output(), 2000) })
}

// WriteFiles writes files (path below dir: content).
func (w *World) WriteFiles(dir string, files map[string]string) {
	w.T.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.T.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			w.T.Fatal(err)
		}
	}
}

// Git runs git in dir and returns its output trimmed, failing the test
// when git fails.
func (w *World) Git(dir string, args ...string) string {
	w.T.Helper()
	out, code := w.Run(dir, "git", args...)
	if code != 0 {
		w.T.Fatalf("git %s in %s: exit %d\n%s", strings.Join(args, " "), dir, code, out)
	}
	return strings.TrimSpace(out)
}

// Run runs a command to its end and returns its output and exit code (-1
// when it could not start or did not end in time).
func (w *World) Run(dir, name string, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), w.Within(2*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, w.Env
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

// Event is the part of a journal line the tests read.
type Event struct {
	Seq     int            `json:"seq"`
	Run     string         `json:"run"`
	Worker  string         `json:"worker"`
	Machine string         `json:"machine"`
	Task    string         `json:"task"`
	Kind    string         `json:"kind"`
	Text    string         `json:"text"`
	Data    map[string]any `json:"data"`
}

// Journal reads the journal (.ralph/events.jsonl) of the repository
// repo; a torn last line (someone is writing it) is left for the next
// read.
func Journal(repo string) []Event {
	b, err := os.ReadFile(filepath.Join(repo, ".ralph", "events.jsonl"))
	if err != nil {
		return nil
	}
	var out []Event
	for _, line := range strings.Split(string(b), "\n") {
		var ev Event
		if json.Unmarshal([]byte(line), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}

// Clip keeps the last n bytes of s: the end of a log is where it failed.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Kill kills p's process group and waits until p has exited.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.Done
}
