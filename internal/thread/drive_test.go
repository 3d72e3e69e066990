package thread

import (
	"errors"
	"fmt"
	"github.com/ralphloop/ralph/internal/check"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
)

// These tests drive the runner over every edge it raises itself, with
// scripted ports (rig_test.go), and assert the exact transitions.

// TestRunnerQuickModeTakesTheThreadToReview: from a finalized spec, quick
// mode begins implementation, passes preflight, configures, runs the loop,
// verifies its claim and submits for review, where a person is needed.
func TestRunnerQuickModeTakesTheThreadToReview(t *testing.T) {
	g := newRig(t, PhaseFinalized, ModeQuick, nil)
	g.loop.steps = []loopStep{{outcome: loop.OutcomeComplete, iterations: 1, done: true}}
	g.checks.pass["check-hello"] = true
	if err := g.r.drive(); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	g.wantSteps(
		"Finalized -implement-> Preflight",
		"Preflight -checks_pass-> Configuring",
		"Configuring -start-> Running",
		"Running -claim_done-> Verifying",
		"Verifying -criteria_passed-> Implemented",
		"Implemented -submit-> PendingReview")
	if g.phase() != PhasePendingReview {
		t.Fatalf("phase %s", g.phase())
	}
	if b := strings.TrimSpace(gitT(t, g.r.ws.Root, "symbolic-ref", "--short", "HEAD")); b != BranchName("t1") {
		t.Errorf("on branch %s, want the thread's branch", b)
	}
	if ev := g.r.Evidence(); ev == nil || !ev.Passed || len(g.checks.ran) != 1 {
		t.Errorf("evidence %+v, checks run %q", ev, g.checks.ran)
	}
	if !strings.Contains(g.out.String(), "★ Recommend Approve") {
		t.Errorf("no recommendation in the review:\n%s", g.out)
	}
}

// TestRunnerPreflightFails: uncommitted work of the person's fails
// preflight, which says what to do, and no loop runs.
func TestRunnerPreflightFails(t *testing.T) {
	g := newRig(t, PhaseFinalized, ModeQuick, nil)
	if err := os.WriteFile(filepath.Join(g.r.ws.Root, "stray.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.r.drive(); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	g.wantSteps("Finalized -implement-> Preflight", "Preflight -checks_fail-> PreflightFailed")
	th := g.r.Thread()
	if th.Phase.Type != PhasePreflightFailed || len(th.Phase.Failures) != 1 ||
		!strings.Contains(th.Phase.Failures[0], "uncommitted changes (stray.txt): commit or stash them") {
		t.Fatalf("phase %+v", th.Phase)
	}
}

// TestRunnerLoopOutcomes: every way a loop run can end is an edge from
// Running, with what the person needs in the event and on the terminal.
func TestRunnerLoopOutcomes(t *testing.T) {
	failure := errors.New("agent fake cannot run: not logged in")
	cases := []struct {
		name  string
		step  loopStep
		steps []string
		// reason is why, as the event and the Stuck or Paused box say.
		reason string
		// err is what the command ends with ("" for none).
		err string
	}{
		{name: "interrupted", step: loopStep{outcome: loop.OutcomeInterrupted, iterations: 1, err: loop.ErrInterrupted},
			steps: []string{"Running -interrupt-> Paused"},
			err:   "thread t1 paused; nothing is lost: ralph thread resume | reconfigure | abandon"},
		{name: "all agents limited", step: loopStep{iterations: 2, err: fmt.Errorf("%w: every agent is cooling down after a usage limit (fake until 15:00:00)", loop.ErrAllLimited)},
			steps:  []string{"Running -stuck-> Stuck"},
			reason: "all agents exhausted: every agent is cooling down after a usage limit (fake until 15:00:00)"},
		{name: "needs a human", step: loopStep{outcome: loop.OutcomeNeedsHuman, iterations: 1},
			steps: []string{"Running -stuck-> Stuck"}, reason: "only blocked stories are left"},
		{name: "max iterations", step: loopStep{outcome: loop.OutcomeMaxIterations, iterations: 1, reason: "iteration limit 1 reached"},
			steps: []string{"Running -stuck-> Stuck"}, reason: "iteration limit 1 reached"},
		{name: "budget", step: loopStep{outcome: loop.OutcomeBudget, iterations: 1, reason: "budget reached: max_tokens (10 of 10 tokens used)"},
			steps: []string{"Running -stuck-> Stuck"}, reason: "budget reached: max_tokens (10 of 10 tokens used)"},
		{name: "loop failed", step: loopStep{outcome: loop.OutcomeError, err: failure},
			steps:  []string{"Running -loop_failed-> Paused"},
			reason: failure.Error(),
			err:    "the loop stopped: agent fake cannot run: not logged in (thread t1 is Paused: fix it, then `ralph thread resume`)"},
		{name: "unknown outcome", step: loopStep{outcome: "mystery", iterations: 1},
			steps:  []string{"Running -loop_failed-> Paused"},
			reason: `the loop ended with outcome "mystery", which this ralph does not know`,
			err:    `the loop stopped: the loop ended with outcome "mystery", which this ralph does not know (thread t1 is Paused: fix it, then ` + "`ralph thread resume`)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, PhaseRunning, ModeQuick, nil)
			g.loop.steps = []loopStep{c.step}
			var got collect
			g.r.env.Events = report.NewEmitter(MachineName, "t1", 0, nil, report.Text{W: g.out}, g.steps, &got)
			err := g.r.drive()
			if c.err == "" && err != nil || c.err != "" && (err == nil || err.Error() != c.err) {
				t.Fatalf("drive: %v\nwant %q", err, c.err)
			}
			if c.step.err != nil && !errors.Is(err, c.step.err) && c.err != "" {
				t.Errorf("the command's error does not wrap the loop's: %v", err)
			}
			g.wantSteps(c.steps...)
			if c.reason == "" {
				return
			}
			var tr report.Event
			for _, ev := range got {
				if ev.Kind == report.KindTransition {
					tr = ev
				}
			}
			if got, _ := tr.Data.(report.Transition); got.Reason != c.reason {
				t.Errorf("the transition carries reason %q, want %q", got.Reason, c.reason)
			}
			if !strings.Contains(g.out.String(), "why: "+c.reason) {
				t.Errorf("the person is not told why:\n%s", g.out)
			}
			if g.phase() == PhaseStuck && g.r.StuckReason() != c.reason {
				t.Errorf("stuck reason %q", g.r.StuckReason())
			}
		})
	}
	// An interrupted thread's error is the one interruption of every
	// command, so that it exits 130.
	g := newRig(t, PhaseRunning, ModeQuick, nil)
	g.loop.steps = []loopStep{{outcome: loop.OutcomeInterrupted, err: loop.ErrInterrupted}}
	if err := g.r.drive(); !errors.Is(err, ErrInterrupted) {
		t.Errorf("interrupt: %v", err)
	}
}

// TestRunnerLoopCannotStart: a loop that cannot even be set up (an agent
// of the thread's configuration that no longer exists) pauses the thread,
// where reconfigure can change the agent; no loop runs.
func TestRunnerLoopCannotStart(t *testing.T) {
	g := newRig(t, PhaseRunning, ModeQuick, nil)
	g.r.opts.Agents = []string{"nosuch"}
	err := g.r.drive()
	if err == nil || !strings.HasPrefix(err.Error(), "the loop stopped: ") {
		t.Fatalf("drive: %v", err)
	}
	g.wantSteps("Running -loop_failed-> Paused")
	if !strings.Contains(strings.Join(AllowedCommands(g.phase()), " "), "reconfigure") {
		t.Errorf("reconfigure is not offered in %s", g.phase())
	}
}

// TestRunnerDoesNotRunTheLoopWithoutWork: with no iterations left, or
// every agent resting for longer than the thread waits, the thread is
// stuck without a loop run.
func TestRunnerDoesNotRunTheLoopWithoutWork(t *testing.T) {
	g := newRig(t, PhaseRunning, ModeQuick, nil)
	th := g.r.Thread()
	th.Phase.Iteration = 1 // of the default 1
	g.r.t = th
	if err := g.r.drive(); err != nil {
		t.Fatal(err)
	}
	g.wantSteps("Running -stuck-> Stuck")
	if got := g.r.StuckReason(); got != "no iterations left (1 of 1 used)" {
		t.Errorf("reason %q", got)
	}

	g = newRig(t, PhaseRunning, ModeQuick, nil)
	now := time.Now().Truncate(time.Second)
	g.r.env.Now = func() time.Time { return now }
	if err := runkit.OpenCooldowns(g.r.ws.Dir()).Set("fake", now.Add(time.Hour), "limit"); err != nil {
		t.Fatal(err)
	}
	if err := g.r.drive(); err != nil {
		t.Fatal(err)
	}
	g.wantSteps("Running -stuck-> Stuck")
	if got := g.r.StuckReason(); !strings.HasPrefix(got, "all agents exhausted: every agent is cooling down after a usage limit (fake until ") {
		t.Errorf("reason %q", got)
	}
}

// TestRunnerVerification: a failed verification with iterations left
// sends the loop back to work; with none left the thread is stuck, with
// the criteria that passed and failed.
func TestRunnerVerification(t *testing.T) {
	g := newRig(t, PhaseRunning, ModeQuick, nil)
	g.r.opts.MaxIterations = 5
	g.checks.pass["check-hello"] = false
	g.loop.steps = []loopStep{
		{outcome: loop.OutcomeComplete, iterations: 1, done: true},
		{outcome: loop.OutcomeInterrupted, iterations: 1, err: loop.ErrInterrupted},
	}
	if err := g.r.drive(); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("drive: %v\n%s", err, g.out)
	}
	g.wantSteps("Running -claim_done-> Verifying", "Verifying -criteria_failed-> Running", "Running -interrupt-> Paused")
	if it := g.r.Thread().Phase.Iteration; it != 2 {
		t.Errorf("iteration %d after two runs of one", it)
	}
	if ev := g.r.Evidence(); ev == nil || ev.Passed {
		t.Errorf("evidence %+v", ev)
	}

	g = newRig(t, PhaseRunning, ModeQuick, nil)
	g.checks.pass["check-hello"] = false
	g.loop.steps = []loopStep{{outcome: loop.OutcomeComplete, iterations: 1, done: true}}
	if err := g.r.drive(); err != nil {
		t.Fatalf("drive: %v\n%s", err, g.out)
	}
	g.wantSteps("Running -claim_done-> Verifying", "Verifying -stuck-> Stuck")
	s := g.r.Thread().Stuck
	if s == nil || len(s.CriteriaFailed) != 1 || s.CriteriaFailed[0] != "US-001: hello.txt says hello" || s.Iterations != 1 {
		t.Errorf("stuck %+v", s)
	}
}

// TestRunnerVerificationFeedback: a criterion's verify command that fails
// with a long output reaches the loop's next prompt (the hints in
// context.md) in the one feedback format, not as 300 bytes cut mid-line.
func TestRunnerVerificationFeedback(t *testing.T) {
	g := newRig(t, PhaseRunning, ModeQuick, nil)
	g.r.opts.MaxIterations = 5
	g.checks.pass["check-hello"] = false
	var out strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&out, "comparing byte %d of hello.txt\n", i)
	}
	out.WriteString("hello.txt says hi, not hello\n")
	g.checks.output = map[string]string{"check-hello": out.String()}
	g.loop.steps = []loopStep{
		{outcome: loop.OutcomeComplete, iterations: 1, done: true},
		{outcome: loop.OutcomeInterrupted, iterations: 1, err: loop.ErrInterrupted},
	}
	if err := g.r.drive(); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("drive: %v\n%s", err, g.out)
	}
	hints, err := os.ReadFile(g.r.work.Path("context.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := check.Feedback(check.Result{Check: check.Check{Name: "check-hello", Run: "check-hello"}, ExitCode: 1, Output: out.String()})
	if !strings.Contains(string(hints), "verification failed: US-001: hello.txt says hello\n") || !strings.Contains(string(hints), want) {
		t.Errorf("the hints for the next prompt lack the failed verify command's feedback:\n%s", hints)
	}
	if !strings.Contains(want, "lines above left out") || !strings.Contains(want, "hello.txt says hi, not hello\n```") {
		t.Errorf("feedback does not keep the end of a long output:\n%s", want)
	}
}

// TestRunnerSpecAgents: the assessment's verdict, polish and the approval
// that prepares the commit, each as the one command a person types.
func TestRunnerSpecAgents(t *testing.T) {
	g := newRig(t, PhaseDrafting, ModeMethodical, nil)
	g.agent.replies = []agentReply{{final: "criterion 1 cannot be tested\nVERDICT: REVISE"}, {final: "fine\nVERDICT: OK"}}
	if err := g.r.Do("assess", "", nil); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	g.wantSteps("Drafting -assess-> Assessing", "Assessing -revise-> Drafting")
	if err := g.r.Do("assess", "", nil); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	// An OK is advice: finalizing stays the person's.
	g.wantSteps("Drafting -assess-> Assessing")

	g = newRig(t, PhaseImplemented, ModeMethodical, nil)
	g.agent.replies = []agentReply{{final: "added the docs", write: map[string]string{"DOCS.md": "docs\n"}}}
	if err := g.r.Do("polish", "", nil); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	g.wantSteps("Implemented -polish-> Polishing", "Polishing -polish_done-> Implemented")
	if len(g.agent.runs) != 1 || !strings.Contains(g.agent.runs[0].Prompt, "Polish the implementation") {
		t.Errorf("agent runs %+v", g.agent.runs)
	}

	g = newRig(t, PhasePendingReview, ModeMethodical, nil)
	if err := g.r.Do("approve", "", nil); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	g.wantSteps("PendingReview -approve-> Approved", "Approved -prepare_commit-> ReadyToCommit")
}

// TestSpecAgentRecordsItselfForCrashCleanup: the spec agent in progress is
// recorded (runkit.AgentFile: process group and token) while it runs, and
// the record is gone once it ends.
func TestSpecAgentRecordsItselfForCrashCleanup(t *testing.T) {
	g := newRig(t, PhaseDrafting, ModeMethodical, nil)
	g.agent.replies = []agentReply{{final: "done", write: map[string]string{".ralph/threads/t1/draft.md": rigSpec}}}
	if err := g.r.Draft("a greeting"); err != nil {
		t.Fatalf("%v\n%s", err, g.out)
	}
	if !strings.HasPrefix(g.agent.tokenFile, "4242 tok-1 ") { // then the start time of process 4242, if any
		t.Errorf("while the agent ran the record held %q", g.agent.tokenFile)
	}
	if _, err := os.Stat(g.r.path(agentTokenFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record outlived the agent: %v", err)
	}
	g.wantSteps()
}

// TestSpecAgentsCountAgainstTheBudget: what the spec agents use is kept
// with the thread, counted by every loop run of it, and once it reaches
// [budget] no spec agent starts, nor does a command that would run one
// move the thread.
func TestSpecAgentsCountAgainstTheBudget(t *testing.T) {
	g := newRig(t, PhaseDrafting, ModeQuick, nil)
	g.r.cfg.Budget.MaxTokens = 100
	g.agent.replies = []agentReply{{final: "a first go", tokens: 60, cost: 0.5}, {final: "better", tokens: 50, cost: 0.25}}
	for _, msg := range []string{"a greeting", "shorter"} {
		if err := g.r.Draft(msg); err != nil {
			t.Fatalf("%v\n%s", err, g.out)
		}
	}
	if c := g.r.loadConf(); c.SpecTokens != 110 || c.SpecCostUSD != 0.75 {
		t.Fatalf("recorded %d tokens, $%.2f; want 110, $0.75", c.SpecTokens, c.SpecCostUSD)
	}
	msgs, _ := ReadConversation(g.r.dir, "t1")
	err := g.r.Draft("one more")
	var be *BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("want a BudgetError, got %v", err)
	}
	if want := "not running the agent for the draft of thread t1: the [budget] is spent: max_tokens (110 of 100 tokens used); raise it in .ralph/config.toml to go on"; err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
	if after, _ := ReadConversation(g.r.dir, "t1"); len(after) != len(msgs) {
		t.Errorf("the refused message was kept: %d messages, were %d", len(after), len(msgs))
	}
	if err := g.r.Do("assess", "", nil); !errors.As(err, &be) {
		t.Fatalf("assess: want a BudgetError, got %v", err)
	}
	if g.phase() != PhaseDrafting || len(g.agent.runs) != 2 {
		t.Errorf("phase %s, %d agent runs after the refusals", g.phase(), len(g.agent.runs))
	}
	g.wantSteps()

	// The thread's loop starts with the spec agents' use spent.
	th := g.r.Thread()
	th.Phase = PhaseState{Type: PhaseRunning}
	if err := Save(g.r.dir, &th); err != nil {
		t.Fatal(err)
	}
	g.r.t = th
	g.loop.steps = []loopStep{{outcome: loop.OutcomeBudget, reason: "budget reached: max_tokens (110 of 100 tokens used)"}}
	if err := g.r.drive(); err != nil {
		t.Fatal(err)
	}
	if got := g.loop.opts[0].SpentBefore; got != (runkit.Spent{Tokens: 110, CostUSD: 0.75}) {
		t.Errorf("the loop was given %+v spent before", got)
	}
	g.wantSteps("Running -stuck-> Stuck")
}

// TestHumanCommandsTakeTheirEdges takes every human row of the table the
// way a command does, through the runner's apply, from a thread set up as
// the command finds it; each lands where the table says.
func TestHumanCommandsTakeTheirEdges(t *testing.T) {
	yes := func(string) bool { return true }
	for _, row := range Table {
		if row.With.Actor != ActorHuman {
			continue
		}
		name := edgeName(string(row.From), string(row.On), string(row.To))
		g := newRig(t, row.From, ModeMethodical, yes)
		if row.On == VerbFinalize {
			if err := os.WriteFile(g.r.draftPath(), []byte(rigSpec), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := g.r.apply(Event{Verb: row.On, Source: SourceHuman}, string(row.On)); err != nil {
			t.Errorf("%s: %v\n%s", name, err, g.out)
			continue
		}
		g.wantSteps(name)
		if g.phase() != row.To {
			t.Errorf("%s: the thread on disk is %s", name, g.phase())
		}
	}
}

// TestEveryActionHasAPerformer enumerates every action Next returns, from
// every row of the table, and fails for one the runner has no performer
// for; and each phase's entry action has one.
func TestEveryActionHasAPerformer(t *testing.T) {
	seen := map[Action]bool{}
	for _, row := range Table {
		_, acts, err := Next(at(row.From), Event{Verb: row.On, Source: naturalSource(row.With.Actor)})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acts {
			seen[a] = true
			if _, ok := performers[a]; !ok {
				t.Errorf("action %s (of %s -%s->) has no performer in the runner", a, row.From, row.On)
			}
		}
	}
	for _, p := range Phases {
		if _, ok := performers[EntryAction(p)]; !ok {
			t.Errorf("%s's entry action %s has no performer", p, EntryAction(p))
		}
	}
	for a := range performers {
		if !seen[a] {
			t.Errorf("performer for %s, which the table never returns", a)
		}
	}
	if len(seen) < 15 {
		t.Errorf("only %d actions seen; the enumeration is broken", len(seen))
	}
}

// A thread is never verified while one of ralph's checks fails, however
// its stories and the agent's promise look: Verifying runs the checks and
// records each as evidence.
func TestVerifyingRunsRalphsChecks(t *testing.T) {
	for _, passing := range []bool{false, true} {
		g := newRig(t, PhaseRunning, ModeQuick, nil)
		g.r.env.Checks = []check.Check{{Name: "tests", Run: "run-tests"}}
		g.checks.pass["check-hello"] = true
		g.checks.pass["run-tests"] = passing
		g.agent.replies = nil
		g.loop.steps = []loopStep{{outcome: loop.OutcomeComplete, iterations: 1, done: true}}
		if err := g.r.drive(); err != nil {
			t.Fatalf("drive: %v\n%s", err, g.out)
		}
		ev := g.r.Evidence()
		var item *EvidenceItem
		for i := range ev.Items {
			if ev.Items[i].Name == "check tests" {
				item = &ev.Items[i]
			}
		}
		if item == nil || item.Passed != passing {
			t.Fatalf("passing=%v: evidence %+v; want the check recorded as it came out", passing, ev)
		}
		if ev.Passed != passing {
			t.Errorf("passing=%v: the verification passed=%v", passing, ev.Passed)
		}
		if !passing && g.phase() == PhaseImplemented {
			t.Errorf("a thread whose check fails reached Implemented")
		}
	}
}

// TestSavedRunIDThatIsAPathIsForgotten: the loop run id of config.json
// names the folder read for the thread's evidence and logs; one edited
// into a path is no run ralph made and is not read.
func TestSavedRunIDThatIsAPathIsForgotten(t *testing.T) {
	g := newRig(t, PhaseDrafting, ModeMethodical, nil)
	for id, want := range map[string]string{"20260101-000000-abcdef": "20260101-000000-abcdef", "../../../../tmp/x": "", "a/b": ""} {
		if err := os.WriteFile(g.r.path("config.json"), []byte(`{"schema_version": 1, "run_id": "`+id+`", "run_base": 3}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if c := g.r.loadConf(); c.RunID != want || c.RunBase != 3 {
			t.Errorf("run_id %q read as %q (base %d), want %q", id, c.RunID, c.RunBase, want)
		}
	}
}

// TestLeftoverSpecAgentIsStoppedWhenTheRunIsRefused: a spec agent a kill
// of ralph left running is stopped by the next spec agent command even
// when that command is refused (here: the [budget] is spent), so it does
// not go on writing the draft alone.
func TestLeftoverSpecAgentIsStoppedWhenTheRunIsRefused(t *testing.T) {
	g := newRig(t, PhaseDrafting, ModeQuick, nil)
	g.r.cfg.Budget.MaxTokens = 100
	c := g.r.loadConf()
	c.SpecTokens = 200
	if err := g.r.saveConf(c); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RALPH_AGENT_TOKEN=leftover-tok"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	if err := os.WriteFile(g.r.path(agentTokenFile), []byte("0 leftover-tok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var be *BudgetError
	if err := g.r.Draft("a greeting"); !errors.As(err, &be) {
		t.Fatalf("want a BudgetError, got %v", err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover spec agent is still running after a refused run")
	}
}
