package modelserver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// realCLI is how one real agent CLI runs headless against the server.
type realCLI struct {
	name string
	args []string
	// env builds the CLI's environment for home and the server's URL.
	env func(home, baseURL string) ([]string, error)
	// api is the API the CLI calls.
	api string
	// outside lists the other hosts (host:port) the CLI is known to try;
	// the server refuses them. Any other attempt fails the test.
	outside []string
}

// The prompt goes on stdin for all four: claude -p reads it when there is no
// prompt argument, codex exec reads it for the argument "-", opencode run
// takes piped stdin as the message, and gemini runs headless when stdin is
// not a terminal and takes stdin as the prompt (no -p).
const realPrompt = "Create the file marker.txt, then say you are done."

var realCLIs = []realCLI{
	{
		name: "claude",
		args: []string{"-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"},
		env:  func(h, u string) ([]string, error) { return ClaudeEnv(h, u), nil },
		api:  "anthropic",
	},
	{
		name: "codex",
		args: []string{"exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check",
			"-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
			"--disable", "plugins", "--disable", "apps", "-"},
		env: CodexEnv,
		api: "responses",
	},
	{
		name: "opencode",
		args: []string{"run", "--format", "json", "--auto"},
		env:  OpencodeEnv,
		api:  "chat",
		// opencode installs @opencode-ai/plugin into its config directory
		// in the background; the run does not wait for it.
		outside: []string{"registry.npmjs.org:443"},
	},
	{
		name: "gemini",
		args: []string{"-m", GeminiModel, "-o", "stream-json", "--yolo", "--skip-trust"},
		env:  GeminiEnv,
		api:  "gemini",
	},
}

// TestRealCLIsTalkToTheServer runs each real CLI installed by
// scripts/install-agents.sh once, headless, against a script of one shell
// tool call and a final text, and checks that the CLI ran the tool and
// printed the text. The CLIs are real components: without them the test
// fails (make test installs them); RALPH_SKIP_REAL_AGENTS=1 opts out
// explicitly, for a quick inner loop.
func TestRealCLIsTalkToTheServer(t *testing.T) {
	if os.Getenv("RALPH_SKIP_REAL_AGENTS") == "1" {
		t.Skip("RALPH_SKIP_REAL_AGENTS=1: the real agent CLIs are not run")
	}
	bin := filepath.Join(repoRoot(t), ".tools", "agents", "node_modules", ".bin")
	for _, c := range realCLIs {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(bin, c.name)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("%s is not installed (%v): run bash scripts/install-agents.sh (make test does it)", c.name, err)
			}
			s := Start(t, []Turn{Tool("echo hi > marker.txt"), Text("done\n<promise>COMPLETE</promise>")})
			home, work := t.TempDir(), t.TempDir()
			env, err := c.env(home, s.URL)
			if err != nil {
				t.Fatal(err)
			}
			// Gemini CLI writes error reports to the temp dir: keep it here.
			env = append(env, "PATH="+os.Getenv("PATH"), "LANG=C.UTF-8", "TMPDIR="+t.TempDir())

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, path, c.args...)
			cmd.Dir = work
			cmd.Env = env
			cmd.Stdin = strings.NewReader(realPrompt)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			// Gemini CLI relaunches itself as a child: kill the whole group.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 5 * time.Second
			start := time.Now()
			err = cmd.Run()
			took := time.Since(start)

			reqs := s.Requests()
			var leaks []string
			for _, r := range reqs {
				if r.API == "proxy" {
					leaks = append(leaks, r.Method+" "+r.Path)
				}
			}
			t.Logf("%s: %s, exit %v, %d requests, turns consumed %d, refused outside traffic %v",
				c.name, took.Round(10*time.Millisecond), exitCode(err), len(reqs), s.Consumed(), leaks)
			dump := func() {
				for i, r := range reqs {
					t.Logf("request %d: %s %s?%s api=%s model=%s turn=%d aux=%v toolResult=%v status=%d tools=%v user=%.80q",
						i, r.Method, r.Path, r.Query, r.API, r.Model, r.Turn, r.Auxiliary, r.ToolResult, r.Status, r.Tools, r.UserText)
				}
				t.Logf("stdout:\n%s", tail(stdout.String(), 6000))
				t.Logf("stderr:\n%s", tail(stderr.String(), 6000))
			}
			if ctx.Err() != nil {
				dump()
				t.Fatalf("%s did not finish in time", c.name)
			}
			if err != nil {
				dump()
				t.Fatalf("%s failed: %v", c.name, err)
			}
			got, err := os.ReadFile(filepath.Join(work, "marker.txt"))
			if err != nil || strings.TrimSpace(string(got)) != "hi" {
				dump()
				t.Fatalf("marker.txt = %q, %v: the CLI did not run the tool call", got, err)
			}
			if !strings.Contains(stdout.String(), "COMPLETE") {
				dump()
				t.Fatalf("the output has no COMPLETE")
			}
			var toolResult bool
			for _, r := range reqs {
				if r.API == c.api && r.ToolResult {
					toolResult = true
				}
			}
			if !toolResult {
				dump()
				t.Errorf("no %s request carried the tool result", c.api)
			}
			for _, l := range leaks {
				host := strings.TrimPrefix(l, "CONNECT ")
				if !slices.Contains(c.outside, host) {
					dump()
					t.Errorf("%s tried to reach another host: %s", c.name, l)
				}
			}
			if testing.Verbose() {
				dump()
			}
		})
	}
}

// repoRoot is the directory of go.mod above the package directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
