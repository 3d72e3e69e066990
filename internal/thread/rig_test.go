package thread

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// The runner tests drive the thread's runner with scripted ports: no agent
// process, no loop and no check runs. Git is the real one, in a temporary
// repository. Every transition any test's runner takes is collected, so
// that TestMain can fail an edge of the table that no test takes.

// covered collects, across the package's tests, the edges of the table
// the runners took, as "From -verb-> To".
var covered = struct {
	sync.Mutex
	edges map[string]bool
}{edges: map[string]bool{}}

func edgeName(from, verb, to string) string { return from + " -" + verb + "-> " + to }

// steps records a runner's transitions, in order, and adds them to
// covered. A step that is no row of the table fails the test: the runner
// never takes a step the table does not have.
type steps struct {
	t    *testing.T
	mu   sync.Mutex
	list []string
}

func (s *steps) Emit(ev report.Event) {
	if ev.Kind != report.KindTransition || ev.From == "" {
		return // the loop's own events, and `thread new`, which no row makes
	}
	name := edgeName(ev.From, ev.Trigger, ev.To)
	row, ok := Lookup(Phase(ev.From), Verb(ev.Trigger))
	if !ok || string(row.To) != ev.To {
		s.t.Errorf("the runner took %s, which is no row of the table", name)
	}
	s.mu.Lock()
	s.list = append(s.list, name)
	s.mu.Unlock()
	covered.Lock()
	covered.edges[name] = true
	covered.Unlock()
}

// took returns the steps taken since the last call.
func (s *steps) took() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.list
	s.list = nil
	return out
}

// TestMain fails the package when a row of the table was taken by no
// test's runner, so that a new edge cannot come without a test. Only a run
// of every test can say so.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" {
		if missing := uncovered(); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: no test drives the runner over these edges of the thread table:\n  %s\n", strings.Join(missing, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

func uncovered() []string {
	covered.Lock()
	defer covered.Unlock()
	var out []string
	for _, r := range Table {
		if name := edgeName(string(r.From), string(r.On), string(r.To)); !covered.edges[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// agentReply is what the scripted spec agent does in one run.
type agentReply struct {
	final  string
	exit   int
	write  map[string]string // files it writes, relative to the work tree
	tokens int64
	cost   float64
}

// fakeAgent is the scripted AgentPort: each run takes the next reply, and
// a run nobody scripted fails the test.
type fakeAgent struct {
	t       *testing.T
	replies []agentReply
	runs    []runkit.Attempt
	// tokenFile is what the thread's agent record held while the agent ran.
	tokenFile string
}

func (f *fakeAgent) RunAgent(ctx context.Context, a runkit.Attempt) (runkit.Result, error) {
	f.runs = append(f.runs, a)
	if len(f.replies) == 0 {
		f.t.Errorf("a spec agent ran that the test did not script (prompt file %s)", a.PromptFile)
		return runkit.Result{}, errors.New("no agent in this test")
	}
	rep := f.replies[0]
	f.replies = f.replies[1:]
	if a.SaveToken != nil {
		if err := a.SaveToken("tok-1"); err != nil {
			return runkit.Result{}, err
		}
	}
	if a.OnStart != nil {
		a.OnStart(4242)
	}
	if b, err := os.ReadFile(filepath.Join(a.Dir, ".ralph", "threads", "t1", agentTokenFile)); err == nil {
		f.tokenFile = string(b)
	}
	for p, content := range rep.write {
		if err := os.WriteFile(filepath.Join(a.Dir, p), []byte(content), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	var out agent.Outcome
	out.ExitCode = rep.exit
	out.Result.FinalMessage = rep.final
	out.Result.Usage = agent.Usage{InputTokens: rep.tokens / 2, OutputTokens: rep.tokens - rep.tokens/2}
	out.Result.CostUSD, out.Result.CostKnown = rep.cost, rep.cost > 0
	return runkit.Result{Outcome: out, Token: "tok-1", PromptFile: a.PromptFile, LogFile: a.LogFile}, nil
}

// loopStep is how one scripted loop run ends.
type loopStep struct {
	outcome    loop.Outcome
	iterations int
	reason     string
	err        error
	// done ticks every story of the PRD copy and leaves the spec's
	// promise in the run's record, as a loop that finished the work does.
	done bool
	// cancel cancels the runner's context, as Ctrl+C during the run does.
	cancel context.CancelFunc
}

// fakeLoop is the scripted LoopPort: each run takes the next step, and a
// run nobody scripted fails the test.
type fakeLoop struct {
	t     *testing.T
	steps []loopStep
	opts  []loop.Options
	// roots are the work trees the runs were given.
	roots []string
}

func (f *fakeLoop) Build(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
	f.opts = append(f.opts, opts)
	f.roots = append(f.roots, ws.Root)
	if len(f.steps) == 0 {
		f.t.Errorf("a loop ran that the test did not script")
		return loop.Report{}, errors.New("no loop in this test")
	}
	s := f.steps[0]
	f.steps = f.steps[1:]
	runID := fmt.Sprintf("run-%d", len(f.opts))
	if s.done {
		b, err := os.ReadFile(opts.PRDPath)
		if err != nil {
			f.t.Fatal(err)
		}
		prd, err := tasks.ParseMarkdown("prd", b)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, st := range prd.Stories {
			if b, err = tasks.SetStoryDone(b, st.ID, true); err != nil {
				f.t.Fatal(err)
			}
		}
		if err := store.WriteFileAtomic(opts.PRDPath, b, 0o644); err != nil {
			f.t.Fatal(err)
		}
		rec := loop.IterationRecord{SchemaVersion: 1, RunID: runID, Iteration: 1, Signals: []string{"COMPLETE"}}
		runs := ws.RunsDir() // the loop's home: the work tree's .ralph, or opts.Home
		if opts.Home != "" {
			runs = filepath.Join(opts.Home, "runs")
		}
		if err := os.MkdirAll(filepath.Join(runs, runID), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if err := store.WriteJSON(filepath.Join(runs, runID, "iter-1.json"), rec); err != nil {
			f.t.Fatal(err)
		}
	}
	if s.cancel != nil {
		s.cancel()
	}
	return loop.Report{RunID: runID, Outcome: s.outcome, Iterations: s.iterations, Reason: s.reason}, s.err
}

// fakeChecks is the scripted CheckPort: pass says how each check, by its
// command, comes out; an unscripted one fails the test.
type fakeChecks struct {
	t    *testing.T
	pass map[string]bool
	ran  []string
	dirs []string // where each ran
	// output is what a failing check prints, by its command;
	// "FAIL <command>" when unscripted.
	output map[string]string
}

func (f *fakeChecks) RunCheck(ctx context.Context, dir string, c check.Check) check.Result {
	f.ran = append(f.ran, c.Run)
	f.dirs = append(f.dirs, dir)
	ok, known := f.pass[c.Run]
	if !known {
		f.t.Errorf("a check ran that the test did not script: %q", c.Run)
	}
	if ok {
		return check.Result{Check: c}
	}
	out, scripted := f.output[c.Run]
	if !scripted {
		out = "FAIL " + c.Run
	}
	return check.Result{Check: c, ExitCode: 1, Output: out}
}

// rig is a runner over a fresh repository with scripted ports.
type rig struct {
	t      *testing.T
	r      *Runner
	out    *strings.Builder
	agent  *fakeAgent
	loop   *fakeLoop
	checks *fakeChecks
	steps  *steps
	// cancel cancels the runner's context.
	cancel context.CancelFunc
}

// rigSpec is the spec the rig's threads work from.
const rigSpec = `# Greeting

Promise: COMPLETE

### [ ] US-001: Write hello
- [ ] hello.txt says hello (verify: ` + "`check-hello`" + `)
`

// agentsOnPath is what ResolveAgent gives: an agent whose program is
// installed everywhere, so that preflight's tool check passes. It never
// runs: the agent port is scripted.
func agentsOnPath(name string) (agent.Spec, error) {
	if name == "" {
		name = "fake"
	}
	if name == "nosuch" {
		return agent.Spec{}, &agent.UnknownError{Name: name}
	}
	return agent.Spec{Name: name, Headless: []string{"true"}}, nil
}

func (g *rig) emitter() *report.Emitter {
	return report.NewEmitter(MachineName, "t1", 0, nil, report.Text{W: g.out}, g.steps)
}

// newRig returns a rig whose thread t1, in mode, is saved in phase p with
// spec v1 (rigSpec) finalized, its baseline the repository's one commit.
func newRig(t *testing.T, p Phase, mode Mode, confirm func(string) bool) *rig {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the runner tests but is not in PATH: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "init", "-q", "-b", "master")
	gitT(t, dir, "config", "user.name", "Ralph Test")
	gitT(t, dir, "config", "user.email", "ralph@example.com")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.EnsureStateFiles(runnerNow); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	th, err := New("t1", "title", mode, runnerNow)
	if err != nil {
		t.Fatal(err)
	}
	th.Phase = PhaseState{Type: p}
	head := strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))
	th.Baseline = &Baseline{Branch: "master", CommitSHA: head, CapturedAt: runnerNow}
	if p == PhaseStuck {
		th.Stuck = &StuckInfo{SpecVersion: 1, Iterations: 2}
	}
	if err := os.MkdirAll(Dir(ws.Dir(), "t1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if v, err := AddSpec(ws.Dir(), "t1", []byte(rigSpec)); err != nil {
		t.Fatal(err)
	} else {
		th.SpecVersion = v
	}
	if err := Save(ws.Dir(), &th); err != nil {
		t.Fatal(err)
	}
	g := &rig{t: t, out: &strings.Builder{}, steps: &steps{t: t},
		agent: &fakeAgent{t: t}, loop: &fakeLoop{t: t}, checks: &fakeChecks{t: t, pass: map[string]bool{}}}
	env := Env{
		Events:       g.emitter(),
		Now:          func() time.Time { return runnerNow },
		WorkDir:      func() (string, error) { return dir, nil },
		ResolveAgent: agentsOnPath,
		NamedAgent:   func(name, _ string) (agent.Spec, error) { return agentsOnPath(name) },
		LoopOptions: func(_ context.Context, a agent.Spec, prd string, maxIterations int) (loop.Options, error) {
			return loop.Options{Agent: a, PRDPath: filepath.Join(dir, prd), MaxIterations: maxIterations}, nil
		},
		Confirm: confirm,
		Ports:   Ports{Agent: g.agent, Loop: g.loop, Checks: g.checks},
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g.cancel = cancel
	g.r = NewRunner(ctx, ws, Settings{}, th, env, Options{})
	return g
}

// wantSteps fails the test unless the runner took exactly want since the
// last check.
func (g *rig) wantSteps(want ...string) {
	g.t.Helper()
	if got := g.steps.took(); !slices.Equal(got, want) {
		g.t.Errorf("steps:\n got  %q\n want %q\noutput:\n%s", got, want, g.out)
	}
}

// phase is the thread's phase on disk.
func (g *rig) phase() Phase {
	g.t.Helper()
	th, err := Load(g.r.dir, "t1")
	if err != nil {
		g.t.Fatal(err)
	}
	return th.Phase.Type
}
