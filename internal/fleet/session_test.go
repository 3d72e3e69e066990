package fleet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/workspace"
)

// The session workflow's tests run the real session runner of
// internal/session on a real git repository, as the runner's own tests
// do: each role's reply comes from a script (scriptedRoles) instead of an
// agent process, as internal/session's fakeInvoker does. Nothing of the
// activities is mocked.

// Role replies, in the shape the runner's tests give them.
const (
	sPlannerQA      = "```json\n{\"status\": \"needs_qa_cycle\", \"questions\": [\"Which greeting word?\"]}\n```"
	sQuestionerAsks = "```json\n{\"human_questions\": [\"Which greeting does the owner want?\", \"Which file name?\"]}\n```"
	sPlannerOneTask = "```json\n{\"status\": \"completed\", \"summary\": \"one file\", \"tasks\": [{\"title\": \"Write greet.txt\", \"criteria\": [\"greet.txt says hello\"]}]}\n```"
	sExecutorDone   = "```json\n{\"status\": \"completed\", \"summary\": \"wrote hello\"}\n```"
	sReviewerOK     = "```json\n{\"verdict\": \"Qualified\", \"summary\": \"says hello\"}\n```"
	sGoalPassed     = "```json\n{\"status\": \"passed\", \"summary\": \"greet.txt exists\"}\n```"
)

// scriptedRoles answers role runs from a script: the first reply of a
// role whose prompt contains its match. before, when set, runs before
// the executor replies (a test holds the run there).
type scriptedRoles struct {
	t      *testing.T
	root   string
	mu     sync.Mutex
	calls  []session.Call
	before func()
	// limit, when set, is the reset of a usage limit the first role run
	// hits.
	limit time.Time
}

func (s *scriptedRoles) Agent(string) string { return "fake" }

func (s *scriptedRoles) Invoke(ctx context.Context, c session.Call) (string, error) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	limit := s.limit
	s.limit = time.Time{}
	s.mu.Unlock()
	if !limit.IsZero() {
		return "", &session.LimitError{Agent: "fake", ResetsAt: limit, Message: "5-hour limit reached"}
	}
	switch {
	case c.Role == role.Planner && strings.Contains(c.Prompt, "Mode: INITIALIZE"):
		return sPlannerQA, nil
	case c.Role == role.Questioner:
		return sQuestionerAsks, nil
	case c.Role == role.Planner && strings.Contains(c.Prompt, "Mode: QA_COORDINATE"):
		return sPlannerOneTask, nil
	case c.Role == role.Executor:
		if s.before != nil {
			s.before()
		}
		if err := os.WriteFile(filepath.Join(s.root, "greet.txt"), []byte("hello\n"), 0o644); err != nil {
			return "", err
		}
		return sExecutorDone, nil
	case c.Role == role.Reviewer:
		return sReviewerOK, nil
	case c.Role == role.GoalCheck:
		return sGoalPassed, nil
	}
	s.t.Errorf("unexpected %s run; prompt begins: %.300s", c.Role, c.Prompt)
	return "", &session.LimitError{Agent: "fake", Message: "unexpected call"}
}

// prompts are the prompts of role's runs, in order.
func (s *scriptedRoles) prompts(r string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if c.Role == r {
			out = append(out, c.Prompt)
		}
	}
	return out
}

// sessionRig is a repository with a new session in it and a CheckoutHost
// whose RunSession runs the real session runner over it.
type sessionRig struct {
	ws    *workspace.Workspace
	id    string
	dir   string
	roles *scriptedRoles
	host  *CheckoutHost
	// runs counts the host's runs of the session.
	mu   sync.Mutex
	runs int
	// now, when set, is the time of the workflow (the test environment's
	// clock), which the host's runner takes at the start of a run.
	now func() time.Time
}

func newSessionRig(t *testing.T) *sessionRig {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the session workflow tests but is not in PATH: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "init", "-q", "-b", "master")
	gitIn(t, root, "config", "user.name", "Ralph Test")
	gitIn(t, root, "config", "user.email", "ralph@example.com")
	// ralph's folder is ignored, as the CLI arranges: the session's
	// commits hold only the agent's work.
	for name, body := range map[string]string{"README.md": "Greetings say hello.\n", ".gitignore": ".ralph/\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, root, "add", "-A")
	gitIn(t, root, "commit", "-q", "-m", "initial")
	ws, err := workspace.Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	const id = "260102-030405"
	dir := SessionDir(ws.Dir(), id)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := session.Create(ws, dir, id, "Greet the user in greet.txt", gitIn(t, root, "rev-parse", "HEAD"), now); err != nil {
		t.Fatal(err)
	}
	r := &sessionRig{ws: ws, id: id, dir: dir, roles: &scriptedRoles{t: t, root: root}}
	r.host = &CheckoutHost{Name: "h1", RalphDir: ws.Dir(), Poll: 5 * time.Millisecond,
		RecordAnswer: func(_ context.Context, a SessionAnswer) error {
			_, err := session.AnswerQuestion(SessionDir(ws.Dir(), a.SessionID), a.QuestionID, a.Text, time.Now())
			return err
		},
		RunSession: func(ctx context.Context, in SessionRunInput) error {
			r.mu.Lock()
			r.runs++
			r.mu.Unlock()
			// The runner's time is the workflow's: in the SDK's test
			// environment a durable timer skips hours in no time.
			clock := &activityClock{at: time.Now(), began: time.Now()}
			if r.now != nil {
				clock.at = r.now()
			}
			run := &session.Runner{WS: ws, Dir: SessionDir(ws.Dir(), in.SessionID), Invoker: r.roles, Clock: clock,
				Backoff: time.Millisecond, MaxAgentRetries: 1, MaxLimitWait: time.Second,
				Events: report.NewEmitter(session.MachineName, in.SessionID, 0, nil)}
			_, err := run.Run(ctx)
			return err
		}}
	return r
}

// activityClock tells the time from a run's start as the workflow's
// clock saw it; it never waits (a limit the runner would sit
// out in place stops the run instead: MaxLimitWait is 1s).
type activityClock struct{ at, began time.Time }

func (c *activityClock) Now() time.Time { return c.at.Add(time.Since(c.began)) }

func (c *activityClock) Wait(ctx context.Context, d time.Duration, _ func(time.Duration)) error {
	return ctx.Err()
}

func (r *sessionRig) hostRuns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs
}

func (r *sessionRig) input() SessionInput {
	p, err := session.Load(r.dir)
	if err != nil {
		panic(err)
	}
	return SessionInput{SessionID: r.id, Placement: Placement{Host: "h1", Shared: "ralph", Heartbeat: time.Second}, Title: p.Title, State: p.State}
}

// questionsOnDisk are the host's questions, by id, with their answers.
func (r *sessionRig) questionsOnDisk(t *testing.T) map[string]string {
	t.Helper()
	qs, err := session.LoadQuestions(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, q := range qs {
		out[q.ID] = q.Answer
	}
	return out
}

type answerResult = hostedUpdate[SessionStatus]

func sendAnswer(env *testsuite.TestWorkflowEnvironment, uid string, a SessionAnswer, res *answerResult) {
	res.send(env, UpdateAnswer, uid, a)
}

func querySession(t *testing.T, env *testsuite.TestWorkflowEnvironment) SessionStatus {
	t.Helper()
	return queryHosted[SessionStatus](t, env)
}

func openIDs(qs []session.Question) []string {
	var ids []string
	for _, q := range qs {
		ids = append(ids, q.ID)
	}
	return ids
}

// The answer Update, against the real runner on the host: the session
// plans, its questioner asks a person two questions, and the workflow
// waits with both open (the status Query lists them). An answer to an
// unknown question and an empty one are refused by the validator before
// they are accepted, and nothing changes; the answer to q-1 is accepted
// and recorded on the host, but the session waits on for q-2; a second
// answer to q-1 is refused. The answer to q-2 lets the session go on: the
// host runs it again, the planner gets both answers, and while the
// executor works an answer is refused because the session waits for none.
// The session ends Complete and the workflow with it.
func TestSessionAnswerUpdate(t *testing.T) {
	g := newSessionRig(t)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	g.host.Signal = func(_ context.Context, name string, p any) { env.SignalWorkflow(name, p) }
	RegisterHosted(env, g.host)
	env.SetTestTimeout(time.Minute)

	executing := make(chan struct{})
	release := make(chan struct{})
	g.roles.before = func() {
		close(executing)
		select {
		case <-release:
		case <-time.After(10 * time.Second): // the test failed: do not hang it
		}
	}
	var waiting, afterRefusals, afterQ1, working SessionStatus
	var unknown, empty, q1, q1again, q2, whileWorking answerResult
	var diskAfterRefusals, diskAfterQ1 map[string]string
	var runsBeforeQ2 int
	env.RegisterDelayedCallback(func() {
		waiting = querySession(t, env)
		sendAnswer(env, "u1", SessionAnswer{QuestionID: "q-9", Text: "hello", By: "ann"}, &unknown)
		sendAnswer(env, "u2", SessionAnswer{QuestionID: "q-1", Text: "  ", By: "ann"}, &empty)
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		afterRefusals = querySession(t, env)
		diskAfterRefusals = g.questionsOnDisk(t)
		sendAnswer(env, "u3", SessionAnswer{QuestionID: "q-1", Text: "hello, as the README says", By: "ann"}, &q1)
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		afterQ1 = querySession(t, env)
		diskAfterQ1 = g.questionsOnDisk(t)
		runsBeforeQ2 = g.hostRuns()
		sendAnswer(env, "u4", SessionAnswer{QuestionID: "q-1", Text: "hi", By: "bob"}, &q1again)
		sendAnswer(env, "u5", SessionAnswer{QuestionID: "q-2", Text: "greet.txt", By: "bob"}, &q2)
	}, 3*time.Minute)
	env.RegisterDelayedCallback(func() {
		select {
		case <-executing:
		case <-time.After(20 * time.Second):
			t.Error("the host's executor never ran after the answers")
			close(release)
			return
		}
		working = querySession(t, env)
		sendAnswer(env, "u6", SessionAnswer{QuestionID: "q-3", Text: "late", By: "cid"}, &whileWorking)
		close(release)
	}, 3*time.Minute+time.Second) // while the run works the env's clock moves with the wall clock
	env.ExecuteWorkflow(SessionWorkflow, g.input())

	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not end")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	if !waiting.WaitsForAnswers || waiting.Working || waiting.State != session.Planning ||
		!slices.Equal(openIDs(waiting.OpenQuestions), []string{"q-1", "q-2"}) || waiting.OpenQuestions[0].Text != "Which greeting does the owner want?" {
		t.Errorf("status while the session waits: %+v", waiting)
	}
	if unknown.rejected == nil || unknown.accepted || !strings.Contains(unknown.rejected.Error(), `no open question "q-9"`) ||
		!strings.Contains(unknown.rejected.Error(), "q-1, q-2") {
		t.Errorf("an answer to q-9: %+v", unknown)
	}
	if empty.rejected == nil || empty.accepted || !strings.Contains(empty.rejected.Error(), "empty") {
		t.Errorf("an empty answer: %+v", empty)
	}
	if !slices.Equal(openIDs(afterRefusals.OpenQuestions), []string{"q-1", "q-2"}) || len(afterRefusals.Log) != len(waiting.Log) ||
		diskAfterRefusals["q-1"] != "" || diskAfterRefusals["q-2"] != "" {
		t.Errorf("the refused answers changed something: status %+v, on the host %v", afterRefusals, diskAfterRefusals)
	}
	if !q1.accepted || q1.err != nil || !slices.Equal(openIDs(q1.status.OpenQuestions), []string{"q-2"}) {
		t.Errorf("the answer to q-1: %+v", q1)
	}
	if diskAfterQ1["q-1"] != "hello, as the README says" {
		t.Errorf("the host recorded %q for q-1", diskAfterQ1["q-1"])
	}
	if !afterQ1.WaitsForAnswers || runsBeforeQ2 != 1 || afterQ1.Runs != 1 {
		t.Errorf("with q-2 open the session went on: status %+v, host runs %d", afterQ1, runsBeforeQ2)
	}
	if q1again.rejected == nil || !strings.Contains(q1again.rejected.Error(), "already answered by ann") {
		t.Errorf("a second answer to q-1: %+v", q1again)
	}
	if !q2.accepted || q2.err != nil || len(q2.status.OpenQuestions) != 0 {
		t.Errorf("the answer to q-2: %+v", q2)
	}
	if !working.Working || working.WaitsForAnswers || working.State != session.Executing || working.CurrentTask != "task-1" {
		t.Errorf("status while the executor works: %+v", working)
	}
	if whileWorking.rejected == nil || !strings.Contains(whileWorking.rejected.Error(), "waits for no answer") {
		t.Errorf("an answer while the session works: %+v", whileWorking)
	}
	if g.hostRuns() != 2 {
		t.Errorf("the host ran the session %d times, want 2 (before and after the answers)", g.hostRuns())
	}
	prompts := g.roles.prompts(role.Planner)
	if last := prompts[len(prompts)-1]; !strings.Contains(last, "hello, as the README says") || !strings.Contains(last, "greet.txt") {
		t.Errorf("the planner was not given the person's answers:\n%.2000s", last)
	}
	var final SessionStatus
	if err := env.GetWorkflowResult(&final); err != nil || !final.Done || final.Outcome != SessionDone || final.TasksDone != 1 {
		t.Errorf("the workflow ended with %+v, %v", final, err)
	}
	p, err := session.Load(g.dir)
	if err != nil || !p.State.Done {
		t.Errorf("progress.md on the host: %+v, %v", p.State, err)
	}
	if log := gitIn(t, g.ws.Root, "log", "--format=%s"); !strings.Contains(log, "task-1: Write greet.txt") {
		t.Errorf("the host's repository has no commit of task-1:\n%s", log)
	}
}

// The validator alone: with no question open the session waits for
// none, whatever the id.
func TestSessionValidatorWithNothingOpen(t *testing.T) {
	w := &sessionRun{in: SessionInput{SessionID: "s1", Placement: Placement{Host: "h1"}}, st: session.OrchestratorState{Current: session.Complete, Done: true},
		answered: map[string]string{}, recording: map[string]string{}}
	err := w.validate(SessionAnswer{QuestionID: "q-1", Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "waits for no answer: it has ended") {
		t.Errorf("validate with the session ended: %v", err)
	}
	w.st, w.working = session.OrchestratorState{Current: session.Executing}, true
	err = w.validate(SessionAnswer{QuestionID: "q-1", Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "ralph is working on it on host h1") {
		t.Errorf("validate while a run works: %v", err)
	}
}

// On a real Temporal server, with a worker on the shared queue and one on
// the session's host queue: the session's workflow runs the session until
// its questioner asks a person; a second start of the same session is
// refused; an answer to an unknown question is refused with the
// validator's reason; answers to q-1 and q-2 are recorded on the host and
// the session goes on to Complete, which ends the workflow.
func TestSessionOnDevServer(t *testing.T) {
	g := newSessionRig(t)
	c := devServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.host.Client = c
	shared := "ralph-session-test"
	ws := worker.New(c, shared, worker.Options{})
	RegisterHosted(ws, nil)
	wh := worker.New(c, HostQueue(shared, "h1"), worker.Options{})
	RegisterHosted(wh, g.host)
	for _, w := range []worker.Worker{ws, wh} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
	}
	in := g.input()
	in.Shared = shared
	began := time.Now()
	run, err := StartSession(ctx, c, in)
	if err != nil {
		t.Fatal(err)
	}
	var st SessionStatus
	waits := func() bool { st, err = QuerySession(ctx, c, g.id); return err == nil && st.WaitsForAnswers }
	if !wait.Within(wait.Long, waits) {
		t.Fatalf("the workflow never waited for answers: %+v, %v", st, err)
	}
	t.Logf("from the start to the session waiting for answers: %v", time.Since(began).Round(time.Millisecond))
	if !slices.Equal(openIDs(st.OpenQuestions), []string{"q-1", "q-2"}) || st.State != session.Planning {
		t.Errorf("status while the session waits: %+v", st)
	}
	if _, err := StartSession(ctx, c, in); !errors.Is(err, ErrSessionRunning) || !strings.Contains(err.Error(),
		"session "+g.id+" is workflow ralph-session-"+g.id+"; answer its questions with `ralph answer --session "+g.id+" ID \"...\"`") {
		t.Errorf("a second start of the session: %v, want ErrSessionRunning saying how to answer it", err)
	}
	_, _, err = SendAnswer(ctx, c, g.id, SessionAnswer{QuestionID: "q-7", Text: "x"}, 10*time.Second)
	var refused *Refused
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, `no open question "q-7"`) {
		t.Fatalf("an answer to q-7: %v", err)
	}
	began = time.Now()
	st, recorded, err := SendAnswer(ctx, c, g.id, SessionAnswer{QuestionID: "q-1", Text: "hello", By: "ann"}, 10*time.Second)
	if err != nil || !recorded || !slices.Equal(openIDs(st.OpenQuestions), []string{"q-2"}) {
		t.Fatalf("the answer to q-1: %+v, recorded %v, %v", st, recorded, err)
	}
	t.Logf("an answer from the Update to recorded on the host: %v", time.Since(began).Round(time.Millisecond))
	if g.questionsOnDisk(t)["q-1"] != "hello" {
		t.Errorf("the host has %v", g.questionsOnDisk(t))
	}
	if _, _, err := SendAnswer(ctx, c, g.id, SessionAnswer{QuestionID: "q-2", Text: "greet.txt", By: "ann"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var final SessionStatus
	if err := run.Get(ctx, &final); err != nil || !final.Done || final.Runs != 2 {
		t.Fatalf("the workflow ended with %+v, %v", final, err)
	}
	t.Logf("history of the whole session: %d events", final.HistoryLength)
	if _, err := os.Stat(filepath.Join(g.ws.Root, "greet.txt")); err != nil {
		t.Errorf("the host's session did not do its task: %v", err)
	}
}

// A usage limit that resets in five hours stops the host's run; the
// workflow sleeps it out on a durable timer (skipped here in
// milliseconds) and runs the session again once it reset, when it goes
// on to the questions and, answered, to Complete. The status Query shows
// the wait.
func TestSessionUsageLimitIsADurableTimer(t *testing.T) {
	g := newSessionRig(t)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	RegisterHosted(env, g.host)
	env.SetTestTimeout(time.Minute)
	g.now = env.Now
	until := env.Now().Add(5 * time.Hour)
	g.roles.limit = until
	var sleeping, waiting SessionStatus
	var q1, q2 answerResult
	env.RegisterDelayedCallback(func() { sleeping = querySession(t, env) }, time.Hour)
	env.RegisterDelayedCallback(func() {
		waiting = querySession(t, env)
		sendAnswer(env, "a1", SessionAnswer{QuestionID: "q-1", Text: "hello"}, &q1)
		sendAnswer(env, "a2", SessionAnswer{QuestionID: "q-2", Text: "greet.txt"}, &q2)
	}, 6*time.Hour)
	began := time.Now()
	env.ExecuteWorkflow(SessionWorkflow, g.input())
	t.Logf("a 5-hour limit and the whole session took %v", time.Since(began).Round(time.Millisecond))
	if err := env.GetWorkflowError(); err != nil || !env.IsWorkflowCompleted() {
		t.Fatalf("workflow: %v", err)
	}
	if !sleeping.UntilLimit.Equal(until) || sleeping.Working || sleeping.Outcome != SessionLimited || sleeping.Runs != 1 {
		t.Errorf("status during the limit: %+v", sleeping)
	}
	if !waiting.WaitsForAnswers || waiting.Runs != 2 || !waiting.UntilLimit.IsZero() {
		t.Errorf("status after the limit reset: %+v", waiting)
	}
	if !q1.accepted || !q2.accepted {
		t.Errorf("answers: %+v %+v", q1, q2)
	}
	var final SessionStatus
	if err := env.GetWorkflowResult(&final); err != nil || !final.Done || g.hostRuns() != 3 {
		t.Errorf("the workflow ended with %+v, %v after %d runs on the host (want 3: limited, questions, the rest)", final, err, g.hostRuns())
	}
}
