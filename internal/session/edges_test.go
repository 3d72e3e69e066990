package session_test

// The edge tests drive the runner over every edge of the session machine
// with scripted ports: the fake invoker plays the roles, fakeChecks plays
// ralph's checks, the fake clock waits without sleeping; the workspace is a
// real git repository in a temporary folder. Each test asserts the exact
// transitions the runner emitted. Every transition any runner test makes
// is checked, as it is made, against the machine's edges (session.Edges),
// and TestMain fails the package when an edge of the machine was driven by
// no test: a new edge needs a test.

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/tasks"
)

// covered collects the edges the runner tests drove.
var covered = &edgeSet{seen: map[session.Edge]bool{}}

type edgeSet struct {
	mu    sync.Mutex
	table map[session.Edge]bool
	seen  map[session.Edge]bool
}

// add records edge, failing t when the machine has no such edge: the
// runner took a step the table does not have.
func (s *edgeSet) add(t interface{ Errorf(string, ...any) }, edge session.Edge) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == nil {
		s.table = map[session.Edge]bool{}
		for _, e := range session.Edges() {
			s.table[e] = true
		}
	}
	if !s.table[edge] {
		t.Errorf("the runner went %s -%s-> %s (%q), which is not an edge of the session machine", edge.From, edge.Trigger, edge.To, edge.Label)
		return
	}
	s.seen[edge] = true
}

type errorfRecorder struct{ msgs []string }

func (r *errorfRecorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// TestStepCheck shows that the check every runner test makes of each
// transition fails on a step the machine does not have, and passes the
// machine's own.
func TestStepCheck(t *testing.T) {
	var rec errorfRecorder
	made := []session.Edge{
		{From: session.Reviewing, To: session.Complete, Trigger: session.ReviewerCompleted, Label: "reviewer_completed (Qualified)"},
		{From: session.Stopped, To: session.Failed, Trigger: session.Resumed, Label: "resumed"},
		{From: session.Executing, To: session.Reviewing, Trigger: session.ExecutorCompleted, Label: "executor_completed (blocked)"},
	}
	check := &edgeSet{seen: map[session.Edge]bool{}}
	for _, e := range made {
		check.add(&rec, e)
	}
	if len(rec.msgs) != len(made) {
		t.Errorf("the step check let made-up steps pass: %q", rec.msgs)
	}
	rec.msgs = nil
	for _, e := range session.Edges() {
		check.add(&rec, e)
	}
	if len(rec.msgs) != 0 {
		t.Errorf("the step check refused the machine's own edges: %q", rec.msgs)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	// Only a run of every test can tell an edge no test drives.
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" {
		var missing []string
		for _, e := range session.Edges() {
			if !covered.seen[e] {
				missing = append(missing, fmt.Sprintf("%s -%s-> %s (%s)", e.From, e.Trigger, e.To, e.Label))
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: no runner test drives these edges of the session machine:\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

// fakeChecks plays ralph's checks: the exit codes of the runs of the
// check "files", in order; a run beyond the script passes.
type fakeChecks struct {
	mu    sync.Mutex
	codes []int
	runs  int
	// output is what a failing run prints, "greet.txt is empty" when "".
	output string
}

func (c *fakeChecks) RunCheck(_ context.Context, _ string, chk check.Check) check.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs++
	res := check.Result{Check: chk, Duration: time.Millisecond}
	if len(c.codes) > 0 {
		res.ExitCode, c.codes = c.codes[0], c.codes[1:]
	}
	if res.ExitCode != 0 {
		res.Output = cmp.Or(c.output, "greet.txt is empty\n")
	}
	return res
}

// rig is one session with its scripted ports, run as ralph runs it: each
// run is a new Runner over the same folder.
type rig struct {
	t      *testing.T
	e      *sessionEnv
	inv    *fakeInvoker
	checks *fakeChecks
	git    session.GitPort // nil: the repository itself
	policy session.Policy
	budget runkit.Budget
	cancel context.CancelFunc
	events []report.Event // of the last run
}

func newRig(t *testing.T) *rig {
	e := newSessionEnv(t, greetRequest)
	// The shared cooldowns forget rests a day past the system clock.
	e.clock.now = time.Now().UTC().Truncate(time.Second)
	return &rig{t: t, e: e, inv: newInvoker(t), checks: &fakeChecks{}}
}

// run runs the session once and returns what Run returned and the
// transitions it made, "From -trigger-> To". crashed says the run ended as
// a kill of ralph would end it: a role's script called runtime.Goexit, so
// Run never returned and recorded nothing more.
func (g *rig) run() (p session.Progress, err error, steps []string, crashed bool) {
	r := g.e.runner(g.t, g.inv)
	r.Checker, r.Policy, r.Budget, r.MaxAgentRetries = g.checks, g.policy, g.budget, 0
	r.Checks = []check.Check{{Name: "files", Run: "sh check.sh"}}
	if g.git != nil {
		r.Git = g.git
	}
	var log eventLog
	r.Events = report.NewEmitter(session.MachineName, testSessionID, 0, g.e.clock.Now, report.Text{W: testWriter{g.t}}, &log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.cancel = cancel
	crashed = true
	done := make(chan struct{})
	go func() {
		defer close(done)
		p, err = r.Run(ctx)
		crashed = false
	}()
	<-done
	g.events = log.evs
	for _, ev := range log.evs {
		if ev.Kind == report.KindTransition {
			steps = append(steps, ev.From+" -"+ev.Trigger+"-> "+ev.To)
		}
	}
	return p, err, steps, crashed
}

// on scripts the role runs, as fakeInvoker.on.
func (g *rig) on(roleName, match string, times int, run func(context.Context, session.Call) (string, error)) *rig {
	g.inv.on(roleName, match, times, run)
	return g
}

func wantSteps(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s, transitions:\n got  %s\n want %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// The transitions of a one-task session that goes well, and of parts of
// sessions.
var (
	happy = []string{
		"Initializing -session_resolved-> Planning",
		"Planning -planner_completed-> Executing",
		"Executing -task_selected-> Executing",
		"Executing -executor_completed-> Reviewing",
		"Reviewing -reviewer_completed-> Executing",
		"Executing -no_tasks_remaining-> Complete",
		"Complete -holistic_check_passed-> Complete",
	}
	toReview   = happy[2:4]
	fromReview = happy[4:]
)

// Role replies beyond helpers_test.go's.
const (
	plannerQA        = "```json\n{\"status\": \"needs_qa_cycle\", \"questions\": [\"Which greeting word?\"]}\n```"
	questionerAnswer = "```json\n{\"answers\": [{\"question\": \"Which greeting word?\", \"answer\": \"hello\"}]}\n```"
	questionerHuman  = "```json\n{\"human_questions\": [\"Which greeting does the owner want?\"]}\n```"
	plannerBlocked   = "```json\n{\"status\": \"blocked\", \"blockers\": [\"needs a database\"]}\n```"
	plannerTwoTasks  = "```json\n{\"status\": \"completed\", \"tasks\": [{\"title\": \"Write greet.txt\"}, {\"title\": \"Write bye.txt\"}]}\n```"
	executorBlocked  = "```json\n{\"status\": \"blocked\", \"blockers\": [\"greet.txt is locked\"]}\n```"
	executorFoundNew = "```json\n{\"status\": \"completed\", \"summary\": \"bye.txt is needed too\", \"new_requirements\": true, \"new_tasks\": [{\"title\": \"Write bye.txt\"}]}\n```"
	reviewerFailed   = "```json\n{\"verdict\": \"Failed\", \"reasons\": [\"greet.txt says hi\"]}\n```"
	goalFailed       = "```json\n{\"status\": \"failed\", \"reasons\": [\"bye.txt missing\"], \"new_tasks\": [{\"title\": \"Write bye.txt\"}]}\n```"
)

// spends is run, reporting tokens as it ends.
func spends(tokens int64, run func(context.Context, session.Call) (string, error)) func(context.Context, session.Call) (string, error) {
	return func(ctx context.Context, c session.Call) (string, error) {
		c.OnUsage(tokens, 0)
		return run(ctx, c)
	}
}

// crash is a run during which ralph is killed.
func crash(context.Context, session.Call) (string, error) {
	runtime.Goexit()
	return "", nil
}

func TestRunnerWholeSessionCommitsWithRalphsMessage(t *testing.T) {
	g := newRig(t)
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	finishTask1(t, g.e, g.inv)
	p, err, steps, _ := g.run()
	wantDone(t, g.e, p, err)
	wantSteps(t, "the session", steps, happy...)
	g.inv.allUsed()
	// The message is byte for byte what ralph always wrote: subject, the
	// session's trailers, and the token that proves the commit ralph's last.
	raw := git(t, g.e.ws.Root, "cat-file", "commit", "HEAD")
	_, msg, _ := strings.Cut(raw, "\n\n")
	token := g.e.progress(t).CommitToken
	want := "task-1: Write greet.txt\n\nRalph-Session: " + testSessionID + "\nRalph-Task: task-1\nRalph-Attempt: 1\nRalph-Commit: " + token + "\n"
	if len(token) < 16 || msg != want {
		t.Errorf("ralph's commit message:\n%q\nwant\n%q", msg, want)
	}
}

// A Q&A cycle runs the questioner; a question only a person can answer
// stops the session until it is answered, through Stopped, and the resume
// goes back to planning.
func TestRunnerQACycleAndQuestionsForAPerson(t *testing.T) {
	g := newRig(t)
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerQA))
	g.on(role.Questioner, "", 1, says(questionerHuman))
	_, err, steps, _ := g.run()
	if !errors.Is(err, session.ErrWaitingForAnswers) {
		t.Fatalf("Run = %v, want ErrWaitingForAnswers", err)
	}
	wait := []string{"Initializing -session_resolved-> Planning", "Planning -planner_completed-> Planning", "Planning -waiting_for_answers-> Stopped"}
	wantSteps(t, "the first run", steps, wait...)
	p := g.e.progress(t)
	if p.State.Current != session.Stopped || p.State.Resumes() != session.Planning {
		t.Errorf("progress.md is at %s (resumes at %s), want Stopped in Planning", p.State.Current, p.State.Resumes())
	}
	if last := p.LastEvent; last == nil || last.Transition.Detail != "q-1" {
		t.Errorf("the stop records %+v; want the question it waits for, q-1", last)
	}

	// Unanswered, a resume stops again without running a role.
	_, err, steps, _ = g.run()
	if !errors.Is(err, session.ErrWaitingForAnswers) {
		t.Fatalf("second Run = %v, want ErrWaitingForAnswers", err)
	}
	wantSteps(t, "the resume before the answer", steps, "Stopped -resumed-> Planning", "Planning -waiting_for_answers-> Stopped")

	if _, err := session.AnswerQuestion(g.e.dir, "q-1", "hello, as the README says", g.e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	g.on(role.Planner, "Mode: QA_COORDINATE", 1, says(plannerOneTask))
	finishTask1(t, g.e, g.inv)
	p, err, steps, _ = g.run()
	wantDone(t, g.e, p, err)
	wantSteps(t, "the resume after the answer", steps, concat([]string{"Stopped -resumed-> Planning"}, happy[1:])...)
	if prompts := g.inv.prompts(role.Planner); !strings.Contains(prompts[len(prompts)-1], "hello, as the README says") {
		t.Errorf("the planner was not given the person's answer")
	}
	g.inv.allUsed()
}

func TestRunnerPlanningEndings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(g *rig)
		steps  []string
		reason string
	}{
		{"answered Q&A cycles run out", func(g *rig) {
			g.on(role.Planner, "", 4, says(plannerQA))
			g.on(role.Questioner, "", 3, says(questionerAnswer))
		}, []string{"Planning -planner_completed-> Planning", "Planning -planner_completed-> Planning", "Planning -planner_completed-> Planning",
			"Planning -planner_completed-> Failed"}, "still needs answers after 3 Q&A cycles"},
		{"invalid plans run out", func(g *rig) {
			g.on(role.Planner, "", 6, says(malformed))
		}, []string{"Planning -invalid_response-> Planning", "Planning -invalid_response-> Planning", "Planning -invalid_response-> Failed"},
			"the planner gave no valid result (after 2 planning retries)"},
		{"blocked", func(g *rig) {
			g.on(role.Planner, "", 1, says(plannerBlocked))
		}, []string{"Planning -planner_completed-> Failed"}, "planner blocked: needs a database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t)
			tc.script(g)
			p, err, steps, _ := g.run()
			if !errors.Is(err, session.ErrFailed) || !strings.Contains(p.State.Reason, tc.reason) {
				t.Fatalf("Run = %v (reason %q), want ErrFailed saying %q", err, p.State.Reason, tc.reason)
			}
			wantSteps(t, tc.name, steps, concat(happy[:1], tc.steps)...)
			g.inv.allUsed()
			if log := readTestFile(t, g.e.ws.ErrorsLogPath()); !strings.Contains(log, "session "+testSessionID+" failed: ") || !strings.Contains(log, tc.reason) {
				t.Errorf("errors.log does not log the failure:\n%s", log)
			}
		})
	}
}

// ralph's failing check and an invalid verdict send the task back to the
// executor; the third attempt is qualified and committed once.
func TestRunnerReworkAfterFailedChecksAndInvalidVerdict(t *testing.T) {
	g := newRig(t)
	g.checks.codes = []int{1}
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	g.on(role.Executor, exec1, 1, writes(t, g.e.ws.Root, "greet.txt", "", executorDone))
	g.on(role.Executor, exec2, 1, writes(t, g.e.ws.Root, "greet.txt", "hi\n", executorDone))
	g.on(role.Reviewer, review2, 2, says(malformed))
	g.on(role.Executor, "Execute task-1, attempt 3 of 3", 1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone))
	g.on(role.Reviewer, "Review task-1, attempt 3", 1, says(reviewerOK))
	g.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err, steps, _ := g.run()
	wantDone(t, g.e, p, err)
	wantSteps(t, "the session", steps, concat(happy[:4],
		[]string{"Reviewing -reviewer_completed-> Executing", "Executing -executor_completed-> Reviewing",
			"Reviewing -invalid_response-> Executing", "Executing -executor_completed-> Reviewing"}, fromReview)...)
	g.inv.allUsed()
	if rec := record(t, g.e.progress(t), "task-1"); rec.Failures != 2 || rec.Reworks != 1 {
		t.Errorf("task-1 = %+v; want 2 failed attempts, 1 rework (the Failed verdict of ralph's check)", rec)
	}
	if execs := g.inv.prompts(role.Executor); !strings.Contains(execs[1], "greet.txt is empty") {
		t.Errorf("the second attempt was not told what ralph's check said")
	}
	if msg := git(t, g.e.ws.Root, "log", "-1", "--format=%B"); !strings.Contains(msg, "Ralph-Attempt: 3\n") {
		t.Errorf("ralph's commit is not of attempt 3:\n%s", msg)
	}
}

// A long failing output of ralph's check reaches the executor's next
// prompt in the one feedback format (the check, its command and exit
// code, the end of its output in whole lines), while the transition's
// reason stays on one line.
func TestRunnerExecutorGetsTheCheckFeedback(t *testing.T) {
	g := newRig(t)
	g.checks.codes = []int{1}
	var out strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&out, "checking line %d of greet.txt\n", i)
	}
	out.WriteString("greet.txt is empty\n")
	g.checks.output = out.String()
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	g.on(role.Executor, exec1, 1, writes(t, g.e.ws.Root, "greet.txt", "", executorDone))
	g.on(role.Executor, exec2, 1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone))
	g.on(role.Reviewer, review2, 1, says(reviewerOK))
	g.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err, _, _ := g.run()
	wantDone(t, g.e, p, err)
	want := check.Feedback(check.Result{Check: check.Check{Name: "files", Run: "sh check.sh"}, ExitCode: 1, Output: out.String(), Duration: time.Millisecond})
	execs := g.inv.prompts(role.Executor)
	if len(execs) != 2 || !strings.Contains(execs[1], want) {
		t.Fatalf("the second attempt's prompt does not carry check.Feedback:\n%s", execs[len(execs)-1])
	}
	if !strings.Contains(want, "lines above left out") || !strings.Contains(want, "greet.txt is empty\n```") {
		t.Errorf("feedback does not keep the end of a long output:\n%s", want)
	}
	seen := 0
	for _, ev := range g.events {
		tr, _ := ev.Data.(report.Transition)
		if d := tr.Detail; strings.Contains(d, "ralph's check") {
			seen++
			if strings.Contains(d, "\n") || !strings.HasSuffix(d, ": greet.txt is empty") {
				t.Errorf("the transition's reason is not one line ending in the output's last line: %q", d)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no transition says ralph's check failed")
	}
}

// A task that fails every attempt fails the session, whichever way its
// attempts fail.
func TestRunnerTaskAttemptsRunOut(t *testing.T) {
	type script func(g *rig)
	execOK := func(g *rig, n int) {
		g.on(role.Executor, fmt.Sprintf("Execute task-1, attempt %d of 3", n), 1, writes(t, g.e.ws.Root, "greet.txt", "hi\n", executorDone))
	}
	review := func(g *rig, n int, reply string, times int) {
		g.on(role.Reviewer, fmt.Sprintf("Review task-1, attempt %d", n), times, says(reply))
	}
	pass := []string{"Executing -executor_completed-> Reviewing", "Reviewing -reviewer_completed-> Executing"}
	for _, tc := range []struct {
		name   string
		script script
		steps  []string
		reason string
	}{
		{"Failed verdicts", func(g *rig) {
			for n := 1; n <= 3; n++ {
				execOK(g, n)
				review(g, n, reviewerFailed, 1)
			}
		}, concat(pass, pass, []string{"Executing -executor_completed-> Reviewing", "Reviewing -reviewer_completed-> Failed"}),
			"task task-1 failed 3 times: greet.txt says hi"},
		{"an invalid verdict last", func(g *rig) {
			for n := 1; n <= 3; n++ {
				execOK(g, n)
			}
			review(g, 1, reviewerFailed, 1)
			review(g, 2, reviewerFailed, 1)
			review(g, 3, malformed, 2)
		}, concat(pass, pass, []string{"Executing -executor_completed-> Reviewing", "Reviewing -invalid_response-> Failed"}),
			"task task-1 failed 3 times: reviewer gave no verdict"},
		{"invalid executor results", func(g *rig) {
			g.on(role.Executor, "", 6, says(malformed))
		}, []string{"Executing -invalid_response-> Executing", "Executing -invalid_response-> Executing", "Executing -invalid_response-> Failed"},
			"task task-1 failed 3 times"},
		{"a blocked executor, re-planned every time", func(g *rig) {
			g.on(role.Executor, "", 3, says(executorBlocked))
			g.on(role.Planner, "Mode: UPDATE", 3, says(plannerOneTask))
		}, concat(slices.Repeat([]string{"Executing -executor_completed-> Planning", "Planning -planner_completed-> Executing", "Executing -task_selected-> Executing"}, 2),
			[]string{"Executing -executor_completed-> Planning", "Planning -planner_completed-> Executing", "Executing -task_selected-> Failed"}),
			"task task-1 failed 3 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRig(t)
			g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
			tc.script(g)
			p, err, steps, _ := g.run()
			if !errors.Is(err, session.ErrFailed) || !strings.Contains(p.State.Reason, tc.reason) {
				t.Fatalf("Run = %v (reason %q), want ErrFailed saying %q", err, p.State.Reason, tc.reason)
			}
			wantSteps(t, tc.name, steps, concat(happy[:3], tc.steps)...)
			g.inv.allUsed()
			if n := len(g.e.commitsOf(t, "task-1")); n != 0 {
				t.Errorf("a task that failed was committed %d times", n)
			}
		})
	}
}

// An executor that finds new requirements sends the session back to the
// planner with the task it found added; both tasks are then done.
func TestRunnerNewRequirementsReplan(t *testing.T) {
	g := newRig(t)
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	g.on(role.Executor, exec1, 1, says(executorFoundNew))
	g.on(role.Planner, "Mode: UPDATE", 1, func(context.Context, session.Call) (string, error) {
		if ts := g.e.tasks(t); len(ts) != 2 || ts[1].Title != "Write bye.txt" {
			t.Errorf("the planner's tasks.md holds %+v; want the task the executor found added", ts)
		}
		return plannerTwoTasks, nil
	})
	g.on(role.Executor, exec2, 1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone))
	g.on(role.Reviewer, review2, 1, says(reviewerOK))
	g.on(role.Executor, "Execute task-2, attempt 1", 1, writes(t, g.e.ws.Root, "bye.txt", "bye\n", executorDone))
	g.on(role.Reviewer, "Review task-2, attempt 1", 1, says(reviewerOK))
	g.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err, steps, _ := g.run()
	if err != nil || !p.State.Done {
		t.Fatalf("Run = %v, done %v", err, p.State.Done)
	}
	wantSteps(t, "the session", steps, concat(happy[:3],
		[]string{"Executing -new_requirements-> Planning", "Planning -planner_completed-> Executing"},
		happy[2:5], happy[2:])...)
	g.inv.allUsed()
}

func TestRunnerGoalCheckEndings(t *testing.T) {
	t.Run("failed, re-planned, then failed past the limit", func(t *testing.T) {
		g := newRig(t)
		g.policy.MaxGoalChecks = 2
		g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
		g.on(role.Executor, exec1, 1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone))
		g.on(role.Reviewer, review1, 1, says(reviewerOK))
		g.on(role.GoalCheck, "", 1, says(goalFailed))
		g.on(role.Planner, "Mode: UPDATE", 1, func(context.Context, session.Call) (string, error) {
			if ts := g.e.tasks(t); len(ts) != 2 || ts[1].Title != "Write bye.txt" {
				t.Errorf("the planner's tasks.md holds %+v; want the task the goal check found added", ts)
			}
			return plannerTwoTasks, nil
		})
		g.on(role.Executor, "Execute task-2, attempt 1", 1, writes(t, g.e.ws.Root, "bye.txt", "bye\n", executorDone))
		g.on(role.Reviewer, "Review task-2, attempt 1", 1, says(reviewerOK))
		g.on(role.GoalCheck, "", 1, says(goalFailed))
		p, err, steps, _ := g.run()
		if !errors.Is(err, session.ErrFailed) || !strings.Contains(p.State.Reason, "the holistic goal check failed 2 times: bye.txt missing") {
			t.Fatalf("Run = %v (reason %q), want the goal check's limit", err, p.State.Reason)
		}
		wantSteps(t, "the session", steps, concat(happy[:6],
			[]string{"Complete -holistic_check_failed-> Planning", "Planning -planner_completed-> Executing"},
			happy[2:6], []string{"Complete -holistic_check_failed-> Failed"})...)
		g.inv.allUsed()
	})
	t.Run("invalid results run out", func(t *testing.T) {
		g := newRig(t)
		g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
		g.on(role.Executor, exec1, 1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone))
		g.on(role.Reviewer, review1, 1, says(reviewerOK))
		g.on(role.GoalCheck, "", 6, says(malformed))
		p, err, steps, _ := g.run()
		if !errors.Is(err, session.ErrFailed) || !strings.Contains(p.State.Reason, "the goal check gave no valid result") {
			t.Fatalf("Run = %v (reason %q)", err, p.State.Reason)
		}
		wantSteps(t, "the session", steps, concat(happy[:6],
			[]string{"Complete -invalid_response-> Complete", "Complete -invalid_response-> Complete", "Complete -invalid_response-> Failed"})...)
		g.inv.allUsed()
	})
}

// A critical error fails the session: a request that is gone, or a task
// gone from tasks.md when the session comes back to it.
func TestRunnerCriticalErrors(t *testing.T) {
	t.Run("no request", func(t *testing.T) {
		g := newRig(t)
		if err := os.Remove(filepath.Join(g.e.dir, "request.md")); err != nil {
			t.Fatal(err)
		}
		p, err, steps, _ := g.run()
		if !errors.Is(err, session.ErrFailed) || !strings.Contains(err.Error(), "request.md is missing or empty") {
			t.Fatalf("Run = %v, want the session failed for its missing request", err)
		}
		wantSteps(t, "the run", steps, "Initializing -error-> Failed")
		if p.State.Current != session.Failed || len(g.inv.roles()) != 0 {
			t.Errorf("state %s, %d role runs; want Failed before any role", p.State.Current, len(g.inv.roles()))
		}
	})
	for _, at := range []session.State{session.Executing, session.Reviewing} {
		t.Run("task gone at "+string(at), func(t *testing.T) {
			g := newRig(t)
			g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
			interrupt := func(ctx context.Context, _ session.Call) (string, error) {
				g.cancel()
				return "", ctx.Err()
			}
			stopped := happy[:3]
			if at == session.Executing {
				g.on(role.Executor, exec1, 1, interrupt)
			} else {
				g.on(role.Executor, exec1, 1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone))
				g.on(role.Reviewer, review1, 1, interrupt)
				stopped = happy[:4]
			}
			_, err, steps, _ := g.run()
			if !errors.Is(err, loop.ErrInterrupted) {
				t.Fatalf("Run = %v, want interrupted", err)
			}
			wantSteps(t, "the first run", steps, concat(stopped, []string{string(at) + " -interrupted-> Stopped"})...)
			writeTestFile(t, filepath.Join(g.e.dir, "tasks.md"), string(tasks.RenderTasksMD(greetRequest, nil)))
			p, err, steps, _ := g.run()
			if !errors.Is(err, session.ErrFailed) || p.State.Reason != "task task-1 is no longer in tasks.md" {
				t.Fatalf("Run = %v (reason %q), want the session failed for its lost task", err, p.State.Reason)
			}
			wantSteps(t, "the resume", steps, "Stopped -resumed-> "+string(at), string(at)+" -error-> Failed")
			g.inv.allUsed()
		})
	}
}

// A kill of ralph (no stop recorded) resumes through Initializing at the
// state progress.md was saved in; the role cut short runs again and the
// session ends as an uninterrupted one, its task committed once.
func TestRunnerResumesAfterACrash(t *testing.T) {
	for _, tc := range []struct {
		at   session.State
		role string
		done int // transitions made before the kill
	}{
		{session.Planning, role.Planner, 1},
		{session.Executing, role.Executor, 3},
		{session.Reviewing, role.Reviewer, 4},
		{session.Complete, role.GoalCheck, 6},
	} {
		t.Run(string(tc.at), func(t *testing.T) {
			g := newRig(t)
			// The kill comes during the role's first run; the executor
			// had written half its work.
			g.on(tc.role, "", 1, func(ctx context.Context, c session.Call) (string, error) {
				if tc.role == role.Executor {
					writeTestFile(t, filepath.Join(g.e.ws.Root, "greet.txt"), "hel")
				}
				return crash(ctx, c)
			})
			g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
			finishTask1(t, g.e, g.inv)
			_, _, steps, crashed := g.run()
			if !crashed {
				t.Fatal("the run was not killed")
			}
			wantSteps(t, "the killed run", steps, happy[:tc.done]...)
			if p := g.e.progress(t); p.State.Current != tc.at {
				t.Fatalf("progress.md after the kill is at %s, want %s", p.State.Current, tc.at)
			}
			p, err, steps, _ := g.run()
			wantDone(t, g.e, p, err)
			wantSteps(t, "the resume", steps, concat([]string{"Initializing -session_resolved-> " + string(tc.at)}, happy[tc.done:])...)
			g.inv.allUsed()
		})
	}
}

// Every way a run ends before the session does stops it where it was,
// through Stopped, with the error the CLI maps to its exit code; the
// session keeps its counters and spends no attempt, and the next run
// resumes it there by the resumed edge and finishes it.
func TestRunnerStopsAndResumes(t *testing.T) {
	states := []struct {
		at     session.State
		role   string
		match  string
		before int // transitions made before the role runs
	}{
		{session.Planning, role.Planner, "Mode: INITIALIZE", 1},
		{session.Executing, role.Executor, exec1, 3},
		{session.Reviewing, role.Reviewer, review1, 4},
		{session.Complete, role.GoalCheck, "", 6},
	}
	for _, st := range states {
		for _, trig := range []session.Trigger{session.BudgetExhausted, session.UsageLimit, session.AgentCannotRun, session.Interrupted, session.UnexpectedError} {
			t.Run(string(st.at)+"/"+string(trig), func(t *testing.T) {
				g := newRig(t)
				g.budget.MaxTokens = 1000
				script := []struct {
					role, match string
					run         func(context.Context, session.Call) (string, error)
				}{
					{role.Planner, "Mode: INITIALIZE", says(plannerOneTask)},
					{role.Executor, exec1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone)},
					{role.Reviewer, review1, says(reviewerOK)},
					{role.GoalCheck, "", says(goalPassed)},
				}
				var wantErr func(error) bool
				for i, s := range script {
					if s.role == st.role {
						switch trig {
						case session.BudgetExhausted:
							if i == 0 {
								// Nothing ran before the planner: its own
								// first, malformed reply spends the budget
								// before it is asked again.
								g.on(s.role, s.match, 1, spends(1500, says(malformed)))
							}
							wantErr = func(err error) bool {
								var be *session.BudgetError
								return errors.As(err, &be) && strings.Contains(err.Error(), "max_tokens (1500 of 1000 tokens used)")
							}
						case session.UsageLimit:
							g.on(s.role, s.match, 1, func(context.Context, session.Call) (string, error) {
								return "", &session.LimitError{Agent: fakeAgentName, ResetsAt: g.e.clock.Now().Add(time.Hour), Message: "weekly limit reached"}
							})
							wantErr = func(err error) bool {
								var le *session.LimitError
								return errors.As(err, &le) && strings.Contains(err.Error(), "resume it with ralph run --resume once the limit resets")
							}
						case session.AgentCannotRun:
							g.on(s.role, s.match, 1, fails(&agent.EnvError{Agent: "claude", Kind: agent.EnvAuth, Detail: "403", Hint: "Log in: run `claude login`"}))
							wantErr = func(err error) bool {
								var envErr *agent.EnvError
								return errors.As(err, &envErr) && strings.Contains(err.Error(), "claude login")
							}
						case session.Interrupted:
							g.on(s.role, s.match, 1, func(ctx context.Context, _ session.Call) (string, error) {
								g.cancel()
								return "", ctx.Err()
							})
							wantErr = func(err error) bool { return errors.Is(err, loop.ErrInterrupted) }
						case session.UnexpectedError:
							crashed := errors.New("agent exited with status 1")
							g.on(s.role, s.match, 1, fails(crashed))
							wantErr = func(err error) bool {
								return errors.Is(err, crashed) && strings.Contains(err.Error(), "the "+s.role+" failed 1 time")
							}
						}
					}
					if trig == session.BudgetExhausted && i+1 < len(script) && script[i+1].role == st.role {
						g.on(s.role, s.match, 1, spends(1500, s.run))
						continue
					}
					g.on(s.role, s.match, 1, s.run)
				}
				_, err, steps, _ := g.run()
				if !wantErr(err) || errors.Is(err, session.ErrFailed) {
					t.Fatalf("Run = %v; want the %s error, not a failed session", err, trig)
				}
				wantSteps(t, "the stopped run", steps, concat(happy[:st.before], []string{string(st.at) + " -" + string(trig) + "-> Stopped"})...)
				p := g.e.progress(t)
				if p.State.Current != session.Stopped || p.State.Resumes() != st.at || p.State.Final() {
					t.Errorf("progress.md is at %s (resumes at %s); want Stopped in %s", p.State.Current, p.State.Resumes(), st.at)
				}
				if rec := p.Task("task-1"); rec != nil && rec.Failures != 0 {
					t.Errorf("the stop cost task-1 an attempt: %+v", *rec)
				}
				if trig != session.Interrupted && (p.LastEvent == nil || p.LastEvent.Transition.Detail == "") {
					t.Errorf("the stop's transition does not say why: %+v", p.LastEvent)
				}

				// Once what stopped it is gone, the session resumes
				// where it was.
				g.budget.MaxTokens = 0
				g.e.clock.now = g.e.clock.now.Add(2 * time.Hour) // past the usage limit
				p, err, steps, _ = g.run()
				wantDone(t, g.e, p, err)
				wantSteps(t, "the resume", steps, concat([]string{"Stopped -resumed-> " + string(st.at)}, happy[st.before:])...)
				g.inv.allUsed()
			})
		}
	}
}

// refusingGit is the repository, except that its first commit is refused
// as a pre-commit hook would refuse it.
type refusingGit struct {
	*gitx.Repo
	refused bool
}

func (g *refusingGit) Commit(ctx context.Context, msg string) (string, error) {
	if !g.refused {
		g.refused = true
		return "", &gitx.ExitError{Stderr: "pre-commit hook: lint failed"}
	}
	return g.Repo.Commit(ctx, msg)
}

// A commit ralph cannot make stops the run in Reviewing with the task not
// done; the resume reviews it again and commits it once.
func TestRunnerRefusedCommitStopsInReviewing(t *testing.T) {
	g := newRig(t)
	g.git = &refusingGit{Repo: g.e.ws.Repo}
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	g.on(role.Executor, exec1, 1, writes(t, g.e.ws.Root, "greet.txt", "hello\n", executorDone))
	g.on(role.Reviewer, review1, 2, says(reviewerOK))
	g.on(role.GoalCheck, "", 1, says(goalPassed))
	_, err, steps, _ := g.run()
	if err == nil || !strings.Contains(err.Error(), "pre-commit hook: lint failed") {
		t.Fatalf("Run = %v, want the refused commit", err)
	}
	wantSteps(t, "the first run", steps, concat(happy[:4], []string{"Reviewing -unexpected_error-> Stopped"})...)
	p := g.e.progress(t)
	if rec := record(t, p, "task-1"); rec.Mark != tasks.MarkInReview || rec.Commit != "" {
		t.Errorf("task-1 = %+v after a refused commit; want [P] and no commit", rec)
	}
	if p.State.Resumes() != session.Reviewing || p.State.CurrentTaskID != "task-1" {
		t.Errorf("progress.md resumes at %s, task %q; want Reviewing task-1", p.State.Resumes(), p.State.CurrentTaskID)
	}
	p, err, steps, _ = g.run()
	wantDone(t, g.e, p, err)
	wantSteps(t, "the resume", steps, concat([]string{"Stopped -resumed-> Reviewing"}, fromReview)...)
	g.inv.allUsed()
}

// A usage limit is the account's: the session records its agent's in the
// workspace's shared cooldowns, and before a role run waits out a rest
// another run recorded, or stops when it is too long.
func TestRunnerSharedCooldowns(t *testing.T) {
	t.Run("a short rest is waited out, showing progress", func(t *testing.T) {
		g := newRig(t)
		if err := runkit.OpenCooldowns(g.e.ws.Dir()).Set(fakeAgentName, g.e.clock.Now().Add(2*time.Minute), "5-hour limit (the loop's)"); err != nil {
			t.Fatal(err)
		}
		g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
		finishTask1(t, g.e, g.inv)
		p, err, steps, _ := g.run()
		wantDone(t, g.e, p, err)
		wantSteps(t, "the session", steps, happy...)
		if got := g.e.clock.slept(); !slices.Equal(got, []time.Duration{2 * time.Minute}) {
			t.Errorf("waited %v, want 2m before the planner", got)
		}
		var limits, waits []string
		for _, ev := range g.events {
			switch ev.Kind {
			case report.KindLimit:
				limits = append(limits, ev.Text)
			case report.KindWait:
				waits = append(waits, ev.Text)
			}
		}
		if len(limits) != 1 || !strings.Contains(limits[0], "fake hit a usage limit until") || !strings.Contains(limits[0], "5-hour limit (the loop's); waiting 2m0s") {
			t.Errorf("limit events %q; want one saying the agent rests and the session waits 2m", limits)
		}
		if len(waits) != 3 || !strings.Contains(waits[0], "usage limit of fake: 1m30s left") || !strings.Contains(waits[2], ": 30s left") {
			t.Errorf("wait events %q; want the time left every 30s", waits)
		}
	})
	t.Run("a long rest stops the session", func(t *testing.T) {
		g := newRig(t)
		if err := runkit.OpenCooldowns(g.e.ws.Dir()).Set(fakeAgentName, g.e.clock.Now().Add(time.Hour), "weekly limit"); err != nil {
			t.Fatal(err)
		}
		_, err, steps, _ := g.run()
		var le *session.LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "ralph run --resume once the limit resets") {
			t.Fatalf("Run = %v, want the agent's limit and how to resume", err)
		}
		wantSteps(t, "the run", steps, "Initializing -session_resolved-> Planning", "Planning -usage_limit-> Stopped")
		if n := len(g.inv.roles()); n != 0 {
			t.Errorf("%d role runs; a resting agent must not be asked", n)
		}
	})
	t.Run("a limit a role hits is recorded for every run", func(t *testing.T) {
		g := newRig(t)
		reset := g.e.clock.Now().Add(2 * time.Minute)
		g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
		g.on(role.Executor, exec1, 1, fails(&session.LimitError{Agent: fakeAgentName, ResetsAt: reset, Message: "5-hour limit reached"}))
		finishTask1(t, g.e, g.inv)
		p, err, _, _ := g.run()
		wantDone(t, g.e, p, err)
		until, resting := runkit.OpenCooldowns(g.e.ws.Dir()).Until(fakeAgentName, reset.Add(-time.Second))
		if !resting || !until.Equal(reset) {
			t.Errorf("the shared cooldowns say %s rests until %v (%v); want until %v", fakeAgentName, until, resting, reset)
		}
	})
}
