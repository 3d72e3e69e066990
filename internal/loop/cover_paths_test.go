package loop

// ralph plan end to end: a real git repository, a shell line as the
// agent, the run's records on disk. Each test asserts what a person sees
// of a planning run: the outcome, the lines, the files and the error's
// advice.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/workspace"
)

// lines collects what a run told a person.
type lines struct {
	mu  sync.Mutex
	evs []report.Event
}

func (l *lines) Emit(ev report.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ev := range l.evs {
		b.WriteString(ev.Text)
	}
	return b.String()
}

// planWorkspace is a repository with a committed PRD of one story and the
// options of a plan whose agent is the shell line script.
func planWorkspace(t *testing.T, script string, iterations int) (*workspace.Workspace, Options, *lines) {
	t.Helper()
	ws := newBenchWorkspace(t)
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-qm", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws.Root}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	out := &lines{}
	return ws, Options{
		MaxIterations: iterations,
		PRDPath:       filepath.Join(ws.Root, "prd.md"),
		PlanPath:      ws.Path("IMPLEMENTATION_PLAN.md"),
		Agent:         agent.Spec{Name: "sh", Headless: []string{"sh", "-c", script}, Format: agent.FormatPlain},
		AgentTimeout:  time.Minute,
		Sink:          out,
	}, out
}

const writesPlan = `mkdir -p .ralph && printf '# Plan\n\n## US-001\n- do it\n' > .ralph/IMPLEMENTATION_PLAN.md; `

// A plan written with the COMPLETE signal ends planning at once: the
// rest of the iterations do not run, the plan is on disk and the run says
// where; the iteration's record says it planned.
func TestCoverPlanWrittenEndsPlanning(t *testing.T) {
	ws, opts, out := planWorkspace(t, writesPlan+`echo '<promise>COMPLETE</promise>'`, 3)
	rep, err := Plan(context.Background(), ws, opts)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if rep.Outcome != OutcomeComplete || rep.Iterations != 1 {
		t.Errorf("Plan = %s after %d iterations, want complete after 1", rep.Outcome, rep.Iterations)
	}
	if b, err := os.ReadFile(opts.PlanPath); err != nil || !strings.Contains(string(b), "## US-001") {
		t.Errorf("the plan on disk: %q (%v)", b, err)
	}
	text := out.text()
	for _, want := range []string{"── planning iteration 1/3 · agent sh ──", "✓ plan written to .ralph/IMPLEMENTATION_PLAN.md"} {
		if !strings.Contains(text, want) {
			t.Errorf("the run does not say %q:\n%s", want, text)
		}
	}
	rec, err := os.ReadFile(filepath.Join(rep.RunDir, "iter-1.json"))
	if err != nil || !strings.Contains(string(rec), `"status": "`+string(StatusPlanned)+`"`) || !strings.Contains(string(rec), `"signal_accepted": true`) {
		t.Errorf("iteration 1's record does not say it planned with its signal accepted: %s (%v)", rec, err)
	}
}

// Planning is read-only: an agent that writes code while planning stops
// the run with the file named, the error logged, and its work left alone
// for the person to look at.
func TestCoverPlanThatWritesCodeStops(t *testing.T) {
	ws, opts, _ := planWorkspace(t, writesPlan+`echo 'package main' > main.go; echo '<promise>COMPLETE</promise>'`, 3)
	rep, err := Plan(context.Background(), ws, opts)
	if !errors.Is(err, ErrPlanTouchedOtherFiles) && (err == nil || !strings.Contains(err.Error(), ErrPlanTouchedOtherFiles.Error())) {
		t.Fatalf("Plan = %v, want %v", err, ErrPlanTouchedOtherFiles)
	}
	if !strings.Contains(err.Error(), "main.go") || !strings.Contains(err.Error(), "see .ralph/errors.log") {
		t.Errorf("the error does not name the file and the log: %v", err)
	}
	if rep.Outcome != OutcomeError || rep.Iterations != 1 {
		t.Errorf("Plan = %s after %d iterations, want an error after 1", rep.Outcome, rep.Iterations)
	}
	if log, _ := os.ReadFile(ws.ErrorsLogPath()); !strings.Contains(string(log), "planning iteration 1: "+ErrPlanTouchedOtherFiles.Error()+": main.go") {
		t.Errorf("errors.log does not record the iteration's fault:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(ws.Root, "main.go")); err != nil {
		t.Errorf("ralph removed the agent's file: %v", err)
	}
}

// An agent that never writes the plan runs every iteration; the run ends
// in an error that says where to look. A failing agent process is logged
// as such each time.
func TestCoverPlanNeverWritten(t *testing.T) {
	ws, opts, out := planWorkspace(t, `echo 'thinking about it'; exit 3`, 2)
	rep, err := Plan(context.Background(), ws, opts)
	if err == nil {
		t.Fatal("Plan succeeded without a plan")
	}
	want := "no plan was written to .ralph/IMPLEMENTATION_PLAN.md after 2 iterations: see the agent's output in " + ws.Rel(rep.RunDir)
	if err.Error() != want {
		t.Errorf("Plan = %q\nwant    %q", err, want)
	}
	if rep.Outcome != OutcomeError || rep.Iterations != 2 {
		t.Errorf("Plan = %s after %d iterations, want an error after 2", rep.Outcome, rep.Iterations)
	}
	log, _ := os.ReadFile(ws.ErrorsLogPath())
	if n := strings.Count(string(log), "exit"); n < 2 || !strings.Contains(string(log), want) {
		t.Errorf("errors.log does not record both failed runs and the missing plan:\n%s", log)
	}
	if !strings.Contains(out.text(), "── planning iteration 2/2") {
		t.Errorf("the second iteration was not told:\n%s", out.text())
	}
}

// An agent that is not installed stops the plan before anything starts:
// the error says how to get it, and no run is recorded.
func TestCoverPlanWithoutTheAgent(t *testing.T) {
	ws, opts, _ := planWorkspace(t, "", 1)
	opts.Agent = agent.Spec{Name: "nosuch", Headless: []string{"ralph-test-no-such-agent"}, InstallHint: "install nosuch from example.invalid"}
	if _, err := Plan(context.Background(), ws, opts); err == nil || !strings.Contains(err.Error(), "ralph-test-no-such-agent") {
		t.Fatalf("Plan = %v, want an error naming the missing program", err)
	}
	if _, err := os.Stat(filepath.Join(ws.Dir(), "runs")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a plan that could not start recorded a run (%v)", err)
	}
}

// Ctrl+C while the agent plans ends the run as interrupted, the agent
// stopped, and says so.
func TestCoverPlanInterrupted(t *testing.T) {
	ws, opts, _ := planWorkspace(t, `echo $$ > agent.pid.tmp && mv agent.pid.tmp agent.pid; exec sleep 60`, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pidFile := filepath.Join(ws.Root, "agent.pid")
	go func() {
		wait.Within(30*time.Second, func() bool { _, err := os.Stat(pidFile); return err == nil })
		cancel()
	}()
	rep, err := Plan(ctx, ws, opts)
	if !errors.Is(err, ErrInterrupted) || rep.Outcome != OutcomeInterrupted || rep.Iterations != 1 {
		t.Fatalf("Plan = %v (%s after %d iterations), want interrupted in iteration 1", err, rep.Outcome, rep.Iterations)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || syscall.Kill(pid, 0) == nil {
		t.Errorf("the planning agent (pid %d) still runs after the interrupt", pid)
	}
}

// reviewWorkspace is a repository whose check runs tests/greet_test.sh
// against greet.txt ("hello"), with the PRD story given, committed, and
// the options of a build whose agent changes the greeting to "bonjour" in
// both the code and the test, and ticks the story.
func reviewWorkspace(t *testing.T, story string) (*workspace.Workspace, Options, *lines) {
	t.Helper()
	ws := newBenchWorkspace(t)
	for name, content := range map[string]string{
		"greet.txt":           "hello\n",
		"tests/greet_test.sh": "grep -qx hello greet.txt\n",
		"prd.md":              "# PRD\n\n" + story,
	} {
		p := filepath.Join(ws.Root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, ws.Root, "add", "-A")
	gitIn(t, ws.Root, "commit", "-qm", "greet in English")
	script := `sed -i s/hello/bonjour/ greet.txt tests/greet_test.sh; ` +
		`sed -i -e 's/^### \[ \]/### [x]/' -e 's/^- \[ \]/- [x]/' prd.md; echo 'US-001 done <promise>COMPLETE</promise>'`
	out := &lines{}
	return ws, Options{
		MaxIterations: 3,
		MaxRetries:    1,
		PRDPath:       filepath.Join(ws.Root, "prd.md"),
		PlanPath:      ws.Path("IMPLEMENTATION_PLAN.md"),
		Agent:         agent.Spec{Name: "sh", Headless: []string{"sh", "-c", script}, Format: agent.FormatPlain},
		AgentTimeout:  time.Minute,
		Checks:        []check.Check{{Name: "greet", Kind: check.KindTest, Run: "sh tests/greet_test.sh", Timeout: time.Minute}},
		Sink:          out,
	}, out
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return string(out)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A story that says its test changes, whose attempt changed the test so
// that the start's test fails against the new code, waits for a person:
// its work is set aside at its attempt's ref, the tree is as before, and
// the run says how to read and approve it. Approve brings the work back,
// marks the story done and commits it naming who approved; a second
// approve says there is nothing waiting.
func TestCoverTestChangeWaitsForApproval(t *testing.T) {
	ws, opts, out := reviewWorkspace(t, "### [ ] US-001: Greet in French\n- [ ] greet.txt says bonjour; update the greeting test for the new greeting\n")
	rep, err := Build(context.Background(), ws, opts)
	if err != nil {
		t.Logf("Build: %v", err)
	}
	text := out.text()
	for _, want := range []string{
		"the story says tests change, and the attempt changed tests/greet_test.sh: a person must approve the test change (`ralph approve US-001`)",
		"⛔ US-001 blocked",
		"a person must decide: read the test change (git diff refs/ralph/attempts/" + rep.RunID + "/US-001^ refs/ralph/attempts/" + rep.RunID + "/US-001), then `ralph approve US-001`",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the build does not say %q", want)
		}
	}
	if rep.Outcome != OutcomeNeedsHuman || rep.StoriesDone != 0 {
		t.Errorf("Build = %s with %d stories done, want needs_human with none", rep.Outcome, rep.StoriesDone)
	}
	if got := readFile(t, filepath.Join(ws.Root, "greet.txt")); got != "hello\n" {
		t.Errorf("greet.txt after the blocked attempt = %q, want the start's: the work waits at its ref", got)
	}
	st, err := HomeOf(ws).Load()
	if err != nil {
		t.Fatal(err)
	}
	_, rec := st.BlockedTask("US-001")
	if rec == nil || rec.Blocker == nil || !rec.Blocker.Review || rec.Blocker.Ref == "" {
		t.Fatalf("state.json does not hold US-001 blocked for review at a ref: %+v", rec)
	}
	if got := gitIn(t, ws.Root, "show", rec.Blocker.Ref+":greet.txt"); got != "bonjour\n" {
		t.Errorf("the attempt's ref holds greet.txt %q, want the attempt's", got)
	}

	src := tasks.Open(tasks.KindMarkdown, opts.PRDPath)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msg, err := Approve(context.Background(), ws, src, "US-001", "ana", now)
	if err != nil {
		t.Fatalf("Approve: %v", err)
	}
	if !strings.HasPrefix(msg, "US-001 approved: its work is committed as ") {
		t.Errorf("Approve says %q", msg)
	}
	body := gitIn(t, ws.Root, "log", "-1", "--format=%B")
	for _, want := range []string{"US-001: Greet in French\n", "Approved by a person: ana approved the test change the story asks for", "Ralph-Approved-By: ana"} {
		if !strings.Contains(body, want) {
			t.Errorf("the approval's commit does not say %q:\n%s", want, body)
		}
	}
	for file, want := range map[string]string{"greet.txt": "bonjour\n", "tests/greet_test.sh": "grep -qx bonjour greet.txt\n"} {
		if got := gitIn(t, ws.Root, "show", "HEAD:"+file); got != want {
			t.Errorf("the approval's commit holds %s = %q, want %q", file, got, want)
		}
	}
	if prd := readFile(t, opts.PRDPath); !strings.Contains(prd, "### [x] US-001") {
		t.Errorf("the PRD does not mark US-001 done:\n%s", prd)
	}
	if _, err := Approve(context.Background(), ws, src, "US-001", "ana", now); err == nil || !strings.Contains(err.Error(), "US-001 is not waiting for a review") {
		t.Errorf("a second Approve = %v, want one saying US-001 is not waiting", err)
	}
}

// The same change where the story says nothing of its tests is sent back,
// not offered for approval: changing the test instead of the code does
// not count.
func TestCoverTestChangeTheStoryDoesNotAskFor(t *testing.T) {
	ws, opts, out := reviewWorkspace(t, "### [ ] US-001: Greet in French\n- [ ] greet.txt says bonjour\n")
	rep, _ := Build(context.Background(), ws, opts)
	text := out.text()
	if !strings.Contains(text, "with the start's version of tests/greet_test.sh put back") || strings.Contains(text, "ralph approve US-001") {
		t.Errorf("the build does not refuse the bent test without offering approval:\n%s", text)
	}
	if rep.StoriesDone != 0 {
		t.Errorf("Build accepted the story: %+v", rep)
	}
	src := tasks.Open(tasks.KindMarkdown, opts.PRDPath)
	if _, err := Approve(context.Background(), ws, src, "US-001", "ana", time.Now()); err == nil || !strings.Contains(err.Error(), "US-001 is not waiting for a review") {
		t.Errorf("Approve = %v, want one saying US-001 is not waiting", err)
	}
}
