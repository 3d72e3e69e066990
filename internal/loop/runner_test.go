package loop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/workspace"
)

// The runner tests drive Build over the loop machine's edges with scripted
// ports: no agent, git or check process runs. The workspace folder and the
// markdown PRD are real files in a temporary folder.

// fakeGit is a repository in memory. Files the fake agent writes are dirty
// until a commit; every call is recorded, and a call of a method the test
// did not allow fails the test.
type fakeGit struct {
	t       testing.TB
	mu      sync.Mutex
	allowed map[string]bool
	calls   []string
	head    string
	dirty   map[string]bool
	commits []gitx.Commit
	msgs    []string
	// commitErr and addErr, when set, are what Commit and AddAll return.
	commitErr, addErr error
	// branch is the checked-out branch, "" for main.
	branch string
	// alone is what CommitAlone says: that git ran no hook.
	alone bool
}

// gitReads are the calls every run makes.
var gitReads = []string{"Snapshot", "Head", "HeadFiles", "Untracked", "CommitsBetween", "ChangedFiles", "IsAncestor", "Range", "LastCommit"}

func newFakeGit(t testing.TB, allow ...string) *fakeGit {
	g := &fakeGit{t: t, allowed: map[string]bool{}, head: "h0", dirty: map[string]bool{}}
	for _, m := range append(append([]string{}, gitReads...), allow...) {
		g.allowed[m] = true
	}
	return g
}

func (g *fakeGit) call(name string, args ...any) {
	g.calls = append(g.calls, strings.TrimSpace(name+" "+strings.TrimSpace(fmt.Sprintln(args...))))
	if !g.allowed[name] {
		g.t.Errorf("unexpected git call %s %v", name, args)
	}
}

func (g *fakeGit) touch(path string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dirty[path] = true
}

func (g *fakeGit) called(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.calls {
		if c == name || strings.HasPrefix(c, name+" ") {
			n++
		}
	}
	return n
}

func (g *fakeGit) Snapshot(ctx context.Context) (gitx.Snapshot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("Snapshot")
	var dirty []string
	for f := range g.dirty {
		dirty = append(dirty, f)
	}
	slices.Sort(dirty)
	branch := g.branch
	if branch == "" {
		branch = "main"
	}
	return gitx.Snapshot{Head: g.head, Branch: branch, Dirty: dirty}, nil
}

func (g *fakeGit) Head(ctx context.Context) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("Head")
	return g.head, nil
}

func (g *fakeGit) AddAll(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("AddAll")
	return g.addErr
}

// AddAllListed is AddAll (counted as one) naming the dirty paths.
func (g *fakeGit) AddAllListed(ctx context.Context) ([]string, error) {
	if err := g.AddAll(ctx); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var staged []string
	for f := range g.dirty {
		staged = append(staged, f)
	}
	slices.Sort(staged)
	return staged, nil
}

// HeadFiles reads what Snapshot would.
func (g *fakeGit) HeadFiles() (string, string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("HeadFiles")
	branch := g.branch
	if branch == "" {
		branch = "main"
	}
	return g.head, branch, true
}

func (g *fakeGit) Commit(ctx context.Context, message string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("Commit")
	if g.commitErr != nil {
		return "", g.commitErr
	}
	g.head = fmt.Sprintf("c%d000000", len(g.commits)+1)
	subject, _, _ := strings.Cut(message, "\n")
	g.commits = append(g.commits, gitx.Commit{Hash: g.head, Subject: subject})
	g.msgs = append(g.msgs, message)
	g.dirty = map[string]bool{}
	return g.head, nil
}

// CommitSnapshot is Commit (counted as one) and a Snapshot.
func (g *fakeGit) CommitSnapshot(ctx context.Context, message string) (gitx.Snapshot, error) {
	if _, err := g.Commit(ctx, message); err != nil {
		return gitx.Snapshot{}, err
	}
	return g.Snapshot(ctx)
}

// CommitAlone is Commit (counted as one); alone is what the test set.
func (g *fakeGit) CommitAlone(ctx context.Context, message, trace string) (bool, error) {
	if _, err := g.Commit(ctx, message); err != nil {
		return false, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.alone, nil
}

// Range is CommitsBetween; the fake's history only ever grows.
func (g *fakeGit) Range(ctx context.Context, from, to string) (gitx.Range, error) {
	commits, err := g.CommitsBetween(ctx, from, to)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("Range", from, to)
	return gitx.Range{Commits: commits, Descends: true}, err
}

func (g *fakeGit) LastCommit(ctx context.Context) (string, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("LastCommit")
	if len(g.msgs) == 0 {
		return g.head, "", nil
	}
	return g.head, g.msgs[len(g.msgs)-1], nil
}

func (g *fakeGit) CommitsBetween(ctx context.Context, from, to string) ([]gitx.Commit, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("CommitsBetween", from, to)
	var out []gitx.Commit
	in := from == "h0"
	for _, c := range g.commits {
		if in {
			out = append(out, c)
		}
		if c.Hash == from {
			in = true
		}
		if c.Hash == to {
			break
		}
	}
	return out, nil
}

func (g *fakeGit) ChangedFiles(ctx context.Context, from, to string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("ChangedFiles", from, to)
	return nil, nil
}

func (g *fakeGit) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("IsAncestor", a, b)
	return true, nil
}

func (g *fakeGit) SetAside(ctx context.Context, ref, message string, exclude ...string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("SetAside", ref)
	g.dirty = map[string]bool{}
	return "aside1", nil
}

func (g *fakeGit) Untracked(ctx context.Context, pathspecs ...string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("Untracked")
	return nil, nil
}

func (g *fakeGit) CommitPaths(ctx context.Context, message string, paths ...string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("CommitPaths", paths)
	return "", nil
}

func (g *fakeGit) Unstage(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("Unstage")
	return nil
}

// FilesAt says the fake repository's commits hold none of paths: the
// fake agent's files are new, so their start versions are absent.
func (g *fakeGit) FilesAt(ctx context.Context, rev string, paths []string) ([]gitx.FileAt, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("FilesAt", rev)
	return nil, nil
}

func (g *fakeGit) UpdateRef(ctx context.Context, ref, commit string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("UpdateRef", ref, commit)
	return nil
}

func (g *fakeGit) MoveBranchBack(ctx context.Context, base string, keep ...string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call("MoveBranchBack", base)
	g.head = base
	return nil
}

// step is one scripted agent attempt: what the agent does to the tree and
// the PRD, and how its process ends.
type step struct {
	write   string   // a file the agent writes (its content changes every attempt)
	tick    string   // a story the agent checks in the PRD, heading and criteria
	signals []string // signals in its final message
	exit    int
	err     error        // the agent could not be run at all
	limit   *agent.Limit // a usage limit the CLI reported
	// envFail is the attempt's judgement that the agent cannot run
	// (runkit.Result.EnvFailure), whatever the outcome shows.
	envFail *agent.EnvError
	tokens  int64
	cancel  bool   // the user interrupts ralph while the agent runs
	switch_ string // a branch the agent checks out
}

// fakeAgent plays the steps in order, one per attempt; an attempt beyond
// the script fails the test.
type fakeAgent struct {
	t       testing.TB
	root    string
	prd     string
	git     *fakeGit
	steps   []step
	calls   int
	specs   []string
	prompts []string
	cancel  context.CancelFunc
}

// RunAgent plays the next step and judges its outcome as runkit.Attempt
// does: a usage limit, and an agent that cannot run at all.
func (a *fakeAgent) RunAgent(ctx context.Context, spec agent.Spec, n int, prompt string) (runkit.Result, error) {
	out, err := a.play(spec, n, prompt)
	res := runkit.Result{Outcome: out, EnvFailure: agent.EnvironmentFailure(spec, out, err)}
	res.Limit, res.LimitSource = runkit.DetectLimit(out, err, nil)
	if s := a.steps[a.calls-1]; s.envFail != nil {
		res.EnvFailure = s.envFail
	}
	return res, err
}

func (a *fakeAgent) play(spec agent.Spec, n int, prompt string) (agent.Outcome, error) {
	a.specs = append(a.specs, spec.Name)
	a.prompts = append(a.prompts, prompt)
	if a.calls >= len(a.steps) {
		a.t.Fatalf("agent run %d (iteration %d) is not in the script", a.calls+1, n)
	}
	s := a.steps[a.calls]
	a.calls++
	out := agent.Outcome{}
	out.ExitCode = s.exit
	out.Duration = time.Second
	if s.err != nil {
		return out, s.err
	}
	if s.write != "" {
		if err := os.WriteFile(filepath.Join(a.root, s.write), []byte(fmt.Sprintf("attempt %d\n", a.calls)), 0o644); err != nil {
			a.t.Fatal(err)
		}
		a.git.touch(s.write)
	}
	if s.tick != "" {
		data, err := os.ReadFile(a.prd)
		if err != nil {
			a.t.Fatal(err)
		}
		text := strings.Replace(string(data), "### [ ] "+s.tick+":", "### [x] "+s.tick+":", 1)
		if err := os.WriteFile(a.prd, []byte(text), 0o644); err != nil {
			a.t.Fatal(err)
		}
		a.git.touch(".agents/tasks/prd.md")
	}
	out.Result.Signals = s.signals
	out.Result.Limit = s.limit
	out.Result.Usage.OutputTokens = s.tokens
	if s.switch_ != "" {
		a.git.mu.Lock()
		a.git.branch = s.switch_
		a.git.mu.Unlock()
	}
	if s.cancel {
		a.cancel()
		out.Interrupted = true
	}
	return out, nil
}

// fakeChecks plays, per check name, the exit codes of its runs in order;
// a run beyond the script passes.
type fakeChecks struct {
	mu    sync.Mutex
	codes map[string][]int
	runs  map[string]int
	// output is what a failing run prints, "FAIL: TestThing" when empty.
	output string
}

func (c *fakeChecks) RunCheck(ctx context.Context, dir string, chk check.Check) check.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]int{}
	}
	c.runs[chk.Name]++
	res := check.Result{Check: chk, Duration: time.Millisecond}
	if q := c.codes[chk.Name]; len(q) > 0 {
		res.ExitCode, c.codes[chk.Name] = q[0], q[1:]
		if res.ExitCode != 0 {
			res.Output = cmp.Or(c.output, "FAIL: TestThing\n")
		}
	}
	return res
}

// events collects what the runner emits.
type events struct {
	mu  sync.Mutex
	all []report.Event
}

func (e *events) Emit(ev report.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) of(kind report.Kind) []report.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []report.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// banners are the iteration banners: the iteration events that start an
// iteration, not those that close one (data "iteration_end").
func (e *events) banners() []report.Event {
	var out []report.Event
	for _, ev := range e.of(report.KindIteration) {
		if it, _ := ev.Data.(report.Iteration); it.End == nil {
			out = append(out, ev)
		}
	}
	return out
}

// steps renders the transitions as "FROM -trigger-> TO".
func (e *events) steps() []string {
	var out []string
	for _, ev := range e.of(report.KindTransition) {
		out = append(out, ev.From+" -"+ev.Trigger+"-> "+ev.To)
	}
	return out
}

// rig is one workspace with its fake ports.
type rig struct {
	t      testing.TB
	ws     *workspace.Workspace
	opts   Options
	git    *fakeGit
	agent  *fakeAgent
	checks *fakeChecks
	events *events
	ctx    context.Context
}

const twoStories = `# PRD: two stories

### [ ] US-001: First story
- [ ] a.txt says good

### [ ] US-002: Second story
- [ ] b.txt exists
`

const oneStory = `# PRD: one story

### [ ] US-001: First story
- [ ] a.txt says good
`

func newRig(t testing.TB, prd string, steps ...step) *rig {
	t.Helper()
	dir := t.TempDir()
	prdPath := filepath.Join(dir, ".agents", "tasks", "prd.md")
	if err := os.MkdirAll(filepath.Dir(prdPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prdPath, []byte(prd), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g := newFakeGit(t, "AddAll", "Commit")
	r := &rig{t: t, ws: &workspace.Workspace{Root: dir}, git: g, checks: &fakeChecks{codes: map[string][]int{}}, events: &events{}, ctx: ctx}
	r.agent = &fakeAgent{t: t, root: dir, prd: prdPath, git: g, steps: steps, cancel: cancel}
	var mu sync.Mutex
	// The clock runs hours behind the real one: the shared cooldowns
	// record drops rests more than a day past by the real clock, and a
	// wait sleeps by it, so rests the runner records are kept and a wait
	// for one is already over when it starts.
	clock := time.Now().Add(-6 * time.Hour).Truncate(time.Second)
	r.opts = Options{
		MaxIterations: 10, PRDPath: prdPath, PlanPath: filepath.Join(dir, ".ralph", "IMPLEMENTATION_PLAN.md"),
		// "true" is on every PATH: the check that the agent is installed
		// looks it up; the fake agent port runs instead of it.
		Agent:            agent.Spec{Name: "main", Headless: []string{"true"}},
		MemoryRetryDelay: time.Millisecond,
		Agents:           r.agent, Git: g, Checker: r.checks, Sink: r.events,
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(time.Second)
			return clock
		},
	}
	return r
}

func (r *rig) build() (Report, error) {
	r.t.Helper()
	rep, err := Build(r.ctx, r.ws, r.opts)
	checkTableSteps(r.t, r.events.of(report.KindTransition))
	return rep, err
}

// resume runs the next `ralph build` of the same workspace, with a fresh
// context; the events of both runs are kept in order.
func (r *rig) resume() (Report, error) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.t.Cleanup(cancel)
	r.ctx, r.agent.cancel = ctx, cancel
	return r.build()
}

// wantStopped checks that the run stopped by trig in IMPLEMENT, resumable.
func wantStopped(t *testing.T, r *rig, trig Trigger) *LoopState {
	t.Helper()
	steps := r.events.steps()
	if want := "IMPLEMENT -" + string(trig) + "-> STOPPED"; len(steps) == 0 || steps[len(steps)-1] != want {
		t.Errorf("last transition %v; want %s", steps, want)
	}
	st := r.state()
	if st.Finished || st.Machine.State != StateStopped || st.Machine.StoppedIn != StateImplement || st.Machine.Resumes() != StateImplement {
		t.Errorf("state finished %v in %s (stopped in %s); want a resumable stop in IMPLEMENT", st.Finished, st.Machine.State, st.Machine.StoppedIn)
	}
	return st
}

// wantResumedAndDone checks that a resumed run went back to IMPLEMENT and
// finished the one story.
func wantResumedAndDone(t *testing.T, r *rig, rep Report, err error) {
	t.Helper()
	if err != nil || rep.Outcome != OutcomeComplete || rep.StoriesDone != 1 {
		t.Fatalf("resumed Build = %+v, %v; want complete", rep, err)
	}
	if !slices.Contains(r.events.steps(), "STOPPED -resumed-> IMPLEMENT") {
		t.Errorf("no resumed edge in %v", r.events.steps())
	}
}

func (r *rig) state() *LoopState {
	r.t.Helper()
	st, err := HomeOf(r.ws).Load()
	if err != nil || st == nil {
		r.t.Fatalf("state.json: %v %v", st, err)
	}
	return st
}

// checkTableSteps fails the test for a transition event that is not a row
// of the table: the runner took a step the machine does not have.
func checkTableSteps(t testing.TB, evs []report.Event) {
	t.Helper()
	for _, ev := range evs {
		if !inTable(ev) {
			t.Errorf("the runner went %s -%s-> %s, which is not a transition of loop.Table", ev.From, ev.Trigger, ev.To)
		}
	}
}

func inTable(ev report.Event) bool {
	for _, tr := range Table {
		if string(tr.From) == ev.From && string(tr.On) == ev.Trigger && string(tr.To) == ev.To {
			return true
		}
	}
	return false
}

func wantSteps(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("transitions:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

var (
	toSelect = []string{"INIT -progress_found-> MEMORY_LOAD", "MEMORY_LOAD -memory_loaded-> STORY_SELECT"}
	doneOnce = []string{"STORY_SELECT -task_selected-> IMPLEMENT", "IMPLEMENT -code_written-> TEST", "TEST -tests_passed-> VALIDATE",
		"VALIDATE -acs_met-> COMMIT", "COMMIT -committed-> MEMORY_LOAD", "MEMORY_LOAD -memory_loaded-> STORY_SELECT"}
)

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestRunnerStoryDoneFirstTry(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001", signals: []string{"COMPLETE"}})
	r.opts.Checks = []check.Check{{Name: "test", Run: "go test ./..."}}
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete || rep.StoriesDone != 1 || rep.StoriesLeft != 0 {
		t.Fatalf("Build = %+v, %v; want complete with 1 story done", rep, err)
	}
	wantSteps(t, r.events.steps(), concat(toSelect, doneOnce, []string{"STORY_SELECT -all_complete-> EXIT"})...)
	st := r.state()
	if !st.Finished || st.Outcome != OutcomeComplete || st.Machine.State != StateExit {
		t.Errorf("state = finished %v, outcome %s, in %s; want a finished, complete run in EXIT", st.Finished, st.Outcome, st.Machine.State)
	}
	if tr := st.Tasks["US-001"]; tr == nil || tr.Successes != 1 || tr.Blocker != nil {
		t.Errorf("task record = %+v; want one success, no blocker", tr)
	}
	if r.checks.runs["test"] != 2 {
		t.Errorf("check ran %d times; want 2 (the starting tree, then the attempt)", r.checks.runs["test"])
	}
	if len(r.git.commits) != 1 || r.git.commits[0].Subject != "US-001: First story" {
		t.Errorf("commits = %+v; want one, for US-001", r.git.commits)
	}
	if !strings.Contains(r.git.msgs[0], gitx.CommitTrailer+": ") {
		t.Errorf("the commit has no %s trailer, so a crash after it would commit twice:\n%s", gitx.CommitTrailer, r.git.msgs[0])
	}
	if len(r.events.of(report.KindSummary)) != 1 || len(r.events.of(report.KindCommit)) != 1 {
		t.Errorf("want one commit event and one summary event, got %d and %d", len(r.events.of(report.KindCommit)), len(r.events.of(report.KindSummary)))
	}
}

func TestRunnerTestsFailThenPass(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"}, step{write: "a.txt", tick: "US-001"})
	r.opts.Checks = []check.Check{{Name: "test", Run: "go test ./..."}}
	r.checks.codes["test"] = []int{0, 1} // passes on the starting tree, fails after the first attempt
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	wantSteps(t, r.events.steps(), concat(toSelect,
		[]string{"STORY_SELECT -task_selected-> IMPLEMENT", "IMPLEMENT -code_written-> TEST", "TEST -tests_failed-> IMPLEMENT",
			"IMPLEMENT -code_written-> TEST", "TEST -tests_passed-> VALIDATE", "VALIDATE -acs_met-> COMMIT",
			"COMMIT -committed-> MEMORY_LOAD", "MEMORY_LOAD -memory_loaded-> STORY_SELECT", "STORY_SELECT -all_complete-> EXIT"})...)
	failed := r.events.of(report.KindTransition)[4]
	if failed.Attempt != 1 || !strings.Contains(failed.Data.(report.Transition).Detail, `check "test" exited with code 1`) {
		t.Errorf("the tests_failed event = attempt %d, data %v; want attempt 1 with the failing check in its detail", failed.Attempt, failed.Data)
	}
	// The retry's prompt carries what failed, so the agent can fix it.
	if len(r.agent.prompts) != 2 || !strings.Contains(r.agent.prompts[1], "FAIL: TestThing") {
		t.Errorf("the second prompt does not carry the failing check's output")
	}
	st := r.state()
	if tr := st.Tasks["US-001"]; tr == nil || tr.Failures != 1 || tr.Successes != 1 || tr.RetryCount != 0 {
		t.Errorf("task record = %+v; want one failure, one success, retries reset", tr)
	}
	if _, left := st.Feedback["US-001"]; left {
		t.Errorf("the feedback of a done task is kept: %q", st.Feedback["US-001"])
	}
	// Programs read the facts from the events' data, not their text.
	var checks, ends []string
	for _, ev := range r.events.of(report.KindCheck) {
		if c, ok := ev.Data.(report.Check); ok && c.Passed != nil {
			checks = append(checks, fmt.Sprintf("%s %v %v %v", c.Name, *c.Passed, c.Baseline, c.DurationMS != nil))
		}
	}
	if want := []string{"test true true true", "test false false true", "test true false true"}; !slices.Equal(checks, want) {
		t.Errorf("check data = %q; want %q", checks, want)
	}
	for _, ev := range r.events.of(report.KindIteration) {
		if it, _ := ev.Data.(report.Iteration); it.End != nil {
			ends = append(ends, fmt.Sprintf("%v %v %v %v", it.Iteration, it.Task, it.Status, it.IterationEnd))
		} else if it.Turn == nil || it.Task != "US-001" || it.Agent == "" {
			t.Errorf("banner data = %v; want iteration, task and agent", ev.Data)
		}
	}
	if want := []string{"1 US-001 tests_failed true", "2 US-001 done true"}; !slices.Equal(ends, want) {
		t.Errorf("iteration ends = %q; want one per iteration, done included: %q", ends, want)
	}
	if c := r.events.of(report.KindCommit); len(c) != 1 || c[0].Data.(report.Commit).Status != StatusDone || c[0].Data.(report.Commit).Commit == "" || c[0].Data.(report.Commit).Iteration != 2 {
		t.Errorf("commit events = %+v; want one, done at iteration 2, with its hash", c)
	}
}

// A long failing output reaches the retry's prompt in the one feedback
// format: the check named with its command and exit code, and the end of
// its output in whole lines, saying how many lines above were left out.
func TestRunnerNextPromptCarriesTheCheckFeedback(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"}, step{write: "a.txt", tick: "US-001"})
	r.opts.Checks = []check.Check{{Name: "test", Run: "go test ./..."}}
	r.checks.codes["test"] = []int{0, 1}
	var out strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&out, "=== RUN TestCase%d\n", i)
	}
	out.WriteString("--- FAIL: TestCase3000\nFAIL\texample.com/m\t0.5s\n")
	r.checks.output = out.String()
	if rep, err := r.build(); err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	want := check.Feedback(check.Result{Check: r.opts.Checks[0], ExitCode: 1, Output: out.String(), Duration: time.Millisecond})
	if len(r.agent.prompts) != 2 {
		t.Fatalf("%d prompts; want 2", len(r.agent.prompts))
	}
	p := r.agent.prompts[1]
	if !strings.Contains(p, want) {
		t.Errorf("the retry's prompt does not carry check.Feedback of the failed check:\n%s", p)
	}
	for _, s := range []string{"Check \"test\" (`go test ./...`) exited with code 1.", "lines above left out", "FAIL\texample.com/m\t0.5s\n```"} {
		if !strings.Contains(p, s) {
			t.Errorf("the retry's prompt lacks %q", s)
		}
	}
}

// A criterion's verify command that fails with a long output reaches the
// retry's prompt in the one feedback format, after the verdict.
func TestRunnerNextPromptCarriesTheVerifyCommandFeedback(t *testing.T) {
	prd := "# PRD\n\n### [ ] US-001: First story\n- [ ] a.txt exists (verify: `test -f a.txt`)\n"
	r := newRig(t, prd, step{write: "a.txt", tick: "US-001"}, step{write: "a.txt", tick: "US-001"})
	r.git.allowed["FilesAt"] = true
	r.checks.codes["AC-1"] = []int{1}
	var out strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&out, "stat a.txt, try %d\n", i)
	}
	out.WriteString("a.txt: no such file\n")
	r.checks.output = out.String()
	if rep, err := r.build(); err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	want := check.Feedback(check.Result{Check: check.Check{Name: "AC-1", Run: "test -f a.txt", Timeout: 10 * time.Minute, Format: check.FormatNone},
		ExitCode: 1, Output: out.String(), Duration: time.Millisecond})
	if len(r.agent.prompts) != 2 || !strings.Contains(r.agent.prompts[1], "was sent back: acceptance criteria not met") || !strings.Contains(r.agent.prompts[1], want) {
		t.Errorf("the retry's prompt lacks the verify command's feedback:\n%s", r.agent.prompts[len(r.agent.prompts)-1])
	}
}

func TestRunnerACsNotMetTwiceBlocksAndNeedsHuman(t *testing.T) {
	// The agent changes the code but never checks the story: its criteria
	// are not met, twice.
	r := newRig(t, oneStory, step{write: "a.txt"}, step{write: "a.txt"})
	r.git.allowed["SetAside"] = true
	r.git.allowed["CommitPaths"] = true // the blocker's note in progress.md, committed at EXIT
	rep, err := r.build()
	if !errors.Is(err, ErrNeedsHuman) || rep.Outcome != OutcomeNeedsHuman {
		t.Fatalf("Build = %+v, %v; want needs_human", rep, err)
	}
	wantSteps(t, r.events.steps(), concat(toSelect,
		[]string{"STORY_SELECT -task_selected-> IMPLEMENT", "IMPLEMENT -code_written-> TEST", "TEST -tests_passed-> VALIDATE",
			"VALIDATE -acs_failed-> IMPLEMENT", "IMPLEMENT -code_written-> TEST", "TEST -tests_passed-> VALIDATE",
			"VALIDATE -acs_failed-> BLOCKER", "BLOCKER -blocker_logged-> MEMORY_LOAD", "MEMORY_LOAD -memory_loaded-> STORY_SELECT",
			"STORY_SELECT -none_selectable-> EXIT"})...)
	st := r.state()
	bl := st.Tasks["US-001"].Blocker
	if bl == nil || bl.Reason != "acceptance criteria not met" || !bl.RequiresHuman || len(bl.AttemptedFixes) != 1 {
		t.Fatalf("blocker = %+v; want a permanent one for the criteria", bl)
	}
	// No task's commit took the blocker's note along: EXIT commits it,
	// progress.md alone.
	if n := r.git.called("CommitPaths"); n != 1 || !slices.Contains(r.git.calls, "CommitPaths [.ralph/progress.md]") {
		t.Errorf("CommitPaths called %d times (%v); want progress.md committed once", n, r.git.calls)
	}
	// The report names it: a parallel build takes its story's reason from
	// there, not "only blocked tasks are left".
	if rep.Blockers["US-001"] != "acceptance criteria not met" {
		t.Errorf("report blockers = %v; want US-001's", rep.Blockers)
	}
	if bl.Ref != AttemptRef(st.RunID, "US-001") || r.git.called("SetAside") != 1 {
		t.Errorf("the blocked attempt was not set aside on its ref (ref %q, %d calls)", bl.Ref, r.git.called("SetAside"))
	}
	if r.git.called("Commit") != 0 {
		t.Errorf("a blocked task was committed")
	}
	prd, _ := os.ReadFile(r.opts.PRDPath)
	if !strings.Contains(string(prd), "US-001") || strings.Contains(string(prd), "### [x] US-001") {
		t.Errorf("the PRD shows the blocked story done:\n%s", prd)
	}
	if len(r.events.of(report.KindBlocker)) == 0 {
		t.Errorf("no blocker event")
	}
}

func TestRunnerContextExhaustedCommitsPartialWork(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", signals: []string{"CONTEXT_EXHAUSTED"}}, step{write: "a.txt", tick: "US-001"})
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	wantSteps(t, r.events.steps(), concat(toSelect,
		[]string{"STORY_SELECT -task_selected-> IMPLEMENT", "IMPLEMENT -context_exhausted-> COMMIT",
			"COMMIT -committed-> MEMORY_LOAD", "MEMORY_LOAD -memory_loaded-> STORY_SELECT"}, doneOnce,
		[]string{"STORY_SELECT -all_complete-> EXIT"})...)
	if len(r.git.commits) != 2 || r.git.commits[0].Subject != "US-001: partial work (context exhausted)" || r.git.commits[1].Subject != "US-001: First story" {
		t.Errorf("commits = %+v; want the partial work, then the story", r.git.commits)
	}
	if tr := r.state().Tasks["US-001"]; tr == nil || tr.Successes != 1 {
		t.Errorf("task record = %+v; the partial commit must not count as the task's success", tr)
	}
}

func TestRunnerCommitFailsBlocksTheTask(t *testing.T) {
	r := newRig(t, twoStories, step{write: "a.txt", tick: "US-001"}, step{write: "b.txt", tick: "US-002"})
	r.git.allowed["Unstage"] = true
	r.git.allowed["SetAside"] = true
	r.git.allowed["CommitPaths"] = true // the blocker's note in progress.md, committed at EXIT
	r.git.commitErr = &gitx.ExitError{Stderr: "pre-commit hook: lint failed"}
	rep, err := r.build()
	if !errors.Is(err, ErrNeedsHuman) {
		t.Fatalf("Build = %+v, %v; want needs_human: every commit fails", rep, err)
	}
	steps := r.events.steps()
	if !slices.Contains(steps, "COMMIT -commit_failed-> BLOCKER") {
		t.Fatalf("no commit_failed edge in %v", steps)
	}
	st := r.state()
	bl := st.Tasks["US-001"].Blocker
	if bl == nil || !strings.Contains(bl.Reason, "pre-commit hook: lint failed") {
		t.Fatalf("blocker = %+v; want what the hook said", bl)
	}
	if r.git.called("Unstage") != 2 {
		t.Errorf("the refused commit's index was not unstaged (%d calls)", r.git.called("Unstage"))
	}
	prd, _ := os.ReadFile(r.opts.PRDPath)
	if strings.Contains(string(prd), "### [x]") {
		t.Errorf("a story whose commit failed reads as done:\n%s", prd)
	}
}

// ralph's commits say what was done and tie it to ralph's records, with
// the token that recognises the commit after a crash last: the partial
// work of an exhausted context, then the story with its acceptance
// criteria and how ralph accepted it: here, with no verify command and no
// failing test to fix, on the agent's word, which the body says.
func TestRunnerCommitMessages(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", signals: []string{"CONTEXT_EXHAUSTED"}}, step{write: "a.txt", tick: "US-001"})
	rep, err := r.build()
	if err != nil || len(r.git.msgs) != 2 {
		t.Fatalf("Build = %+v, %v, %d commits; want the partial work and the story committed", rep, err, len(r.git.msgs))
	}
	id := rep.RunID
	want := []string{
		"US-001: partial work (context exhausted)\n\nRalph-Task: US-001\nRalph-Story: US-001\nRalph-Run: " + id + "\nRalph-Iteration: 1\nRalph-Commit: ",
		"US-001: First story\n\nAcceptance criteria:\nAC-1: a.txt says good - ✓ checked by the agent; no checks are configured, but nothing ralph ran proves it (the agent's word)\n\n" +
			"Done on the agent's word: no checks are configured, but nothing ralph ran shows it done.\n\n" +
			"Ralph-Task: US-001\nRalph-Story: US-001\nRalph-Run: " + id + "\nRalph-Iteration: 2\nRalph-Memory-Event: evt-" + id + "-2\nRalph-Commit: ",
	}
	tokens := map[string]bool{}
	for i, msg := range r.git.msgs {
		body, token, _ := strings.Cut(msg, gitx.CommitTrailer+": ")
		if body+gitx.CommitTrailer+": " != want[i] || !strings.HasSuffix(token, "\n") || strings.Contains(strings.TrimSuffix(token, "\n"), "\n") || len(token) < 9 {
			t.Errorf("commit %d:\n%q\nwant\n%q followed by a token on the last line", i+1, msg, want[i])
		}
		tokens[token] = true
	}
	if len(tokens) != 2 {
		t.Errorf("the two commits share their token: %v", tokens)
	}
}

// A staging git refuses (an index.lock an agent left) fails the commit as a
// refused commit does: the task is blocked with what git said, its done
// mark is taken back, and nothing stays staged.
func TestRunnerGitAddFailsBlocksTheTask(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	r.git.allowed["Unstage"] = true
	r.git.allowed["SetAside"] = true
	r.git.allowed["CommitPaths"] = true // the blocker's note in progress.md, committed at EXIT
	r.git.addErr = &gitx.ExitError{Stderr: "fatal: Unable to create '.git/index.lock': File exists."}
	rep, err := r.build()
	if !errors.Is(err, ErrNeedsHuman) {
		t.Fatalf("Build = %+v, %v; want needs_human: the commit fails", rep, err)
	}
	if !slices.Contains(r.events.steps(), "COMMIT -commit_failed-> BLOCKER") {
		t.Fatalf("no commit_failed edge in %v", r.events.steps())
	}
	bl := r.state().Tasks["US-001"].Blocker
	if bl == nil || !strings.Contains(bl.Reason, "git add failed") || !strings.Contains(bl.Reason, "index.lock': File exists.") {
		t.Fatalf("blocker = %+v; want the failed git add and what git said", bl)
	}
	if r.git.called("Commit") != 0 || r.git.called("Unstage") != 1 {
		t.Errorf("commits %d, unstaged %d times; want no commit and the index emptied", r.git.called("Commit"), r.git.called("Unstage"))
	}
	if prd, _ := os.ReadFile(r.opts.PRDPath); strings.Contains(string(prd), "### [x]") {
		t.Errorf("a story whose commit failed reads as done:\n%s", prd)
	}
}

func TestRunnerAgentCannotRunStops(t *testing.T) {
	r := newRig(t, oneStory, step{err: &agent.MissingError{Spec: agent.Spec{Name: "main"}, Program: "claude"}})
	rep, err := r.build()
	var envErr *agent.EnvError
	if !errors.As(err, &envErr) || rep.Outcome != OutcomeError {
		t.Fatalf("Build = %+v, %v; want an environment error", rep, err)
	}
	st := wantStopped(t, r, TrigAgentCannotRun)
	if st.Attempt != nil {
		t.Errorf("attempt %+v; want the attempt dropped", st.Attempt)
	}
	if tr := st.Tasks["US-001"]; tr != nil && (tr.Failures != 0 || tr.RetryCount != 0 || tr.Blocker != nil) {
		t.Errorf("the task was charged for the environment's failure: %+v", tr)
	}
	if d := st.LastEvent.Data.(report.Transition).Detail; !strings.Contains(d, "claude") {
		t.Errorf("the stop's event says %v; want the agent's failure", st.LastEvent.Data)
	}
	// Once the agent runs, the next build resumes the same iteration.
	r.agent.steps = append(r.agent.steps, step{write: "a.txt", tick: "US-001"})
	rep, err = r.resume()
	wantResumedAndDone(t, r, rep, err)
	if rep.Iterations != 1 {
		t.Errorf("iterations = %d; want 1: the agent that could not run was no attempt", rep.Iterations)
	}
}

// The runner acts on the attempt's judgement that the agent cannot run
// (runkit.Result.EnvFailure), made in one place for every machine: the run
// stops, saying what to do, and the task is not charged.
func TestRunnerStopsOnTheAttemptsEnvFailure(t *testing.T) {
	envErr := &agent.EnvError{Agent: "main", Kind: agent.EnvAuth, Detail: "401 Unauthorized", Hint: "log in with `main login`"}
	r := newRig(t, oneStory, step{exit: 1, envFail: envErr})
	rep, err := r.build()
	if !errors.Is(err, envErr) || rep.Outcome != OutcomeError || !strings.Contains(err.Error(), "main login") {
		t.Fatalf("Build = %+v, %v; want the attempt's environment failure", rep, err)
	}
	st := wantStopped(t, r, TrigAgentCannotRun)
	if tr := st.Tasks["US-001"]; tr != nil && (tr.Failures != 0 || tr.RetryCount != 0 || tr.Blocker != nil) {
		t.Errorf("the task was charged for the environment's failure: %+v", tr)
	}
}

// An agent that checks out another branch stops the run by the
// history_changed edge; nothing is committed on the other branch.
func TestRunnerHistoryChangedStops(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001", switch_: "other"})
	_, err := r.build()
	var hist *HistoryError
	if !errors.As(err, &hist) {
		t.Fatalf("Build: %v; want a history error", err)
	}
	wantStopped(t, r, TrigHistoryChanged)
	if r.git.called("Commit") != 0 {
		t.Errorf("the run committed on a branch it did not start on")
	}
}

// An error that is no outcome of the task stops the run by the error edge.
func TestRunnerErrorStops(t *testing.T) {
	r := newRig(t, oneStory, step{err: errors.New("fork: resource temporarily unavailable")})
	rep, err := r.build()
	if err == nil || rep.Outcome != OutcomeError {
		t.Fatalf("Build = %+v, %v; want an error", rep, err)
	}
	wantStopped(t, r, TrigError)
}

func TestRunnerUsageLimitCoolsDownAndRotates(t *testing.T) {
	r := newRig(t, oneStory,
		step{exit: 1, limit: &agent.Limit{Kind: "usage_limit", Message: "5-hour limit reached"}},
		step{write: "a.txt", tick: "US-001"})
	r.opts.Fallbacks = []agent.Spec{{Name: "spare", Headless: []string{"true"}}}
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	if !slices.Equal(r.agent.specs, []string{"main", "spare"}) {
		t.Errorf("agents run = %v; want main, then spare while main cools down", r.agent.specs)
	}
	st := r.state()
	if until, ok := HomeOf(r.ws).Cooldowns().Until("main", st.StartedAt); !ok || !until.After(st.StartedAt) {
		t.Errorf("main rests until %v (%v); want main cooling down in the shared record", until, ok)
	}
	if st.Cooldowns != nil {
		t.Errorf("state.json holds cooldowns %v; the shared record keeps them", st.Cooldowns)
	}
	if tr := st.Tasks["US-001"]; tr == nil || tr.Failures != 0 {
		t.Errorf("a usage limit counted as a failed attempt: %+v", tr)
	}
	// A limit repeats the iteration: it is no transition of the machine.
	wantSteps(t, r.events.steps(), concat(toSelect, doneOnce, []string{"STORY_SELECT -all_complete-> EXIT"})...)
	if len(r.events.of(report.KindLimit)) < 2 {
		t.Errorf("want limit events for the cooldown and the rotation, got %d", len(r.events.of(report.KindLimit)))
	}
}

func TestRunnerAllAgentsLimitedStops(t *testing.T) {
	r := newRig(t, oneStory, step{exit: 1, limit: &agent.Limit{Kind: "usage_limit"}})
	r.opts.MaxLimitWait = time.Minute // the default cooldown is 30 minutes
	rep, err := r.build()
	if !errors.Is(err, ErrAllLimited) || rep.Outcome != OutcomeInterrupted {
		t.Fatalf("Build = %+v, %v; want ErrAllLimited", rep, err)
	}
	wantStopped(t, r, TrigAllLimited)
	// After the reset the next build resumes the same task.
	r.opts.Now = func() time.Time { return time.Now().Add(24 * time.Hour) }
	r.agent.steps = append(r.agent.steps, step{write: "a.txt", tick: "US-001"})
	rep, err = r.resume()
	wantResumedAndDone(t, r, rep, err)
}

// limitedElsewhere records, as another run of r's workspace would, that
// agent rests until until after a usage limit.
func limitedElsewhere(t *testing.T, r *rig, agent string, until time.Time) {
	t.Helper()
	if err := os.MkdirAll(r.ws.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := HomeOf(r.ws).Cooldowns().Set(agent, until, "5-hour limit reached"); err != nil {
		t.Fatal(err)
	}
}

// An agent limited by another run of the workspace (a thread's loop, a
// second build) is in the shared record before this run starts: it is not
// asked; the fallback works instead.
func TestRunnerAgentLimitedByAnotherRunIsNotAsked(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	r.opts.Fallbacks = []agent.Spec{{Name: "spare", Headless: []string{"true"}}}
	limitedElsewhere(t, r, "main", r.opts.Now().Add(time.Hour))
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	if !slices.Equal(r.agent.specs, []string{"spare"}) {
		t.Errorf("agents run = %v; want only spare: main rests after another run's limit", r.agent.specs)
	}
}

// A state.json written by an older ralph keeps its cooldowns: they move to
// the shared record, so the limited agent is still not asked, and the
// state is written without them.
func TestRunnerOlderStateCooldownsMoveToTheSharedRecord(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	r.opts.Fallbacks = []agent.Spec{{Name: "spare", Headless: []string{"true"}}}
	reset := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	old := fmt.Sprintf(`{"schema_version": 1, "run_id": "old", "machine": {"state": "EXIT"}, "finished": true, "tasks": {}, "metrics": {},
		"cooldowns": {"main": %q, "gone": "2000-01-01T00:00:00Z"}}`, reset.Format(time.RFC3339))
	if err := os.MkdirAll(r.ws.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(HomeOf(r.ws).StatePath(), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	if !slices.Equal(r.agent.specs, []string{"spare"}) {
		t.Errorf("agents run = %v; want only spare: main's cooldown from the older state holds", r.agent.specs)
	}
	all, err := HomeOf(r.ws).RestingAgents(time.Now())
	if err != nil || len(all) != 1 || !all["main"].Until.Equal(reset) {
		t.Errorf("shared record = %v, %v; want main until %s, and no rest long past", all, err, reset)
	}
	if b, _ := os.ReadFile(HomeOf(r.ws).StatePath()); strings.Contains(string(b), `"cooldowns"`) {
		t.Errorf("state.json still has cooldowns:\n%s", b)
	}
}

// With no agent free, the run stops as when its own agents were limited,
// without asking any.
func TestRunnerAllAgentsLimitedByAnotherRunStops(t *testing.T) {
	r := newRig(t, oneStory)
	r.opts.MaxLimitWait = time.Minute
	limitedElsewhere(t, r, "main", r.opts.Now().Add(time.Hour))
	rep, err := r.build()
	if !errors.Is(err, ErrAllLimited) || rep.Outcome != OutcomeInterrupted {
		t.Fatalf("Build = %+v, %v; want ErrAllLimited", rep, err)
	}
	if !strings.Contains(err.Error(), "main until ") {
		t.Errorf("the error %q does not say which agent rests until when", err)
	}
	if len(r.agent.specs) != 0 {
		t.Errorf("agents run = %v; want none", r.agent.specs)
	}
	wantStopped(t, r, TrigAllLimited)
}

// Or, with no bound on the wait, it waits, visibly, for the other run's
// limit to reset and then asks the agent.
func TestRunnerWaitsForAnotherRunsLimit(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	r.opts.Now = time.Now // the wait sleeps by the real clock
	limitedElsewhere(t, r, "main", time.Now().Add(1500*time.Millisecond))
	start := time.Now()
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("Build = %+v, %v; want complete", rep, err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("the run finished after %s, before main's reset", waited)
	}
	if !slices.Equal(r.agent.specs, []string{"main"}) {
		t.Errorf("agents run = %v; want main once, after its reset", r.agent.specs)
	}
	var shown []string
	for _, ev := range r.events.of(report.KindWait) {
		shown = append(shown, ev.Text)
	}
	if text := strings.Join(shown, ""); !strings.Contains(text, "all agents are limited (main until ") || !strings.Contains(text, "  … waiting for a usage limit to reset: ") ||
		!strings.Contains(text, "the usage-limit wait is over after ") {
		t.Errorf("the wait was not shown: %q", text)
	}
	var states []string
	for _, ev := range r.events.of(report.KindWait) {
		if w, _ := ev.Data.(report.Wait); w.Wait == "limit" && w.State != "waiting" {
			states = append(states, w.State)
			switch w.State {
			case "started":
				if _, err := time.Parse(time.RFC3339, w.Until); err != nil || w.Agent == nil || *w.Agent != "main" {
					t.Errorf("wait start data = %v; want until (RFC 3339) and agent main", ev.Data)
				}
			case "ended":
				if w.WaitedMS == nil || *w.WaitedMS < 1000 {
					t.Errorf("wait end data = %v; want waited_ms of the wait", ev.Data)
				}
			}
		}
	}
	if !slices.Equal(states, []string{"started", "ended"}) {
		t.Errorf("limit wait states = %v; want started, then ended", states)
	}
	if st := r.state(); st.Metrics.WaitMillis[WaitLimit] < 1000 {
		t.Errorf("waiting = %v; want the wait for the reset counted as waiting", st.Metrics.WaitMillis)
	}
}

func TestRunnerIterationLimit(t *testing.T) {
	r := newRig(t, twoStories, step{write: "a.txt", tick: "US-001"})
	r.opts.MaxIterations = 1
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeMaxIterations || rep.StoriesLeft != 1 {
		t.Fatalf("Build = %+v, %v; want max_iterations with one story left", rep, err)
	}
	wantSteps(t, r.events.steps(), concat(toSelect, doneOnce, []string{"STORY_SELECT -budget_exhausted-> EXIT"})...)
	if st := r.state(); !st.Finished || st.Outcome != OutcomeMaxIterations {
		t.Errorf("state finished %v, outcome %s; want max_iterations", st.Finished, st.Outcome)
	}
	// The trigger is the budget's (the table's one edge); the data says
	// it is the iteration limit.
	lim := r.events.of(report.KindLimit)
	if len(lim) != 1 || lim[0].Data.(report.Limit).Ending == nil || *lim[0].Data.(report.Limit).Ending != (report.Ending{Outcome: "max_iterations", Reason: "reached 1 iteration with 1 story left"}) {
		t.Errorf("limit events = %+v; want one with outcome max_iterations and its reason", lim)
	}
	if sum := r.events.of(report.KindSummary); len(sum) != 1 || sum[0].Data.(report.Summary).Outcome != "max_iterations" || sum[0].Data.(report.Summary).Reason != "reached 1 iteration with 1 story left" {
		t.Errorf("summary = %+v; want outcome and reason", sum)
	}
}

func TestRunnerIterationLimitDuringRetries(t *testing.T) {
	// Retries never pass STORY_SELECT: the limit stops them in IMPLEMENT.
	r := newRig(t, oneStory, step{write: "a.txt"})
	r.opts.MaxIterations = 1
	r.opts.MaxRetries = 3
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeMaxIterations || rep.Iterations != 1 {
		t.Fatalf("Build = %+v, %v; want max_iterations after 1 iteration", rep, err)
	}
	if st := r.state(); !st.Finished || st.Outcome != OutcomeMaxIterations || st.Tasks["US-001"].RetryCount != 1 || st.Machine.State != StateExit {
		t.Errorf("state = finished %v, outcome %s in %s, task %+v; want max_iterations in EXIT with the retry count kept", st.Finished, st.Outcome, st.Machine.State, st.Tasks["US-001"])
	}
	wantSteps(t, r.events.steps(), concat(toSelect, []string{"STORY_SELECT -task_selected-> IMPLEMENT", "IMPLEMENT -code_written-> TEST",
		"TEST -tests_passed-> VALIDATE", "VALIDATE -acs_failed-> IMPLEMENT", "IMPLEMENT -iteration_limit-> EXIT"})...)
}

// The budget is checked before every agent run, retries included: it ends
// the run from IMPLEMENT.
func TestRunnerBudgetDuringRetries(t *testing.T) {
	r := newRig(t, oneStory, step{exit: 2, tokens: 5000})
	r.opts.Budget = runkit.Budget{MaxTokens: 1000}
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeBudget || rep.Iterations != 1 {
		t.Fatalf("Build = %+v, %v; want budget after 1 iteration", rep, err)
	}
	wantSteps(t, r.events.steps(), concat(toSelect, []string{"STORY_SELECT -task_selected-> IMPLEMENT",
		"IMPLEMENT -implement_failed-> IMPLEMENT", "IMPLEMENT -budget_exhausted-> EXIT"})...)
	if st := r.state(); !st.Finished || st.Outcome != OutcomeBudget || st.Machine.State != StateExit {
		t.Errorf("state = finished %v, outcome %s in %s; want budget in EXIT", st.Finished, st.Outcome, st.Machine.State)
	}
}

func TestRunnerBudget(t *testing.T) {
	r := newRig(t, twoStories, step{write: "a.txt", tick: "US-001", tokens: 5000})
	r.opts.Budget = runkit.Budget{MaxTokens: 1000}
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeBudget {
		t.Fatalf("Build = %+v, %v; want budget", rep, err)
	}
	wantSteps(t, r.events.steps(), concat(toSelect, doneOnce, []string{"STORY_SELECT -budget_exhausted-> EXIT"})...)
	if st := r.state(); !st.Finished || st.Outcome != OutcomeBudget || st.Metrics.Tokens.OutputTokens != 5000 {
		t.Errorf("state = finished %v, outcome %s, tokens %d; want the budget outcome and the tokens counted", st.Finished, st.Outcome, st.Metrics.Tokens.OutputTokens)
	}
}

func TestRunnerTestRunnerMissingBlocks(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	r.git.allowed["SetAside"] = true
	r.git.allowed["CommitPaths"] = true // the blocker's note in progress.md, committed at EXIT
	r.opts.Checks = []check.Check{{Name: "test", Run: "nosuchtool"}}
	r.checks.codes["test"] = []int{0}
	missing := &missingChecks{fakeChecks: r.checks}
	r.opts.Checker = missing
	_, err := r.build()
	if !errors.Is(err, ErrNeedsHuman) {
		t.Fatalf("Build: %v; want needs_human", err)
	}
	if !slices.Contains(r.events.steps(), "TEST -test_runner_missing-> BLOCKER") {
		t.Errorf("no test_runner_missing edge in %v", r.events.steps())
	}
	if bl := r.state().Tasks["US-001"].Blocker; bl == nil || !strings.HasPrefix(bl.Reason, "test runner missing") {
		t.Errorf("blocker = %+v", bl)
	}
}

// missingChecks passes the starting tree and then reports the check's
// program missing.
type missingChecks struct{ *fakeChecks }

func (m *missingChecks) RunCheck(ctx context.Context, dir string, c check.Check) check.Result {
	res := m.fakeChecks.RunCheck(ctx, dir, c)
	if m.runs[c.Name] > 1 {
		res.Missing, res.ExitCode = true, 127
	}
	return res
}

func TestRunnerAgentFailsThenBlocked(t *testing.T) {
	r := newRig(t, oneStory, step{exit: 2}, step{exit: 2})
	r.git.allowed["SetAside"] = true
	r.git.allowed["CommitPaths"] = true // the blocker's note in progress.md, committed at EXIT
	_, err := r.build()
	if !errors.Is(err, ErrNeedsHuman) {
		t.Fatalf("Build: %v; want needs_human", err)
	}
	steps := r.events.steps()
	for _, want := range []string{"IMPLEMENT -implement_failed-> IMPLEMENT", "IMPLEMENT -implement_failed-> BLOCKER"} {
		if !slices.Contains(steps, want) {
			t.Errorf("no %s in %v", want, steps)
		}
	}
	if bl := r.state().Tasks["US-001"].Blocker; bl == nil || bl.Reason != "agent exited with code 2" {
		t.Errorf("blocker = %+v", bl)
	}
}

func TestRunnerInterrupted(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", cancel: true})
	rep, err := r.build()
	if !errors.Is(err, ErrInterrupted) || rep.Outcome != OutcomeInterrupted {
		t.Fatalf("Build = %+v, %v; want interrupted", rep, err)
	}
	st := wantStopped(t, r, TrigInterrupted)
	if st.Attempt == nil || st.Attempt.TaskID != "US-001" {
		t.Errorf("attempt %+v; want the attempt kept for the resume", st.Attempt)
	}
	if r.git.called("Commit") != 0 {
		t.Errorf("an interrupted attempt was committed")
	}
	// The next build records the cut-short iteration and runs the task
	// again as iteration 2.
	r.agent.steps = append(r.agent.steps, step{write: "a.txt", tick: "US-001"})
	rep, err = r.resume()
	wantResumedAndDone(t, r, rep, err)
	if rep.Iterations != 2 {
		t.Errorf("iterations = %d; want 2: the interrupted one and its rerun", rep.Iterations)
	}
}

// TestTableStepCheck shows that the step check used by every runner test
// fails on a step the table does not have.
func TestTableStepCheck(t *testing.T) {
	if inTable(report.Event{From: "TEST", Trigger: "committed", To: "EXIT"}) {
		t.Errorf("a made-up step passed the table check")
	}
	for _, tr := range Table {
		if !inTable(report.Event{From: string(tr.From), Trigger: string(tr.On), To: string(tr.To)}) {
			t.Errorf("row %v failed the table check", tr)
		}
	}
}

// TestEveryActionHasAPerformer enumerates every action Next can return,
// from every row of the table and on both sides of the retry guard, and
// fails for one the runner has no performer for.
func TestEveryActionHasAPerformer(t *testing.T) {
	b := &builder{}
	entry, trans := b.entryPerformers(), b.transitionPerformers()
	seen := map[Action]bool{}
	for _, tr := range Table {
		for _, retries := range []int{0, DefaultMaxRetries} {
			m := Machine{State: tr.From, TaskID: "US-001", RetryCount: retries, MaxRetries: DefaultMaxRetries, Partial: retries > 0, StoppedIn: tr.To}
			_, actions, err := Next(m, Event{Trigger: tr.On, TaskID: "US-001"})
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range actions {
				seen[a] = true
				last := i == len(actions)-1
				if last && entry[a] == nil {
					t.Errorf("entry action %s (of %s -%s->) has no performer in the runner", a, tr.From, tr.On)
				}
				if !last && trans[a] == nil {
					t.Errorf("transition action %s (of %s -%s->) has no performer in the runner", a, tr.From, tr.On)
				}
			}
		}
	}
	for _, s := range States {
		if entry[EntryAction(s)] == nil {
			t.Errorf("state %s's entry action %s has no performer", s, EntryAction(s))
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d actions seen; the enumeration is broken", len(seen))
	}
}

// What the caller's agents spent before the run (a thread's spec agents)
// counts against the budget: a run that starts over it ends before any
// agent of its own is asked.
func TestRunnerBudgetCountsWhatWasSpentBefore(t *testing.T) {
	r := newRig(t, oneStory, step{write: "a.txt", tick: "US-001", tokens: 10})
	r.opts.Budget = runkit.Budget{MaxTokens: 1000}
	r.opts.SpentBefore = runkit.Spent{Tokens: 1000}
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeBudget {
		t.Fatalf("Build = %+v, %v; want budget", rep, err)
	}
	if st := r.state(); st.Metrics.Tokens.OutputTokens != 0 {
		t.Errorf("the agent ran (%d tokens) although the budget was spent before the run", st.Metrics.Tokens.OutputTokens)
	}
}

// A parallel worker's loop works only its story, in a home of its own,
// with the merge queue's reason in its first prompt, and shares the
// checkout's cooldowns: an agent limited by another worker is not asked.
func TestRunnerWorkerOfAParallelBuild(t *testing.T) {
	r := newRig(t, twoStories, step{write: "b.txt", tick: "US-002"})
	shared := t.TempDir()
	r.opts.Home = filepath.Join(t.TempDir(), "worker-home")
	r.opts.SharedHome = shared
	r.opts.OnlyStory = "US-002"
	r.opts.Feedback = "could not land: conflict in b.txt"
	r.opts.Fallbacks = []agent.Spec{{Name: "spare", Headless: []string{"true"}}}
	if err := runkit.OpenCooldowns(shared).Set("main", time.Now().Add(time.Hour), "limited by w1"); err != nil {
		t.Fatal(err)
	}
	rep, err := r.build()
	if err != nil || rep.Outcome != OutcomeComplete || rep.Iterations != 1 {
		t.Fatalf("Build = %+v, %v; want US-002 alone, complete in one iteration", rep, err)
	}
	if !slices.Equal(r.agent.specs, []string{"spare"}) {
		t.Errorf("agents run = %v; want spare: main rests in the shared record", r.agent.specs)
	}
	if len(r.agent.prompts) != 1 || !strings.Contains(r.agent.prompts[0], "US-002") || !strings.Contains(r.agent.prompts[0], "conflict in b.txt") {
		t.Errorf("prompt lacks the story or the queue's reason:\n%s", strings.Join(r.agent.prompts, "\n---\n"))
	}
	prd, _ := os.ReadFile(r.opts.PRDPath)
	if !strings.Contains(string(prd), "[ ] US-001") {
		t.Errorf("the worker touched another story:\n%s", prd)
	}
	if _, err := os.Stat(filepath.Join(r.opts.Home, "state.json")); err != nil {
		t.Errorf("the worker's state is not in its own home: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.ws.Dir(), "state.json")); err == nil {
		t.Error("the worker wrote the checkout's state.json")
	}
}

// Workers of a parallel build share one ledger: what one spent counts
// against the budget of the other, and their iterations together are
// bounded by the run's limit.
func TestRunnerLedgerIsSharedBetweenWorkers(t *testing.T) {
	ledger := &runkit.Ledger{MaxRuns: 1}
	first := newRig(t, oneStory, step{write: "a.txt", tick: "US-001", tokens: 400})
	first.opts.Ledger = ledger
	first.opts.Budget = runkit.Budget{MaxTokens: 1000}
	if rep, err := first.build(); err != nil || rep.Outcome != OutcomeComplete {
		t.Fatalf("first worker: %+v, %v", rep, err)
	}
	if got := ledger.Total().Tokens; got != 400 || ledger.Runs() != 1 {
		t.Fatalf("ledger after the first worker: %d tokens, %d runs; want 400 and 1", got, ledger.Runs())
	}
	second := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	second.opts.Ledger = ledger
	rep, err := second.build()
	if err != nil || rep.Outcome != OutcomeMaxIterations || len(second.agent.specs) != 0 {
		t.Fatalf("second worker: %+v, %v, agents %v; want the run's one iteration used up and no agent asked", rep, err, second.agent.specs)
	}
	if st := second.state(); !strings.Contains(st.Reason, "used up by its workers") {
		t.Errorf("reason = %q", st.Reason)
	}
	ledger.MaxRuns = 0
	ledger.Add(runkit.Spent{Tokens: 600})
	third := newRig(t, oneStory, step{write: "a.txt", tick: "US-001"})
	third.opts.Ledger = ledger
	third.opts.Budget = runkit.Budget{MaxTokens: 1000}
	rep, err = third.build()
	if err != nil || rep.Outcome != OutcomeBudget || len(third.agent.specs) != 0 {
		t.Fatalf("third worker: %+v, %v, agents %v; want the shared budget spent and no agent asked", rep, err, third.agent.specs)
	}
}

// A resumed run whose limit its caller raised says where the limit came
// from: a parallel or Temporal resume without N said "as given on the
// command line".
func TestRunnerResumeSaysWhereTheRaisedLimitCameFrom(t *testing.T) {
	for _, tc := range []struct{ from, want string }{
		{"", "ralph: iteration limit raised from 10 to 16, as given on the command line\n"},
		{"the parallel run's limit, which its workers share", "ralph: iteration limit raised from 10 to 16, the parallel run's limit, which its workers share\n"},
	} {
		r := newRig(t, oneStory, step{write: "a.txt", cancel: true})
		if _, err := r.build(); !errors.Is(err, ErrInterrupted) {
			t.Fatalf("first build: %v", err)
		}
		r.agent.steps = append(r.agent.steps, step{write: "a.txt", tick: "US-001"})
		r.opts.MaxIterations, r.opts.IterationsGiven, r.opts.IterationsFrom = 15, true, tc.from
		if _, err := r.resume(); err != nil {
			t.Fatal(err)
		}
		if !containsText(r.events.of(report.KindRun), tc.want) {
			t.Errorf("from %q: run lines %v; want %q", tc.from, r.events.of(report.KindRun), tc.want)
		}
	}
}
