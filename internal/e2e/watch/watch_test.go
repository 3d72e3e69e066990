package watch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

const prd = `# PRD: watch test

### [ ] US-001: Write one
- [ ] one.txt exists

### [ ] US-002: Write two
- [ ] two.txt exists

### [ ] US-003: Write three
- [ ] three.txt exists
`

// scenario makes each iteration last about two seconds, long enough to
// type a hint and a pause while the build goes.
func scenario() fakeagent.Scenario {
	story := func(id, file string, last bool) fakeagent.Invocation {
		final := "wrote " + file
		if last {
			final += "\n<promise>COMPLETE</promise>"
		}
		return fakeagent.Invocation{Match: "Story: " + id + ":", Steps: []fakeagent.Step{
			{Say: "Working on " + id + ": writing " + file},
			{Sleep: "1s"},
			{Write: file, Content: id + "\n"},
			{Say: "→ tool: Bash sh check.sh"},
			{Sleep: "1s"},
			{CheckStory: id},
			{Final: final},
		}}
	}
	return fakeagent.Scenario{Invocations: []fakeagent.Invocation{
		story("US-001", "one.txt", false), story("US-002", "two.txt", false), story("US-003", "three.txt", true)}}
}

// term is one tmux server of the test's own, with `ralph watch` in it.
type term struct {
	t      *testing.T
	socket string
}

func (tm *term) tmux(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (tm *term) screen() string { return tm.tmux("capture-pane", "-p", "-t", "watch") }

// waitFor waits until the screen matches re, and returns it.
func (tm *term) waitFor(re string, limit time.Duration) string {
	tm.t.Helper()
	rx := regexp.MustCompile(re)
	var s string
	if !wait.Within(limit, func() bool { s = tm.screen(); return rx.MatchString(s) }) {
		tm.t.Fatalf("the screen did not show %q within %s; it shows:\n%s", re, limit, s)
	}
	return s
}

func TestWatchSteersABuild(t *testing.T) {
	clitest.NeedGit(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the watch end-to-end test runs ralph watch in tmux: install tmux (make test installs it)")
	}
	ralph, err := exec.LookPath("ralph")
	if err != nil {
		t.Fatalf("ralph is not on PATH (TestMain's testscript.Main installs it): %v", err)
	}
	fake, err := exec.LookPath("fakeagent")
	if err != nil {
		t.Fatalf("fakeagent is not on PATH: %v", err)
	}
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	repo := filepath.Join(dir, "repo")
	home := filepath.Join(dir, "home")
	scen := filepath.Join(dir, "scenario.json")
	if err := fakeagent.WriteScenario(scen, scenario()); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + filepath.Join(home, "gitconfig"), "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.invalid", "TERM=xterm-256color",
		fakeagent.EnvScenario + "=" + scen, "GORACE=" + clitest.NoExitSleep(), "TZ=UTC"}
	files := map[string]string{
		".agents/tasks/prd.md": prd,
		".ralph/config.toml": fmt.Sprintf("[agent]\ndefault = \"fake\"\ntimeout = \"60s\"\n[build]\nrequire_plan = false\n[memory]\nstore = \"file\"\n[agents.fake]\ncommand = [%q]\n"+
			"[[checks]]\nname = \"tests\"\nrun = \"sh check.sh\"\n", fake),
		"check.sh":                               "#!/bin/sh\nexit 0\n",
		"README.md":                              "# watch test\n",
		filepath.Join("..", "home", "gitconfig"): "",
	}
	for name, content := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) {
		t.Helper()
		c := exec.Command(name, args...)
		c.Dir, c.Env = repo, env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("git", "init", "-q", "-b", "main")
	run("git", "add", "-A")
	run("git", "commit", "-q", "-m", "initial")

	// The viewer starts before the build: it attaches to a workspace
	// where nothing runs yet, then follows the run that starts.
	tm := &term{t: t, socket: fmt.Sprintf("ralph-watch-%d", os.Getpid())}
	t.Cleanup(func() { exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	shell := fmt.Sprintf("env %s NO_COLOR=1 %q watch; echo \"watch exited $?\"; sleep 600", quoteAll(env), ralph)
	tm.tmux("new-session", "-d", "-s", "watch", "-x", "120", "-y", "40", "-c", repo, shell)
	tm.waitFor(`p pause`, wait.Long)

	build := exec.Command(ralph, "build", "10")
	build.Dir, build.Env = repo, env
	var buildOut bytes.Buffer
	build.Stdout, build.Stderr = &buildOut, &buildOut
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	buildDone := make(chan error, 1)
	ended := make(chan struct{})
	go func() { buildDone <- build.Wait(); close(ended) }()
	t.Cleanup(func() {
		select {
		case <-ended:
		default:
			build.Process.Kill()
			<-ended
		}
	})

	tm.waitFor(`● running[\s\S]*Working on US-001`, wait.Long)

	// A hint, typed into the viewer, reaches the next iteration's prompt.
	tm.tmux("send-keys", "-t", "watch", "h")
	tm.waitFor(`hint for the next iteration> `, wait.Long)
	tm.tmux("send-keys", "-t", "watch", "-l", "use the helper")
	tm.tmux("send-keys", "-t", "watch", "Enter")
	tm.waitFor(`✓ hint: queued for the next iteration's prompt`, wait.Long)

	// p pauses: the run takes it at its next step and waits.
	tm.tmux("send-keys", "-t", "watch", "p")
	s := tm.waitFor(`⏸ paused by watch at`, wait.Long)
	for _, want := range []string{"p resume", "control: hint \"use the helper\" by watch", "control: pause by watch"} {
		if !strings.Contains(s, want) {
			t.Errorf("the paused screen does not show %q:\n%s", want, s)
		}
	}
	writeCapture(t, s) // the paused run, with the hint and the pause in its journal
	if !strings.Contains(s, "p resume") {
		t.Errorf("a paused run's key line does not offer to resume:\n%s", s)
	}
	prompts := func() int {
		m, _ := filepath.Glob(filepath.Join(repo, ".ralph", "runs", "*", "iter-*.prompt.md"))
		return len(m)
	}
	before := prompts()
	// A hold, not a sync: the run looks at the pause every 200 ms, so 3 s
	// of no new prompt is what "the run holds" means; the screen said
	// paused above, which is the sync.
	time.Sleep(3 * time.Second)
	if after := prompts(); after != before {
		t.Errorf("the paused run started %d more iterations in 3s", after-before)
	}
	select {
	case err := <-buildDone:
		t.Fatalf("the build ended while paused: %v\n%s", err, buildOut.String())
	default:
	}

	// p again resumes, and the build finishes.
	tm.tmux("send-keys", "-t", "watch", "p")
	tm.waitFor(`✓ resume: resumed`, wait.Long)
	select {
	case err := <-buildDone:
		if err != nil {
			t.Fatalf("ralph build: %v\n%s", err, buildOut.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the build did not finish within 60s of the resume\n%s", buildOut.String())
	}
	final := tm.waitFor(`finished: complete[\s\S]*3/3 done`, wait.Long)

	// The hint was in the prompt of an iteration after it was typed.
	hinted := false
	m, _ := filepath.Glob(filepath.Join(repo, ".ralph", "runs", "*", "iter-*.prompt.md"))
	for _, p := range m {
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("use the helper")) {
			hinted = true
			if strings.HasSuffix(p, "iter-1.prompt.md") {
				t.Errorf("the hint typed during iteration 1 is in iteration 1's prompt: %s", p)
			}
		}
	}
	if !hinted {
		t.Errorf("no iteration's prompt holds the hint typed into ralph watch (%d prompts)", len(m))
	}
	// The journal records each command as given by watch, and the run's
	// pause and resume.
	journal, err := os.ReadFile(filepath.Join(repo, ".ralph", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"command":"hint","context_added":"use the helper"`, `"command":"pause"`, `"command":"resume"`, `⏸ paused by watch`, `▶ resumed`} {
		if !bytes.Contains(journal, []byte(want)) {
			t.Errorf("the journal does not hold %s", want)
		}
	}
	if n := bytes.Count(journal, []byte(`"by":"watch"`)); n < 3 {
		t.Errorf("the journal holds %d commands by watch; want the hint, the pause and the resume", n)
	}
	_ = final

	// q leaves the viewer with exit 0.
	tm.tmux("send-keys", "-t", "watch", "q")
	tm.waitFor(`watch exited 0`, wait.Long)
}

// writeCapture keeps the last screen: in docs/watch.txt for the README
// when RALPH_UPDATE_DOCS=1, else as a test artifact.
func writeCapture(t *testing.T, screen string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(screen, "\n") {
		lines = append(lines, strings.TrimRight(l, " "))
	}
	text := strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n"
	var path string
	if os.Getenv("RALPH_UPDATE_DOCS") == "1" {
		root, err := clitest.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(root, "docs", "watch.txt")
	} else {
		dir := os.Getenv("RALPH_ARTIFACTS")
		if dir == "" {
			dir = t.TempDir()
		}
		path = filepath.Join(dir, "watch.txt")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the final screen of ralph watch is in %s", path)
}

// quoteAll quotes env for the shell tmux runs.
func quoteAll(env []string) string {
	q := make([]string, len(env))
	for i, kv := range env {
		q[i] = "'" + strings.ReplaceAll(kv, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
