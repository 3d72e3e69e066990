package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/fakeagent"
	rfleet "github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

// testDeadline bounds the whole test: it takes well under a minute
// normally, and several times that on a loaded 2-core machine under -race.
const testDeadline = 6 * time.Minute

// story is one story of the PRD and the file its agent writes.
type story struct{ id, file string }

var stories = []story{
	{"US-001", "one.txt"}, {"US-002", "two.txt"}, {"US-003", "three.txt"},
	{"US-004", "four.txt"}, {"US-005", "five.txt"}, {"US-006", "six.txt"},
}

func prd() string {
	var b strings.Builder
	b.WriteString("# PRD: the Temporal engine's integration test\n")
	for _, s := range stories {
		fmt.Fprintf(&b, "\n### [ ] %s: Write %s\n- [ ] %s holds %s\n", s.id, s.file, s.file, s.id)
	}
	return b.String()
}

// checkScript is the repository's check: a story the task file marks done
// must have its file, holding its id. The target branch may only ever be
// at a commit where it passes.
func checkScript() string {
	var pairs []string
	for _, s := range stories {
		pairs = append(pairs, s.file+":"+s.id)
	}
	return `#!/bin/sh
fail=0
for n in ` + strings.Join(pairs, " ") + `; do
  f=${n%%:*}; id=${n#*:}
  if grep -q "^### \[x\] $id:" .agents/tasks/prd.md && ! grep -qx "$id" "$f" 2>/dev/null; then
    echo "$id is done but $f does not hold $id"; fail=1
  fi
done
exit $fail
`
}

// agentSleep is how long each story's agent works before it writes its
// file: long enough to kill a worker in the middle of an attempt.
const agentSleep = "5s"

// orphanStays makes an agent whose worker is gone (its parent is no
// longer a `ralph worker`) stay a minute longer, well past the end of the
// run, so that only ralph stopping the agent its killed worker left
// (the resumed loop's leftover cleanup) ends it in time.
const orphanStays = `pp=$(awk '{print $4}' /proc/$PPID/stat); case "$(tr '\0' ' ' < /proc/$pp/cmdline)" in *" worker "*) ;; *) sleep 60 ;; esac`

func scenario() fakeagent.Scenario {
	sc := fakeagent.Scenario{Format: "claude"}
	for _, s := range stories {
		sc.Invocations = append(sc.Invocations, fakeagent.Invocation{Match: "Story: " + s.id + ":", Steps: []fakeagent.Step{
			{Say: "working on " + s.id}, {Sleep: agentSleep}, {Run: orphanStays},
			{Write: s.file, Content: s.id + "\n"}, {CheckStory: s.id}, {Final: s.id + " done"}}})
	}
	return sc
}

// fleetRun is one test's world: a dev server, the repositories and every
// process the test started, all under one temporary folder.
type fleetRun struct {
	*harness.World
	a, b     string // the two clones: a is the person's checkout and the integration host
	exchange string // the bare repository task branches travel through
	pushLog  string // every ref update pushed to the exchange, by its update hook
	scenario string
	temporal string
	addr     string
}

type proc = harness.Proc

func newFleetRun(t *testing.T) *fleetRun {
	t.Helper()
	w := harness.New(t, testDeadline)
	r := &fleetRun{World: w, a: filepath.Join(w.Dir, "a"), b: filepath.Join(w.Dir, "b"), exchange: filepath.Join(w.Dir, "exchange.git"),
		pushLog: filepath.Join(w.Dir, "pushed.log"), scenario: filepath.Join(w.Dir, "scenario.json")}
	// Runs before the world's cleanup kills the server: what the build
	// workflow did, when the test failed.
	t.Cleanup(func() {
		if !t.Failed() || r.addr == "" {
			return
		}
		for _, what := range []string{"describe", "show"} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			out, _ := exec.CommandContext(ctx, r.temporal, "workflow", what, "--workflow-id", rfleet.BuildID("ralph", "main"), "--address", r.addr).CombinedOutput()
			cancel()
			t.Logf("──── temporal workflow %s (the build workflow) ────\n%s", what, harness.Clip(string(out), 30000))
		}
	})
	return r
}

// startServer starts the Temporal dev server, one for this test.
func (r *fleetRun) startServer() {
	r.T.Helper()
	srv, err := harness.StartDevServer(filepath.Join(r.Dir, "logs"), r.Env, r.Within(time.Minute))
	if err != nil {
		r.T.Fatalf("the Temporal engine's end-to-end test needs the dev server: %v", err)
	}
	r.Procs = append(r.Procs, srv.Proc)
	r.temporal, r.addr = srv.Bin, srv.Addr
}

// makeRepos makes repository a (the person's checkout, configured for
// the Temporal engine), the bare exchange repository with a hook that
// logs every ref pushed to it, and b, a clone of a: the second host.
func (r *fleetRun) makeRepos() {
	r.T.Helper()
	if err := fakeagent.WriteScenario(r.scenario, scenario()); err != nil {
		r.T.Fatal(err)
	}
	config := fmt.Sprintf(`[agent]
default = "fake"
[build]
require_plan = false
[memory]
store = "file"
[agents.fake]
command = [%q, "__demo-agent", "--scenario", %q]
format = "claude"
[[checks]]
name = "stories"
run = "sh check.sh"
[engine]
kind = "temporal"
address = %q
exchange_remote = %q
heartbeat = "5s"
host_timeout = "30s"
`, r.Ralph, r.scenario, r.addr, r.exchange)
	files := map[string]string{
		".agents/tasks/prd.md": prd(),
		".ralph/config.toml":   config,
		"check.sh":             checkScript(),
		"README.md":            "# fleet test\n",
	}
	r.WriteFiles(r.a, files)
	r.Git(r.a, "init", "-q", "-b", "main")
	r.Git(r.a, "add", "-A")
	r.Git(r.a, "commit", "-q", "-m", "initial")
	r.Git(r.Dir, "init", "-q", "--bare", r.exchange)
	hook := "#!/bin/sh\necho \"$1\" >> " + r.pushLog + "\n"
	if err := os.WriteFile(filepath.Join(r.exchange, "hooks", "update"), []byte(hook), 0o755); err != nil {
		r.T.Fatal(err)
	}
	r.Git(r.Dir, "clone", "-q", r.a, r.b)
}

// ralphRun runs a ralph command to its end and returns its output and
// exit code.
func (r *fleetRun) ralphRun(dir string, args ...string) (string, int) {
	r.T.Helper()
	out, code := r.Run(dir, r.Ralph, args...)
	if code == -1 {
		r.T.Fatalf("ralph %s: %s", strings.Join(args, " "), out)
	}
	return out, code
}

// status is `ralph status --json` in a: the run's state from the
// workflow's status Query.
func (r *fleetRun) status() (rfleet.Status, error) {
	out, code := r.ralphRun(r.a, "status", "--json")
	var st rfleet.Status
	if code != 0 {
		return st, fmt.Errorf("ralph status --json: exit %d: %s", code, harness.Clip(out, 2000))
	}
	// The document is the one a local build has (schema_version 1),
	// with the run's own state under temporal.
	var doc status.Report
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return st, fmt.Errorf("ralph status --json printed no status document (%v):\n%s", err, harness.Clip(out, 2000))
	}
	if doc.SchemaVersion != status.SchemaVersion || doc.Engine != status.EngineTemporal || doc.Temporal == nil || doc.Parallel == nil || doc.Board == nil {
		return st, fmt.Errorf("ralph status --json is not the status document of a build on Temporal (schema_version %d, engine %q, temporal and parallel present: %v %v):\n%s",
			doc.SchemaVersion, doc.Engine, doc.Temporal != nil, doc.Parallel != nil, harness.Clip(out, 2000))
	}
	tp := doc.Temporal
	st.RunID, st.Target, st.Workers, st.Outcome, st.Reason = doc.RunID, doc.Parallel.Target, doc.Parallel.Workers, doc.Outcome, doc.Reason
	st.Paused, st.Stopping, st.Controls, st.Generation, st.HistoryLength, st.Iterations = doc.Paused != nil, tp.Stopping, tp.Controls, tp.Generation, tp.HistoryLength, doc.Iteration
	for _, t := range tp.Tasks {
		st.Tasks = append(st.Tasks, &rfleet.Task{ID: t.ID, State: landing.TaskState(t.State), Host: t.Host, Attempt: t.Attempt,
			Branch: t.Branch, Commit: t.Commit, Reason: t.Reason, Skipped: t.Skipped, HeldBy: t.HeldBy})
	}
	return st, nil
}

// waitStatus polls the run's status until cond holds.
func (r *fleetRun) waitStatus(what string, limit time.Duration, cond func(rfleet.Status) bool) rfleet.Status {
	r.T.Helper()
	var st rfleet.Status
	r.WaitFor(what, limit, func() (bool, string) {
		var err error
		if st, err = r.status(); err != nil {
			return false, err.Error()
		}
		if cond(st) {
			return true, ""
		}
		b, _ := json.Marshal(st)
		return false, string(b)
	})
	return st
}

func describe(pids []int) string {
	var parts []string
	for _, p := range pids {
		cwd, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "cwd"))
		parts = append(parts, fmt.Sprintf("%d in %s: %s", p, cwd, harness.Cmdline(p)))
	}
	return strings.Join(parts, "\n")
}
