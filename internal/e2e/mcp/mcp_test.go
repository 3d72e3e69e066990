package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/mcpserver"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

const prd = `# PRD: mcp test

### [ ] US-001: Write one
- [ ] one.txt exists

### [ ] US-002: Write two
- [ ] two.txt exists
`

// workspace is a repository with a PRD of two stories and the fake agent
// as its agent, each run of which sleeps agentSleep before its work.
type workspace struct {
	repo, home, gitconfig, scenario string
}

func newWorkspace(t *testing.T, agentSleep string) *workspace {
	t.Helper()
	clitest.NeedGit(t)
	fake, err := exec.LookPath("fakeagent")
	if err != nil {
		t.Fatalf("fakeagent is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	w := &workspace{repo: filepath.Join(dir, "repo"), home: filepath.Join(dir, "home"), scenario: filepath.Join(dir, "scenario.json")}
	w.gitconfig = filepath.Join(w.home, "gitconfig")
	config := fmt.Sprintf("[agent]\ndefault = \"fake\"\ntimeout = \"60s\"\n[build]\nrequire_plan = false\n[agents.fake]\ncommand = [%q]\n", fake)
	for name, content := range map[string]string{
		".agents/tasks/prd.md": prd,
		".ralph/config.toml":   config,
		"README.md":            "# mcp test\n",
	} {
		p := filepath.Join(w.repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(w.home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.gitconfig, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	story := func(id, file string) fakeagent.Invocation {
		return fakeagent.Invocation{Match: "Story: " + id + ":", Steps: []fakeagent.Step{
			{Sleep: agentSleep}, {Write: file, Content: id + "\n"}, {CheckStory: id}, {Final: "done " + id}}}
	}
	if err := fakeagent.WriteScenario(w.scenario, fakeagent.Scenario{Invocations: []fakeagent.Invocation{
		story("US-001", "one.txt"), story("US-002", "two.txt")}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "MCP Test"}, {"config", "user.email", "mcp@example.invalid"},
		{"config", "commit.gpgsign", "false"}, {"add", "-A"}, {"commit", "-q", "-m", "initial"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = w.repo, w.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return w
}

// env is the environment of ralph and git: this process's, away from the
// user's git configuration and agent settings.
func (w *workspace) env() []string {
	return harness.Env("HOME="+w.home, "GIT_CONFIG_GLOBAL="+w.gitconfig, fakeagent.EnvScenario+"="+w.scenario)
}

// syncBuffer is a buffer that a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// client starts `ralph mcp --dir REPO` from another directory, as an
// MCP client's configuration would, and connects the SDK's client to it.
func (w *workspace) client(t *testing.T) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	ralph, err := exec.LookPath("ralph")
	if err != nil {
		t.Fatalf("ralph is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	cmd := exec.Command(ralph, "mcp", "--dir", w.repo)
	cmd.Dir, cmd.Env = t.TempDir(), w.env()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Close waits this long for ralph to end by itself before it signals
	// it: far beyond the bound below, so a ralph that ignored its closed
	// stdin would be told apart from a slow one.
	const terminateAfter = time.Minute
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateAfter}, nil)
	if err != nil {
		t.Fatalf("connect to ralph mcp: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		// Closing the client closes ralph's stdin: the server ends by
		// itself, with no signal.
		start := time.Now()
		cs.Close()
		if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
			t.Errorf("ralph mcp did not end cleanly when its stdin closed: %v\nstderr:\n%s", cmd.ProcessState, stderr)
		} else if d := time.Since(start); d > terminateAfter/2 {
			t.Errorf("ralph mcp took %s to end after its stdin closed", d)
		}
	})
	return cs, stderr
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func statusOf(t *testing.T, cs *mcp.ClientSession) status.Report {
	t.Helper()
	res := call(t, cs, "ralph_status", nil)
	if res.IsError {
		t.Fatalf("ralph_status: %s", text(res))
	}
	var rep status.Report
	structured(t, res, &rep)
	return rep
}

// TestMCP: a client lists the tools, reads the status of a workspace no
// build has run in, gives a hint that lands where `ralph add-context`
// puts one, is told why a pause with no run going cannot be, and reads
// the journal.
func TestMCP(t *testing.T) {
	w := newWorkspace(t, "0s")
	cs, stderr := w.client(t)

	if info := cs.InitializeResult().ServerInfo; info.Name != "ralph" {
		t.Errorf("server name %q, want ralph", info.Name)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"ralph_status", "ralph_board", "ralph_journal_tail", "ralph_hint", "ralph_pause", "ralph_resume", "ralph_answer"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tool %s in %v", want, names)
		}
	}

	rep := statusOf(t, cs)
	if rep.Running || len(rep.Board) != 2 || rep.Board[0].ID != "US-001" || rep.Board[0].Title != "Write one" || rep.Board[1].State != status.StoryTodo {
		t.Errorf("status of a fresh workspace: running %v, board %+v", rep.Running, rep.Board)
	}
	if txt := text(call(t, cs, "ralph_status", nil)); !strings.Contains(txt, "no build has run in this workspace yet") || !strings.Contains(txt, "US-002 Write two") {
		t.Errorf("status text:\n%s", txt)
	}

	res := call(t, cs, "ralph_hint", map[string]any{"text": "keep one.txt short"})
	if res.IsError || !strings.Contains(text(res), "queued for the next iteration's prompt (1 hint waiting)") {
		t.Fatalf("hint: IsError %v, %q", res.IsError, text(res))
	}
	ctxFile, err := os.ReadFile(filepath.Join(w.repo, ".ralph", "context.md"))
	if err != nil || !strings.Contains(string(ctxFile), "mcp) keep one.txt short") {
		t.Errorf(".ralph/context.md after the hint: %q, %v", ctxFile, err)
	}
	journal, _ := os.ReadFile(filepath.Join(w.repo, ".ralph", "events.jsonl"))
	if !bytes.Contains(journal, []byte(`"kind":"control","data":{"by":"mcp","command":"hint","context_added":"keep one.txt short"`)) {
		t.Errorf("the journal has no control event by mcp for the hint:\n%s", journal)
	}

	res = call(t, cs, "ralph_pause", nil)
	if !res.IsError || !strings.Contains(text(res), "no run in this workspace is going, so there is nothing to pause") {
		t.Errorf("pause with no run: IsError %v, %q", res.IsError, text(res))
	}
	res = call(t, cs, "ralph_hint", map[string]any{"text": " "})
	if !res.IsError || !strings.Contains(text(res), "a hint needs its text") {
		t.Errorf("an empty hint: IsError %v, %q", res.IsError, text(res))
	}

	res = call(t, cs, "ralph_journal_tail", map[string]any{"kinds": []string{"control"}})
	var tail mcpserver.Tail
	structured(t, res, &tail)
	if len(tail.Events) != 1 || tail.Events[0].Data.(report.Control).By != "mcp" || !strings.Contains(text(res), `control: hint "keep one.txt short" by mcp (applied)`) {
		t.Errorf("journal tail: %+v\n%s", tail.Events, text(res))
	}
	if !strings.Contains(stderr.String(), "serving over stdio") {
		t.Errorf("ralph mcp logged nothing on stderr:\n%s", stderr)
	}
}

// TestMCPSteersABuild: during a fake-agent build, a pause given over MCP
// holds the run at its next step, the status says so, a hint given
// while it is paused reaches the next prompt, and a resume lets the
// build finish.
func TestMCPSteersABuild(t *testing.T) {
	w := newWorkspace(t, "1500ms")
	cs, _ := w.client(t)

	ralph, _ := exec.LookPath("ralph")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	build := exec.CommandContext(ctx, ralph, "build", "5")
	build.Dir, build.Env = w.repo, w.env()
	out := &syncBuffer{}
	build.Stdout, build.Stderr = out, out
	build.WaitDelay = 10 * time.Second
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- build.Wait() }()
	defer func() {
		cancel()
		<-done
	}()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for !ok() {
			select {
			case err := <-done:
				t.Fatalf("the build ended (%v) before %s:\n%s", err, what, out)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 45s; build output:\n%s", what, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("steerable run", func() bool { return len(statusOf(t, cs).Steerable) > 0 })

	res := call(t, cs, "ralph_pause", nil)
	if res.IsError || !strings.Contains(text(res), "after the current step") {
		t.Fatalf("pause during a build: IsError %v, %q", res.IsError, text(res))
	}
	rep := statusOf(t, cs)
	if rep.Paused == nil || rep.Paused.By != "mcp" {
		t.Errorf("status after the pause: paused %+v, want a pause by mcp", rep.Paused)
	}
	waitFor("pause taken by the run", func() bool {
		res := call(t, cs, "ralph_journal_tail", map[string]any{"n": 50, "kinds": []string{"wait"}})
		return strings.Contains(text(res), "paused by mcp")
	})
	// Held: the run takes the pause at a step boundary, before or
	// between iterations, and starts none while it lasts.
	held := statusOf(t, cs)
	// A hold, not a sync (the journal's pause line above is the sync):
	// the run looks at the pause every 200 ms, so 2 s without a new
	// iteration is what "held" means.
	time.Sleep(2 * time.Second)
	if rep := statusOf(t, cs); rep.Iteration != held.Iteration || rep.Paused == nil {
		t.Fatalf("the run went on while paused: iteration %d then %d, paused %+v\n%s", held.Iteration, rep.Iteration, rep.Paused, out)
	}
	if txt := text(call(t, cs, "ralph_status", nil)); !strings.Contains(txt, "paused by mcp") {
		t.Errorf("status text while paused:\n%s", txt)
	}
	if res := call(t, cs, "ralph_hint", map[string]any{"text": "name the file two.txt"}); res.IsError {
		t.Fatalf("hint while paused: %s", text(res))
	}

	res = call(t, cs, "ralph_resume", nil)
	if res.IsError || !strings.Contains(text(res), "resumed") {
		t.Fatalf("resume: IsError %v, %q", res.IsError, text(res))
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the build failed after the resume: %v\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the build did not finish after the resume:\n%s", out)
	}
	done <- nil // for the deferred wait

	rep = statusOf(t, cs)
	if !rep.Finished || rep.StoriesDone != 2 || rep.Paused != nil {
		t.Errorf("status after the build: finished %v, %d stories done, paused %+v", rep.Finished, rep.StoriesDone, rep.Paused)
	}
	// The hint reaches the first prompt after the pause, and only it.
	for i := 1; i <= 2; i++ {
		prompts, _ := filepath.Glob(filepath.Join(w.repo, ".ralph", "runs", "*", fmt.Sprintf("iter-%d.prompt.md", i)))
		if len(prompts) != 1 {
			t.Fatalf("iteration %d's prompt: %v", i, prompts)
		}
		p, _ := os.ReadFile(prompts[0])
		if got, want := strings.Contains(string(p), "name the file two.txt"), i == held.Iteration+1; got != want {
			t.Errorf("paused after iteration %d: the hint given over MCP in iteration %d's prompt: %v, want %v\nbuild:\n%s", held.Iteration, i, got, want, out)
		}
	}
	res = call(t, cs, "ralph_journal_tail", map[string]any{"n": 500, "kinds": []string{"note"}})
	if !strings.Contains(text(res), "▶ resumed") {
		t.Errorf("the journal does not say the run resumed:\n%s", text(res))
	}
}
