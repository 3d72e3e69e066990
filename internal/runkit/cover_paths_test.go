package runkit_test

// The run kit as its runners use it, through its exported API only: an
// agent attempt's lines, log and prompt record; the journal a kill left
// short; the shared budget of parallel workers; the crash points the
// crash tests depend on.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
)

type eventLog struct {
	mu  sync.Mutex
	evs []report.Event
}

func (l *eventLog) Emit(ev report.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, ev)
}

// of returns the texts of the events of kind, in order.
func (l *eventLog) of(kind report.Kind) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.evs {
		if ev.Kind == kind {
			out = append(out, ev.Text)
		}
	}
	return out
}

func shellAgent(script string) agent.Spec {
	return agent.Spec{Name: "sh", Headless: []string{"sh", "-c", script}, Format: agent.FormatPlain}
}

// What the agent prints reaches the run's sinks as agent output, one
// event per line, the last line too when it has none; the log holds
// it, and with AppendLog a second attempt adds to the first's log rather
// than replacing it. The prompt's record is written even for an agent that
// reads the prompt on stdin, with the secrets in it redacted.
func TestAttemptShowsTheAgentsLinesAndKeepsItsLog(t *testing.T) {
	dir := t.TempDir()
	log := &eventLog{}
	em := report.NewEmitter("loop", "run-1", 0, nil, log)
	secret := "hunter2-" + strings.Repeat("x", 12)
	a := runkit.Attempt{
		Spec: shellAgent(`cat > /dev/null; echo first line; printf 'second, no newline'`), Prompt: "push to https://ana:" + secret + "@git.example.com/repo",
		Dir: dir, PromptFile: filepath.Join(dir, "iter-1.prompt.md"), LogFile: filepath.Join(dir, "iter-1.log"), AppendLog: true,
		Events: em, Working: "agent sh thinking",
	}
	res, err := a.Run(context.Background())
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run = %v, exit %d", err, res.ExitCode)
	}
	if got := log.of(report.KindAgentOutput); strings.Join(got, "|") != "first line\n|second, no newline\n" {
		t.Errorf("agent output events = %q, want the two lines", got)
	}
	if res.Token == "" {
		t.Error("the attempt has no token for a resume to find its agent by")
	}
	prompt, err := os.ReadFile(a.PromptFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(prompt), secret) || !strings.Contains(string(prompt), "push to https://ana:") {
		t.Errorf("the prompt's record is %q: want it written with the secret redacted", prompt)
	}

	a.Spec = shellAgent(`echo again`)
	if _, err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(a.LogFile)
	if l := string(b); !strings.Contains(l, "first line") || !strings.Contains(l, "again") {
		t.Errorf("the log after a second attempt with AppendLog:\n%s\nwant both attempts' output", l)
	}
}

// An attempt ralph cannot record is not run: a prompt file or a log it
// cannot write, or a token it cannot save, is ralph's own error, and the
// agent never starts.
func TestAttemptThatCannotBeRecordedDoesNotRun(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	spec := shellAgent("touch " + marker)
	fileSpec := agent.Spec{Name: "sh", Headless: []string{"sh", "-c", "touch " + marker, agent.PromptPlaceholder}, Format: agent.FormatPlain}
	missing := filepath.Join(dir, "no", "such", "folder")
	saveFailed := errors.New("disk full")
	for _, tc := range []struct {
		name string
		a    runkit.Attempt
		want string
	}{
		{"prompt file", runkit.Attempt{Spec: fileSpec, PromptFile: filepath.Join(missing, "p.md")}, "no such file or directory"},
		{"log file", runkit.Attempt{Spec: spec, LogFile: filepath.Join(missing, "a.log")}, "no such file or directory"},
		{"token", runkit.Attempt{Spec: spec, SaveToken: func(string) error { return saveFailed }}, "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.a.Dir, tc.a.Prompt = dir, "go"
			_, err := tc.a.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the agent ran although its attempt could not be recorded")
			}
		})
	}
}

// A kill between a transition's state write and its journal line leaves
// the journal one line short; the resume appends it once, however many
// times it is repaired and whatever other writers appended since.
func TestRepairEventsAppendsTheMissingLineOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "transitions.jsonl")
	ev := &runkit.TransitionEvent{Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), SessionID: "s1",
		Transition: runkit.TransitionEntry{From: "Executing", To: "Reviewing", Trigger: "executor_completed", TaskID: "task-1", AttemptNumber: 1}}
	if err := runkit.RepairEvents(path, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nothing to repair wrote the journal (%v)", err)
	}
	if err := runkit.RepairEvents(path, ev); err != nil {
		t.Fatal(err)
	}
	// Another writer appends after it; the repair still finds the line.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `{"timestamp":"2026-01-02T03:05:00Z","sessionId":"s1","transition":{"from":"x","to":"y","trigger":"hint"}}`)
	f.Close()
	for range 2 {
		if err := runkit.RepairEvents(path, ev); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	want, _ := json.Marshal(ev)
	if n := strings.Count(string(b), string(want)); n != 1 {
		t.Errorf("the journal holds the repaired transition %d times, want once:\n%s", n, b)
	}
	if err := runkit.RepairEvents(t.TempDir(), ev); err == nil {
		t.Error("a journal that cannot be read was taken as repaired")
	}
}

// A journal line reads whether an older ralph wrote it in seed 002's
// shape or this ralph in its event envelope; an envelope of another kind
// than a transition reads as no transition.
func TestTransitionEventReadsBothShapes(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := `{"timestamp":"2026-01-02T03:04:05Z","sessionId":"s1","transition":{"from":"Planning","to":"Executing","trigger":"planner_completed","detail":"completed"}}`
	envelope, err := json.Marshal(report.Event{V: report.SchemaVersion, Seq: 7, Time: at, Machine: "session", Run: "s1", Kind: report.KindTransition,
		From: "Planning", To: "Executing", Trigger: "planner_completed", Task: "task-1", Attempt: 2, Data: report.Transition{Detail: "completed"}})
	if err != nil {
		t.Fatal(err)
	}
	note, _ := json.Marshal(report.Event{V: report.SchemaVersion, Time: at, Run: "s1", Kind: report.KindNote, Text: "hello\n"})
	want := runkit.TransitionEntry{From: "Planning", To: "Executing", Trigger: "planner_completed", Detail: "completed"}
	for _, tc := range []struct {
		name string
		line string
		want runkit.TransitionEntry
	}{
		{"seed 002's shape", old, want},
		{"the envelope", string(envelope), runkit.TransitionEntry{From: "Planning", To: "Executing", Trigger: "planner_completed", TaskID: "task-1", AttemptNumber: 2, Detail: "completed"}},
		{"another kind", string(note), runkit.TransitionEntry{}},
	} {
		var ev runkit.TransitionEvent
		if err := json.Unmarshal([]byte(tc.line), &ev); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ev.Transition != tc.want || ev.SessionID != "s1" || !ev.Timestamp.Equal(at) {
			t.Errorf("%s reads as %+v, want %+v of s1 at %s", tc.name, ev, tc.want, at)
		}
	}
	var ev runkit.TransitionEvent
	if err := json.Unmarshal([]byte(`{"v":1,"seq":"x"}`), &ev); err == nil {
		t.Error("a malformed envelope read as a transition")
	}
}

// The workers of a parallel build share one budget and one iteration
// limit: what each spends adds up, and no more iterations are handed out
// than the limit, however many workers ask at once.
func TestLedgerIsOneBudgetForAllWorkers(t *testing.T) {
	l := &runkit.Ledger{MaxRuns: 5}
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.TakeRun() {
				mu.Lock()
				taken++
				mu.Unlock()
				l.Add(runkit.Spent{Tokens: 100, CostUSD: 0.5, Wall: time.Second})
			}
		}()
	}
	wg.Wait()
	if taken != 5 || l.Runs() != 5 {
		t.Errorf("the workers took %d iterations (ledger: %d), want the limit, 5", taken, l.Runs())
	}
	if got := l.Total(); got != (runkit.Spent{Tokens: 500, CostUSD: 2.5, Wall: 5 * time.Second}) {
		t.Errorf("the ledger's total = %+v, want five iterations' worth", got)
	}
	budget := runkit.Budget{MaxTokens: 500}
	if why := budget.Exceeded(l.Total()); why == "" {
		t.Error("the workers' shared spend did not reach the budget they share")
	}
	if unbounded := (&runkit.Ledger{}); !unbounded.TakeRun() || !unbounded.TakeRun() {
		t.Error("a ledger without MaxRuns refused an iteration")
	}
}

// A rest ralph recorded for an agent ends when cleared: the agent is
// picked again at once.
func TestCooldownClearedAgentIsPickedAgain(t *testing.T) {
	c := runkit.OpenCooldowns(t.TempDir())
	now := time.Now()
	if err := c.Set("claude", now.Add(time.Hour), "5-hour limit"); err != nil {
		t.Fatal(err)
	}
	if name, ok, _, _ := c.Pick([]string{"claude"}, now); ok {
		t.Fatalf("a resting agent was picked: %s", name)
	}
	if err := c.Clear("claude"); err != nil {
		t.Fatal(err)
	}
	if name, ok, _, err := c.Pick([]string{"claude"}, now); !ok || name != "claude" || err != nil {
		t.Errorf("after Clear, Pick = %q, %v, %v; want claude", name, ok, err)
	}
	if s := c.Summary(now); s != "" {
		t.Errorf("after Clear the summary still lists %q", s)
	}
}

// crashHelperEnv makes TestCrashHelper act: it is the process the crash
// tests below kill.
const crashHelperEnv = "RALPH_RUNKIT_CRASH_HELPER"

// TestCrashHelper passes three crash points and three persisted
// transitions, saying each on stdout, when run by the tests below; run
// as a test of its own it does nothing.
func TestCrashHelper(t *testing.T) {
	if os.Getenv(crashHelperEnv) != "1" {
		return
	}
	for i := 1; i <= 3; i++ {
		fmt.Printf("point %d\n", i)
		runkit.CrashPoint("saved")
	}
	for i := 1; i <= 3; i++ {
		fmt.Printf("transition %d\n", i)
		runkit.CrashHook()
	}
	fmt.Println("survived")
}

// The crash tests kill ralph exactly where they mean to: at the Nth time
// a named crash point is reached, or right after the Nth persisted
// transition, by SIGKILL, with nothing run past it.
func TestCrashPointsKillWhereAsked(t *testing.T) {
	for _, tc := range []struct {
		env, last string
	}{
		{"RALPH_TEST_CRASH_AT=saved@2", "point 2"},
		{"RALPH_TEST_CRASH_AT=saved", "point 1"},
		{"RALPH_TEST_CRASH_AT=elsewhere", "survived"},
		{"RALPH_TEST_CRASH_AFTER=2", "transition 2"},
		{"RALPH_TEST_CRASH_AFTER=0", "survived"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashHelperEnv+"=1", tc.env)
			out, err := cmd.Output()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			var last string
			for _, l := range lines {
				if strings.HasPrefix(l, "point ") || strings.HasPrefix(l, "transition ") || l == "survived" {
					last = l
				}
			}
			if last != tc.last {
				t.Errorf("the helper's last step was %q, want %q:\n%s", last, tc.last, out)
			}
			var exit *exec.ExitError
			killed := errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
			if want := tc.last != "survived"; killed != want {
				t.Errorf("killed by SIGKILL: %v, want %v (%v)", killed, want, err)
			}
		})
	}
}
