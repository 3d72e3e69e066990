package realagents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/modelserver"
)

// TestRealAgents runs the real `ralph build` with each real agent CLI
// (Claude Code, Codex, opencode, Gemini CLI, as installed by
// scripts/install-agents.sh) as the agent, with the built-in agent's default
// headless argv, against the scripted modelserver: fully offline, in a fresh
// git repository and a fresh HOME per case.
//
// For every CLI it shows that
//
//   - implemented: a story is implemented by the CLI's own shell tool, and
//     ralph verifies, commits and completes it;
//   - false-complete: a COMPLETE with no change is rejected and the loop
//     goes on to complete the story in the next iteration;
//   - usage-limit: a usage limit in the API's own shape makes ralph cool
//     down, wait for the reset and then complete the same task;
//   - prompt-echo: a model that echoes ralph's prompt (which mentions the
//     completion tag inline) does not complete the run;
//   - session: `ralph run "REQUEST"` goes through a whole seed-002 session
//     (planner, executor, reviewer, goal check, each a fresh run of the
//     CLI) whose roles end their final message with a ```json result,
//     and ralph commits the task and completes the session.
//
// A CLI that is not installed fails the test: run bash
// scripts/install-agents.sh first.
func TestRealAgents(t *testing.T) {
	ralph, bin := realSetup(t)

	var mu sync.Mutex
	var summary []string
	t.Cleanup(func() {
		sort.Strings(summary)
		t.Logf("summary (CLI × case: result, wall time):\n%s", strings.Join(summary, "\n"))
	})
	for _, a := range realAgentTable {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range realAgentCases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					start := time.Now()
					t.Cleanup(func() {
						res := "PASS"
						if t.Failed() {
							res = "FAIL"
						}
						mu.Lock()
						summary = append(summary, fmt.Sprintf("  %-8s × %-14s %s %s", a.name, c.name, res, time.Since(start).Round(100*time.Millisecond)))
						mu.Unlock()
					})
					turns, reset := c.script(a)
					r := newRealRun(t, a, ralph, bin, turns, c.limit, false)
					r.reset = reset
					c.run(t, r)
				})
			}
		})
	}
}

// realSetup finds ralph (the test binary) and the directory of the real
// CLIs, and fails the test when git, node or a CLI is missing.
func realSetup(t *testing.T) (ralph, bin string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the real agents' tests need git on PATH: install it (apt-get install git)")
	}
	ralph, err := exec.LookPath("ralph")
	if err != nil {
		t.Fatalf("ralph is not on PATH (testscript.Main should have put the test binary there): %v", err)
	}
	bin = realAgentsBin(t)
	for _, a := range realAgentTable {
		if _, err := os.Stat(filepath.Join(bin, a.name)); err != nil {
			t.Fatalf("the real %s CLI is not installed in %s (%v): run `bash scripts/install-agents.sh` from the repository root", a.name, bin, err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: the agent CLIs need Node.js 20+ (see `bash scripts/install-agents.sh`)")
	}
	return ralph, bin
}

// realAgent is one real CLI as ralph's agent.
type realAgent struct {
	name string
	// env is the modelserver environment for the CLI; limit is set for the
	// usage-limit case.
	env func(home, url string, limit bool) ([]string, error)
	// outside lists the other hosts (host:port) the CLI is known to try
	// (see modelserver's realcli_test.go); any other one fails the test.
	outside []string
	// limitTurns are the first turns of the usage-limit case: the CLI
	// must give up on them at once with a limit ralph can read. reset is
	// the reset time the turns announce in a form ralph reads, or zero.
	limitTurns func() (turns []modelserver.Turn, reset time.Time)
	// limitSource is the LimitWait.Source ralph must record for the limit:
	// "event" (structured) or "" for any.
	limitSource string
	// usage says whether the CLI reports token usage in its stream.
	usage bool
}

var realAgentTable = []realAgent{
	{
		name: "claude",
		env: func(home, url string, limit bool) ([]string, error) {
			env := modelserver.ClaudeEnv(home, url)
			if limit {
				// With an OAuth token (a subscription) Claude Code reads
				// the anthropic-ratelimit-unified-* headers, does not
				// retry and reports a rate_limit_event with resetsAt
				// (modelserver/doc.go); with an API key it retries.
				env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") })
				env = append(env, "CLAUDE_CODE_OAUTH_TOKEN=dummy")
			}
			return env, nil
		},
		limitTurns: func() ([]modelserver.Turn, time.Time) {
			reset := time.Unix(time.Now().Add(8*time.Second).Unix(), 0)
			return []modelserver.Turn{{Status: 429, Headers: map[string]string{
				"anthropic-ratelimit-unified-status":               "rejected",
				"anthropic-ratelimit-unified-reset":                strconv.FormatInt(reset.Unix(), 10),
				"anthropic-ratelimit-unified-representative-claim": "five_hour",
			}}}, reset
		},
		limitSource: "event",
		usage:       true,
	},
	{
		name: "codex",
		env: func(home, url string, _ bool) ([]string, error) {
			env, err := modelserver.CodexEnv(home, url)
			if err != nil {
				return nil, err
			}
			// ralph's default argv for codex has no --disable plugins
			// --disable apps (which realcli_test.go passes); without them
			// Codex 0.169 tries github.com, api.github.com and chatgpt.com.
			// The same switches in the config file keep the argv as is.
			f, err := os.OpenFile(filepath.Join(home, ".codex", "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			_, err = f.WriteString("\n[features]\nplugins = false\napps = false\n")
			return env, err
		},
		limitTurns: func() ([]modelserver.Turn, time.Time) {
			// Codex does not retry usage_limit_reached (a plain 429 it
			// retries 5 times). Codex 0.169 says "You’ve hit your usage
			// limit. Try again later." whatever resets_in_seconds says, so
			// ralph rests for limit_cooldown.
			return []modelserver.Turn{{Status: 429,
				Body: `{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":5}}`}}, time.Time{}
		},
		limitSource: "event",
		usage:       true,
	},
	{
		name: "opencode",
		env: func(home, url string, _ bool) ([]string, error) {
			return modelserver.OpencodeEnv(home, url)
		},
		outside: []string{"registry.npmjs.org:443"},
		limitTurns: func() ([]modelserver.Turn, time.Time) {
			// With retry-after: 0 opencode gives up after 8 requests in
			// about 4 s; each request consumes a turn. Too many 429s here
			// would only mean a second limit in the next run.
			var turns []modelserver.Turn
			for range 8 {
				turns = append(turns, modelserver.Turn{Status: 429, Headers: map[string]string{"retry-after": "0"}})
			}
			return turns, time.Time{}
		},
		limitSource: "event",
		usage:       true,
	},
	{
		name: "gemini",
		env: func(home, url string, _ bool) ([]string, error) {
			return modelserver.GeminiEnv(home, url)
		},
		limitTurns: func() ([]modelserver.Turn, time.Time) {
			// A daily quota is terminal for Gemini CLI: one request, exit
			// 173 (a plain RESOURCE_EXHAUSTED it retries for minutes).
			return []modelserver.Turn{{Status: 429, Body: `{"error":{"code":429,` +
				`"message":"You exceeded your current quota, please check your plan and billing details. Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0",` +
				`"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[` +
				`{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier",` +
				`"quotaDimensions":{"location":"global","model":"gemini-2.5-pro"}}]}]}}`}}, time.Time{}
		},
		// Gemini CLI 0.61 reports the quota error as a result event with
		// error {"type":"unknown","message":"[API Error: ... Quota
		// exceeded ...]"} and no code; ralph reads the API's quota wording
		// in that structured event, so the source is still "event".
		limitSource: "event",
		usage:       true,
	},
}

// implementCmd is what the model has the CLI's shell tool run: it creates
// a.txt and checks the story and its criterion in the PRD.
const implementCmd = `echo a > a.txt && sed -i 's/^### \[ \] US-001/### [x] US-001/; s/^- \[ \] a.txt/- [x] a.txt/' .agents/tasks/prd.md`

// implementTurns implement the story and then claim completion.
func implementTurns() []modelserver.Turn {
	return []modelserver.Turn{modelserver.Tool(implementCmd), modelserver.Text("done\n<promise>COMPLETE</promise>")}
}

// The session case: one request, one task, each role one fresh run of the
// CLI.
const (
	realSessionRequest = "Write greet.txt saying hello"
	realSessionTask    = "Write greet.txt"
	// realSessionCmd is what the executor has the CLI's shell tool run. The
	// check of realConfig (test -f a.txt) stays, so the task's work also
	// makes a.txt for ralph's check to pass.
	realSessionCmd = `printf 'hello\n' > greet.txt && echo a > a.txt`
)

// realSessionTurns are the model's turns of a session, in the order ralph runs
// the roles; realSessionRoles names the role that consumes each turn. Every
// final text ends with its result in a ```json block, as the role prompts
// ask.
func realSessionTurns() []modelserver.Turn {
	return []modelserver.Turn{
		// planner (Mode: INITIALIZE)
		modelserver.Text("One task: write the file.\n\n```json\n" +
			`{"status": "completed", "summary": "greet.txt with hello", "tasks": [{"title": "` + realSessionTask + `", "criteria": ["greet.txt says hello"]}], "questions": [], "blockers": []}` +
			"\n```"),
		// executor: the shell tool writes the files, then the result
		modelserver.Tool(realSessionCmd),
		modelserver.Text("I wrote greet.txt.\n\n```json\n" +
			`{"status": "completed", "summary": "wrote hello to greet.txt", "blockers": [], "new_tasks": [], "new_requirements": false}` +
			"\n```"),
		// reviewer
		modelserver.Text("greet.txt says hello.\n\n```json\n" +
			`{"verdict": "Qualified", "summary": "greet.txt says hello", "reasons": [], "new_tasks": []}` +
			"\n```"),
		// goal check
		modelserver.Text("The request is done.\n\n```json\n" +
			`{"status": "passed", "summary": "greet.txt says hello", "reasons": [], "new_tasks": []}` +
			"\n```"),
	}
}

var realSessionRoles = []string{"planner", "executor", "executor", "reviewer", "goal-check"}

type realAgentCase struct {
	name string
	// limit marks the usage-limit case, whose environment may differ.
	limit bool
	// script returns the model's turns and the reset time they announce
	// (zero for none).
	script func(a realAgent) ([]modelserver.Turn, time.Time)
	run    func(t *testing.T, r *realRun)
}

var realAgentCases = []realAgentCase{
	{
		name:   "implemented",
		script: func(realAgent) ([]modelserver.Turn, time.Time) { return implementTurns(), time.Time{} },
		run: func(t *testing.T, r *realRun) {
			r.build(t)
			r.wantCompleted(t)
			it := r.iteration(t, 1)
			r.wantDone(t, it)
			if r.exists(2) {
				t.Errorf("an iteration 2 ran after the story was done:\n%s", r.stdout)
			}
			if n := r.srv.Consumed(); n != 2 {
				t.Errorf("the CLI consumed %d turns, want 2 (tool call, final text)", n)
			}
		},
	},
	{
		name: "false-complete",
		script: func(realAgent) ([]modelserver.Turn, time.Time) {
			return append([]modelserver.Turn{modelserver.Text("<promise>COMPLETE</promise>")}, implementTurns()...), time.Time{}
		},
		run: func(t *testing.T, r *realRun) {
			r.build(t)
			it1 := r.iteration(t, 1)
			if it1.Status != "no_changes" {
				t.Errorf("iteration 1 status = %q (%s), want no_changes", it1.Status, it1.Reason)
			}
			if !slices.Contains(it1.Signals, "COMPLETE") || it1.SignalAccepted {
				t.Errorf("iteration 1 signals %v accepted %v, want COMPLETE not accepted", it1.Signals, it1.SignalAccepted)
			}
			r.wantFile(t, ".ralph/errors.log", `iteration 1 \(US-001\): signal rejected: the agent said COMPLETE but 1 story is not done`)
			r.wantStdout(t, `signal rejected`)
			r.wantCompleted(t)
			r.wantDone(t, r.iteration(t, 2))
		},
	},
	{
		name:  "usage-limit",
		limit: true,
		script: func(a realAgent) ([]modelserver.Turn, time.Time) {
			turns, reset := a.limitTurns()
			return append(turns, implementTurns()...), reset
		},
		run: func(t *testing.T, r *realRun) {
			r.build(t)
			r.wantStdout(t, `⏸ `+r.agent.name+` hit a usage limit: cooling down until \d\d:\d\d:\d\d`)
			r.wantStdout(t, `all agents are limited \(`+r.agent.name+` until \d\d:\d\d:\d\d\); waiting for the earliest reset`)
			r.wantStdout(t, `… waiting for a usage limit to reset: \d+s left`)
			r.wantFile(t, ".ralph/errors.log", `agent `+r.agent.name+` hit a usage limit \(.+\): cooling down until`)
			r.wantCompleted(t)
			it := r.iteration(t, 1)
			r.wantDone(t, it)
			if len(it.LimitWaits) == 0 {
				t.Errorf("iteration 1 has no limit_waits")
			}
			for i, w := range it.LimitWaits {
				t.Logf("limit wait: agent %s source %s waited %dms resets_at %s message %q", w.Agent, w.Source, w.WaitedMillis, w.ResetsAt.Format(time.TimeOnly), w.Message)
				if w.Agent != r.agent.name {
					t.Errorf("limit wait of agent %q, want %q", w.Agent, r.agent.name)
				}
				if want := r.agent.limitSource; want != "" && w.Source != want {
					t.Errorf("limit wait %d has source %q, want %q (a structured limit from the CLI's output)", i, w.Source, want)
				}
			}
			if len(it.LimitWaits) > 0 && !r.reset.IsZero() {
				// ralph rests until the announced reset; only when that has
				// already passed when ralph sees the limit does it rest for
				// limit_cooldown (2s) instead.
				got := it.LimitWaits[0].ResetsAt
				if !got.Equal(r.reset) && !got.Add(-2*time.Second).After(r.reset) {
					t.Errorf("the first limit wait resets at %s, want the announced reset %s", got.Format(time.RFC3339), r.reset.Format(time.RFC3339))
				}
			}
			if len(it.LimitWaits) > 0 && it.LimitWaits[len(it.LimitWaits)-1].WaitedMillis <= 0 {
				t.Errorf("the last limit wait records no waiting time")
			}
		},
	},
	{
		name: "prompt-echo",
		script: func(realAgent) ([]modelserver.Turn, time.Time) {
			return append([]modelserver.Turn{{EchoPrompt: true}}, implementTurns()...), time.Time{}
		},
		run: func(t *testing.T, r *realRun) {
			r.build(t)
			it1 := r.iteration(t, 1)
			if it1.Status == "done" || it1.SignalAccepted || len(it1.Signals) > 0 {
				t.Errorf("the echo iteration: status %q, signals %v, accepted %v; want not done and no signal", it1.Status, it1.Signals, it1.SignalAccepted)
			}
			if !strings.Contains(it1.FinalMessage, "<promise>COMPLETE</promise>") {
				t.Errorf("iteration 1's final message does not hold the echoed prompt's inline tag: %.300q", it1.FinalMessage)
			}
			r.wantCompleted(t)
			r.wantDone(t, r.iteration(t, 2))
		},
	},
	{
		name:   "session",
		script: func(realAgent) ([]modelserver.Turn, time.Time) { return realSessionTurns(), time.Time{} },
		run: func(t *testing.T, r *realRun) {
			r.session(t, realSessionRequest)
			r.wantStdout(t, `^session \d{6}-\d{6} · agent `+r.agent.name+` · \.ralph/sessions/`)
			r.wantStdout(t, `Planning → Executing \(planner_completed: completed\)`)
			r.wantStdout(t, `Executing → Reviewing \(executor_completed, task-1: completed\)`)
			r.wantStdout(t, `Reviewing → Executing \(reviewer_completed, task-1: Qualified\)`)
			r.wantStdout(t, `Complete → Complete \(holistic_check_passed: passed\)`)
			r.wantStdout(t, `^✓ session \d{6}-\d{6} complete: 1 task done, goal check passed$`)
			if strings.Contains(r.stdout, "gave no valid result") {
				t.Errorf("ralph asked a role again for its result: the ```json result did not reach it intact")
			}
			r.wantFile(t, "greet.txt", `\Ahello\n\z`)
			dir := r.sessionDir(t)
			r.wantFile(t, filepath.Join(dir, "tasks.md"), `^- \[x\] task-1: `+regexp.QuoteMeta(realSessionTask)+`$`)
			r.wantFile(t, filepath.Join(dir, "tasks.md"), `^  - greet\.txt says hello$`)
			r.wantFile(t, filepath.Join(dir, "progress.md"), `^- State: Complete$`)
			r.wantFile(t, filepath.Join(dir, "progress.md"), `^- Done: yes$`)
			r.wantFile(t, filepath.Join(dir, "transitions.jsonl"), `"to":"Complete","trigger":"holistic_check_passed"`)
			subject := "task-1: " + realSessionTask
			subjects := r.git(t, "log", "--format=%s")
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(subject) + `$`).MatchString(subjects) {
				t.Errorf("git log has no commit %q:\n%s", subject, subjects)
			}
			body := r.git(t, "log", "-1", "--format=%B", "--grep", "^"+regexp.QuoteMeta(subject)+"$")
			for _, re := range []string{`^Ralph-Session: ` + regexp.QuoteMeta(filepath.Base(dir)) + `$`, `^Ralph-Task: task-1$`, `^Ralph-Attempt: 1$`} {
				if !regexp.MustCompile(`(?m)` + re).MatchString(body) {
					t.Errorf("ralph's commit does not match %q:\n%s", re, body)
				}
			}
			files := strings.Fields(r.git(t, "log", "-1", "--format=", "--name-only", "--grep", "^"+regexp.QuoteMeta(subject)+"$"))
			if !slices.Contains(files, "greet.txt") {
				t.Errorf("ralph's commit does not hold greet.txt: %v", files)
			}
			if st := r.git(t, "status", "--porcelain"); st != "" {
				t.Logf("note: the work tree is not clean after the session:\n%s", st)
			}
			// Each turn went to the role it was written for: no role run
			// was repeated or asked again.
			if n := r.srv.Consumed(); n != len(realSessionRoles) {
				t.Errorf("the CLI consumed %d turns, want %d (planner, executor tool call and result, reviewer, goal check)", n, len(realSessionRoles))
			}
			for _, q := range r.srv.Requests() {
				if q.Turn < 0 || q.Turn >= len(realSessionRoles) {
					continue
				}
				if want := "# Ralph session role: " + realSessionRoles[q.Turn]; !strings.Contains(q.UserText, want) {
					t.Errorf("turn %d went to a request whose prompt lacks %q: %.120q", q.Turn, want, q.UserText)
				}
			}
		},
	},
}

// realRun is one case: a server, a repository, a HOME and ralph's
// environment.
type realRun struct {
	agent realAgent
	srv   *modelserver.Server
	home  string
	work  string
	env   []string
	ralph string
	// reset is the reset time the script announces, zero for none.
	reset  time.Time
	stdout string
	stderr string
	took   time.Duration
}

const realPRD = `# PRD: real agents

### [ ] US-001: Make a.txt
- [ ] a.txt exists
`

func realConfig(agent string) string {
	return `[agent]
default = "` + agent + `"
timeout = "120s"
limit_cooldown = "2s"
[build]
require_plan = false
[[checks]]
name = "a-exists"
kind = "test"
run = "test -f a.txt"
timeout = "10s"
`
}

// newRealRun sets up a case; sandboxed adds a [sandbox] section to the
// config for a run with --sandbox (see sandboxConfig).
func newRealRun(t *testing.T, a realAgent, ralph, bin string, script []modelserver.Turn, limit, sandboxed bool) *realRun {
	t.Helper()
	srv := modelserver.Start(t, script)
	home, work, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	env, err := a.env(home, srv.URL, limit)
	if err != nil {
		t.Fatal(err)
	}
	gitconfig := filepath.Join(home, "gitconfig-global")
	if err := os.WriteFile(gitconfig, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path := strings.Join([]string{bin, filepath.Dir(ralph), os.Getenv("PATH")}, string(os.PathListSeparator))
	env = append(env,
		"PATH="+path,
		"LANG=C.UTF-8",
		// Gemini CLI writes error reports to the temp dir: keep it here.
		"TMPDIR="+tmp,
		"GIT_CONFIG_GLOBAL="+gitconfig,
		"GIT_CONFIG_NOSYSTEM=1",
	)
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	r := &realRun{agent: a, srv: srv, home: home, work: work, env: env, ralph: ralph}
	config := realConfig(a.name)
	if sandboxed {
		tools, err := filepath.EvalSymlinks(filepath.Dir(filepath.Dir(bin)))
		if err != nil {
			t.Fatal(err)
		}
		config += sandboxConfig(a.name, srv.URL, tools)
	}
	for name, content := range map[string]string{
		".agents/tasks/prd.md": realPRD,
		".ralph/config.toml":   config,
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git(t, "init", "-q")
	r.git(t, "config", "user.name", "Real Agents Test")
	r.git(t, "config", "user.email", "real-agents@example.invalid")
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", "initial")
	return r
}

func (r *realRun) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = r.work, r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// build runs `ralph build 3` and fails the test unless it exits 0; it also
// checks that the CLI reached no other host than the known ones.
func (r *realRun) build(t *testing.T) {
	t.Helper()
	r.ralphCmd(t, "build", "3")
}

// session runs `ralph run REQUEST` (a seed-002 session) and fails the test
// unless it exits 0; it also checks that the CLI reached no other host than
// the known ones.
func (r *realRun) session(t *testing.T, request string) {
	t.Helper()
	r.ralphCmd(t, "run", request)
}

// runLimit bounds one ralph command of these tests. A session with
// opencode takes about a minute alone, and more than four on a 2-core
// machine that is busy with other tests under -race.
const runLimit = 8 * time.Minute

// ralphCmd runs ralph with args in the repository, in its own process
// group (killed whole after runLimit), and fails the test unless it exits
// 0; it also checks that the CLI reached no other host than the known ones.
func (r *realRun) ralphCmd(t *testing.T, args ...string) {
	t.Helper()
	what := "ralph " + strings.Join(args, " ")
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.ralph, args...)
	cmd.Dir, cmd.Env = r.work, r.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r.took = time.Since(start)
	r.stdout, r.stderr = stdout.String(), stderr.String()
	t.Logf("%s with %s: exit %d after %s, %d requests, %d turns consumed", what, r.agent.name, realExitCode(err), r.took.Round(100*time.Millisecond), len(r.srv.Requests()), r.srv.Consumed())
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() && os.Getenv("RALPH_REAL_AGENTS_DUMP") != "" {
			r.dump(t)
		}
	})
	for _, q := range r.srv.Requests() {
		if q.API == "proxy" && !slices.Contains(r.agent.outside, q.Path) {
			t.Errorf("%s tried to reach another host: %s %s", r.agent.name, q.Method, q.Path)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %s", what, runLimit)
	}
	if err != nil {
		t.Fatalf("%s failed: %v (exit %d)", what, err, realExitCode(err))
	}
}

// sessionDir is the folder of the one session `ralph run` made, relative
// to the repository.
func (r *realRun) sessionDir(t *testing.T) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(r.work, ".ralph", "sessions", "*", "progress.md"))
	if len(m) != 1 {
		t.Fatalf("want one .ralph/sessions/*/progress.md, found %v", m)
	}
	rel, err := filepath.Rel(r.work, filepath.Dir(m[0]))
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// dump logs what the server saw, ralph's output and its logs.
func (r *realRun) dump(t *testing.T) {
	for i, q := range r.srv.Requests() {
		t.Logf("request %d: %s %s?%s api=%s model=%s turn=%d aux=%v toolResult=%v status=%d user=%.60q",
			i, q.Method, q.Path, q.Query, q.API, q.Model, q.Turn, q.Auxiliary, q.ToolResult, q.Status, q.UserText)
	}
	t.Logf("stdout:\n%s", realTail(r.stdout, 8000))
	t.Logf("stderr:\n%s", realTail(r.stderr, 4000))
	if b, err := os.ReadFile(filepath.Join(r.work, ".ralph", "errors.log")); err == nil {
		t.Logf("errors.log:\n%s", realTail(string(b), 4000))
	}
	logs, _ := filepath.Glob(filepath.Join(r.work, ".ralph", "runs", "*", "iter-*.log"))
	// A session's role runs: their raw output, and the final message ralph
	// parsed is in it.
	roleLogs, _ := filepath.Glob(filepath.Join(r.work, ".ralph", "sessions", "*", "logs", "*.log"))
	for _, l := range append(logs, roleLogs...) {
		b, _ := os.ReadFile(l)
		if os.Getenv("RALPH_REAL_AGENTS_DUMP") == "full" {
			t.Logf("%s:\n%s", filepath.Base(l), b)
			continue
		}
		t.Logf("%s:\n%s", filepath.Base(l), realClip(string(b), 3000, 4000))
	}
	if p, _ := filepath.Glob(filepath.Join(r.work, ".ralph", "sessions", "*", "progress.md")); len(p) > 0 {
		b, _ := os.ReadFile(p[0])
		t.Logf("progress.md:\n%s", realTail(string(b), 3000))
	}
}

func (r *realRun) wantStdout(t *testing.T, re string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)` + re).MatchString(r.stdout) {
		t.Errorf("ralph's stdout does not match %q", re)
	}
}

func (r *realRun) wantFile(t *testing.T, name, re string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.work, name))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if !regexp.MustCompile(`(?m)` + re).Match(b) {
		t.Errorf("%s does not match %q:\n%s", name, re, realTail(string(b), 2000))
	}
}

// wantCompleted checks the end of a successful run: the completion line,
// the checked PRD and ralph's commit with its trailers.
func (r *realRun) wantCompleted(t *testing.T) {
	t.Helper()
	r.wantStdout(t, `^<promise>COMPLETED</promise>$`)
	r.wantStdout(t, `✓ iteration \d: US-001 done and verified · commit [0-9a-f]{7}`)
	r.wantFile(t, ".agents/tasks/prd.md", `^### \[x\] US-001: Make a\.txt$`)
	r.wantFile(t, ".agents/tasks/prd.md", `^- \[x\] a\.txt exists$`)
	r.wantFile(t, "a.txt", `^a$`)
	subjects := r.git(t, "log", "--format=%s")
	if !regexp.MustCompile(`(?m)^US-001: Make a\.txt$`).MatchString(subjects) {
		t.Errorf("git log has no commit \"US-001: Make a.txt\":\n%s", subjects)
	}
	body := r.git(t, "log", "-1", "--format=%B", "--grep", "^US-001: Make a.txt$")
	if !regexp.MustCompile(`(?m)^Ralph-Task: US-001$`).MatchString(body) {
		t.Errorf("ralph's commit has no Ralph-Task trailer:\n%s", body)
	}
	files := r.git(t, "log", "-1", "--format=", "--name-only", "--grep", "^US-001: Make a.txt$")
	for _, f := range strings.Fields(files) {
		if f != "a.txt" && f != ".agents/tasks/prd.md" && !strings.HasPrefix(f, ".ralph/") {
			t.Logf("note: ralph's commit holds a file the story did not ask for: %s", f)
		}
	}
	if st := r.git(t, "status", "--porcelain"); st != "" {
		t.Logf("note: the work tree is not clean after the run:\n%s", st)
	}
}

// realIteration is the part of iter-N.json the tests read.
type realIteration struct {
	Iteration      int      `json:"iteration"`
	Agent          string   `json:"agent"`
	Status         string   `json:"status"`
	Reason         string   `json:"reason"`
	ExitCode       int      `json:"exit_code"`
	Signals        []string `json:"signals"`
	SignalAccepted bool     `json:"signal_accepted"`
	FinalMessage   string   `json:"final_message"`
	Tokens         struct {
		Input      int64 `json:"input"`
		Output     int64 `json:"output"`
		CacheRead  int64 `json:"cache_read"`
		CacheWrite int64 `json:"cache_write"`
	} `json:"tokens"`
	LimitWaits []struct {
		Agent        string    `json:"agent"`
		Message      string    `json:"message"`
		ResetsAt     time.Time `json:"resets_at"`
		Source       string    `json:"source"`
		WaitedMillis int64     `json:"waited_ms"`
	} `json:"limit_waits"`
}

func (r *realRun) iterFiles(n int) []string {
	m, _ := filepath.Glob(filepath.Join(r.work, ".ralph", "runs", "*", fmt.Sprintf("iter-%d.json", n)))
	return m
}

func (r *realRun) exists(n int) bool { return len(r.iterFiles(n)) > 0 }

func (r *realRun) iteration(t *testing.T, n int) realIteration {
	t.Helper()
	files := r.iterFiles(n)
	if len(files) != 1 {
		t.Fatalf("want one .ralph/runs/*/iter-%d.json, found %v", n, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var it realIteration
	if err := json.Unmarshal(b, &it); err != nil {
		t.Fatalf("iter-%d.json: %v", n, err)
	}
	t.Logf("iter-%d.json: status %s agent %s exit %d signals %v accepted %v tokens %+v limit_waits %d",
		n, it.Status, it.Agent, it.ExitCode, it.Signals, it.SignalAccepted, it.Tokens, len(it.LimitWaits))
	return it
}

// wantDone checks an iteration that implemented the story.
func (r *realRun) wantDone(t *testing.T, it realIteration) {
	t.Helper()
	if it.Status != "done" {
		t.Errorf("iteration %d status = %q (%s), want done", it.Iteration, it.Status, it.Reason)
	}
	if it.Agent != r.agent.name {
		t.Errorf("iteration %d agent = %q, want %q", it.Iteration, it.Agent, r.agent.name)
	}
	if !it.SignalAccepted {
		t.Errorf("iteration %d: the COMPLETE signal was not accepted (signals %v)", it.Iteration, it.Signals)
	}
	if r.agent.usage && it.Tokens.Input+it.Tokens.Output <= 0 {
		t.Errorf("iteration %d records no token usage: %+v", it.Iteration, it.Tokens)
	}
}

// realAgentsBin is the directory scripts/install-agents.sh installs the CLIs
// into.
func realAgentsBin(t *testing.T) string {
	t.Helper()
	root, err := clitest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, ".tools", "agents", "node_modules", ".bin")
}

func realExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// realClip keeps the first head and the last tail bytes of s.
func realClip(s string, head, tail int) string {
	if len(s) <= head+tail {
		return s
	}
	return s[:head] + "\n[...]\n" + s[len(s)-tail:]
}

func realTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
