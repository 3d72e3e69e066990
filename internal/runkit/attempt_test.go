package runkit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// TestMain lets this test binary play the agent: with the switch set, it
// runs the scripted fake agent instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("RALPH_RUNKIT_TEST_FAKE") == "1" {
		os.Exit(fakeagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func fakeSpec(t *testing.T, exit int, steps ...fakeagent.Step) agent.Spec {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.json")
	sc := fakeagent.Scenario{Invocations: []fakeagent.Invocation{{Steps: steps, Exit: exit}}}
	if err := fakeagent.WriteScenario(path, sc); err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeagent.EnvScenario, path)
	t.Setenv("RALPH_RUNKIT_TEST_FAKE", "1")
	return agent.Spec{Name: "fake", Headless: []string{os.Args[0]}, Format: agent.FormatPlain}
}

// The token is on record before the agent starts: when OnStart runs, the
// agent is running and already findable by the saved token, so a crash
// at that instant leaves what stops it.
func TestTokenIsSavedBeforeTheAgentStarts(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec(t, 0, fakeagent.Step{Final: "done"})
	var saved string
	var order []string
	res, err := Attempt{
		Spec: spec, Prompt: "go", Dir: dir,
		PromptFile: filepath.Join(dir, "p.md"), LogFile: filepath.Join(dir, "a.log"),
		SaveToken: func(tok string) error { saved = tok; order = append(order, "saved"); return nil },
		OnStart: func(pgid int) {
			order = append(order, "started")
			if saved == "" {
				t.Error("agent started before its token was saved")
			}
		},
	}.Run(context.Background())
	if err != nil || res.ExitCode != 0 || res.Result.FinalMessage != "done" {
		t.Fatalf("exit=%d final=%q err=%v", res.ExitCode, res.Result.FinalMessage, err)
	}
	if strings.Join(order, ",") != "saved,started" || res.Token != saved {
		t.Fatalf("order %v, saved %q, ran with %q", order, saved, res.Token)
	}
}

// The saved token finds the running agent: the processes carry it.
func TestSavedTokenFindsTheRunningAgent(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec(t, 0, fakeagent.Step{Hang: true})
	var saved string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	found := make(chan bool, 1)
	go func() {
		res, _ := Attempt{Spec: spec, Prompt: "go", Dir: dir,
			SaveToken: func(tok string) error { saved = tok; return nil },
			OnStart: func(int) {
				go func() {
					// The agent is running now: stop it by the saved
					// token, as a resumed run does after a crash. Its
					// process carries the token once exec is done.
					tag := proc.Tag(agent.TokenVar, saved)
					if !wait.Within(wait.Long, func() bool { return len(proc.FindTagged(tag)) > 0 }) {
						t.Error("no process of the running agent carries the saved token")
					}
					st := agent.StopLeftover(saved, 0, 0)
					found <- st.Any()
				}()
			},
			Timeout: 20 * time.Second,
		}.Run(ctx)
		_ = res
	}()
	if !wait.Recv(t, found, wait.Long, "the agent to be stopped by its saved token") {
		t.Fatal("the saved token found no process of the running agent")
	}
}

// An agent nobody could find again after a crash is not started.
func TestTokenThatCannotBeSavedStopsTheAttempt(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec(t, 0, fakeagent.Step{Run: "touch ran"}, fakeagent.Step{Final: "done"})
	_, err := Attempt{Spec: spec, Prompt: "go", Dir: dir,
		SaveToken: func(string) error { return errors.New("disk full") },
	}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v, want the save's error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the agent ran although its token was not saved")
	}
}

// A silent agent is killed by the idle limit, long before the wall limit.
func TestSilentAgentIsKilledByTheIdleLimit(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec(t, 0, fakeagent.Step{Hang: true})
	start := time.Now()
	res, err := Attempt{Spec: spec, Prompt: "go", Dir: dir, Timeout: 20 * time.Second, IdleTimeout: 500 * time.Millisecond}.Run(context.Background())
	if err != nil || !res.Idle || res.TimedOut {
		t.Fatalf("idle=%v timedout=%v err=%v", res.Idle, res.TimedOut, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
	if res.Limit != nil {
		t.Fatalf("a kill by ralph reported as a usage limit: %+v", res.Limit)
	}
}

// The raw log keeps at most MaxLogBytes of a flood, and the prompt file
// holds the prompt without its secrets.
func TestLogIsCappedAndPromptRedacted(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec(t, 0, fakeagent.Step{Flood: 1 << 20, Newlines: true}, fakeagent.Step{Final: "done"})
	logFile, promptFile := filepath.Join(dir, "a.log"), filepath.Join(dir, "p.md")
	secret := "s3cret-pass-123"
	res, err := Attempt{Spec: spec, Prompt: "use key https://user:" + secret + "@example.com/r.git", Dir: dir, PromptFile: promptFile, LogFile: logFile, MaxLogBytes: 64 << 10}.Run(context.Background())
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exit=%d err=%v", res.ExitCode, err)
	}
	fi, err := os.Stat(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 80<<10 || res.LogCutBytes == 0 {
		t.Fatalf("log holds %d bytes, cut %d; want at most about 64KiB", fi.Size(), res.LogCutBytes)
	}
	p, _ := os.ReadFile(promptFile)
	if strings.Contains(string(p), secret) || !strings.Contains(string(p), "use key") {
		t.Fatalf("prompt file = %q", p)
	}
}

// A failed run whose final message matches a configured pattern is a
// usage limit; the same words in a successful run are not.
func TestLimitPatternOnlyOnAFailedRun(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec(t, 1, fakeagent.Step{Final: "You have hit your usage limit."})
	res, err := Attempt{Spec: spec, Prompt: "go", Dir: dir, LimitPatterns: []string{"usage limit"}}.Run(context.Background())
	if err != nil || res.Limit == nil || res.LimitSource != "pattern" {
		t.Fatalf("limit=%+v source=%q err=%v", res.Limit, res.LimitSource, err)
	}
	spec = fakeSpec(t, 0, fakeagent.Step{Final: "I fixed the usage limit bug."})
	res, err = Attempt{Spec: spec, Prompt: "go", Dir: dir, LimitPatterns: []string{"usage limit"}}.Run(context.Background())
	if err != nil || res.Limit != nil {
		t.Fatalf("limit=%+v err=%v", res.Limit, err)
	}
}

func TestMatchLimitReadsOnlyFinalMessageAndErrors(t *testing.T) {
	pats := []string{"usage limit"}
	if l := MatchLimit(agent.Result{FinalMessage: "I fixed the rate limiter; done"}, pats); l != nil {
		t.Fatalf("prose without the pattern matched: %+v", l)
	}
	if l := MatchLimit(agent.Result{FinalMessage: "You have hit your Usage Limit."}, pats); l == nil {
		t.Fatal("final message with the pattern did not match")
	}
	if l := MatchLimit(agent.Result{Errors: []string{"429: usage limit reached"}}, pats); l == nil || l.Message != "429: usage limit reached" {
		t.Fatalf("reported error did not match: %+v", l)
	}
}

// Every runner judges limits through DetectLimit: ralph's own kills are
// never limits, a structured event is, and a pattern only on a failed run.
func TestDetectLimit(t *testing.T) {
	pats := []string{"usage limit"}
	said := agent.Result{FinalMessage: "You have hit your usage limit."}
	fail := func(o agent.Outcome) agent.Outcome { o.ExitCode = 1; return o }
	for _, c := range []struct {
		name   string
		out    agent.Outcome
		err    error
		source string
	}{
		{"event", agent.Outcome{Result: agent.Result{Limit: &agent.Limit{Kind: "event"}}}, nil, "event"},
		{"pattern on a failed run", fail(agent.Outcome{Result: said}), nil, "pattern"},
		{"pattern on an error result", agent.Outcome{Result: agent.Result{FinalMessage: said.FinalMessage, IsError: true}}, nil, "pattern"},
		{"pattern on a clean run", agent.Outcome{Result: said}, nil, ""},
		{"timeout", func() agent.Outcome { o := fail(agent.Outcome{Result: said}); o.TimedOut = true; return o }(), nil, ""},
		{"idle", func() agent.Outcome { o := fail(agent.Outcome{Result: said}); o.Idle = true; return o }(), nil, ""},
		{"run error", fail(agent.Outcome{Result: said}), errors.New("boom"), ""},
	} {
		if l, source := DetectLimit(c.out, c.err, pats); source != c.source || (l == nil) != (c.source == "") {
			t.Errorf("%s: DetectLimit = %+v, %q; want source %q", c.name, l, source, c.source)
		}
	}
}
