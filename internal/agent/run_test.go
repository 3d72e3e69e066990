package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/sandbox"
)

// TestMain lets this test binary play the agent: with the switch set, it
// runs the scripted fake agent instead of the tests.
func TestMain(m *testing.M) {
	// A sandbox with network "proxy" starts this binary as its forwarder.
	if len(os.Args) > 1 && os.Args[1] == sandbox.ForwardCommand {
		os.Exit(sandbox.ForwardMain(os.Args[2:]))
	}
	if os.Getenv("RALPH_AGENT_TEST_FAKE") == "1" {
		os.Exit(fakeagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func fakeSpec(t *testing.T, sc fakeagent.Scenario, args ...string) Spec {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := fakeagent.WriteScenario(path, sc); err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeagent.EnvScenario, path)
	t.Setenv("RALPH_AGENT_TEST_FAKE", "1")
	f := FormatPlain
	if sc.Format == fakeagent.FormatClaude {
		f = FormatClaude
	}
	return Spec{Name: "fake", Headless: append([]string{os.Args[0]}, args...), Format: f}
}

func TestRunSendsPromptOnStdinAndReadsTheSignal(t *testing.T) {
	spec := fakeSpec(t, fakeagent.Scenario{Invocations: []fakeagent.Invocation{{
		Match: "implement US-007",
		Steps: []fakeagent.Step{{Say: "working"}, {Final: "done\n<promise>COMPLETE</promise>"}},
	}}})
	var log, display bytes.Buffer
	out, err := Run(context.Background(), Invocation{Spec: spec, Prompt: "please implement US-007", Dir: t.TempDir(), Log: &log, Display: &display})
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != 0 || len(out.Result.Signals) != 1 || out.Result.Signals[0] != "COMPLETE" {
		t.Fatalf("exit=%d signals=%v", out.ExitCode, out.Result.Signals)
	}
	if !strings.Contains(log.String(), "working\n") || !strings.Contains(display.String(), "working") {
		t.Fatalf("log=%q display=%q", log.String(), display.String())
	}
	if out.OutputBytes != int64(log.Len()) {
		t.Fatalf("OutputBytes=%d, log has %d", out.OutputBytes, log.Len())
	}
}

func TestRunPassesThePromptFileForThePlaceholder(t *testing.T) {
	spec := fakeSpec(t, fakeagent.Scenario{Invocations: []fakeagent.Invocation{{
		Match: "from the file", Steps: []fakeagent.Step{{Final: "read it"}},
	}}}, "--prompt-file", PromptPlaceholder)
	pf := filepath.Join(t.TempDir(), "prompt.md")
	os.WriteFile(pf, []byte("prompt from the file"), 0o644)
	out, err := Run(context.Background(), Invocation{Spec: spec, Prompt: "prompt from the file", PromptFile: pf, Dir: t.TempDir()})
	if err != nil || out.ExitCode != 0 || out.Result.FinalMessage != "read it" {
		t.Fatalf("exit=%d final=%q err=%v", out.ExitCode, out.Result.FinalMessage, err)
	}
}

func TestRunRemovesVariablesThatBreakNestedAgents(t *testing.T) {
	dir := t.TempDir()
	spec := fakeSpec(t, fakeagent.Scenario{Invocations: []fakeagent.Invocation{{
		Steps: []fakeagent.Step{{Run: `echo "CLAUDECODE=${CLAUDECODE:-unset}" > env.txt`}},
	}}})
	t.Setenv("CLAUDECODE", "1")
	if _, err := Run(context.Background(), Invocation{Spec: spec, Prompt: "x", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	if strings.TrimSpace(string(b)) != "CLAUDECODE=unset" {
		t.Fatalf("agent saw %q", b)
	}
}

func TestRunEchoedPromptNeverCompletes(t *testing.T) {
	spec := fakeSpec(t, fakeagent.Scenario{Invocations: []fakeagent.Invocation{{
		Steps: []fakeagent.Step{{EchoPrompt: true}},
	}}})
	prompt := "Do the story.\nWhen all is done print:\n<promise>COMPLETE</promise>\n"
	out, err := Run(context.Background(), Invocation{Spec: spec, Prompt: prompt, Dir: t.TempDir()})
	if err != nil || len(out.Result.Signals) != 0 {
		t.Fatalf("signals=%v err=%v", out.Result.Signals, err)
	}
}

func TestRunMissingBinaryGivesInstallHint(t *testing.T) {
	spec, _, err := Resolve(Choice{Flag: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	spec.Headless = append([]string{"definitely-not-installed-claude"}, spec.Headless[1:]...)
	_, err = Run(context.Background(), Invocation{Spec: spec, Prompt: "x", Dir: t.TempDir()})
	var me *MissingError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "npm install -g @anthropic-ai/claude-code") {
		t.Fatalf("err = %v", err)
	}
}

func TestLineWriterKeepsMemoryBoundedAndTheLogComplete(t *testing.T) {
	var raw int
	var lines [][]byte
	w := &lineWriter{max: 1024, raw: func(b []byte) { raw += len(b) }, line: func(l []byte, _ int) { lines = append(lines, append([]byte(nil), l...)) }}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for i := 0; i < 160; i++ { // 10 MiB without a newline
		w.Write(chunk)
		if cap(w.buf) > 4096 {
			t.Fatalf("line buffer grew to %d bytes", cap(w.buf))
		}
	}
	w.Write([]byte("\nlast line\n"))
	if raw != 160*len(chunk)+11 {
		t.Fatalf("raw saw %d bytes", raw)
	}
	if len(lines) != 2 || len(lines[0]) != 1024 || string(lines[1]) != "last line" {
		t.Fatalf("lines: %d, first %d bytes", len(lines), len(lines[0]))
	}
}

// TestEnvKeepsTheNotifySecret: an agent gets neither RALPH_NOTIFY_SECRET
// nor the variable config's [notify] secret_env names, with which it
// could sign notifications ralph never sent.
func TestEnvKeepsTheNotifySecret(t *testing.T) {
	t.Setenv("RALPH_NOTIFY_SECRET", "notify-secret-0123")
	t.Setenv("MY_HOOK_SIGNING", "hook-secret-0123")
	t.Setenv("AGENT_ENV_KEPT", "kept")
	StripEnv("MY_HOOK_SIGNING")
	env := strings.Join(Env(), "\n")
	if strings.Contains(env, "notify-secret") || strings.Contains(env, "hook-secret") || !strings.Contains(env, "AGENT_ENV_KEPT=kept") {
		t.Errorf("agent environment:\n%s", env)
	}
}
