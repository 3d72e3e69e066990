package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
)

// testNow is the fixed clock of the CLI tests.
var testNow = time.Date(2024, time.March, 5, 14, 30, 0, 0, time.UTC)

// isolateGit keeps the machine's git configuration out of the test and
// fails (never skips) when the git binary is missing.
func isolateGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the cli tests but is not in PATH: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

// gitT runs the real git in dir for test setup and checks.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newTestRepo creates an empty git repository and returns its real path.
func newTestRepo(t *testing.T) string {
	t.Helper()
	isolateGit(t)
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	gitT(t, dir, "config", "user.name", "Ralph Test")
	gitT(t, dir, "config", "user.email", "ralph@example.com")
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// notRepoDir returns a directory in which git finds no repository.
func notRepoDir(t *testing.T) string {
	t.Helper()
	isolateGit(t)
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	return dir
}

// untracked lists what `git status` shows in dir, one path per line.
func gitStatus(t *testing.T, dir string) string {
	t.Helper()
	return gitT(t, dir, "status", "--porcelain", "--untracked-files=all")
}

// result is what one ralph command line did.
type result struct {
	code     int
	out, err string
}

// testEnv is an Env with buffers for IO, no environment variables, a fixed
// clock and dir as the working directory.
func testEnv(dir string, in io.Reader, terminal bool) (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	if in == nil {
		in = strings.NewReader("")
	}
	env := &Env{
		IO:         IO{In: in, Out: &out, Err: &errb, InTerminal: terminal},
		Getenv:     func(string) string { return "" },
		WorkDir:    func() (string, error) { return dir, nil },
		Now:        func() time.Time { return testNow },
		Executable: func() (string, error) { return "", errors.New("no executable in tests") },
	}
	return env, &out, &errb
}

// run executes one ralph command line through Run.
func run(t *testing.T, dir string, in io.Reader, terminal bool, args ...string) result {
	t.Helper()
	env, out, errb := testEnv(dir, in, terminal)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := Run(ctx, env, args)
	return result{code: code, out: out.String(), err: errb.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.out, r.err)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestPRDEmptyAnswerCancels(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
	}{
		{"empty line", "\n"},
		{"blank line", "   \n"},
		{"end of input", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newTestRepo(t)
			r := run(t, dir, strings.NewReader(c.in), true, "prd")
			if r.code != ExitOK {
				t.Fatalf("want exit 0 on cancel, got:\n%s", r)
			}
			if !strings.Contains(r.out, "Describe what you want built") {
				t.Errorf("ralph prd did not ask for the request:\n%s", r)
			}
			if !strings.Contains(r.out, "cancelled; nothing was written") {
				t.Errorf("ralph prd did not say it cancelled:\n%s", r)
			}
			if r.err != "" {
				t.Errorf("cancelling printed to stderr:\n%s", r)
			}
			if exists(filepath.Join(dir, ".agents", "tasks", "prd.md")) {
				t.Errorf("a PRD file was written although the user cancelled")
			}
			// "nothing was written" means nothing at all.
			if st := gitStatus(t, dir); st != "" {
				t.Errorf("cancelling left files behind:\n%s", st)
			}
		})
	}
}

func TestPRDWithoutRequestOrTerminalIsUsageError(t *testing.T) {
	dir := newTestRepo(t)
	r := run(t, dir, strings.NewReader("a todo app\n"), false, "prd")
	if r.code != ExitUsage {
		t.Fatalf("want exit 2, got:\n%s", r)
	}
	if !strings.Contains(r.err, "no request given and no terminal to ask on") {
		t.Errorf("stderr does not explain that there is no terminal to ask on:\n%s", r)
	}
	if !strings.Contains(r.err, `ralph prd "what you want built"`) {
		t.Errorf("stderr does not show how to pass the request:\n%s", r)
	}
	if strings.Contains(r.out, "Describe what you want built") {
		t.Errorf("ralph prd prompted although stdin is not a terminal:\n%s", r)
	}
	if st := gitStatus(t, dir); st != "" {
		t.Errorf("a usage error left files behind:\n%s", st)
	}
}

// shAgentConfig makes a custom agent "sh" the default; run interactively,
// it writes a one-story PRD and ignores the prompt.
const shAgentConfig = `[agent]
default = "sh"

[agents.sh]
interactive = ["sh", "-c", "mkdir -p .agents/tasks && printf '### [ ] US-001: Todo\\n- [ ] x\\n' > .agents/tasks/prd.md"]
`

func TestPRDRequestFromTerminalRunsInteractiveAgent(t *testing.T) {
	dir := newTestRepo(t)
	if err := os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".ralph", "config.toml"), []byte(shAgentConfig), 0o644); err != nil {
		t.Fatal(err)
	}

	r := run(t, dir, strings.NewReader("a todo app\n"), true, "prd")
	if r.code != ExitOK {
		t.Fatalf("want exit 0, got:\n%s", r)
	}
	for _, want := range []string{
		"Describe what you want built",
		"starting sh interactively to write .agents/tasks/prd.md",
		"PRD .agents/tasks/prd.md has 1 story (1 open):",
		"[ ] US-001: Todo (1 criterion)",
		"next: ralph plan, then ralph build",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r.out, "cancelled") {
		t.Errorf("a typed request was treated as a cancel:\n%s", r)
	}
	prd, err := os.ReadFile(filepath.Join(dir, ".agents", "tasks", "prd.md"))
	if err != nil || string(prd) != "### [ ] US-001: Todo\n- [ ] x\n" {
		t.Errorf("the agent's PRD = %q, %v", prd, err)
	}
	// The request typed at the prompt is what the agent is asked to do.
	promptFile := filepath.Join(dir, ".ralph", ".tmp", "PROMPT_prd-"+testNow.Format("20060102-150405")+".md")
	text, err := os.ReadFile(promptFile)
	if err != nil {
		t.Fatalf("the PRD prompt file was not written: %v", err)
	}
	if !strings.Contains(string(text), "a todo app") {
		t.Errorf("the prompt does not carry the typed request:\n%s", text)
	}
}

func TestExitCodes(t *testing.T) {
	repo := newTestRepo(t)
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown command", []string{"nonesuch"}, ExitUsage, `unknown command "nonesuch"`},
		{"unknown flag", []string{"build", "--bogus"}, ExitUsage, "unknown flag: --bogus"},
		{"unknown root flag", []string{"--bogus"}, ExitUsage, "unknown flag: --bogus"},
		{"zero iterations", []string{"build", "0"}, ExitUsage, `iterations must be a whole number of at least 1, got "0"`},
		{"word for iterations", []string{"plan", "three"}, ExitUsage, `iterations must be a whole number of at least 1, got "three"`},
		{"too many arguments", []string{"build", "1", "2"}, ExitUsage, "accepts at most 1 arg"},
		{"init takes no arguments", []string{"init", "now"}, ExitUsage, `ralph init takes no arguments, got "now"`},
		{"unknown agent", []string{"build", "--agent", "nonesuch"}, ExitUsage, `unknown agent "nonesuch" (from --agent)`},
		// Every command that takes a task id refuses a blank one the same
		// way, before the workspace is opened.
		{"blank task to unblock", []string{"unblock", " "}, ExitUsage, "unblock takes one task id, for example: ralph unblock US-002"},
		{"blank task to approve", []string{"approve", " "}, ExitUsage, "approve takes one task id, for example: ralph approve US-004"},
		{"blank task to skip", []string{"skip", " "}, ExitUsage, "skip takes one task id, for example: ralph skip US-002"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, repo, nil, false, c.args...)
			if r.code != c.code {
				t.Fatalf("ralph %s: want exit %d, got:\n%s", strings.Join(c.args, " "), c.code, r)
			}
			if r.out != "" {
				t.Errorf("a usage error printed to stdout:\n%s", r)
			}
			lines := strings.Split(strings.TrimRight(r.err, "\n"), "\n")
			// The hint names the help of the command that was run.
			found, _, _ := NewRootCmd(&Env{}).Find(c.args)
			hint := "Run '" + found.CommandPath() + " --help' for usage."
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "ralph: ") || lines[1] != hint {
				t.Fatalf("stderr should be one \"ralph: \" error line and the hint %q:\n%s", hint, r)
			}
			if !strings.Contains(lines[0], c.msg) {
				t.Errorf("stderr lacks %q:\n%s", c.msg, r)
			}
			if n := strings.Count(r.err, c.msg); n != 1 {
				t.Errorf("the error was printed %d times, want once:\n%s", n, r)
			}
		})
	}
	if st := gitStatus(t, repo); st != "" {
		t.Errorf("usage errors left files behind:\n%s", st)
	}
}

func TestNotARepositoryExitsOne(t *testing.T) {
	dir := notRepoDir(t)
	for _, args := range [][]string{{"init"}, {"build"}, {"prd", "a todo app"}} {
		t.Run(args[0], func(t *testing.T) {
			r := run(t, dir, nil, false, args...)
			if r.code != ExitFailure {
				t.Fatalf("ralph %s outside a repository: want exit 1, got:\n%s", strings.Join(args, " "), r)
			}
			if !strings.HasPrefix(r.err, "ralph: ") || !strings.HasSuffix(r.err, "\n") || strings.Count(r.err, "\n") != 1 {
				t.Errorf("stderr should be exactly one \"ralph: \" line:\n%s", r)
			}
			if strings.Count(r.err, "not a git repository") != 1 {
				t.Errorf("stderr should say once that this is not a git repository:\n%s", r)
			}
			if strings.Contains(r.err, "ralph --help") {
				t.Errorf("a failure that is not a usage error points at --help:\n%s", r)
			}
			if exists(filepath.Join(dir, ".ralph")) {
				t.Errorf("ralph created .ralph outside a repository")
			}
		})
	}
}

func TestHelpShowsExitStatus(t *testing.T) {
	isolateGit(t)
	for _, args := range [][]string{{"--help"}, {}} {
		t.Run(strings.Join(append([]string{"ralph"}, args...), " "), func(t *testing.T) {
			r := run(t, t.TempDir(), nil, false, args...)
			if r.code != ExitOK {
				t.Fatalf("want exit 0, got:\n%s", r)
			}
			if r.err != "" {
				t.Errorf("help printed to stderr:\n%s", r)
			}
			for _, cmd := range []string{"init", "prd", "plan", "build", "demo"} {
				if !regexp.MustCompile(`(?m)^\s+` + cmd + `\s`).MatchString(r.out) {
					t.Errorf("help does not list the %s command:\n%s", cmd, r.out)
				}
			}
			i := strings.Index(r.out, "Exit status:")
			if i < 0 {
				t.Fatalf("help lacks the exit status table:\n%s", r.out)
			}
			table := r.out[i:]
			for _, row := range []string{
				`0\s+all done`,
				`1\s+error`,
				`2\s+usage error`,
				`3\s+blocked or stuck`,
				`4\s+iteration limit or a budget reached`,
				`130\s+interrupted`,
			} {
				if !regexp.MustCompile(`(?m)^\s+` + row).MatchString(table) {
					t.Errorf("exit status table lacks the row %q:\n%s", row, table)
				}
			}
		})
	}
}

// TestExitCodeMapping checks the one place that turns errors into exit
// codes for the outcomes the command tests cannot reach cheaply.
func TestExitCodeMapping(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain error", errors.New("disk full"), 1},
		{"usage error, wrapped", fmt.Errorf("ctx: %w", usageErrorf("bad")), 2},
		{"needs a human", &ExitError{Code: ExitNeedsHuman, Msg: "stuck"}, 3},
		{"limit", &ExitError{Code: ExitLimit, Msg: "limit"}, 4},
		{"interrupted", fmt.Errorf("iteration 2: %w", loop.ErrInterrupted), 130},
		{"unknown agent from --agent", &agent.UnknownError{Name: "x", Source: "--agent"}, 2},
		{"unknown agent from config", &agent.UnknownError{Name: "x", Source: "config"}, 1},
		{"cobra argument error", errors.New("accepts at most 1 arg(s), received 2"), 2},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}

func TestBuildFlagsParseIntoOptions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want BuildOptions
	}{
		{[]string{"7", "--agent", "claude", "--prd", "x.md", "--no-commit"},
			BuildOptions{MaxIterations: 7, Agent: "claude", PRD: "x.md", prdTyped: true, NoCommit: true}},
		{[]string{"--agent=codex", "3"},
			BuildOptions{MaxIterations: 3, Agent: "codex"}},
		{nil, BuildOptions{}},
	} {
		env, out, errb := testEnv(t.TempDir(), nil, false)
		var got *BuildOptions
		cmd := newBuildCmd(env, func(o *BuildOptions) error { got = o; return nil })
		cmd.SetArgs(c.args)
		cmd.SetOut(out)
		cmd.SetErr(errb)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("build %v: %v", c.args, err)
		}
		if got == nil {
			t.Fatalf("build %v: the run function was not called", c.args)
		}
		if got.Env != env {
			t.Errorf("build %v: options lost the Env", c.args)
		}
		got.Env = nil
		if *got != c.want {
			t.Errorf("build %v: options = %+v, want %+v", c.args, *got, c.want)
		}
	}
}

func TestPlanFlagsParseIntoOptions(t *testing.T) {
	env, out, errb := testEnv(t.TempDir(), nil, false)
	var got *BuildOptions
	cmd := newPlanCmd(env, func(o *BuildOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"2", "--agent", "gemini", "--prd", "docs/prd.md"})
	cmd.SetOut(out)
	cmd.SetErr(errb)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.MaxIterations != 2 || got.Agent != "gemini" || got.PRD != "docs/prd.md" || got.NoCommit {
		t.Errorf("plan options = %+v", got)
	}
	// plan is read-only and has no --no-commit.
	cmd = newPlanCmd(env, func(*BuildOptions) error { return nil })
	cmd.SetArgs([]string{"--no-commit"})
	cmd.SetOut(out)
	cmd.SetErr(errb)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "unknown flag: --no-commit") {
		t.Errorf("plan --no-commit: err = %v, want unknown flag", err)
	}
}

func TestPRDRequestFromArguments(t *testing.T) {
	env, _, _ := testEnv(t.TempDir(), nil, true)
	var got *PRDOptions
	cmd := newPRDCmd(env, func(o *PRDOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--out", "docs/prd.md", "a", "todo", "app", "--agent", "claude"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Request != "a todo app" || got.Out != "docs/prd.md" || got.Agent != "claude" {
		t.Errorf("prd options = %+v", got)
	}
}

// The agents' names come from the agent registry only (issue 27): the
// config ralph init writes, build's --agent help and the demo's closing
// words each name every built-in agent, so a new agent is listed
// everywhere by being added to the registry.
func TestAgentNamesComeFromTheRegistry(t *testing.T) {
	dir := newTestRepo(t)
	if r := run(t, dir, nil, false, "init"); r.code != 0 {
		t.Fatalf("ralph init: %v", r)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, ".ralph", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	help := run(t, dir, nil, false, "build", "--help")
	for _, name := range agent.Names(nil) {
		if !strings.Contains(string(cfg), name) {
			t.Errorf("the config ralph init writes does not name the agent %q:\n%s", name, cfg)
		}
		if !strings.Contains(help.out, name) {
			t.Errorf("build --help does not name the agent %q:\n%s", name, help.out)
		}
	}
}
