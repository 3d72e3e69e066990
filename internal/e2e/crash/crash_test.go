package crash

// Crash tests: `ralph build` is killed with SIGKILL at every persisted
// transition (through the RALPH_TEST_CRASH_AFTER hook) and at random
// instants, then started again; the resumed run must end exactly where an
// uninterrupted run ends, with its counters intact and any cut-short agent
// run recorded as an interrupted iteration.
//
// The test binary doubles as `ralph` and `fakeagent`: testscript.Main (in
// TestMain) copied it to a bin directory on PATH under both names before
// m.Run, so exec.LookPath finds them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/testing/harness"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// crashStories are the PRD's stories, in order, as id and title; ralph's
// commit for a story has the subject "<id>: <title>".
var crashStories = [][2]string{
	{"US-001", "Write one"},
	{"US-002", "Write two"},
	{"US-003", "Write three"},
}

const crashPRD = `# PRD: crash test

### [ ] US-001: Write one
- [ ] one.txt exists

### [ ] US-002: Write two
- [ ] two.txt says good

### [ ] US-003: Write three
- [ ] three.txt exists
`

// crashCheck passes unless two.txt exists and does not say "good": the
// first attempt at US-002 writes "bad", so its check fails once.
const crashCheck = `#!/bin/sh
if [ -f two.txt ] && [ "$(cat two.txt)" != "good" ]; then echo "two is broken: $(cat two.txt)"; exit 1; fi
exit 0
`

// crashScenario is the fake agent's script. US-002's first attempt writes
// a value the check rejects; its retry is recognised by the feedback ralph
// puts into the prompt, not by a use count, so that an agent run cut short
// by a kill does not change which attempt comes next. With slow set each
// agent run sleeps 100ms before each of its three phases (write files,
// check the story, final message), and prints right before the file steps
// of a phase: an agent orphaned by ralph's death dies of SIGPIPE at its
// next print instead of editing the tree behind the resumed run.
func crashScenario(slow bool) fakeagent.Scenario {
	// files alternates names and contents.
	steps := func(id, final string, files ...string) []fakeagent.Step {
		var edit []fakeagent.Step
		for i := 0; i < len(files); i += 2 {
			edit = append(edit, fakeagent.Step{Write: files[i], Content: files[i+1] + "\n"})
		}
		say := func(text string) fakeagent.Step { return fakeagent.Step{Say: text} }
		pause := fakeagent.Step{Sleep: "100ms"}
		if !slow {
			return append(append([]fakeagent.Step{say("writing")}, edit...),
				say("checking "+id), fakeagent.Step{CheckStory: id}, fakeagent.Step{Final: final})
		}
		s := []fakeagent.Step{pause, say("writing")}
		s = append(s, edit...)
		return append(s, pause, say("checking "+id), fakeagent.Step{CheckStory: id}, pause, fakeagent.Step{Final: final})
	}
	return fakeagent.Scenario{Invocations: []fakeagent.Invocation{
		// ralph judges "the agent made changes" by the set of dirty
		// paths, so the retry also writes a file the first attempt did not.
		{Match: "Your previous attempt at US-002 was sent back",
			Steps: steps("US-002", "fixed two", "two.fix", "two.txt now says good", "two.txt", "good")},
		{Match: "Story: US-001:", Steps: steps("US-001", "wrote one", "one.txt", "one")},
		{Match: "Story: US-002:", Steps: steps("US-002", "wrote two", "two.txt", "bad")},
		{Match: "Story: US-003:", Steps: steps("US-003", "wrote three\n<promise>COMPLETE</promise>", "three.txt", "three")},
	}}
}

// crashHarness is what every crash case shares.
type crashHarness struct {
	ralph, fakeagent string
	home, gitconfig  string
}

func newCrashHarness(t *testing.T) *crashHarness {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the crash tests need git on PATH: install it (apt-get install git)")
	}
	ralph, err := exec.LookPath("ralph")
	if err != nil {
		t.Fatalf("ralph is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	fake, err := exec.LookPath("fakeagent")
	if err != nil {
		t.Fatalf("fakeagent is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	home := t.TempDir()
	gitconfig := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(gitconfig, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return &crashHarness{ralph: ralph, fakeagent: fake, home: home, gitconfig: gitconfig}
}

// env is the environment of ralph and git: this process's, without
// anything that would reach the user's git configuration or a crash hook
// that was not asked for, and without the race runtime's second of sleep
// at the exit of every ralph and fake agent process, which added up to
// most of these tests' time under -race.
func (h *crashHarness) env(scenario string, crashAfter int) []string {
	env := harness.Env("HOME="+h.home, "GIT_CONFIG_GLOBAL="+h.gitconfig, fakeagent.EnvScenario+"="+scenario)
	if crashAfter > 0 {
		env = append(env, "RALPH_TEST_CRASH_AFTER="+strconv.Itoa(crashAfter))
	}
	return env
}

// crashCase is one repository with its own scenario (and use counts).
type crashCase struct {
	h        *crashHarness
	repo     string
	scenario string
	// crashAt, when set, is RALPH_TEST_CRASH_AT for the session runs.
	crashAt string
}

func (h *crashHarness) newCase(t *testing.T, slow bool) *crashCase {
	t.Helper()
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	c := &crashCase{h: h, repo: filepath.Join(dir, "repo"), scenario: filepath.Join(dir, "scenario.json")}
	// The file memory store keeps its events readable line by line, which
	// the exactly-once assertions below read.
	config := fmt.Sprintf("[agent]\ndefault = \"fake\"\n[build]\nrequire_plan = false\n[memory]\nstore = \"file\"\n[agents.fake]\ncommand = [%q]\n"+
		"[[checks]]\nname = \"tests\"\nrun = \"sh check.sh\"\n", h.fakeagent)
	files := map[string]string{
		".agents/tasks/prd.md": crashPRD,
		".ralph/config.toml":   config,
		"check.sh":             crashCheck,
		"README.md":            "# crash test\n",
	}
	c.initRepo(t, files, "Crash Test", "crash@example.invalid")
	if err := fakeagent.WriteScenario(c.scenario, crashScenario(slow)); err != nil {
		t.Fatal(err)
	}
	return c
}

// initRepo writes files into a new repository and commits them as
// "initial".
func (c *crashCase) initRepo(t *testing.T, files map[string]string, name, email string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(c.repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.git(t, "init", "-q", "-b", "main")
	c.git(t, "config", "user.name", name)
	c.git(t, "config", "user.email", email)
	c.git(t, "config", "commit.gpgsign", "false")
	c.git(t, "add", "-A")
	c.git(t, "commit", "-q", "-m", "initial")
}

func (c *crashCase) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = c.repo
	cmd.Env = c.h.env(c.scenario, 0)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildResult is how one `ralph build` process ended.
type buildResult struct {
	code   int  // exit code, -1 when killed by a signal
	killed bool // ended by SIGKILL
	out    string
	dur    time.Duration
}

func (r buildResult) String() string {
	if r.killed {
		return fmt.Sprintf("killed by SIGKILL after %s", r.dur.Round(time.Millisecond))
	}
	return fmt.Sprintf("exit %d after %s", r.code, r.dur.Round(time.Millisecond))
}

// build runs `ralph build 20`. crashAfter > 0 sets the crash hook;
// killAfter > 0 sends SIGKILL after that long.
func (c *crashCase) build(t *testing.T, crashAfter int, killAfter time.Duration) buildResult {
	t.Helper()
	return c.runRalph(t, []string{"build", "20"}, c.h.env(c.scenario, crashAfter), killAfter)
}

// runRalph runs ralph with args in the repository and env, sending SIGKILL
// after killAfter when that is set, and says how it ended.
func (c *crashCase) runRalph(t *testing.T, args, env []string, killAfter time.Duration) buildResult {
	t.Helper()
	var kill chan struct{}
	if killAfter > 0 {
		kill = make(chan struct{})
		timer := time.AfterFunc(killAfter, func() { close(kill) })
		defer timer.Stop()
	}
	return c.runRalphUntil(t, args, env, kill)
}

// runRalphUntil runs ralph with args in the repository and env, sending
// SIGKILL when kill closes (nil: never), and says how it ended.
func (c *crashCase) runRalphUntil(t *testing.T, args, env []string, kill <-chan struct{}) buildResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.h.ralph, args...)
	cmd.Dir = c.repo
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ralph: %v", err)
	}
	done := make(chan struct{})
	defer close(done)
	if kill != nil {
		go func() {
			select {
			case <-kill:
				cmd.Process.Signal(syscall.SIGKILL)
			case <-done:
			}
		}()
	}
	err := cmd.Wait()
	res := buildResult{out: out.String(), dur: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("ralph %s did not end within 90s\n%s", strings.Join(args, " "), res.out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			res.killed = true
		}
	default:
		t.Fatalf("ralph %s: %v\n%s", strings.Join(args, " "), err, res.out)
	}
	return res
}

// reapLeftovers waits for the processes ralph left behind when it was
// killed (an agent, a check, git: anything whose working directory is in
// the repository) to end by themselves, then kills the ones that do not,
// so that nothing edits the tree behind the resumed run.
func (c *crashCase) reapLeftovers(t *testing.T) {
	t.Helper()
	seen := map[int]bool{}
	gone := func() bool {
		pids := harness.ProcessesIn(c.repo)
		for _, p := range pids {
			seen[p] = true
		}
		return len(pids) == 0
	}
	if wait.Within(5*time.Second, gone) {
		if len(seen) > 0 {
			t.Logf("%d process(es) outlived ralph and ended by themselves", len(seen))
		}
		return
	}
	for _, p := range harness.ProcessesIn(c.repo) {
		t.Logf("process %d outlived ralph by 5s (%s); killing it", p, harness.Cmdline(p))
		syscall.Kill(p, syscall.SIGKILL)
	}
	wait.Until(t, wait.Long, func() bool { return len(harness.ProcessesIn(c.repo)) == 0 }, "the leftover processes to die of SIGKILL")
}

// ralphFiles checks that every JSON file under .ralph parses and every
// JSON Lines file parses line by line, where only a last line without its
// newline (a torn append) may be incomplete. It returns the transition
// events.
func (c *crashCase) ralphFiles(t *testing.T) []loop.TransitionEvent {
	t.Helper()
	var events []loop.TransitionEvent
	root := filepath.Join(c.repo, ".ralph")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(c.repo, p)
		switch {
		case strings.HasSuffix(p, ".json"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !json.Valid(b) {
				t.Errorf("%s does not parse as JSON after the kill:\n%s", rel, clipOut(string(b)))
			}
		case strings.HasSuffix(p, ".jsonl"):
			lines, torn := jsonLines(t, p)
			if torn != "" {
				t.Logf("%s ends in a torn line (allowed): %q", rel, torn)
			}
			if filepath.Base(p) == "events.jsonl" && filepath.Dir(p) == root {
				for i, l := range lines {
					var ev loop.TransitionEvent
					if err := json.Unmarshal([]byte(l), &ev); err != nil {
						t.Errorf("%s line %d: %v", rel, i+1, err)
						continue
					}
					events = append(events, ev)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk .ralph: %v", err)
	}
	return events
}

// jsonLines returns the complete lines of a JSON Lines file, failing the
// test for one that does not parse, and an unterminated last line.
func jsonLines(t *testing.T, p string) (lines []string, torn string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "\n")
	torn = parts[len(parts)-1]
	for i, l := range parts[:len(parts)-1] {
		if !json.Valid([]byte(l)) {
			t.Errorf("%s line %d does not parse as JSON: %q", filepath.Base(p), i+1, clipOut(l))
			continue
		}
		lines = append(lines, l)
	}
	return lines, torn
}

func (c *crashCase) state(t *testing.T) *loop.LoopState {
	t.Helper()
	var st loop.LoopState
	readJSONFile(t, filepath.Join(c.repo, ".ralph", "state.json"), &st)
	return &st
}

func readJSONFile(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// transitions renders the transition events as "FROM -> TO (trigger,
// task)" lines.
func transitions(events []loop.TransitionEvent) []string {
	var out []string
	for _, e := range events {
		tr := e.Transition
		if tr.From == "" {
			continue
		}
		out = append(out, fmt.Sprintf("%s -> %s (%s, %s)", tr.From, tr.To, tr.Trigger, tr.TaskID))
	}
	return out
}

// crashBaseline is the end of an uninterrupted run.
type crashBaseline struct {
	transitions []string
	state       *loop.LoopState
	subjects    []string
	dur         time.Duration
}

func (h *crashHarness) baseline(t *testing.T, slow bool) *crashBaseline {
	t.Helper()
	c := h.newCase(t, slow)
	res := c.build(t, 0, 0)
	if res.code != 0 || res.killed {
		t.Fatalf("uninterrupted run: %s, want exit 0\n%s", res, res.out)
	}
	events := c.ralphFiles(t)
	b := &crashBaseline{transitions: transitions(events), state: c.state(t), subjects: c.subjects(t), dur: res.dur}
	if b.state.Metrics.Reworks < 1 {
		t.Fatalf("the uninterrupted run has rework_count %d: the scenario must send US-002 back once", b.state.Metrics.Reworks)
	}
	// The end state of every crashed run is compared with this one, so
	// check it against the story the scenario tells.
	c.assertEnd(t, b, nil)
	t.Logf("uninterrupted run (slow=%v): %d transitions, %d iterations, rework_count %d, %s",
		slow, len(b.transitions), b.state.Metrics.Iterations, b.state.Metrics.Reworks, res.dur.Round(time.Millisecond))
	return b
}

// subjects lists the commit subjects, oldest first.
func (c *crashCase) subjects(t *testing.T) []string {
	t.Helper()
	return strings.Split(strings.TrimSpace(c.git(t, "log", "--reverse", "--format=%s")), "\n")
}

// crashPoint is what state.json said right after ralph was killed.
type crashPoint struct {
	state *loop.LoopState
	// agentCut is set when an agent run had started for the current
	// iteration and had not ended: that iteration must be recorded as
	// interrupted.
	agentCut bool
}

func (p *crashPoint) String() string {
	if p == nil || p.state == nil {
		return "no state"
	}
	m := p.state.Machine
	s := fmt.Sprintf("%s, iteration %d, task %q, retry %d", m.State, m.Iteration, m.TaskID, m.RetryCount)
	if p.agentCut {
		s += ", agent run in flight"
	}
	if p.state.Finished {
		s += ", finished"
	}
	return s
}

func (c *crashCase) crashPoint(t *testing.T) *crashPoint {
	t.Helper()
	if _, err := os.Stat(filepath.Join(c.repo, ".ralph", "state.json")); err != nil {
		return &crashPoint{}
	}
	st := c.state(t)
	a := st.Attempt
	cut := st.Machine.State == loop.StateImplement && a != nil && a.Iteration == st.Machine.Iteration && !a.AgentDone
	return &crashPoint{state: st, agentCut: cut}
}

// resume runs `ralph build 20` without the hook until it exits 0.
func (c *crashCase) resume(t *testing.T) {
	t.Helper()
	for try := 1; ; try++ {
		res := c.build(t, 0, 0)
		if res.code == 0 && !res.killed {
			if !strings.Contains(res.out, "<promise>COMPLETED</promise>") {
				t.Errorf("the resumed run exited 0 without printing COMPLETED:\n%s", clipOut(res.out))
			}
			return
		}
		if try == 3 {
			t.Fatalf("ralph build after the crash: %s, %d times; last output:\n%s", res, try, clipOut(res.out))
		}
		t.Logf("ralph build after the crash, try %d: %s; trying again\n%s", try, res, clipOut(res.out))
	}
}

var headingRE = regexp.MustCompile(`(?m)^### \[([ xX])\] (US-\d+):`)

// assertEnd compares the end of a (crashed and resumed) run with the
// uninterrupted run's.
func (c *crashCase) assertEnd(t *testing.T, base *crashBaseline, at *crashPoint) {
	t.Helper()
	events := c.ralphFiles(t)

	// Every story is checked in the PRD.
	prd, err := os.ReadFile(filepath.Join(c.repo, ".agents", "tasks", "prd.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(string(prd), -1) {
		checked[m[2]] = m[1] != " "
	}
	for _, s := range crashStories {
		if !checked[s[0]] {
			t.Errorf("%s is not checked in the PRD at the end:\n%s", s[0], prd)
		}
	}

	// Exactly one ralph commit per story, and no other commit than the
	// uninterrupted run made.
	subjects := c.subjects(t)
	for _, s := range crashStories {
		want := s[0] + ": " + s[1]
		n := 0
		for _, sub := range subjects {
			if sub == want {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d commits with subject %q, want exactly 1; history: %q", n, want, subjects)
		}
	}
	if len(subjects) != len(base.subjects) {
		t.Errorf("history has %d commits %q, the uninterrupted run's has %d %q", len(subjects), subjects, len(base.subjects), base.subjects)
	}
	if debris := c.git(t, "ls-files", "--", "*.tmp", ".ralph/runs", ".ralph/state.json", ".ralph/events.jsonl", ".ralph/lock"); strings.TrimSpace(debris) != "" {
		t.Errorf("ralph committed machine state or temporary files:\n%s", debris)
	}
	if dirty := c.git(t, "status", "--porcelain", "--untracked-files=all"); strings.TrimSpace(dirty) != "" {
		t.Errorf("the tree is not clean at the end:\n%s", dirty)
	}

	// state.json: finished, complete, counters as in the uninterrupted run.
	st := c.state(t)
	want := base.state
	if !st.Finished || st.Outcome != loop.OutcomeComplete {
		t.Errorf("state.json: finished=%v outcome=%q reason=%q, want finished and complete", st.Finished, st.Outcome, st.Reason)
	}
	if st.Machine.State != loop.StateExit {
		t.Errorf("state.json: machine in %s, want EXIT", st.Machine.State)
	}
	mt := st.Metrics
	if mt.TaskSuccesses != 3 {
		t.Errorf("task_successes = %d, want 3", mt.TaskSuccesses)
	}
	if mt.Reworks < 1 || mt.Reworks != want.Metrics.Reworks {
		t.Errorf("rework_count = %d, want %d as in the uninterrupted run (the retry of US-002 was lost or counted twice)", mt.Reworks, want.Metrics.Reworks)
	}
	if mt.TaskFailures != want.Metrics.TaskFailures {
		t.Errorf("task_failures = %d, want %d as in the uninterrupted run", mt.TaskFailures, want.Metrics.TaskFailures)
	}
	if mt.Iterations < want.Metrics.Iterations || st.Machine.Iteration != mt.Iterations {
		t.Errorf("metrics.iterations = %d (machine iteration %d), want >= %d", mt.Iterations, st.Machine.Iteration, want.Metrics.Iterations)
	}
	for _, s := range crashStories {
		tr := st.Tasks[s[0]]
		if tr == nil {
			t.Errorf("state.json has no task record for %s", s[0])
			continue
		}
		wt := want.Tasks[s[0]]
		if tr.Successes != 1 || tr.RetryCount != 0 || tr.Blocker != nil || tr.Failures != wt.Failures {
			t.Errorf("task %s: successes=%d retry_count=%d failures=%d blocker=%v, want 1, 0, %d, none",
				s[0], tr.Successes, tr.RetryCount, tr.Failures, tr.Blocker, wt.Failures)
		}
	}
	if len(st.Feedback) != 0 {
		t.Errorf("feedback left in state.json: %v", st.Feedback)
	}

	// One run, resumed, whose records cover every iteration. A kill
	// before the first state.json leaves a run folder that is never
	// resumed: the next build starts afresh.
	resumed := at != nil && at.state != nil
	runs, _ := filepath.Glob(filepath.Join(c.repo, ".ralph", "runs", "*", "run.json"))
	if len(runs) != 1 && (at == nil || resumed) {
		t.Errorf("%d run folders, want 1 (the crashed run resumed): %v", len(runs), runs)
	}
	runDir := filepath.Join(c.repo, ".ralph", "runs", st.RunID)
	var rr loop.RunRecord
	readJSONFile(t, filepath.Join(runDir, "run.json"), &rr)
	if rr.Outcome != loop.OutcomeComplete || rr.EndedAt.IsZero() {
		t.Errorf("run.json: outcome %q ended_at %v, want complete and an end time", rr.Outcome, rr.EndedAt)
	}
	if resumed && rr.Resumes < 1 {
		t.Errorf("run.json: resumes = %d, want >= 1 after a crash", rr.Resumes)
	}
	interrupted := 0
	status := map[int]string{}
	done := 0
	for i := 1; i <= mt.Iterations; i++ {
		var rec loop.IterationRecord
		p := filepath.Join(runDir, fmt.Sprintf("iter-%d.json", i))
		if _, err := os.Stat(p); err != nil {
			t.Errorf("iteration %d of %d has no record (%s)", i, mt.Iterations, filepath.Base(p))
			continue
		}
		readJSONFile(t, p, &rec)
		status[i] = rec.Status
		switch rec.Status {
		case loop.StatusInterrupted:
			interrupted++
		case loop.StatusDone:
			done++
		}
	}
	if done != 3 {
		t.Errorf("%d iterations recorded done, want 3; statuses %v", done, status)
	}
	// Counters intact: every iteration beyond the uninterrupted run's is
	// one that a kill cut short.
	if mt.Iterations != want.Metrics.Iterations+interrupted {
		t.Errorf("metrics.iterations = %d with %d interrupted iteration(s), want %d + %d; statuses %v",
			mt.Iterations, interrupted, want.Metrics.Iterations, interrupted, status)
	}
	if at != nil && at.state != nil && at.state.Machine.State == loop.StateImplement {
		n := at.state.Machine.Iteration
		switch {
		case at.agentCut && status[n] != loop.StatusInterrupted:
			t.Errorf("ralph was killed while the agent ran iteration %d, whose record says %q, want %q; statuses %v",
				n, status[n], loop.StatusInterrupted, status)
		case !at.agentCut && status[n] == loop.StatusInterrupted:
			t.Errorf("ralph was killed in IMPLEMENT before the agent of iteration %d started, yet it is recorded interrupted; statuses %v", n, status)
		}
	}
	if at != nil && !at.agentCut && interrupted != 0 {
		t.Errorf("%d interrupted iteration(s) although no agent run was cut short; statuses %v", interrupted, status)
	}

	// Memory holds one "task complete" event per story. A COMMIT rerun
	// after a kill writes its event again under the same id, which the
	// file store reads as one memory (the latest version), so the events
	// are counted as ralph's store reads them; every line must parse.
	jsonLines(t, filepath.Join(c.repo, ".ralph", "memory.jsonl"))
	mem := &memory.FileStore{Path: filepath.Join(c.repo, ".ralph", "memory.jsonl")}
	if nodes, err := mem.List(context.Background(), memory.TypeEvent, 0); err != nil {
		t.Errorf("memory.jsonl: %v", err)
	} else {
		complete := map[string]int{}
		for _, n := range nodes {
			if n.Props["event"] == memory.EventTaskComplete {
				complete[n.Props["task"]]++
			}
		}
		for _, s := range crashStories {
			if complete[s[0]] != 1 {
				t.Errorf("memory.jsonl has %d %s events for %s, want 1", complete[s[0]], memory.EventTaskComplete, s[0])
			}
		}
	}

	// The transition log tells the uninterrupted run's story: no
	// transition lost, none repeated.
	if got := transitions(events); strings.Join(got, "\n") != strings.Join(base.transitions, "\n") {
		t.Errorf("events.jsonl transitions differ from the uninterrupted run's:\n%s", diffLines(base.transitions, got))
	}
}

// diffLines shows two line lists side by side from their first difference.
func diffLines(want, got []string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "identical up to line %d; then\n", i)
	for j := i; j < len(want) || j < len(got); j++ {
		w, g := "", ""
		if j < len(want) {
			w = want[j]
		}
		if j < len(got) {
			g = got[j]
		}
		mark := " "
		if w != g {
			mark = "!"
		}
		fmt.Fprintf(&b, "%s %3d want %-55s got %s\n", mark, j+1, w, g)
	}
	return b.String()
}

func clipOut(s string) string {
	if len(s) > 6000 {
		return s[:2000] + "\n…\n" + s[len(s)-4000:]
	}
	return s
}

// TestCrashAtEveryTransition kills ralph right after its Nth persisted
// transition, for every N of an uninterrupted run, and resumes it.
func TestCrashAtEveryTransition(t *testing.T) {
	h := newCrashHarness(t)
	base := h.baseline(t, false)
	total := len(base.transitions)
	for n := 1; n <= total; n++ {
		t.Run(fmt.Sprintf("N=%02d", n), func(t *testing.T) {
			t.Parallel()
			c := h.newCase(t, false)
			res := c.build(t, n, 0)
			if !res.killed {
				t.Fatalf("with RALPH_TEST_CRASH_AFTER=%d ralph was not killed: %s\n%s", n, res, clipOut(res.out))
			}
			events := c.ralphFiles(t)
			at := c.crashPoint(t)
			got := transitions(events)
			// The kill came right after the save that recorded the Nth
			// transition: state.json and the log both end there. One
			// save may record several transitions (those into quick
			// states wait for the next save), so the log may hold more
			// than N, but never fewer, and only the uninterrupted run's.
			if len(got) < n || len(got) > total || strings.Join(got, "\n") != strings.Join(base.transitions[:len(got)], "\n") {
				t.Fatalf("events.jsonl after the kill at N=%d has %d transitions, want the uninterrupted run's first %d or more:\n%s",
					n, len(got), n, diffLines(base.transitions[:min(max(n, len(got)), total)], got))
			}
			if last := events[len(events)-1].Transition; at.state == nil || string(at.state.Machine.State) != last.To {
				t.Fatalf("state.json after the kill at N=%d: %s; the last logged transition went to %s", n, at, last.To)
			}
			t.Logf("killed after transition %d (%s): %s", n, got[n-1], at)
			c.reapLeftovers(t)
			if at.state.Finished {
				// The kill came after the final transition: the run had
				// ended, only its last words (run.json) are missing.
				// Compare the state it left, then check that building
				// again has nothing left to do.
				c.assertFinishedAtKill(t, base)
				return
			}
			c.resume(t)
			c.assertEnd(t, base, at)
		})
	}
}

// assertFinishedAtKill handles a kill after the final transition: state.json
// already says finished, so `ralph build` starts a new run that must find
// nothing to do.
func (c *crashCase) assertFinishedAtKill(t *testing.T, base *crashBaseline) {
	t.Helper()
	st := c.state(t)
	if st.Outcome != loop.OutcomeComplete || st.Metrics.TaskSuccesses != 3 || st.Metrics.Reworks != base.state.Metrics.Reworks ||
		st.Metrics.Iterations != base.state.Metrics.Iterations {
		t.Errorf("state.json at the kill after the final transition: outcome %q, task_successes %d, rework_count %d, iterations %d; want complete, 3, %d, %d",
			st.Outcome, st.Metrics.TaskSuccesses, st.Metrics.Reworks, st.Metrics.Iterations, base.state.Metrics.Reworks, base.state.Metrics.Iterations)
	}
	var rr loop.RunRecord
	readJSONFile(t, filepath.Join(c.repo, ".ralph", "runs", st.RunID, "run.json"), &rr)
	if rr.Outcome == "" {
		t.Logf("note: run.json of the run killed after its final transition has no outcome and no end time, and nothing will ever complete it (state.json says finished, so the next build starts a new run)")
	}
	before := c.subjects(t)
	res := c.build(t, 0, 0)
	if res.code != 0 || res.killed {
		t.Fatalf("ralph build after a kill at the end of a finished run: %s, want exit 0\n%s", res, clipOut(res.out))
	}
	if after := c.subjects(t); len(after) != len(before) {
		t.Errorf("building a finished project again made commits: %q -> %q", before, after)
	}
	if n, _ := filepath.Glob(filepath.Join(c.repo, ".ralph", "runs", "*", "iter-*.log")); len(n) != base.state.Metrics.Iterations {
		t.Errorf("%d agent logs, want %d: building a finished project again ran the agent", len(n), base.state.Metrics.Iterations)
	}
	end := c.state(t)
	if !end.Finished || end.Outcome != loop.OutcomeComplete {
		t.Errorf("state.json after building a finished project again: finished=%v outcome=%q", end.Finished, end.Outcome)
	}
	_ = c.ralphFiles(t)
}

// TestCrashAtRandomTimes kills ralph with SIGKILL after a random delay,
// while agents that take ~300ms each run, and resumes it. The seed is
// logged; RALPH_CRASH_SEED=n replays its delays.
func TestCrashAtRandomTimes(t *testing.T) {
	h := newCrashHarness(t)
	base := h.baseline(t, true)
	seed := time.Now().UnixNano()
	if s := os.Getenv("RALPH_CRASH_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("RALPH_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay the delays with RALPH_CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	// Each kill comes at a random fraction of the uninterrupted run's
	// duration, so that a seed replays the same points of the run.
	const runs = 5
	type kill struct {
		frac  float64
		delay time.Duration
	}
	kills := make([]kill, runs)
	for i := range kills {
		f := 0.02 + 0.93*rng.Float64()
		kills[i] = kill{f, time.Duration(f * float64(base.dur))}
	}
	for i, k := range kills {
		d := k.delay
		t.Run(fmt.Sprintf("kill%d@%02.0f%%", i+1, 100*k.frac), func(t *testing.T) {
			t.Parallel()
			// A run that ends before its kill tested no crash: it is
			// tried again in a fresh repository with the kill at half
			// the delay (this run went faster than the baseline), and
			// the case fails, never passes, when no try was killed.
			var c *crashCase
			for try := 1; ; try++ {
				c = h.newCase(t, true)
				res := c.build(t, 0, d)
				if res.killed {
					break
				}
				t.Logf("try %d: the run ended before the kill after %s: %s", try, d.Round(time.Millisecond), res)
				if try == observedTries {
					t.Fatalf("no try of %d was killed (the last kill after %s): the case tested nothing", try, d.Round(time.Millisecond))
				}
				d /= 2
			}
			_ = c.ralphFiles(t)
			at := c.crashPoint(t)
			t.Logf("killed after %s (%.0f%% of the uninterrupted run): %s", d.Round(time.Millisecond), 100*k.frac, at)
			c.reapLeftovers(t)
			if at.state != nil && at.state.Finished {
				c.assertFinishedAtKill(t, base)
				return
			}
			c.resume(t)
			c.assertEnd(t, base, at)
		})
	}
}

// TestCrashAtObservedPoints kills ralph at two instants the transition
// hook cannot reach, found by watching the repository: when the agent has
// made its edits but not yet exited (ralph is waiting for it in
// IMPLEMENT), and when ralph's commit of a story has landed but COMMIT's
// transition is not yet persisted.
func TestCrashAtObservedPoints(t *testing.T) {
	h := newCrashHarness(t)
	base := h.baseline(t, true)
	prdChecked := func(id string) func(c *crashCase) bool {
		return func(c *crashCase) bool {
			b, _ := os.ReadFile(filepath.Join(c.repo, ".agents", "tasks", "prd.md"))
			return strings.Contains(string(b), "### [x] "+id+":")
		}
	}
	// The story's own commit in HEAD's reflog (its subject starts with
	// the story's id). Counting reflog lines saw the setup's two and
	// fired before ralph had started: every try of the case was killed
	// with no state at all and, skipped, passed having tested nothing.
	commitLanded := func(id string) func(c *crashCase) bool {
		return func(c *crashCase) bool {
			b, _ := os.ReadFile(filepath.Join(c.repo, ".git", "logs", "HEAD"))
			return strings.Contains(string(b), "commit: "+id+":")
		}
	}
	for _, tc := range []struct {
		name string
		when func(c *crashCase) bool
		// task and states are what state.json must say for the kill to
		// have hit what the case names: the story, and a state before
		// ralph recorded the moment. A commit lands while the states
		// that led to it are still in memory, so its case accepts the
		// last one saved before it.
		task   string
		states []loop.State
	}{
		{"agent-edited-US-001", prdChecked("US-001"), "US-001", []loop.State{loop.StateImplement}},
		{"agent-edited-US-003", prdChecked("US-003"), "US-003", []loop.State{loop.StateImplement}},
		{"commit-landed-US-001", commitLanded("US-001"), "US-001", []loop.State{loop.StateTest, loop.StateValidate, loop.StateCommit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The kill is sent when the watcher sees the moment; on a
			// loaded machine it can land a state later. Such a miss tests
			// nothing, so it is tried again in a fresh repository, and the
			// case fails (never skips) when every try missed.
			hit := func(at *crashPoint) bool {
				return at.state != nil && at.state.Machine.TaskID == tc.task && slices.Contains(tc.states, at.state.Machine.State)
			}
			var c *crashCase
			var at *crashPoint
			for try := 1; ; try++ {
				c = h.newCase(t, true)
				res := c.buildUntil(t, tc.when)
				if !res.killed {
					t.Fatalf("the run ended before the watched moment: %s", res)
				}
				_ = c.ralphFiles(t)
				at = c.crashPoint(t)
				t.Logf("try %d: killed after %s: %s", try, res.dur.Round(time.Millisecond), at)
				if hit(at) {
					break
				}
				c.reapLeftovers(t)
				if try == observedTries {
					t.Fatalf("the kill missed %s in %v in all %d tries (the last: state.json says %s): the case tested nothing", tc.task, tc.states, try, at)
				}
			}
			c.reapLeftovers(t)
			c.resume(t)
			c.assertEnd(t, base, at)
		})
	}
}

// observedTries bounds the tries of a kill at an observed moment: each try
// takes a few seconds, and a kill that misses its state this often is a
// watcher (or a run) that changed, not load.
const observedTries = 5

// buildUntil runs `ralph build 20` and sends it SIGKILL as soon as when
// reports true (polled every 200µs).
func (c *crashCase) buildUntil(t *testing.T, when func(c *crashCase) bool) buildResult {
	t.Helper()
	cmd := exec.Command(c.h.ralph, "build", "20")
	cmd.Dir = c.repo
	cmd.Env = c.h.env(c.scenario, 0)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ralph: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	var err error
poll:
	for {
		select {
		case err = <-exited:
			break poll
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("ralph build did not reach the watched moment within 60s\n%s", <-exited)
		default:
		}
		if when(c) {
			cmd.Process.Signal(syscall.SIGKILL)
			err = <-exited
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	res := buildResult{out: out.String(), dur: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			res.killed = true
		}
	}
	return res
}

// Two crashes in a row around an interrupted iteration: the first after
// the agent did US-001's work but before ralph recorded that it ended, the
// second right after the resumed run recorded the cut-short iteration and
// before its rerun began. The rerun must still count the first agent's
// work as this attempt's; judged against the tree it found, the story
// would be reopened twice for "no changes" and blocked.
func TestCrashTwiceAroundAnInterruptedIteration(t *testing.T) {
	h := newCrashHarness(t)
	c := h.newCase(t, false)
	for _, point := range []string{"agent-exited", "interrupted-recorded"} {
		res := c.buildAt(t, point)
		if !res.killed {
			t.Fatalf("RALPH_TEST_CRASH_AT=%s: %s, want a SIGKILL\n%s", point, res, clipOut(res.out))
		}
		c.reapLeftovers(t)
	}
	res := c.build(t, 0, 0)
	if res.code != 0 || res.killed {
		t.Fatalf("the resumed build: %s, want exit 0\n%s", res, clipOut(res.out))
	}
	if strings.Contains(res.out, "made no changes") {
		t.Errorf("the rerun judged the first agent's work as no change:\n%s", clipOut(res.out))
	}
	if n := countOf(c.subjects(t), "US-001: Write one"); n != 1 {
		t.Errorf("%d commits of US-001, want 1; history %q", n, c.subjects(t))
	}
}

// buildAt runs `ralph build 20` with the crash point RALPH_TEST_CRASH_AT.
func (c *crashCase) buildAt(t *testing.T, point string) buildResult {
	t.Helper()
	cmd := exec.Command(c.h.ralph, "build", "20")
	cmd.Dir = c.repo
	cmd.Env = append(c.h.env(c.scenario, 0), "RALPH_TEST_CRASH_AT="+point)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	res := buildResult{out: out.String(), dur: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
		ws, ok := ee.Sys().(syscall.WaitStatus)
		res.killed = ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
	return res
}

// A kill between state.json and its events.jsonl lines: the resume
// appends the lines from state.json's last_event and earlier_events (the
// transitions one save recorded together), so the log ends up the
// uninterrupted run's, line for line.
func TestCrashBetweenStateAndEventLog(t *testing.T) {
	h := newCrashHarness(t)
	base := h.baseline(t, false)
	var batches atomic.Int32
	t.Cleanup(func() {
		if batches.Load() == 0 {
			t.Errorf("no kill came after a save that recorded several transitions: the repair of earlier_events went untested")
		}
	})
	for _, n := range []int{1, 3, 5, 7} {
		t.Run(fmt.Sprintf("N=%02d", n), func(t *testing.T) {
			t.Parallel()
			c := h.newCase(t, false)
			res := c.buildAt(t, fmt.Sprintf("state-saved@%d", n))
			if !res.killed {
				t.Fatalf("RALPH_TEST_CRASH_AT=state-saved@%d: %s, want a SIGKILL\n%s", n, res, clipOut(res.out))
			}
			at := c.crashPoint(t)
			// The state records transitions the log does not have yet:
			// the kill came between the two.
			got := transitions(c.ralphFiles(t))
			saved := 1 + len(at.state.EarlierEvents)
			if len(got)+saved > len(base.transitions) || strings.Join(got, "\n") != strings.Join(base.transitions[:len(got)], "\n") {
				t.Fatalf("the log after the kill is not the start of the uninterrupted run's:\n%s", diffLines(base.transitions, got))
			}
			if last := at.state.LastEvent; last == nil || last.Seq <= lastTransitionSeq(t, c) {
				t.Fatalf("state.json's last_event %v is already in the log: the kill did not come between the save and the log", last)
			}
			if saved > 1 {
				batches.Add(1)
			}
			c.reapLeftovers(t)
			c.resume(t)
			c.assertEnd(t, base, at)
		})
	}
}

// lastTransitionSeq is the highest seq in the case's events.jsonl.
func lastTransitionSeq(t *testing.T, c *crashCase) int64 {
	t.Helper()
	lines, _ := jsonLines(t, filepath.Join(c.repo, ".ralph", "events.jsonl"))
	var last int64
	for _, l := range lines {
		var ev struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal([]byte(l), &ev) == nil {
			last = max(last, ev.Seq)
		}
	}
	return last
}
