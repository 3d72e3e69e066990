package session_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// runT0 is when every runner test's session begins.
var runT0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// testSessionID is the id of every runner test's session.
const testSessionID = "250301-090000"

// The replies of well-behaved roles, in the shape session.txtar's fake
// agent gives them.
const (
	plannerOneTask = "Plan written.\n```json\n{\"status\": \"completed\", \"summary\": \"one file\", \"tasks\": [{\"title\": \"Write greet.txt\", \"criteria\": [\"greet.txt says hello\"]}]}\n```"
	plannerNoTasks = "Nothing to do, it seems.\n```json\n{\"status\": \"completed\", \"summary\": \"nothing\", \"tasks\": []}\n```"
	executorDone   = "Wrote it.\n```json\n{\"status\": \"completed\", \"summary\": \"wrote hello\"}\n```"
	reviewerOK     = "Looks right.\n```json\n{\"verdict\": \"Qualified\", \"summary\": \"says hello\"}\n```"
	goalPassed     = "```json\n{\"status\": \"passed\", \"summary\": \"greet.txt exists\"}\n```"
	malformed      = "Here is my verdict:\n```json\n{\"verdict\": \"Qualified\", \n```"
)

// step is one scripted role run of a fakeInvoker.
type step struct {
	role  string
	match string // a substring of the prompt; "" matches any prompt
	times int
	run   func(ctx context.Context, c session.Call) (string, error)
	used  int
}

// fakeInvoker answers role runs from a script. A call no step matches
// fails the test and is answered with a usage limit of unknown reset, so
// that Run stops at once instead of retrying.
type fakeInvoker struct {
	t     *testing.T
	mu    sync.Mutex
	steps []*step
	calls []session.Call
}

func newInvoker(t *testing.T) *fakeInvoker { return &fakeInvoker{t: t} }

// on scripts times runs of role whose prompt contains match; the first
// step with runs left that matches a call answers it.
func (f *fakeInvoker) on(role, match string, times int, run func(ctx context.Context, c session.Call) (string, error)) *fakeInvoker {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.steps = append(f.steps, &step{role: role, match: match, times: times, run: run})
	return f
}

// says is a run whose final message is text.
func says(text string) func(context.Context, session.Call) (string, error) {
	return func(context.Context, session.Call) (string, error) { return text, nil }
}

// fails is a run that fails with err.
func fails(err error) func(context.Context, session.Call) (string, error) {
	return func(context.Context, session.Call) (string, error) { return "", err }
}

// writes is a run that writes file (relative to root) and then says text.
func writes(t *testing.T, root, file, content, text string) func(context.Context, session.Call) (string, error) {
	return func(context.Context, session.Call) (string, error) {
		writeTestFile(t, filepath.Join(root, file), content)
		return text, nil
	}
}

var errUnexpected = errors.New("fake invoker: unexpected call")

// fakeAgentName is the agent of every role of a fakeInvoker.
const fakeAgentName = "fake"

func (f *fakeInvoker) Agent(string) string { return fakeAgentName }

func (f *fakeInvoker) Invoke(ctx context.Context, c session.Call) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	var st *step
	for _, s := range f.steps {
		if s.role == c.Role && strings.Contains(c.Prompt, s.match) && s.used < s.times {
			st = s
			break
		}
	}
	if st != nil {
		st.used++
	}
	f.mu.Unlock()
	if st == nil {
		f.t.Errorf("unexpected %s run; prompt begins:\n%s", c.Role, clipLines(c.Prompt, 12))
		return "", &session.LimitError{Agent: "fake", Message: errUnexpected.Error()}
	}
	return st.run(ctx, c)
}

// count is the number of runs of role whose prompt contains match.
func (f *fakeInvoker) count(role, match string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.Role == role && strings.Contains(c.Prompt, match) {
			n++
		}
	}
	return n
}

// prompts returns the prompts of role's runs, in order.
func (f *fakeInvoker) prompts(role string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.Role == role {
			out = append(out, c.Prompt)
		}
	}
	return out
}

// roles returns the roles of every run, in order.
func (f *fakeInvoker) roles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.Role)
	}
	return out
}

// allUsed fails the test when a scripted step has runs left.
func (f *fakeInvoker) allUsed() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.steps {
		if s.used != s.times {
			f.t.Errorf("scripted %s run matching %q was used %d time(s), want %d", s.role, s.match, s.used, s.times)
		}
	}
}

func clipLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// fakeClock is the runner's clock: Now stands still, Wait records the wait
// and moves the clock on by it without sleeping, telling show the time
// left in steps as runkit.Wait does.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Wait(ctx context.Context, d time.Duration, show func(left time.Duration)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	for left := d; left > 0; left -= runkit.WaitStep {
		if show != nil {
			show(left)
		}
		c.mu.Lock()
		c.now = c.now.Add(min(left, runkit.WaitStep))
		c.mu.Unlock()
	}
	return nil
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// testWriter sends the runner's output to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// isolateGit keeps the machine's git configuration out of the test.
func isolateGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the runner tests but is not in PATH: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	writeTestFile(t, empty, "")
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_AUTHOR_NAME", "Ralph Test")
	t.Setenv("GIT_AUTHOR_EMAIL", "ralph@example.com")
	t.Setenv("GIT_COMMITTER_NAME", "Ralph Test")
	t.Setenv("GIT_COMMITTER_EMAIL", "ralph@example.com")
}

// git runs the real git in dir and returns its output.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeTestFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sessionEnv is a git repository with one commit and a new session in it.
type sessionEnv struct {
	ws    *workspace.Workspace
	dir   string // the session folder
	clock *fakeClock
}

// newSessionEnv makes a repository with one commit (ralph's folder
// ignored, as the CLI arranges) and creates a session for request.
func newSessionEnv(t testing.TB, request string) *sessionEnv {
	t.Helper()
	isolateGit(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git(t, root, "init", "-q")
	writeTestFile(t, filepath.Join(root, "README.md"), "Greetings say hello.\n")
	writeTestFile(t, filepath.Join(root, ".gitignore"), ".ralph/\n")
	git(t, root, "add", "-A")
	git(t, root, "commit", "-q", "-m", "initial")
	ctx := context.Background()
	ws, err := workspace.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	head, err := ws.Repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := ws.Path("sessions", testSessionID)
	if err := session.Create(ws, dir, testSessionID, request, head, runT0); err != nil {
		t.Fatal(err)
	}
	return &sessionEnv{ws: ws, dir: dir, clock: &fakeClock{now: runT0}}
}

// runner returns a runner of the session with the given invoker: 1s
// backoff, 3 retries, usage limits up to 10 minutes waited out.
func (e *sessionEnv) runner(t testing.TB, inv session.Invoker) *session.Runner {
	r := &session.Runner{
		WS: e.ws, Dir: e.dir, Invoker: inv, Clock: e.clock,
		Backoff: time.Second, MaxAgentRetries: 3, MaxLimitWait: 10 * time.Minute,
		Events: report.NewEmitter(session.MachineName, testSessionID, 0, e.clock.Now, report.Text{W: testWriter{t}}),
	}
	session.ObserveEdges(r, func(edge session.Edge) { covered.add(t, edge) })
	return r
}

// progress reads progress.md back as a resume would.
func (e *sessionEnv) progress(t *testing.T) session.Progress {
	t.Helper()
	p, err := session.Load(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *sessionEnv) progressText(t *testing.T) string {
	t.Helper()
	return readTestFile(t, session.ProgressPath(e.dir))
}

// tasks reads tasks.md.
func (e *sessionEnv) tasks(t *testing.T) []tasks.SessionTask {
	t.Helper()
	p := filepath.Join(e.dir, "tasks.md")
	ts, err := tasks.ParseTasksMD(p, []byte(readTestFile(t, p)))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// mark is the mark of task id in tasks.md.
func (e *sessionEnv) mark(t *testing.T, id string) tasks.Mark {
	t.Helper()
	for _, task := range e.tasks(t) {
		if task.ID == id {
			return task.Mark
		}
	}
	t.Fatalf("tasks.md has no %s", id)
	return ""
}

// record is progress.md's record of task id.
func record(t *testing.T, p session.Progress, id string) session.TaskRecord {
	t.Helper()
	if r := p.Task(id); r != nil {
		return *r
	}
	t.Fatalf("progress.md has no record of %s: %+v", id, p.Tasks)
	return session.TaskRecord{}
}

// commitsOf returns the hashes of the commits whose message names task.
func (e *sessionEnv) commitsOf(t *testing.T, task string) []string {
	t.Helper()
	out := git(t, e.ws.Root, "log", "--format=%H", "--grep=^Ralph-Task: "+task+"$")
	return strings.Fields(out)
}

// wantStopped fails the test unless progress.md says the session stopped
// in state, with task and attempt, to resume there.
func wantStopped(t *testing.T, p session.Progress, state session.State, task string, attempt int) {
	t.Helper()
	if p.State.Current != session.Stopped {
		t.Errorf("progress.md is at %s, want Stopped (in %s)", p.State.Current, state)
	}
	s := p.State
	s.Current = s.Resumes()
	p.State = s
	wantState(t, p, state, task, attempt)
}

// wantState fails the test unless progress.md is at state with task and
// attempt.
func wantState(t *testing.T, p session.Progress, state session.State, task string, attempt int) {
	t.Helper()
	s := p.State
	if s.Current != state || s.CurrentTaskID != task || s.CurrentAttemptNumber != attempt {
		t.Errorf("progress.md is at %s, task %q, attempt %d; want %s, task %q, attempt %d",
			s.Current, s.CurrentTaskID, s.CurrentAttemptNumber, state, task, attempt)
	}
}
