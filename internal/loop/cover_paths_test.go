package loop

// ralph plan end to end: a real git repository, a shell line as the
// agent, the run's records on disk. Each test asserts what a person sees
// of a planning run: the outcome, the lines, the files and the error's
// advice.

import (
	"context"
	"errors"
	"fmt"
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
	if err == nil || !strings.Contains(err.Error(), "a person must decide") {
		t.Errorf("Build = %v, want an error saying a person must decide", err)
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

// counted is a shell line that runs the nth of answers on its nth run,
// counting its runs in a file outside the repository.
func counted(t *testing.T, answers ...string) string {
	t.Helper()
	counter := filepath.Join(t.TempDir(), "runs")
	var b strings.Builder
	fmt.Fprintf(&b, `cat > /dev/null; n=$(cat %s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %s; case $n in `, counter, counter)
	for i, a := range answers {
		fmt.Fprintf(&b, "%d) %s ;; ", i+1, a)
	}
	b.WriteString("esac")
	return b.String()
}

// A reviewer judges the story's criteria: a malformed answer is asked for
// again, a Failed verdict sends the story back with the reviewer's reason
// for the next attempt, and a Qualified one lets it be committed.
func TestCoverReviewerSendsTheStoryBackThenQualifiesIt(t *testing.T) {
	ws := newBenchWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws.Root, "prd.md"), []byte("# PRD\n\n### [ ] US-001: Greet\n- [ ] greet.txt says hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws.Root, "add", "-A")
	gitIn(t, ws.Root, "commit", "-qm", "start")
	tick := `sed -i -e 's/^### \[ \]/### [x]/' -e 's/^- \[ \]/- [x]/' prd.md; echo done`
	executor := counted(t, "echo hi > greet.txt; "+tick, "echo hello > greet.txt; "+tick)
	verdict := func(v string, met bool, why string) string {
		return fmt.Sprintf(`echo '<verdict>{"verdict":"%s","criteria":[{"id":"AC-1","met":%v,"evidence":"%s"}],"reasons":["%s"]}</verdict>'`, v, met, why, why)
	}
	reviewer := counted(t, "echo 'Looks fine to me.'", verdict("Failed", false, "greet.txt says hi"), verdict("Qualified", true, "greet.txt says hello"))
	out := &lines{}
	rep, err := Build(context.Background(), ws, Options{
		MaxIterations: 3, MaxRetries: 3,
		PRDPath:      filepath.Join(ws.Root, "prd.md"),
		PlanPath:     ws.Path("IMPLEMENTATION_PLAN.md"),
		Agent:        agent.Spec{Name: "sh", Headless: []string{"sh", "-c", executor}, Format: agent.FormatPlain},
		Reviewer:     &agent.Spec{Name: "rev", Headless: []string{"sh", "-c", reviewer}, Format: agent.FormatPlain},
		AgentTimeout: time.Minute,
		Checks:       []check.Check{{Name: "true", Run: "true", Timeout: time.Minute}},
		Sink:         out,
	})
	if err != nil || rep.Outcome != OutcomeComplete || rep.Iterations != 2 || rep.StoriesDone != 1 {
		t.Fatalf("Build = %v: %s after %d iterations with %d done; want complete after 2:\n%s", err, rep.Outcome, rep.Iterations, rep.StoriesDone, out.text())
	}
	text := out.text()
	if n := strings.Count(text, "── review by rev ──"); n != 3 {
		t.Errorf("the run shows %d reviews, want 3 (a malformed answer asked again, Failed, Qualified):\n%s", n, text)
	}
	if log := readFile(t, ws.ErrorsLogPath()); !strings.Contains(log, "iteration 1: reviewer answer malformed (try 1)") {
		t.Errorf("errors.log does not record the malformed answer:\n%s", log)
	}
	prompt := readFile(t, filepath.Join(rep.RunDir, "iter-2.prompt.md"))
	if !strings.Contains(prompt, "greet.txt says hi") {
		t.Errorf("the second attempt's prompt does not carry the reviewer's reason")
	}
	if got := gitIn(t, ws.Root, "show", "HEAD:greet.txt"); got != "hello\n" {
		t.Errorf("the committed greet.txt = %q, want the qualified attempt's", got)
	}
}

// tapRunner is a check script that runs each file of tests/cases as a
// test and reports them in TAP, so that ralph sees per-test results.
const tapRunner = `n=0; for f in tests/cases/*; do n=$((n+1)); done; echo "1..$n"; i=0
for f in tests/cases/*; do i=$((i+1)); if sh "$f" >/dev/null 2>&1; then echo "ok $i - $(basename $f)"; else echo "not ok $i - $(basename $f)"; fi; done
for f in tests/cases/*; do sh "$f" >/dev/null 2>&1 || exit 1; done
`

// redGreenBuild builds one story on a tree whose test "bye" fails before
// any agent runs, with per-test results and [verify] red_green; the agent
// writes greet.txt and adds the test case newCase.
func redGreenBuild(t *testing.T, newCase string) (*workspace.Workspace, Report, error, string) {
	ws := newBenchWorkspace(t)
	for name, content := range map[string]string{
		"prd.md":             "# PRD\n\n### [ ] US-001: Greet\n- [ ] greet.txt says hello\n",
		"README":             "greetings\n",
		"tests/run_test.sh":  tapRunner,
		"tests/cases/readme": "test -f README\n",
		"tests/cases/bye":    "grep -qx bye bye.txt\n",
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
	gitIn(t, ws.Root, "commit", "-qm", "start")
	script := `echo hello > greet.txt; echo '` + newCase + `' > tests/cases/greet; ` +
		`sed -i -e 's/^### \[ \]/### [x]/' -e 's/^- \[ \]/- [x]/' prd.md; echo done`
	out := &lines{}
	rep, err := Build(context.Background(), ws, Options{
		MaxIterations: 1, MaxRetries: 1, RedGreen: true,
		PRDPath:      filepath.Join(ws.Root, "prd.md"),
		PlanPath:     ws.Path("IMPLEMENTATION_PLAN.md"),
		Agent:        agent.Spec{Name: "sh", Headless: []string{"sh", "-c", script}, Format: agent.FormatPlain},
		AgentTimeout: time.Minute,
		Checks:       []check.Check{{Name: "cases", Kind: check.KindTest, Run: "sh tests/run_test.sh", Format: check.FormatTAP, Timeout: time.Minute}},
		Sink:         out,
	})
	return ws, rep, err, out.text()
}

// With per-test results, a test that failed before any agent ran and
// still fails is not the attempt's doing; with [verify] red_green the new
// test the attempt adds is evidence because it fails against the start's
// code. The story is done, and the run says that the check still fails as
// it did at the start, so the run is not complete.
func TestCoverRedGreenNewTestIsEvidence(t *testing.T) {
	ws, rep, err, text := redGreenBuild(t, "grep -qx hello greet.txt")
	if err != nil || rep.Outcome != OutcomeChecksFailing || rep.StoriesDone != 1 {
		t.Fatalf("Build = %v: %s with %d done, want checks_failing with the story done:\n%s", err, rep.Outcome, rep.StoriesDone, text)
	}
	for _, want := range []string{
		"✗ check cases", "· 1 test passed, 1 failed",
		"! already failing before any agent ran: check \"cases\" exited with code 1",
		"· it failed at the start too · 2 tests passed, 1 failed · new: greet · still failing: bye",
		"ralph: running the new tests against the start's code ([verify] red_green)",
		"evidence: greet is new, fails against the start's code and passes now (cases)",
		"■ every story is done, but check \"cases\" fails on the final tree",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the run does not say %q:\n%s", want, text)
		}
	}
	if got := gitIn(t, ws.Root, "show", "HEAD:tests/cases/greet"); got != "grep -qx hello greet.txt\n" {
		t.Errorf("the story's commit holds tests/cases/greet = %q", got)
	}
}

// A new test that passes against the start's code as well proves nothing
// about the attempt: while a check fails, the story needs evidence of its
// own, so it is blocked, its work set aside at its attempt's ref and the
// tree put back as it was.
func TestCoverRedGreenTestThatAlwaysPassesIsNoEvidence(t *testing.T) {
	ws, rep, err, text := redGreenBuild(t, "test -f README")
	if err == nil || !strings.Contains(err.Error(), "a person must decide") || rep.Outcome != OutcomeNeedsHuman || rep.StoriesDone != 0 {
		t.Fatalf("Build = %v: %s with %d done, want needs_human with none done:\n%s", err, rep.Outcome, rep.StoriesDone, text)
	}
	for _, want := range []string{
		"· new test greet passes against the start's code too: it proves nothing",
		"nothing ralph ran shows US-001 done",
		"⛔ US-001 blocked (permanent)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the run does not say %q:\n%s", want, text)
		}
	}
	if _, err := os.Stat(filepath.Join(ws.Root, "greet.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the blocked attempt's greet.txt is still in the tree (%v)", err)
	}
	if got := gitIn(t, ws.Root, "show", AttemptRef(rep.RunID, "US-001")+":greet.txt"); got != "hello\n" {
		t.Errorf("the attempt's ref holds greet.txt %q, want the attempt's", got)
	}
}

// An agent that commits its own work, which then passes no check, does not
// move the branch for good: when the story is blocked the branch goes back
// to where the story started, the agent's commit and what it left
// uncommitted are kept at the attempt's ref, and the run says how to see
// and bring them back.
func TestCoverBlockedAgentCommitsAreMovedBack(t *testing.T) {
	ws := newBenchWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws.Root, "prd.md"), []byte("# PRD\n\n### [ ] US-001: Greet\n- [ ] greet.txt says hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws.Root, "add", "-A")
	gitIn(t, ws.Root, "commit", "-qm", "start")
	script := `echo hi > greet.txt && git add greet.txt && git commit -qm 'greet (by the agent)' && echo draft > notes.txt; echo done`
	out := &lines{}
	rep, err := Build(context.Background(), ws, Options{
		MaxIterations: 1, MaxRetries: 1,
		PRDPath:      filepath.Join(ws.Root, "prd.md"),
		PlanPath:     ws.Path("IMPLEMENTATION_PLAN.md"),
		Agent:        agent.Spec{Name: "sh", Headless: []string{"sh", "-c", script}, Format: agent.FormatPlain},
		AgentTimeout: time.Minute,
		Checks:       []check.Check{{Name: "greet", Run: "grep -qx hello greet.txt", Timeout: time.Minute}},
		Sink:         out,
	})
	text := out.text()
	if err == nil || rep.Outcome != OutcomeNeedsHuman {
		t.Fatalf("Build = %v (%s), want the story blocked:\n%s", err, rep.Outcome, text)
	}
	// The story started on the workspace setup ralph committed; ralph's
	// own records may be committed after the branch moved back.
	base := strings.TrimSpace(gitIn(t, ws.Root, "log", "-1", "--format=%h", "--grep=workspace setup"))
	if history := gitIn(t, ws.Root, "log", "--format=%s"); strings.Contains(history, "by the agent") {
		t.Errorf("the branch still holds the agent's commit:\n%s", history)
	}
	ref := AttemptRef(rep.RunID, "US-001")
	want := "↩ 1 commit made while working on US-001 passed no check: the branch is back at " + base + ", and they are kept at " + ref +
		" (see them: git log " + ref + "; bring them back: git merge --ff-only " + ref + ")"
	if !strings.Contains(text, want) {
		t.Errorf("the run does not say\n%s\n%s", want, text)
	}
	for file, content := range map[string]string{"greet.txt": "hi\n", "notes.txt": "draft\n"} {
		if got := gitIn(t, ws.Root, "show", ref+":"+file); got != content {
			t.Errorf("the attempt's ref holds %s = %q, want %q", file, got, content)
		}
		if _, err := os.Stat(filepath.Join(ws.Root, file)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still in the tree after the branch moved back (%v)", file, err)
		}
	}
	if log := readFile(t, ws.ErrorsLogPath()); !strings.Contains(log, "1 commit made while working on US-001 passed no check") {
		t.Errorf("errors.log does not record the moved-back commit:\n%s", log)
	}
}
