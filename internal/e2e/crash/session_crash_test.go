package crash

// Session crash tests: `ralph run` (a seed-002 session of planner,
// questioner, executor and reviewer runs) is killed with SIGKILL right after
// each persisted transition (through the RALPH_TEST_CRASH_AFTER hook) and in
// the middle of an executor run, then continued with `ralph run --resume`.
// The resumed session must end where an uninterrupted one ends, without
// repeating a finished task: every fake-agent invocation of the scenario
// may be used once ("times": 1), so a role run repeated after the resume
// would find no invocation left, and the fake agent would exit 3.
//
// The repository, ralph's configuration and the scenario are those of
// cmd/ralph/testdata/script/session.txtar, read from that file. The harness
// (environment, git, the ralph and fakeagent binaries on PATH) is the one
// crash_test.go uses.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/harness"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/rogpeppe/go-internal/txtar"
)

// sessionRequest is the request session.txtar starts its session with.
const sessionRequest = "Greet and say goodbye in text files"

// sessionTaskSubjects are the subjects of ralph's commits of the session's
// two tasks.
var sessionTaskSubjects = []string{"task-1: Write greet.txt", "task-2: Write bye.txt"}

// Matches of the scenario's executor invocations, whose use counts the
// tests compare.
const (
	matchExec1a = "Execute task-1, attempt 1 of 3"
	matchExec1b = "Execute task-1, attempt 2 of 3"
	matchExec2  = "Execute task-2, attempt 1 of 3"
)

// sessionFixture is what session.txtar's archive holds: the repository's
// files and the fake agent's scenario.
type sessionFixture struct {
	files    map[string]string
	scenario fakeagent.Scenario
}

func loadSessionFixture(t *testing.T) *sessionFixture {
	t.Helper()
	root, err := clitest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ar, err := txtar.ParseFile(filepath.Join(root, "cmd", "ralph", "testdata", "script", "session.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	f := &sessionFixture{files: map[string]string{}}
	var raw []byte
	for _, file := range ar.Files {
		if file.Name == "scenario.json" {
			raw = file.Data
			continue
		}
		f.files[file.Name] = string(file.Data)
	}
	if raw == nil || f.files[".ralph/config.toml"] == "" {
		t.Fatal("session.txtar has no scenario.json or .ralph/config.toml")
	}
	if err := json.Unmarshal(raw, &f.scenario); err != nil {
		t.Fatalf("session.txtar's scenario.json: %v", err)
	}
	for i, inv := range f.scenario.Invocations {
		if inv.Times != 1 {
			t.Fatalf("session.txtar's invocation %d (%q) has times %d; these tests rely on every invocation being usable once", i, inv.Match, inv.Times)
		}
	}
	// A failed role run is not retried: a role run repeated after a resume
	// finds its invocation used up, and the run fails at once instead of
	// after 5s+10s+20s of backoff.
	f.files[".ralph/config.toml"] += "[session]\nagent_retries = 0\n"
	return f
}

// invocationIndex is the index of the invocation whose match is match.
func invocationIndex(t *testing.T, sc fakeagent.Scenario, match string) int {
	t.Helper()
	for i, inv := range sc.Invocations {
		if inv.Match == match {
			return i
		}
	}
	t.Fatalf("the scenario has no invocation matching %q", match)
	return -1
}

// newSessionCase makes a repository with session.txtar's files, committed,
// and writes sc as its scenario (outside the repository).
func (h *crashHarness) newSessionCase(t *testing.T, f *sessionFixture, sc fakeagent.Scenario) *crashCase {
	t.Helper()
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	c := &crashCase{h: h, repo: filepath.Join(dir, "repo"), scenario: filepath.Join(dir, "scenario.json")}
	c.initRepo(t, f.files, "Session Crash Test", "session-crash@example.invalid")
	if err := fakeagent.WriteScenario(c.scenario, sc); err != nil {
		t.Fatal(err)
	}
	return c
}

// runSession runs ralph with args to its end; crashAfter > 0 sets the
// crash hook.
func (c *crashCase) runSession(t *testing.T, crashAfter int, args ...string) buildResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.h.ralph, args...)
	cmd.Dir = c.repo
	cmd.Env = c.sessionEnv(crashAfter)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ralph: %v", err)
	}
	err := cmd.Wait()
	res := buildResult{out: out.String(), dur: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("ralph %s did not end within 60s\n%s", strings.Join(args, " "), clipOut(res.out))
	}
	res.code, res.killed = exitOf(t, err, res.out)
	return res
}

// sessionEnv is the harness's environment for ralph and, through it, the
// fake agent, with the crash point when one is set.
func (c *crashCase) sessionEnv(crashAfter int) []string {
	env := c.h.env(c.scenario, crashAfter)
	if c.crashAt != "" {
		env = append(env, "RALPH_TEST_CRASH_AT="+c.crashAt)
	}
	return env
}

// exitOf is the exit code of a ralph process (-1 when a signal ended it)
// and whether SIGKILL ended it.
func exitOf(t *testing.T, err error, out string) (int, bool) {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, false
	case errors.As(err, &ee):
		ws, ok := ee.Sys().(syscall.WaitStatus)
		return ee.ExitCode(), ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
	t.Fatalf("ralph: %v\n%s", err, clipOut(out))
	return 0, false
}

// resumeSession runs `ralph run --resume` until it exits 0, at most three
// times. Every resume must exit 0: one that does not is reported (a role
// run repeated after the crash fails it), and the next try shows whether
// the session can still be finished.
func (c *crashCase) resumeSession(t *testing.T) (resumes int) {
	t.Helper()
	for try := 1; try <= 3; try++ {
		res := c.runSession(t, 0, "run", "--resume")
		if res.code == 0 && !res.killed {
			return try
		}
		t.Errorf("ralph run --resume, try %d: %s, want exit 0\n%s", try, res, clipOut(res.out))
	}
	t.Fatalf("the session did not complete in 3 resumes")
	return 0
}

// sessionDirOf is the repository's only session folder.
func (c *crashCase) sessionDirOf(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(c.repo, ".ralph", "sessions", "*", "progress.md"))
	if len(dirs) != 1 {
		t.Fatalf("%d session folders, want 1: %v", len(dirs), dirs)
	}
	return filepath.Dir(dirs[0])
}

func readText(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sessionTransitions reads the session's transition log, which must parse.
func (c *crashCase) sessionTransitions(t *testing.T) []loop.TransitionEvent {
	t.Helper()
	events, err := session.ReadTransitions(session.TransitionsPath(c.sessionDirOf(t)))
	if err != nil {
		t.Fatalf("the transition log does not parse: %v", err)
	}
	return events
}

// sessionSteps renders transitions as "From -> To (trigger, task)" lines.
// Without resumed, the session_resolved transitions a resume logs
// (Initializing -> the saved state) are left out, which leaves the
// sequence an uninterrupted run logs.
func sessionSteps(events []loop.TransitionEvent, resumed bool) []string {
	var out []string
	for i, e := range events {
		tr := e.Transition
		if !resumed && i > 0 && tr.From == string(session.Initializing) {
			continue
		}
		out = append(out, fmt.Sprintf("%s -> %s (%s, %s)", tr.From, tr.To, tr.Trigger, tr.TaskID))
	}
	return out
}

func (c *crashCase) agentState(t *testing.T) fakeagent.State {
	t.Helper()
	st, err := fakeagent.ReadState(c.scenario)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sessionReference is the end of an uninterrupted session.
type sessionReference struct {
	steps    []string // sessionSteps of its transition log
	tasks    string   // tasks.md
	subjects []string // git log, oldest first
	used     []int    // the fake agent's use counts
}

func (h *crashHarness) sessionReference(t *testing.T, f *sessionFixture) *sessionReference {
	t.Helper()
	c := h.newSessionCase(t, f, f.scenario)
	res := c.runSession(t, 0, "run", sessionRequest)
	if res.code != 0 || res.killed {
		t.Fatalf("uninterrupted session: %s, want exit 0\n%s", res, clipOut(res.out))
	}
	events := c.sessionTransitions(t)
	ref := &sessionReference{
		steps:    sessionSteps(events, true),
		tasks:    readText(t, filepath.Join(c.sessionDirOf(t), "tasks.md")),
		subjects: c.subjects(t),
		used:     c.agentState(t).Used,
	}
	// session.txtar checks this run in detail; check what the crashed runs
	// are compared on.
	if len(ref.steps) != 13 {
		t.Errorf("the uninterrupted session logged %d transitions, want 13 as session.txtar says:\n%s", len(ref.steps), strings.Join(ref.steps, "\n"))
	}
	if want := append([]string{"initial"}, sessionTaskSubjects...); !slices.Equal(ref.subjects, want) {
		t.Errorf("the uninterrupted session's history is %q, want %q", ref.subjects, want)
	}
	for i, n := range ref.used {
		if n != 1 {
			t.Errorf("the uninterrupted session used invocation %d (%q) %d times, want 1", i, f.scenario.Invocations[i].Match, n)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("uninterrupted session: %d transitions in %s", len(ref.steps), res.dur.Round(time.Millisecond))
	return ref
}

// assertSessionEnd compares a crashed and resumed session with the
// uninterrupted one; resumes is how many `ralph run --resume` it took.
func (c *crashCase) assertSessionEnd(t *testing.T, ref *sessionReference, sc fakeagent.Scenario, resumes int) {
	t.Helper()
	dir := c.sessionDirOf(t)
	if got := readText(t, filepath.Join(dir, "tasks.md")); got != ref.tasks {
		t.Errorf("tasks.md at the end:\n%s\nwant the uninterrupted session's:\n%s", got, ref.tasks)
	}
	if progress := readText(t, session.ProgressPath(dir)); !strings.Contains(progress, "\n- Done: yes\n") {
		t.Errorf("progress.md does not say \"- Done: yes\":\n%s", progress)
	}

	// Exactly one commit per task and no other new commit.
	subjects := c.subjects(t)
	for _, want := range sessionTaskSubjects {
		if n := countOf(subjects, want); n != 1 {
			t.Errorf("%d commits with subject %q, want exactly 1; history %q", n, want, subjects)
		}
	}
	if !slices.Equal(subjects, ref.subjects) {
		t.Errorf("history %q, want the uninterrupted session's %q", subjects, ref.subjects)
	}
	if dirty := c.git(t, "status", "--porcelain", "--untracked-files=all"); strings.TrimSpace(dirty) != "" {
		t.Errorf("the tree is not clean at the end:\n%s", dirty)
	}

	// No role run was repeated: every invocation was used at most as often
	// as it may be, and the executors exactly as often as in the
	// uninterrupted session.
	used := c.agentState(t).Used
	for i, inv := range sc.Invocations {
		n := 0
		if i < len(used) {
			n = used[i]
		}
		if inv.Times > 0 && n > inv.Times {
			t.Errorf("invocation %d (%q) was used %d times, more than its %d", i, inv.Match, n, inv.Times)
		}
	}
	for _, m := range []string{matchExec1a, matchExec1b, matchExec2} {
		i := invocationIndex(t, sc, m)
		if i >= len(used) || used[i] != ref.used[i] {
			t.Errorf("the executor invocation %q was used %v times (all counts %v), want %d as in the uninterrupted session (%v)",
				m, valueAt(used, i), used, ref.used[i], ref.used)
		}
	}

	// The log parses, ends with the goal check, and apart from the
	// Initializing -> ... lines each resume adds, tells the uninterrupted
	// session's story: no transition lost, none repeated.
	events := c.sessionTransitions(t)
	if len(events) == 0 {
		t.Fatal("the transition log is empty")
	}
	if last := events[len(events)-1].Transition; last.Trigger != string(session.HolisticCheckPassed) {
		t.Errorf("the transition log ends with %s -> %s (%s), want %s", last.From, last.To, last.Trigger, session.HolisticCheckPassed)
	}
	if got := sessionSteps(events, false); !slices.Equal(got, ref.steps) {
		t.Errorf("the transition log, resume lines left out, differs from the uninterrupted session's:\n%s", diffLines(ref.steps, got))
	}
	if len(events) != len(ref.steps)+resumes {
		t.Errorf("the transition log has %d lines, want %d (the uninterrupted session's) + %d (one per resume):\n%s",
			len(events), len(ref.steps), resumes, strings.Join(sessionSteps(events, true), "\n"))
	}
}

func countOf(l []string, s string) int {
	n := 0
	for _, v := range l {
		if v == s {
			n++
		}
	}
	return n
}

func valueAt(l []int, i int) any {
	if i < len(l) {
		return l[i]
	}
	return "no"
}

// TestSessionCrashAtEveryTransitionResumes kills `ralph run` right after
// its Nth persisted transition, for every transition of an uninterrupted
// session but the last, and resumes it.
//
// Every invocation keeps "times": 1. The hook kills ralph only right after
// a transition is persisted, and every role run's outcome is persisted by
// the transition it causes (the questioner's by its own progress.md write
// before the planner runs), so a resume never needs to run a role whose
// transition is in the log; a role whose transition was not yet persisted
// had not started either.
func TestSessionCrashAtEveryTransitionResumes(t *testing.T) {
	h := newCrashHarness(t)
	f := loadSessionFixture(t)
	ref := h.sessionReference(t, f)
	total := len(ref.steps)
	for n := 1; n < total; n++ {
		t.Run(fmt.Sprintf("N=%02d", n), func(t *testing.T) {
			t.Parallel()
			c := h.newSessionCase(t, f, f.scenario)
			res := c.runSession(t, n, "run", sessionRequest)
			if !res.killed {
				t.Fatalf("with RALPH_TEST_CRASH_AFTER=%d ralph was not killed: %s\n%s", n, res, clipOut(res.out))
			}
			// The kill came right after the Nth transition was persisted.
			if got := sessionSteps(c.sessionTransitions(t), true); !slices.Equal(got, ref.steps[:n]) {
				t.Fatalf("the transition log after the kill at N=%d, want the uninterrupted session's first %d lines:\n%s",
					n, n, diffLines(ref.steps[:n], got))
			}
			t.Logf("killed after transition %d: %s", n, ref.steps[n-1])
			c.reapLeftovers(t)
			resumes := c.resumeSession(t)
			c.assertSessionEnd(t, ref, f.scenario, resumes)
		})
	}
}

// TestSessionKilledMidAgentResumes kills ralph while the task-2 executor
// runs (the agent hangs), then resumes the session: it completes, task-1
// is not executed again, and each task has one commit.
// A kill after progress.md recorded a transition but before its line
// reached transitions.jsonl: the resume appends the line from
// progress.md, so the log ends up the uninterrupted session's.
func TestSessionCrashBetweenProgressAndLog(t *testing.T) {
	h := newCrashHarness(t)
	f := loadSessionFixture(t)
	ref := h.sessionReference(t, f)
	for _, n := range []int{1, 4, 7, 12} {
		t.Run(fmt.Sprintf("N=%02d", n), func(t *testing.T) {
			t.Parallel()
			c := h.newSessionCase(t, f, f.scenario)
			c.crashAt = fmt.Sprintf("session-saved@%d", n)
			res := c.runSession(t, 0, "run", sessionRequest)
			if !res.killed {
				t.Fatalf("RALPH_TEST_CRASH_AT=%s: %s, want a SIGKILL\n%s", c.crashAt, res, clipOut(res.out))
			}
			if got := sessionSteps(c.sessionTransitions(t), true); len(got) != n-1 {
				t.Fatalf("the log has %d lines after the kill, want %d (the Nth not yet logged)", len(got), n-1)
			}
			c.crashAt = ""
			c.reapLeftovers(t)
			resumes := c.resumeSession(t)
			c.assertSessionEnd(t, ref, f.scenario, resumes)
		})
	}
}

func TestSessionKilledMidAgentResumes(t *testing.T) {
	h := newCrashHarness(t)
	f := loadSessionFixture(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "agent.pid")
	// The scenario gets, ahead of the task-2 executor, an invocation for
	// the same prompt that is used once: it writes the fake agent's pid
	// (the parent of its sh step; the agent leads its own process group)
	// to a file outside the repository, then hangs. The resumed executor
	// run finds it used up and takes the original, which succeeds.
	sc := f.scenario
	i2 := invocationIndex(t, sc, matchExec2)
	hang := fakeagent.Invocation{Match: matchExec2, Times: 1, Steps: []fakeagent.Step{
		{Say: "writing bye.txt"},
		{Run: fmt.Sprintf("echo $PPID > %s.tmp && mv %s.tmp %s", pidFile, pidFile, pidFile)},
		{Hang: true},
	}}
	sc.Invocations = slices.Insert(slices.Clone(sc.Invocations), i2, hang)
	c := h.newSessionCase(t, f, sc)

	cmd := exec.Command(c.h.ralph, "run", sessionRequest)
	cmd.Dir = c.repo
	cmd.Env = c.sessionEnv(0)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ralph: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	agentPID, agentKilled := 0, false
	t.Cleanup(func() {
		// Whatever happened, leave no hanging agent behind.
		if agentPID > 0 && !agentKilled {
			syscall.Kill(-agentPID, syscall.SIGKILL)
			syscall.Kill(agentPID, syscall.SIGKILL)
		}
	})
	// A generous bound: on a loaded 2-core machine under -race the four
	// agents before task-2's executor took more than 20 s once.
	deadline := time.After(90 * time.Second)
wait:
	for {
		select {
		case err := <-exited:
			code, killed := exitOf(t, err, out.String())
			t.Fatalf("ralph ended (exit %d, killed %v) before the task-2 executor started\n%s", code, killed, clipOut(out.String()))
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the task-2 executor did not start within 90s\n%s", clipOut(out.String()))
		case <-time.After(10 * time.Millisecond):
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			continue
		}
		if agentPID, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || agentPID <= 1 {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the agent's pid file says %q", b)
		}
		break wait
	}
	cmd.Process.Signal(syscall.SIGKILL)
	if _, killed := exitOf(t, <-exited, out.String()); !killed {
		t.Fatalf("ralph was not ended by SIGKILL\n%s", clipOut(out.String()))
	}
	progress := readText(t, session.ProgressPath(c.sessionDirOf(t)))
	if !strings.Contains(progress, "- State: Executing") {
		t.Fatalf("progress.md after the kill is not in Executing:\n%s", progress)
	}

	// ralph's death does not end the agent: it runs in its own process
	// group and its hang writes nothing, so no SIGPIPE reaches it. The
	// resumed session must stop it (the group is recorded in the session's
	// agent.pgid) before it runs the executor again.
	if alive := harness.ProcessesIn(c.repo); !slices.Contains(alive, agentPID) {
		t.Fatalf("the hanging agent (pid %d) ended with ralph; this test needs it alive (processes: %v)", agentPID, alive)
	}
	res := c.runSession(t, 0, "run", "--resume")
	if res.code != 0 || res.killed {
		t.Fatalf("ralph run --resume: %s, want exit 0\n%s", res, clipOut(res.out))
	}
	if !strings.Contains(res.out, "ralph: stopped the agent the killed session left running (process group ") {
		t.Errorf("the resume did not say it stopped the left-behind agent:\n%s", clipOut(res.out))
	}
	waitGone(t, agentPID)
	agentKilled = true
	if report := readText(t, filepath.Join(c.sessionDirOf(t), "reports", "task-2.md")); !strings.Contains(report, "## Attempt 1: Executor (interrupted)") {
		t.Errorf("task-2's report does not record the cut-short run:\n%s", report)
	}
	dirPath := c.sessionDirOf(t)
	if p := readText(t, session.ProgressPath(dirPath)); !strings.Contains(p, "\n- Done: yes\n") {
		t.Errorf("progress.md does not say \"- Done: yes\":\n%s", p)
	}
	subjects := c.subjects(t)
	for _, want := range sessionTaskSubjects {
		if n := countOf(subjects, want); n != 1 {
			t.Errorf("%d commits with subject %q, want exactly 1; history %q", n, want, subjects)
		}
	}
	if want := append([]string{"initial"}, sessionTaskSubjects...); !slices.Equal(subjects, want) {
		t.Errorf("history %q, want %q", subjects, want)
	}
	if dirty := c.git(t, "status", "--porcelain", "--untracked-files=all"); strings.TrimSpace(dirty) != "" {
		t.Errorf("the tree is not clean at the end:\n%s", dirty)
	}
	used := c.agentState(t).Used
	wantUsed := make([]int, len(sc.Invocations))
	for i := range wantUsed {
		wantUsed[i] = 1
	}
	if !reflect.DeepEqual(used, wantUsed) {
		for i, inv := range sc.Invocations {
			t.Logf("invocation %d %q: used %v", i, inv.Match, valueAt(used, i))
		}
		t.Errorf("use counts %v, want every invocation used once (task-1's executors once each, task-2's hanging run and its successful rerun once each)", used)
	}
	events := c.sessionTransitions(t)
	if last := events[len(events)-1].Transition; last.Trigger != string(session.HolisticCheckPassed) {
		t.Errorf("the transition log ends with %s -> %s (%s), want %s", last.From, last.To, last.Trigger, session.HolisticCheckPassed)
	}
	if got := readText(t, filepath.Join(c.repo, "bye.txt")); got != "bye\n" {
		t.Errorf("bye.txt says %q, want \"bye\\n\"", got)
	}
}

// waitGone waits up to 5s for pid to end (a zombie counts as ended: it
// is not ours to reap).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	dead := func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return true
		}
		// The state follows the command name in parentheses.
		i := bytes.LastIndexByte(b, ')')
		return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
	}
	if !wait.Within(wait.Long, dead) {
		t.Errorf("the agent (pid %d) is still running %s after SIGKILL", pid, wait.Long)
	}
}
