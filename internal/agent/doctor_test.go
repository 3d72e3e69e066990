package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProbes answers probes from a table keyed by the joined argv and
// records every call.
type fakeProbes struct {
	mu      sync.Mutex
	answers map[string]fakeAnswer
	calls   []string
}

type fakeAnswer struct {
	out  string
	err  error
	hang bool // block until ctx ends
}

func (f *fakeProbes) run(ctx context.Context, argv []string) (string, error) {
	key := strings.Join(argv, " ")
	f.mu.Lock()
	f.calls = append(f.calls, key)
	a, ok := f.answers[key]
	f.mu.Unlock()
	if !ok {
		return "", errors.New("unexpected probe " + key)
	}
	if a.hang {
		<-ctx.Done()
		return a.out, ctx.Err()
	}
	return a.out, a.err
}

func installed(paths ...string) func(string) (string, error) {
	return func(file string) (string, error) {
		for _, p := range paths {
			if filepath.Base(p) == file {
				return p, nil
			}
		}
		return "", &os.PathError{Op: "lookpath", Path: file, Err: os.ErrNotExist}
	}
}

func spec(t *testing.T, name string) Spec {
	t.Helper()
	s, ok := builtin(name)
	if !ok {
		t.Fatalf("no built-in %q", name)
	}
	return s
}

const codexHelp = `Run Codex non-interactively

Usage: codex exec [OPTIONS] [PROMPT] [COMMAND]

Options:
  -c, --config <key=value>  Override a configuration value
      --json                Print events to stdout as JSONL
      --dangerously-bypass-approvals-and-sandbox
                            Skip all confirmation prompts
      --skip-git-repo-check Allow running outside a Git repository
  -h, --help                Print help
`

func TestDiagnoseInstalledAndCurrent(t *testing.T) {
	f := &fakeProbes{answers: map[string]fakeAnswer{
		"codex --version":   {out: "codex-cli 0.169.0\n"},
		"codex exec --help": {out: codexHelp},
	}}
	p := Prober{Run: f.run, LookPath: installed("/opt/bin/codex")}
	d := p.Diagnose(context.Background(), spec(t, "codex"))
	want := Diagnosis{
		Name:         "codex",
		Program:      "codex",
		Path:         "/opt/bin/codex",
		Installed:    true,
		Probed:       true,
		Version:      "codex-cli 0.169.0",
		HelpArgv:     []string{"codex", "exec", "--help"},
		FlagsChecked: []string{"--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"},
		FlagsMissing: []string{},
		Problems:     []string{},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Diagnose = %+v\nwant       %+v", d, want)
	}
	if want := []string{"codex --version", "codex exec --help"}; !reflect.DeepEqual(f.calls, want) {
		t.Errorf("probes = %q, want %q", f.calls, want)
	}
}

func TestDiagnoseMissingFlag(t *testing.T) {
	// --verbose-log must not count as --verbose, nor "--print" as "-p"...
	help := "Usage: claude [options]\n  --print  print\n  --output-format <f>\n  --verbose-log\n  --dangerously-skip-permissions\n"
	f := &fakeProbes{answers: map[string]fakeAnswer{
		"claude --version": {out: "2.1.197 (Claude Code)\n"},
		"claude --help":    {out: help},
	}}
	p := Prober{Run: f.run, LookPath: installed("/usr/bin/claude")}
	d := p.Diagnose(context.Background(), spec(t, "claude"))
	if want := []string{"--verbose", "-p"}; !reflect.DeepEqual(d.FlagsMissing, want) {
		t.Errorf("FlagsMissing = %q, want %q", d.FlagsMissing, want)
	}
	want := []string{"claude: its help no longer lists --verbose, -p; ralph's default command may be out of date (override it in [agents.claude])"}
	if !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("Problems = %q, want %q", d.Problems, want)
	}

	// ...while "-p, --print" lists both, even in colour.
	f.answers["claude --help"] = fakeAnswer{out: "\x1b[1m-p\x1b[0m, --print\n  --output-format\n  \x1b[36m--verbose\x1b[0m\n  --dangerously-skip-permissions\n"}
	if d := p.Diagnose(context.Background(), spec(t, "claude")); len(d.Problems) != 0 {
		t.Errorf("coloured help: Problems = %q, want none", d.Problems)
	}

	// A command from config is the user's to fix, not ralph's default.
	own := Spec{Name: "claude", Headless: []string{"claude", "-p", "--brief"}}
	d = p.Diagnose(context.Background(), own)
	want = []string{"claude: its help does not list --brief; check the command in [agents.claude] in .ralph/config.toml"}
	if !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("own command: Problems = %q, want %q", d.Problems, want)
	}
}

func TestDiagnoseVersionFailure(t *testing.T) {
	f := &fakeProbes{answers: map[string]fakeAnswer{
		"opencode --version":  {out: "error: unknown option\n", err: errors.New("exit status 1")},
		"opencode run --help": {out: "opencode run [message..]\n  --format  json\n  --auto\n"},
		"claude --version":    {out: "\n\n"},
		"claude --help":       {out: "boom\n", err: errors.New("exit status 2")},
		"gemini --version":    {out: "gemini 1\n"},
	}}
	p := Prober{Run: f.run, LookPath: installed("/x/opencode", "/x/claude", "/x/gemini")}

	d := p.Diagnose(context.Background(), spec(t, "opencode"))
	if d.Version != "unknown" || len(d.Problems) != 0 || !d.Installed {
		t.Errorf("opencode: %+v; want version unknown and no problem", d)
	}

	// Empty version output is unknown too; a failing help is a problem.
	mine := Spec{Name: "mine", Headless: []string{"claude", "--go", "--file={prompt}", "-"}}
	d = p.Diagnose(context.Background(), mine)
	if d.Version != "unknown" {
		t.Errorf("mine: Version = %q, want unknown", d.Version)
	}
	if want := []string{"--go"}; !reflect.DeepEqual(d.FlagsChecked, want) {
		t.Errorf("mine: FlagsChecked = %q, want %q", d.FlagsChecked, want)
	}
	want := []string{"mine: could not check its flags: `claude --help` failed: exit status 2: boom"}
	if !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("mine: Problems = %q, want %q", d.Problems, want)
	}

	// Without flags to check, the help is not run at all.
	quiet := Spec{Name: "quiet", Headless: []string{"gemini", "{prompt}"}}
	f.calls = nil
	d = p.Diagnose(context.Background(), quiet)
	if len(d.Problems) != 0 || d.Version != "gemini 1" || d.HelpArgv != nil {
		t.Errorf("quiet: %+v", d)
	}
	if want := []string{"gemini --version"}; !reflect.DeepEqual(f.calls, want) {
		t.Errorf("quiet: probes = %q, want %q", f.calls, want)
	}
}

// TestDiagnoseNeverRunsCustomPrograms: a program that is not a built-in
// agent's may be a wrapper that starts a real, paid agent run on any
// arguments, --version included. Doctor finds it and runs nothing.
func TestDiagnoseNeverRunsCustomPrograms(t *testing.T) {
	f := &fakeProbes{}
	p := Prober{Run: f.run, LookPath: installed("/x/my-agent")}
	mine := Spec{Name: "mine", Headless: []string{"my-agent", "--go", "{prompt}"}}
	d := p.Diagnose(context.Background(), mine)
	if !d.Installed || d.Probed || d.Version != "" || len(d.FlagsChecked) != 0 || len(d.Problems) != 0 {
		t.Errorf("mine: %+v; want installed, not probed, no problem", d)
	}
	if len(f.calls) != 0 {
		t.Errorf("ran a custom program: %q", f.calls)
	}

	// A path names one file: missing and not executable are told apart.
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d = Prober{Run: f.run}.Diagnose(context.Background(), Spec{Name: "custom", Headless: []string{script}})
	if want := []string{"custom: " + script + " is not executable: make it so with chmod +x " + script + ", or fix the command in AGENT_CMD (or [agents.custom] in .ralph/config.toml)"}; !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("not executable: Problems = %q, want %q", d.Problems, want)
	}
	gone := filepath.Join(dir, "gone.sh")
	d = Prober{Run: f.run}.Diagnose(context.Background(), Spec{Name: "custom", Headless: []string{gone}})
	if want := []string{"custom: " + gone + " does not exist: fix the command in AGENT_CMD (or [agents.custom] in .ralph/config.toml)"}; !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("missing: Problems = %q, want %q", d.Problems, want)
	}
	if len(f.calls) != 0 {
		t.Errorf("ran a custom program: %q", f.calls)
	}
}

func TestDiagnoseTimeout(t *testing.T) {
	f := &fakeProbes{answers: map[string]fakeAnswer{
		"gemini --version": {hang: true},
		"gemini --help":    {hang: true},
	}}
	p := Prober{Run: f.run, LookPath: installed("/x/gemini"), Timeout: 50 * time.Millisecond}
	start := time.Now()
	d := p.Diagnose(context.Background(), spec(t, "gemini"))
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Diagnose took %s", el)
	}
	if d.Version != "unknown" {
		t.Errorf("Version = %q, want unknown", d.Version)
	}
	want := []string{"gemini: could not check its flags: `gemini --help` did not finish within 50ms"}
	if !reflect.DeepEqual(d.Problems, want) {
		t.Errorf("Problems = %q, want %q", d.Problems, want)
	}

	// A cancelled caller is not the agent's problem.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d := p.Diagnose(ctx, spec(t, "gemini")); len(d.Problems) != 0 {
		t.Errorf("cancelled: Problems = %q, want none", d.Problems)
	}
}

func TestDiagnoseNotInstalled(t *testing.T) {
	f := &fakeProbes{}
	p := Prober{Run: f.run, LookPath: installed()}
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{spec(t, "codex"), "codex: not installed: install it with npm install -g @openai/codex"},
		{spec(t, "droid"), "droid: not installed: see docs.factory.ai/cli to install droid"},
		{Spec{Name: "mine", Headless: []string{"my-agent"}}, `mine: not installed: "my-agent" is not on PATH; install it or fix the command in [agents.mine] in .ralph/config.toml`},
		{Spec{Name: "custom", Headless: []string{"my-agent"}}, `custom: not installed: "my-agent" is not on PATH; install it or fix the command in AGENT_CMD (or [agents.custom] in .ralph/config.toml)`},
	} {
		d := p.Diagnose(context.Background(), tc.s)
		if d.Installed || d.Path != "" || d.Version != "" || !reflect.DeepEqual(d.Problems, []string{tc.want}) {
			t.Errorf("%s: %+v\nwant problem %q", tc.s.Name, d, tc.want)
		}
	}
	if len(f.calls) != 0 {
		t.Errorf("probed a missing program: %q", f.calls)
	}
}

func TestHeadlessFlagsAndHelpArgv(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		help  string
	}{
		{"codex", []string{"--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"}, "codex exec --help"},
		{"claude", []string{"--output-format", "--verbose", "--dangerously-skip-permissions", "-p"}, "claude --help"},
		{"droid", []string{"--skip-permissions-unsafe", "-o", "-f"}, "droid exec --help"},
		{"opencode", []string{"--format", "--auto"}, "opencode run --help"},
		{"gemini", []string{"-o", "--yolo", "--skip-trust"}, "gemini --help"},
		{"amp", []string{"-x", "--stream-json", "--dangerously-allow-all"}, "amp --help"},
		{"cursor-agent", []string{"-p", "--force", "--output-format"}, "cursor-agent --help"},
		{"copilot", []string{"--allow-all-tools", "--no-ask-user", "-p"}, "copilot --help"},
	} {
		s := spec(t, tc.name)
		if got := HeadlessFlags(s.Headless); !reflect.DeepEqual(got, tc.flags) {
			t.Errorf("%s: HeadlessFlags = %q, want %q", tc.name, got, tc.flags)
		}
		if got := strings.Join(HelpArgv(s.Headless), " "); got != tc.help {
			t.Errorf("%s: HelpArgv = %q, want %q", tc.name, got, tc.help)
		}
	}
	got := HeadlessFlags([]string{"x", "--a=1", "--a", "-", "--file={prompt}", "--", "--after"})
	if want := []string{"--a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("HeadlessFlags = %q, want %q", got, want)
	}
	// A custom agent gets `<program> --help`, unless it runs a built-in
	// program with that program's subcommand.
	if got := strings.Join(HelpArgv([]string{"my-agent", "exec", "--go"}), " "); got != "my-agent --help" {
		t.Errorf("HelpArgv(my-agent) = %q", got)
	}
	if got := strings.Join(HelpArgv([]string{"/opt/codex", "exec", "--json"}), " "); got != "/opt/codex exec --help" {
		t.Errorf("HelpArgv(/opt/codex exec) = %q", got)
	}
}

func TestHelpLists(t *testing.T) {
	help := "  -p, --print\n  --output-format=<f>\n  -f/--file FILE\n  --verbose-log\n  [--yolo]\n"
	for flag, want := range map[string]bool{
		"-p": true, "--print": true, "--output-format": true, "-f": true, "--file": true,
		"--yolo": true, "--verbose": false, "-o": false, "--log": false, "--prin": false,
	} {
		if got := HelpLists(help, flag); got != want {
			t.Errorf("HelpLists(%q) = %v, want %v", flag, got, want)
		}
	}
}

// TestRunProbeKillsOnTimeout runs a real program that outlives its probe.
func TestRunProbeKillsOnTimeout(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "slow-agent")
	pidFile := filepath.Join(dir, "pid")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+pidFile+"\necho started\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Prober{Timeout: 300 * time.Millisecond}
	start := time.Now()
	out, err := p.probe(context.Background(), []string{script, "--version"})
	if !errors.Is(err, errProbeTimeout) {
		t.Fatalf("probe error = %v, want a timeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("probe took %s", el)
	}
	if !strings.Contains(out, "started") {
		t.Errorf("output = %q", out)
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strings.TrimSpace(string(pid))); err == nil {
		t.Errorf("process %s still runs after the timeout", strings.TrimSpace(string(pid)))
	}

	// A real success and a real failure.
	if out, err := p.probe(context.Background(), []string{"sh", "-c", "echo v1.2; echo more"}); err != nil || firstLine(out) != "v1.2" {
		t.Errorf("probe = %q, %v", out, err)
	}
	if _, err := p.probe(context.Background(), []string{"sh", "-c", "exit 3"}); err == nil || err.Error() != "exit status 3" {
		t.Errorf("probe error = %v, want exit status 3", err)
	}
}
