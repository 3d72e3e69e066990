package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

// The machine that runs the agents decides their containment: a `ralph
// worker --sandbox bwrap` runs a build's task (the Work activity), a
// session and a thread on Temporal, whose agents each try to copy a
// planted ~/.ssh/id_ed25519 into their work tree and to append to a file
// outside it. Every try fails, and the story, the session and the thread
// still get done, since none depends on them. The same worker started
// again without --sandbox runs one more of each with the same agent, and
// every theft succeeds: it is the worker's sandbox that stopped them.
func TestFleetWorkerSandboxConfinesTheAgents(t *testing.T) {
	r := newFleetRun(t)
	r.startServer()
	agentDir := filepath.Join(r.Dir, "agent") // the scenario and its use counts: writable inside
	victim := filepath.Join(r.Dir, "outside", "victim.txt")
	key := filepath.Join(r.Dir, "home", ".ssh", "id_ed25519")
	r.WriteFiles(r.Dir, map[string]string{
		"outside/victim.txt":   "original\n",
		"home/.ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted by the test\n-----END OPENSSH PRIVATE KEY-----\n",
	})
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	r.scenario = filepath.Join(agentDir, "scenario.json")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	steal := func(into string) []fakeagent.Step {
		return []fakeagent.Step{
			{Run: `cp "$HOME/.ssh/id_ed25519" ` + into, IgnoreError: true},
			{Run: "echo escaped >> " + victim, IgnoreError: true},
		}
	}
	var sc fakeagent.Scenario
	sc.Format = "claude"
	for _, s := range stories[:2] {
		sc.Invocations = append(sc.Invocations, fakeagent.Invocation{Match: "Story: " + s.id + ":", Steps: append(steal("stolen-"+s.file),
			fakeagent.Step{Write: s.file, Content: s.id + "\n"}, fakeagent.Step{CheckStory: s.id}, fakeagent.Step{Final: s.id + " done"})})
	}
	sc.Invocations = append(sc.Invocations,
		fakeagent.Invocation{Match: "Story: TH-1:", Steps: append(steal("stolen-by-thread.txt"),
			fakeagent.Step{Write: "th.txt", Content: "th\n"}, fakeagent.Step{CheckStory: "TH-1"}, fakeagent.Step{Final: "<promise>COMPLETE</promise>"})},
		fakeagent.Invocation{Match: "Mode: INITIALIZE", Steps: []fakeagent.Step{
			{Final: "```json\n{\"status\": \"completed\", \"tasks\": [{\"title\": \"Paint it\"}]}\n```"}}},
		fakeagent.Invocation{Match: "Execute task-1", Steps: append(steal("stolen-by-session.txt"),
			fakeagent.Step{Append: "fence.txt", Content: "blue\n"}, fakeagent.Step{Final: "```json\n{\"status\": \"completed\"}\n```"})},
		fakeagent.Invocation{Match: "Review task-1", Steps: []fakeagent.Step{{Final: "```json\n{\"verdict\": \"Qualified\"}\n```"}}},
		fakeagent.Invocation{Match: "# Ralph session role: goal-check", Steps: []fakeagent.Step{{Final: "```json\n{\"status\": \"passed\"}\n```"}}},
	)
	if err := fakeagent.WriteScenario(r.scenario, sc); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`[agent]
default = "fake"
timeout = "60s"
[build]
require_plan = false
[memory]
store = "file"
[agents.fake]
command = [%q, "__demo-agent", "--scenario", %q]
format = "claude"
[engine]
kind = "temporal"
address = %q
exchange_remote = %q
heartbeat = "5s"
host_timeout = "30s"
[sandbox]
writable = [%q]
`, r.Ralph, r.scenario, r.addr, r.exchange, agentDir)
	prd := func(n int) string {
		var b strings.Builder
		b.WriteString("# PRD: a hostile agent on Temporal\n")
		for _, s := range stories[:n] {
			fmt.Fprintf(&b, "\n### [ ] %s: Write %s\n- [ ] %s holds %s\n", s.id, s.file, s.file, s.id)
		}
		return b.String()
	}
	r.WriteFiles(r.a, map[string]string{".agents/tasks/prd.md": prd(1), ".ralph/config.toml": config, "README.md": "# sandbox on Temporal\n"})
	r.WriteFiles(r.Dir, map[string]string{"spec.md": "# Write th\n\nPromise: COMPLETE\n\n### [ ] TH-1: Write th\n- [ ] th.txt exists (verify: `test -f th.txt`)\n"})
	r.Git(r.a, "init", "-q", "-b", "main")
	r.Git(r.a, "add", "-A")
	r.Git(r.a, "commit", "-q", "-m", "initial")
	r.Git(r.Dir, "init", "-q", "--bare", r.exchange)

	// work runs a build of story s, a session and a thread on Temporal
	// with worker w, and returns what each one's agent copied of the key
	// (as committed, or left in the checkout) and the file outside.
	work := func(w *proc, s story, request string) (stolen map[string]string, outside string) {
		t.Helper()
		out, code := r.ralphRun(r.a, "build")
		if code != 0 || !strings.Contains(out, "["+s.id+"] landed") || !strings.Contains(out, "ralph: complete:") {
			t.Fatalf("ralph build of %s: exit %d, want 0 and its task landed:\n%s\n──── worker ────\n%s", s.id, code, out, harness.Clip(w.Output(), 8000))
		}
		if got := r.gitMaybe(r.a, "show", "main:"+s.file); got != s.id+"\n" {
			t.Errorf("main's %s holds %q after the build, want %q: the story did not land", s.file, got, s.id+"\n")
		}
		out, code = r.ralphRun(r.a, "run", "--host", "a", request)
		if code != 0 || !strings.Contains(out, "complete") {
			t.Fatalf("ralph run %q on Temporal: exit %d, want the session complete:\n%s\n──── worker ────\n%s", request, code, out, harness.Clip(w.Output(), 8000))
		}
		fence, _ := os.ReadFile(filepath.Join(r.a, "fence.txt"))
		if !strings.Contains(string(fence), "blue") {
			t.Errorf("the session's executor did not paint the fence (fence.txt %q)", fence)
		}
		// A thread on Temporal, in a worktree of its own: its loop's agent.
		id := "th-" + s.id
		for _, args := range [][]string{{"thread", "new", "--id", id, "Write th"}, {"thread", "spec", id, filepath.Join(r.Dir, "spec.md")}, {"thread", "finalize", id}} {
			if out, code := r.ralphRun(r.a, args...); code != 0 {
				t.Fatalf("ralph %s: exit %d:\n%s", strings.Join(args, " "), code, out)
			}
		}
		out, _ = r.ralphRun(r.a, "thread", "start", "--host", "a", "--worktree", id)
		if !strings.Contains(out, "Implemented") {
			t.Fatalf("ralph thread start %s on Temporal: the thread's loop did not implement it:\n%s\n──── worker ────\n%s", id, out, harness.Clip(w.Output(), 8000))
		}
		session, _ := os.ReadFile(filepath.Join(r.a, "stolen-by-session.txt"))
		stolen = map[string]string{
			"the build's task": r.gitMaybe(r.a, "show", "main:stolen-"+s.file),
			"the session":      string(session),
			"the thread":       r.gitMaybe(r.a, "show", "ralph/"+id+":stolen-by-thread.txt"),
		}
		v, err := os.ReadFile(victim)
		if err != nil {
			t.Fatal(err)
		}
		return stolen, string(v)
	}

	wa := r.Start("worker-sandboxed", r.a, nil, r.Ralph, "worker", "--host", "a", "--integrate", "--sandbox", "bwrap")
	r.WaitLog(wa, `ralph worker a: every agent it runs is sandboxed \(bwrap\)`, time.Minute)
	r.WaitLog(wa, `ralph worker a: polling ralph, ralph@a, ralph\.integration`, time.Minute)
	stolen, outside := work(wa, stories[0], "Paint the fence")
	for who, got := range stolen {
		if strings.Contains(got, "PRIVATE KEY") {
			t.Errorf("under the worker's sandbox the agent of %s copied the planted key: %q", who, got)
		}
	}
	if outside != "original\n" {
		t.Errorf("under the worker's sandbox an agent wrote outside its work tree: %s holds %q", victim, outside)
	}

	// The control: the same agents under the same worker without the
	// sandbox reach both.
	if err := syscall.Kill(wa.Cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r.WaitEnd(wa, time.Minute)
	r.WriteFiles(r.a, map[string]string{".agents/tasks/prd.md": strings.Replace(prd(2), "### [ ] US-001", "### [x] US-001", 1)})
	r.Git(r.a, "commit", "-q", "-am", "one more story")
	wb := r.Start("worker-plain", r.a, nil, r.Ralph, "worker", "--host", "a", "--integrate")
	r.WaitLog(wb, `ralph worker a: polling ralph, ralph@a, ralph\.integration`, time.Minute)
	if strings.Contains(wb.Output(), "sandboxed") {
		t.Errorf("the worker without --sandbox says it is sandboxed:\n%s", wb.Output())
	}
	stolen, outside = work(wb, stories[1], "Paint the gate")
	for who, got := range stolen {
		if !strings.Contains(got, "PRIVATE KEY") {
			t.Errorf("without the sandbox the agent of %s did not get the key (%q): the test's theft does not work there, so it proves nothing", who, got)
		}
	}
	if strings.Count(outside, "escaped") != 3 {
		t.Errorf("without the sandbox the three agents did not all write outside their work tree: %s holds %q", victim, outside)
	}
}
