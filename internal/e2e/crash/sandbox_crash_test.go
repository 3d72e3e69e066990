package crash

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// `ralph build --sandbox bwrap` is killed with SIGKILL while its agent
// runs in the sandbox with two children of its own, one of them in a new
// session (setsid), all sleeping far past the test's end. Inside its PID
// namespace the agent's processes have other numbers, but the host's
// /proc shows each of them with the attempt's token in its environment,
// which is how a later ralph finds them. Either the sandbox died with
// ralph (bwrap's --die-with-parent takes the namespace down) or the next
// `ralph build` stops what carries the token before it runs anything;
// after it, whichever did it, no process tagged with the crashed
// attempt's token is left, and the story is done by the next agent.
func TestCrashWithASandboxedAgentLeavesNothingRunning(t *testing.T) {
	h := newCrashHarness(t)
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	// The scenario and its use counts sit outside the repository, in a
	// folder the sandbox makes writable: the fake agent reads and counts
	// them from inside.
	agentDir := filepath.Join(dir, "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &crashCase{h: h, repo: filepath.Join(dir, "repo"), scenario: filepath.Join(agentDir, "scenario.json")}
	config := fmt.Sprintf("[agent]\ndefault = \"fake\"\ntimeout = \"120s\"\n[build]\nrequire_plan = false\n[agents.fake]\ncommand = [%q]\n"+
		"[sandbox]\nenv = [%q]\nwritable = [%q]\n", h.fakeagent, fakeagent.EnvScenario, agentDir)
	c.initRepo(t, map[string]string{
		".agents/tasks/prd.md": "# PRD: a sandboxed agent outlives ralph\n\n### [ ] US-001: Write one\n- [ ] one.txt exists\n",
		".ralph/config.toml":   config,
	}, "Crash Test", "crash@example.invalid")
	sc := fakeagent.Scenario{Invocations: []fakeagent.Invocation{
		{Match: "Story: US-001:", Times: 1, Steps: []fakeagent.Step{
			{Run: "sleep 300 </dev/null >/dev/null 2>&1 & setsid sleep 301 </dev/null >/dev/null 2>&1 &"},
			{Say: "children started"},
			{Sleep: "300s"}}},
		{Match: "Story: US-001:", Steps: []fakeagent.Step{
			{Write: "one.txt", Content: "one\n"}, {CheckStory: "US-001"}, {Final: "wrote one\n<promise>COMPLETE</promise>"}}},
	}}
	if err := fakeagent.WriteScenario(c.scenario, sc); err != nil {
		t.Fatal(err)
	}

	// The first build: killed once its agent and both children run.
	killed := make(chan struct{})
	var token string
	var tagged []proc.Process
	go func() {
		defer close(killed)
		wait.Within(60*time.Second, func() bool {
			token, tagged = agentTokens(t, c.scenario)
			return token != "" && countCmd(tagged, "sleep 300") == 1 && countCmd(tagged, "sleep 301") == 1
		})
	}()
	first := c.runRalphUntil(t, []string{"build", "5", "--sandbox", "bwrap"}, c.h.env(c.scenario, 0), killed)
	<-killed
	if !first.killed {
		t.Fatalf("the first build was not killed while its agent ran (%s); the agent's processes seen: %v\n%s", first, tagged, first.out)
	}
	if token == "" {
		t.Fatalf("no process of the sandboxed agent was found by its token from the host's /proc\n%s", first.out)
	}
	if countCmd(tagged, "bwrap") == 0 {
		t.Errorf("the agent's processes carry the token %s, but none of them is bwrap: was the agent sandboxed? %v", token, tagged)
	}
	t.Logf("killed ralph (SIGKILL) while its sandboxed agent ran: token %s on %v", token, tagged)

	// The sandbox dies with ralph (--die-with-parent), or what is left is
	// the next start's to stop: a second is ample for the first.
	tag := proc.Tag("RALPH_AGENT_TOKEN", token)
	diedWithRalph := wait.Within(2*time.Second, func() bool { return len(proc.FindTagged(tag)) == 0 })
	left := proc.FindTagged(tag)
	t.Logf("died with ralph: %v; left running for the next start: %v", diedWithRalph, left)

	second := c.runRalph(t, []string{"build", "5", "--sandbox", "bwrap"}, c.h.env(c.scenario, 0), 0)
	if second.code != 0 {
		t.Fatalf("the build after the crash: %s, want exit 0 with US-001 done\n%s", second, second.out)
	}
	if survivors := proc.FindTagged(tag); len(survivors) > 0 {
		t.Errorf("the crashed attempt's agent outlived the next build: %v (token %s)\n%s", survivors, token, second.out)
		for _, p := range survivors {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	} else if next, procs := agentTokens(t, c.scenario); next != "" {
		t.Errorf("an agent of this test still runs after the build ended: token %s on %v", next, procs)
	}
	if stopped, next := strings.Index(second.out, "stopped the agent the crashed run left behind"), strings.Index(second.out, "── iteration"); len(left) > 0 && (stopped < 0 || stopped > next) {
		t.Errorf("%d processes of the crashed attempt were running when the next build started, and it does not say it stopped them before its first iteration:\n%s", len(left), second.out)
	}
	if got, _ := os.ReadFile(filepath.Join(c.repo, "one.txt")); string(got) != "one\n" {
		t.Errorf("one.txt holds %q after the next build, want the next agent's \"one\\n\"", got)
	}
}

// agentTokens returns the agent token and the processes of this test's
// agent (those whose environment names its scenario), read from the
// host's /proc: inside the sandbox's PID namespace they have other
// numbers, but the same environment.
func agentTokens(t *testing.T, scenario string) (string, []proc.Process) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	want := []byte(fakeagent.EnvScenario + "=" + scenario + "\x00")
	token := ""
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("RALPH_AGENT_TOKEN=")); ok {
				if token != "" && token != string(v) {
					t.Errorf("two agent tokens run at once: %s and %s", token, v)
				}
				token = string(v)
			}
		}
	}
	if token == "" {
		return "", nil
	}
	return token, proc.FindTagged(proc.Tag("RALPH_AGENT_TOKEN", token))
}

// countCmd counts the processes whose command line, as seen when they
// were found, holds s.
func countCmd(ps []proc.Process, s string) int {
	n := 0
	for _, p := range ps {
		if strings.Contains(p.Cmd, s) {
			n++
		}
	}
	return n
}
