package agent

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"codex exec -", []string{"codex", "exec", "-"}},
		{`claude -p "two words" 'single $HOME'`, []string{"claude", "-p", "two words", "single $HOME"}},
		{`a\ b "x\"y"`, []string{"a b", `x"y`}},
		{"  spaced   out  ", []string{"spaced", "out"}},
	} {
		got, err := SplitCommand(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", `"open`, "'open"} {
		if _, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) succeeded", bad)
		}
	}
}

func TestResolvePrecedence(t *testing.T) {
	custom := map[string]Custom{"mine": {Command: []string{"my-agent", "--go"}}}
	for _, tc := range []struct {
		name       string
		c          Choice
		wantName   string
		wantSource string
	}{
		{"default", Choice{}, "codex", "default"},
		{"config", Choice{ConfigDefault: "claude"}, "claude", "config"},
		{"env name beats config", Choice{Env: "gemini", ConfigDefault: "claude"}, "gemini", "AGENT_CMD"},
		{"env command", Choice{Env: "sh -c 'x'", ConfigDefault: "claude"}, "custom", "AGENT_CMD"},
		{"flag beats all", Choice{Flag: "mine", Env: "gemini", ConfigDefault: "claude", Custom: custom}, "mine", "--agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, src, err := Resolve(tc.c)
			if err != nil || s.Name != tc.wantName || src != tc.wantSource {
				t.Fatalf("got %s from %s (%v), want %s from %s", s.Name, src, err, tc.wantName, tc.wantSource)
			}
		})
	}
}

func TestResolveUnknownNamesTheChoices(t *testing.T) {
	_, _, err := Resolve(Choice{Flag: "gpt", Custom: map[string]Custom{"mine": {Command: []string{"x"}}}})
	var ue *UnknownError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "codex, claude, droid, opencode, gemini, amp, cursor-agent, copilot, mine") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigTableOverridesOnlyWhatItSets(t *testing.T) {
	s, _, err := Resolve(Choice{Flag: "claude", Custom: map[string]Custom{"claude": {Command: []string{"claude", "-p", "--model", "opus"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != FormatClaude || s.InstallHint == "" || len(s.Interactive) == 0 || s.Headless[3] != "opus" {
		t.Fatalf("override lost built-in fields: %+v", s)
	}
}

// The prompt must never travel in argv, where large prompts overflow
// ARG_MAX: each built-in either reads stdin or names the prompt file.
func TestBuiltinsNeverPutThePromptOnTheCommandLine(t *testing.T) {
	for _, s := range Builtins() {
		argv, stdin := Argv(s.Headless, "/tmp/p.md")
		if strings.Contains(strings.Join(argv, " "), "{prompt}") {
			t.Errorf("%s: placeholder left in %q", s.Name, argv)
		}
		if !stdin && !strings.Contains(strings.Join(argv, " "), "/tmp/p.md") {
			t.Errorf("%s: neither stdin nor the prompt file", s.Name)
		}
		if _, err := ParseFormat(string(s.Format)); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if s.InstallHint == "" {
			t.Errorf("%s: no install hint", s.Name)
		}
	}
}

func TestWithModelInsertsTheFlagAfterTheSubcommand(t *testing.T) {
	specs := map[string]Spec{}
	for _, s := range Builtins() {
		specs[s.Name] = s
	}
	for name, want := range map[string][]string{
		"codex":  {"codex", "exec", "--model", "gpt-x", "--json"},
		"claude": {"claude", "--model", "gpt-x", "--output-format"},
		"droid":  {"droid", "exec", "--model", "gpt-x", "--skip-permissions-unsafe"},
	} {
		got, err := WithModel(specs[name], "gpt-x")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got.Headless[:len(want)], " ") != strings.Join(want, " ") {
			t.Errorf("%s: argv %q, want it to start %q", name, got.Headless, want)
		}
		if len(got.Headless) != len(specs[name].Headless)+2 || len(specs[name].Headless) == len(got.Headless) {
			t.Errorf("%s: the original argv changed or the model was not added once", name)
		}
	}
	if _, err := WithModel(specs["amp"], "x"); err == nil || !strings.Contains(err.Error(), "[agents.NAME]") {
		t.Errorf("amp has no model flag, want an error that says what to do, got %v", err)
	}
	same, err := WithModel(specs["amp"], "")
	if err != nil || strings.Join(same.Headless, " ") != strings.Join(specs["amp"].Headless, " ") {
		t.Errorf("an empty model changed the spec: %v %v", same.Headless, err)
	}
}

// Claude Code 2.1.197 started with -p as its first argument reaches its
// first model request about 60 ms later than with the same flags in another
// order (bench/argorder_test.go measures it), on every story ralph runs.
func TestClaudeHeadlessDoesNotStartWithPrint(t *testing.T) {
	for _, s := range Builtins() {
		if s.Name != "claude" {
			continue
		}
		if s.Headless[1] == "-p" || s.Headless[1] == "--print" {
			t.Errorf("claude's headless argv %q starts with -p, which costs Claude Code about 60 ms per run", s.Headless)
		}
		if !slices.Contains(s.Headless, "-p") {
			t.Errorf("claude's headless argv %q lost -p", s.Headless)
		}
	}
}

// A sandbox hides the home folder: every built-in agent must name the
// parts of it it keeps its login in, the variables that carry its
// credentials, and the hosts it talks to, or it cannot run sandboxed.
func TestBuiltinsNameTheirSandboxNeeds(t *testing.T) {
	for _, s := range Builtins() {
		if len(s.State) == 0 || len(s.CredentialEnv) == 0 || len(s.Hosts) == 0 {
			t.Errorf("%s: state %v, credential env %v, hosts %v: name all three", s.Name, s.State, s.CredentialEnv, s.Hosts)
		}
		for _, p := range s.State {
			if filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
				t.Errorf("%s: state %q must be relative to the home folder", s.Name, p)
			}
		}
	}
	claude, _, err := Resolve(Choice{Flag: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/home/u/.claude", "/home/u/.claude.json"}
	if got := claude.StateIn("/home/u"); !slices.Equal(got, want) {
		t.Errorf("claude state = %v, want %v", got, want)
	}
	if !slices.Contains(claude.CredentialEnv, "ANTHROPIC_API_KEY") {
		t.Errorf("claude credential env %v lacks ANTHROPIC_API_KEY", claude.CredentialEnv)
	}
	// As root, Claude Code takes --dangerously-skip-permissions only with
	// IS_SANDBOX set (the sandboxed real claude in internal/e2e/realagents).
	if !slices.Contains(claude.CredentialEnv, "IS_SANDBOX") {
		t.Errorf("claude credential env %v lacks IS_SANDBOX", claude.CredentialEnv)
	}
	custom, _, _ := Resolve(Choice{Flag: "mine", Custom: map[string]Custom{"mine": {Command: []string{"mine"}}}})
	if len(custom.State) != 0 {
		t.Errorf("a custom agent got state %v: it names none", custom.State)
	}
}
