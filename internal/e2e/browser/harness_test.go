package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

const prd = `# PRD: serve test

### [ ] US-001: Write one
- [ ] one.txt exists

### [ ] US-002: Write two
- [ ] two.txt says good

### [ ] US-003: Write three
- [ ] three.txt exists
`

// check passes unless two.txt exists and does not say "good": the first
// attempt at US-002 writes "bad", so its check fails once.
const check = `#!/bin/sh
if [ -f two.txt ] && [ "$(cat two.txt)" != "good" ]; then echo "two is broken: $(cat two.txt)"; exit 1; fi
exit 0
`

// scenario is the fake agent's script; each agent run takes pause.
func scenario(pause string) fakeagent.Scenario {
	steps := func(id, final string, file, content string) []fakeagent.Step {
		return []fakeagent.Step{{Say: "working on " + id}, {Sleep: pause}, {Write: file, Content: content + "\n"},
			{Tool: "Bash", Input: "sh check.sh"}, {CheckStory: id}, {Final: final}}
	}
	// Claude stream-json carries token use, which the receipts add up.
	return fakeagent.Scenario{Format: "claude", Invocations: []fakeagent.Invocation{
		{Match: "Your previous attempt at US-002 was sent back", Steps: append([]fakeagent.Step{{Write: "two.fix", Content: "fixed\n"}}, steps("US-002", "fixed two", "two.txt", "good")...)},
		{Match: "Story: US-001:", Steps: steps("US-001", "wrote one", "one.txt", "one")},
		{Match: "Story: US-002:", Steps: steps("US-002", "wrote two", "two.txt", "bad")},
		{Match: "Story: US-003:", Steps: steps("US-003", "wrote three\n<promise>COMPLETE</promise>", "three.txt", "three")},
	}}
}

// repo is one workspace with the fake agent configured.
type repo struct {
	dir, scenario, home string
	ralph               string
}

func newRepo(t *testing.T, pause string) *repo {
	t.Helper()
	clitest.NeedGit(t)
	ralph, err := exec.LookPath("ralph")
	if err != nil {
		t.Fatalf("ralph is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	fake, err := exec.LookPath("fakeagent")
	if err != nil {
		t.Fatalf("fakeagent is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	base := t.TempDir()
	if d, err := filepath.EvalSymlinks(base); err == nil {
		base = d
	}
	r := &repo{dir: filepath.Join(base, "repo"), scenario: filepath.Join(base, "scenario.json"), home: filepath.Join(base, "home"), ralph: ralph}
	config := fmt.Sprintf("[agent]\ndefault = \"fake\"\n[build]\nrequire_plan = false\n[memory]\nstore = \"file\"\n[agents.fake]\ncommand = [%q]\nformat = \"claude\"\n"+
		"[[checks]]\nname = \"tests\"\nrun = \"sh check.sh\"\n", fake)
	files := map[string]string{".agents/tasks/prd.md": prd, ".ralph/config.toml": config, "check.sh": check, "README.md": "# serve test\n", "../home/gitconfig": ""}
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fakeagent.WriteScenario(r.scenario, scenario(pause)); err != nil {
		t.Fatal(err)
	}
	r.git(t, "init", "-q", "-b", "main")
	r.git(t, "config", "user.name", "Serve Test")
	r.git(t, "config", "user.email", "serve@example.invalid")
	r.git(t, "config", "commit.gpgsign", "false")
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", "initial")
	return r
}

// env is the environment of ralph and git: nothing of the user's git
// configuration, and no second of race-runtime sleep at each exit.
func (r *repo) env() []string {
	return harness.Env("HOME="+r.home, "GIT_CONFIG_GLOBAL="+filepath.Join(r.home, "gitconfig"), fakeagent.EnvScenario+"="+r.scenario)
}

func (r *repo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = r.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ralphCmd is ralph with args in the repository.
func (r *repo) ralphCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.ralph, args...)
	cmd.Dir = r.dir
	cmd.Env = r.env()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// server is a `ralph serve` process.
type server struct {
	URL, Token string
	cmd        *exec.Cmd
	stderr     *bytes.Buffer
}

// serve starts `ralph serve --addr 127.0.0.1:0 --json` on the repository
// and reads the address and token it prints. Cleanup interrupts it and
// checks that it shut down cleanly.
func (r *repo) serve(t *testing.T) *server {
	t.Helper()
	cmd := r.ralphCmd(context.Background(), "serve", "--addr", "127.0.0.1:0", "--json")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			cmd.Wait()
			t.Fatalf("ralph serve printed nothing: %s", s.stderr)
		}
		var start struct{ URL, Token string }
		if err := json.Unmarshal([]byte(l), &start); err != nil || start.URL == "" || len(start.Token) != 64 {
			t.Fatalf("ralph serve --json printed %q, want {\"url\":...,\"token\":<64 hex>}", l)
		}
		s.URL, s.Token = strings.TrimSuffix(start.URL, "/"), start.Token
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("ralph serve printed no address within 20s: %s", s.stderr)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ralph serve did not shut down cleanly on Ctrl+C: %v\n%s", err, s.stderr)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("ralph serve still ran 10s after Ctrl+C")
		}
	})
	return s
}

// control posts a command with token (none when empty) and returns the
// HTTP status and the decoded answer.
func (s *server) control(t *testing.T, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+"/api/control", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (s *server) get(t *testing.T, path string, into any) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
