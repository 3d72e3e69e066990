package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

func claudeOutcome(t *testing.T, exit int, lines ...string) Outcome {
	t.Helper()
	p := NewParser(FormatClaude, "prompt")
	for _, l := range lines {
		p.Line([]byte(l))
	}
	return Outcome{Outcome: proc.Outcome{ExitCode: exit}, Result: p.Result()}
}

func TestEnvironmentFailureRecognisesAnAgentThatCannotRun(t *testing.T) {
	claude, _ := builtin("claude")
	codex, _ := builtin("codex")
	tests := []struct {
		name string
		spec Spec
		out  Outcome
		kind EnvKind
		hint string
	}{
		{"claude 403", claude, claudeOutcome(t, 1,
			`{"type":"system","subtype":"init","session_id":"s"}`,
			`{"type":"result","subtype":"success","is_error":true,"result":"Failed to authenticate. API Error: 403 {\"error\":{\"type\":\"forbidden\",\"message\":\"Request not allowed\"}}"}`),
			EnvAuth, "claude login"},
		{"claude 401 invalid key", claude, claudeOutcome(t, 1,
			`{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Please run /login"}`),
			EnvAuth, "claude login"},
		{"codex not logged in on stderr", codex, Outcome{Outcome: proc.Outcome{ExitCode: 1}, StderrTail: "Error: Not logged in. Run codex login\n"},
			EnvAuth, "codex login"},
		{"unknown model", claude, claudeOutcome(t, 1,
			`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 404 {\"type\":\"error\",\"error\":{\"type\":\"not_found_error\",\"message\":\"model not found: claude-nope\"}}"}`),
			EnvModel, "model name"},
		{"unknown option", claude, Outcome{Outcome: proc.Outcome{ExitCode: 1}, StderrTail: "error: unknown option '--output-formatt'\n"},
			EnvFlags, "claude --help"},
		{"clap unexpected argument", codex, Outcome{Outcome: proc.Outcome{ExitCode: 2}, StderrTail: "error: unexpected argument '--json' found\n"},
			EnvFlags, "update it with `npm install -g @openai/codex`"},
		{"custom agent", Spec{Name: "mine", Headless: []string{"mine"}}, Outcome{Outcome: proc.Outcome{ExitCode: 1}, Result: Result{FinalMessage: "Failed to authenticate. API Error: 403"}},
			EnvAuth, "Log the agent's CLI in"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := EnvironmentFailure(tc.spec, tc.out, nil)
			if e == nil {
				t.Fatalf("EnvironmentFailure = nil, want %s", tc.kind)
			}
			if e.Kind != tc.kind || !strings.Contains(e.Error(), tc.hint) || !strings.Contains(e.Error(), "No task was charged") {
				t.Errorf("EnvironmentFailure = %s %q, want kind %s naming %q", e.Kind, e.Error(), tc.kind, tc.hint)
			}
		})
	}
}

func TestEnvironmentFailureLeavesTheTasksOwnFailuresAlone(t *testing.T) {
	claude, _ := builtin("claude")
	authText := "Failed to authenticate. API Error: 403"
	tests := map[string]Outcome{
		"exit 0":             {Result: Result{FinalMessage: authText}},
		"did work first":     {Outcome: proc.Outcome{ExitCode: 1}, Result: Result{FinalMessage: authText, ToolCalls: 3}},
		"usage limit":        {Outcome: proc.Outcome{ExitCode: 1}, Result: Result{FinalMessage: authText, Limit: &Limit{Kind: "rate_limit"}}},
		"timed out":          {Outcome: proc.Outcome{ExitCode: -1, TimedOut: true}, StderrTail: authText},
		"ordinary failure":   {Outcome: proc.Outcome{ExitCode: 1}, Result: Result{FinalMessage: "tests failed: expected 3, got 4"}},
		"quoted tool output": {Outcome: proc.Outcome{ExitCode: 1}, Result: Result{FinalMessage: "$ curl api\n401 Unauthorized\nI tried the API.\nIt needs a key I do not have.\nThe tests fail.\nI stopped.\nSee the notes."}},
	}
	for name, out := range tests {
		if e := EnvironmentFailure(claude, out, nil); e != nil {
			t.Errorf("%s: EnvironmentFailure = %v, want nil", name, e)
		}
	}
}

func TestEnvironmentFailureMissingBinary(t *testing.T) {
	spec := Spec{Name: "ghost", Headless: []string{"ralph-no-such-agent-binary"}, InstallHint: "npm install -g ghost"}
	out, err := Run(context.Background(), Invocation{Spec: spec, Prompt: "p", Dir: t.TempDir()})
	e := EnvironmentFailure(spec, out, err)
	if e == nil || e.Kind != EnvMissing || !strings.Contains(e.Error(), "npm install -g ghost") {
		t.Fatalf("EnvironmentFailure = %v, want missing with the install hint", e)
	}
	var ee *EnvError
	if !errors.As(error(e), &ee) {
		t.Fatal("not an *EnvError")
	}
}

// An agent that prints a secret of ralph's environment leaves it nowhere:
// not in the raw log, the display, the final message or the stderr tail.
func TestRunRedactsSecrets(t *testing.T) {
	const secret = "sk-ant-api03-SECRETSECRET"
	spec := fakeSpec(t, fakeagent.Scenario{Invocations: []fakeagent.Invocation{{
		Steps: []fakeagent.Step{
			{Say: "my key is " + secret},
			{Stderr: "debug: key=" + secret},
			{Final: "done with " + secret},
		},
		Exit: 1,
	}}})
	red := redact.New([]string{"ANTHROPIC_API_KEY=" + secret}, nil)
	var log, display bytes.Buffer
	out, err := Run(context.Background(), Invocation{Spec: spec, Prompt: "p", Dir: t.TempDir(), Log: &log, Display: &display, Redactor: red})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"log": log.String(), "display": display.String(), "final": out.Result.FinalMessage, "stderr": out.StderrTail} {
		if strings.Contains(s, secret) || !strings.Contains(s, redact.Mask) {
			t.Errorf("%s = %q: secret not masked", name, s)
		}
	}
}

// A process the agent started with setsid left its process group; Run
// stops it too and reports it. OnExit comes once, when the agent's group
// is gone and before the scan that finds the process that left it, so
// that a caller's next step runs beside the scan.
func TestRunStopsAndReportsProcessesThatLeftTheGroup(t *testing.T) {
	pidFile := t.TempDir() + "/escapee.pid"
	spec := fakeSpec(t, fakeagent.Scenario{Invocations: []fakeagent.Invocation{{
		Steps: []fakeagent.Step{
			{Run: "setsid sh -c 'echo $$ > " + pidFile + "; exec sleep 30' >/dev/null 2>&1 &"},
			{Run: "while [ ! -s " + pidFile + " ]; do sleep 0.01; done"},
			{Final: "done"},
		},
	}}})
	exits, group, strayAlive := 0, 0, false
	out, err := Run(context.Background(), Invocation{Spec: spec, Prompt: "p", Dir: t.TempDir(),
		OnStart: func(pgid int) { group = pgid },
		OnExit: func() {
			exits++
			b, _ := os.ReadFile(pidFile)
			p, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			st, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
			strayAlive = p > 0 && err == nil && !strings.Contains(string(st), ") Z ")
			if syscall.Kill(-group, 0) == nil {
				t.Errorf("OnExit came while the agent's group %d still had members", group)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if exits != 1 || !strayAlive {
		t.Errorf("OnExit came %d times, the process that left the group alive then: %v; want once, before the scan stopped it", exits, strayAlive)
	}
	b, _ := os.ReadFile(pidFile)
	pid := 0
	for _, c := range strings.TrimSpace(string(b)) {
		pid = pid*10 + int(c-'0')
	}
	if len(out.Strays) != 1 || out.Strays[0].PID != pid {
		t.Fatalf("Strays = %v, want the setsid process %d", out.Strays, pid)
	}
	gone := func() bool {
		st, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	}
	if !wait.Within(wait.Long, gone) {
		t.Fatalf("the setsid process %d is still running", pid)
	}
}
