package fleet

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	rfleet "github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

// Two hosts work a six-story build on a real Temporal server; the host
// that is not the merge queue's is killed with SIGKILL while its agent
// works on a task and started again a moment later. The task is retried
// on the restarted worker, every story lands exactly once, the target
// only ever moves to commits whose check passes, only ralph/ branches
// travel through the exchange remote, and no agent is left running. On
// the way, `ralph status --json` reads the run through its Query, a
// second `ralph build` of the same branch is refused, and `ralph block` of
// a landed task is refused by the Update's validator.
func TestFleetBuildSurvivesAKilledWorker(t *testing.T) {
	r := newFleetRun(t)
	r.startServer()
	r.makeRepos()

	wa := r.Start("worker-a", r.a, nil, r.Ralph, "worker", "--host", "a", "--integrate")
	wb := r.Start("worker-b", r.b, nil, r.Ralph, "worker", "--host", "b")
	r.WaitLog(wa, `ralph worker a: polling ralph, ralph@a, ralph\.integration`, time.Minute)
	r.WaitLog(wb, `ralph worker b: polling ralph, ralph@b on`, time.Minute)
	start := time.Now()
	build := r.Start("build", r.a, nil, r.Ralph, "build", "--workers", "2")
	runID := r.WaitLog(build, `ralph: build (\S+) started on Temporal`, time.Minute)[1]

	// The status Query answers while the run goes, with the run's tasks.
	st := r.waitStatus("ralph status --json to show the run's six tasks", time.Minute, func(st rfleet.Status) bool { return len(st.Tasks) == len(stories) })
	if st.RunID != runID || st.Target != "main" || st.Workers != 2 || st.Outcome != "" {
		t.Errorf("ralph status --json: run %q on %q with %d workers, outcome %q; want run %s on main with 2 workers, going", st.RunID, st.Target, st.Workers, st.Outcome, runID)
	}
	for i, task := range st.Tasks {
		if task.ID != stories[i].id {
			t.Errorf("ralph status --json: task %d is %s, want %s", i, task.ID, stories[i].id)
		}
	}

	// The workflow id is the target's build: a second start is refused.
	if out, code := r.ralphRun(r.a, "build", "--workers", "2"); code == 0 || !strings.Contains(out, "already running") {
		t.Errorf("a second ralph build of main while the first runs: exit %d, %q; want it refused as already running", code, out)
	}

	// Kill worker b while its agent works on a task: the task's iteration
	// started in b's journal and the agent's process runs in b's worktree.
	task, orphans := r.waitAgentOnB(build)
	if err := syscall.Kill(wb.Cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-wb.Done
	t.Logf("%s: killed worker b (SIGKILL) while its agent worked on %s (agent pids %v)", time.Since(start).Round(time.Millisecond), task, orphans)
	for _, ev := range harness.Journal(r.b) {
		if ev.Task == task && (ev.Kind == "commit" || ev.Kind == "verdict") {
			t.Fatalf("b's journal shows %s %s before the kill (%q): the kill did not come in the middle of the agent's attempt", task, ev.Kind, ev.Text)
		}
	}
	// A moment later the host is back (a machine rebooted, a worker
	// restarted by its supervisor). The sleep is that outage, not a sync.
	time.Sleep(time.Second)
	wb2 := r.Start("worker-b-restarted", r.b, nil, r.Ralph, "worker", "--host", "b")

	// The control Update's validator refuses to block a landed task, with
	// a message and a non-zero exit, and nothing changes.
	before := r.waitStatus("a task to land while the run goes on", 3*time.Minute, func(st rfleet.Status) bool {
		return st.Outcome == "" && landedTask(st) != ""
	})
	landed := landedTask(before)
	out, code := r.ralphRun(r.a, "block", landed)
	if code == 0 || !strings.Contains(out, "refused") || !strings.Contains(out, "landed") {
		t.Errorf("ralph block %s of a landed task: exit %d, %q; want a non-zero exit and the run's refusal saying it landed", landed, code, out)
	}
	t.Logf("ralph block %s (landed): exit %d: %s", landed, code, strings.TrimSpace(out))
	after, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	if got := taskOf(after, landed); got == nil || got.State != landing.Landed || got.HeldBy != "" {
		t.Errorf("after the refused block, %s is %+v; want it landed as before", landed, got)
	}
	if after.Paused || after.Stopping || slices.ContainsFunc(after.Controls, func(c string) bool { return strings.HasPrefix(c, "block") }) {
		t.Errorf("the refused block changed the run: paused %v, stopping %v, commands taken %q", after.Paused, after.Stopping, after.Controls)
	}

	// The killed worker's task is retried on the restarted worker, which
	// says so, and resumes the loop.
	retry := regexp.MustCompile(`\[b ` + task + `\] ↻ retried after its worker was lost`)
	r.WaitFor("the restarted worker to retry "+task, 3*time.Minute, func() (bool, string) {
		return retry.MatchString(wb2.Output()) || build.Exited(), harness.Clip(wb2.Output(), 2000)
	})
	if !retry.MatchString(wb2.Output()) {
		t.Fatalf("the build ended and the restarted worker b never retried %s, whose agent was killed with its worker:\n%s", task, wb2.Output())
	}

	// The build follows the run to its end and exits 0.
	r.WaitFor("the build to end", 5*time.Minute, func() (bool, string) { return build.Exited(), harness.Clip(build.Output(), 2000) })
	t.Logf("%s: the build ended", time.Since(start).Round(time.Millisecond))
	bout := build.Output()
	if build.Err != nil || !strings.Contains(bout, "ralph: complete: 6 tasks landed") {
		t.Fatalf("ralph build --workers 2: %v, want exit 0 and every task landed:\n%s", build.Err, bout)
	}

	r.assertLandedOnce(task)
	r.assertCheckedTip()
	r.assertExchange()
	r.assertNoAgentLeft(orphans)

	// Both workers outlived the run and stop on Ctrl+C (exit 0: a worker
	// built with -race that saw a data race would exit 66).
	for _, w := range []*proc{wa, wb2} {
		if w.Exited() {
			t.Fatalf("%s ended during the run: %v\n%s", w.Name, w.Err, harness.Clip(w.Output(), 4000))
		}
		_ = syscall.Kill(w.Cmd.Process.Pid, syscall.SIGINT)
	}
	for _, w := range []*proc{wa, wb2} {
		r.WaitFor(w.Name+" to stop on Ctrl+C", time.Minute, func() (bool, string) { return w.Exited(), "" })
		if w.Err != nil || !strings.Contains(w.Output(), "stopped") {
			t.Errorf("%s on Ctrl+C: %v, want exit 0 and a word that it stopped:\n%s", w.Name, w.Err, harness.Clip(w.Output(), 4000))
		}
	}
}

// waitAgentOnB waits until worker b's journal shows an iteration started
// for a task and that task's agent runs in b's worktree, and returns the
// task and the agent's processes.
func (r *fleetRun) waitAgentOnB(build *proc) (string, []int) {
	r.T.Helper()
	worktrees := filepath.Join(r.Dir, ".ralph-worktrees", "b")
	var task string
	var pids []int
	r.WaitFor("worker b to start an agent on a task", 3*time.Minute, func() (bool, string) {
		for _, ev := range harness.Journal(r.b) {
			if ev.Kind == "iteration" && ev.Worker == "b" && strings.HasPrefix(strings.TrimSpace(ev.Text), "── iteration") {
				task = ev.Task
			}
		}
		if task == "" {
			if build.Exited() {
				r.T.Fatalf("the build ended before worker b started an agent: the shared queue gave every task to a (%v)\n%s", build.Err, build.Output())
			}
			return false, "b's journal shows no iteration yet"
		}
		pids = nil
		for _, pid := range harness.ProcessesWith(r.scenario) {
			if slices.Contains(harness.ProcessesIn(worktrees), pid) && strings.Contains(describe([]int{pid}), "/"+task) {
				pids = append(pids, pid)
			}
		}
		return len(pids) > 0, "no agent process of " + task + " in " + worktrees
	})
	return task, pids
}

func landedTask(st rfleet.Status) string {
	for _, t := range st.Tasks {
		if t.State == landing.Landed {
			return t.ID
		}
	}
	return ""
}

func taskOf(st rfleet.Status, id string) *rfleet.Task {
	for _, t := range st.Tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// assertLandedOnce checks that main holds exactly one commit for each
// story, marked with its Ralph-Task trailer, that the retried task's
// landed from host b, and that the task file at the tip has every story
// checked.
func (r *fleetRun) assertLandedOnce(retried string) {
	r.T.Helper()
	var tasks []string
	worker := map[string]string{}
	for _, msg := range strings.Split(r.Git(r.a, "log", "--format=%B%x00", "main"), "\x00") {
		var id, by string
		for _, line := range strings.Split(msg, "\n") {
			if v, ok := strings.CutPrefix(line, "Ralph-Task: "); ok {
				id = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "Ralph-Worker: "); ok {
				by = strings.TrimSpace(v)
			}
		}
		if id != "" {
			tasks = append(tasks, id)
			worker[id] = by
		}
	}
	slices.Sort(tasks)
	var want []string
	for _, s := range stories {
		want = append(want, s.id)
	}
	if !slices.Equal(tasks, want) {
		r.T.Errorf("the commits on main with a Ralph-Task trailer are for %v; want each of the six stories exactly once:\n%s", tasks, r.Git(r.a, "log", "--format=%h %s", "main"))
	}
	if worker[retried] != "b" {
		r.T.Errorf("%s landed from host %q, want b: it was retried on the restarted worker, not moved", retried, worker[retried])
	}
	tip := r.Git(r.a, "show", "main:.agents/tasks/prd.md")
	for _, s := range stories {
		if !strings.Contains(tip, "### [x] "+s.id+":") {
			r.T.Errorf("the PRD at the tip of main does not have %s checked:\n%s", s.id, tip)
		}
	}
}

// assertCheckedTip checks that every commit main was ever at (its reflog
// in a) passes the check, and that the check passes on a fresh clone of
// the tip with every story's work there; and that a is clean, on main.
func (r *fleetRun) assertCheckedTip() {
	r.T.Helper()
	for _, commit := range strings.Fields(r.Git(r.a, "rev-list", "--reflog", "main")) {
		prd := r.Git(r.a, "show", commit+":.agents/tasks/prd.md")
		for _, s := range stories {
			if !strings.Contains(prd, "### [x] "+s.id+":") {
				continue
			}
			if got := r.gitMaybe(r.a, "show", commit+":"+s.file); got != s.id+"\n" {
				r.T.Errorf("main was at %s, where %s is done but %s holds %q: a commit whose check fails", commit[:12], s.id, s.file, got)
			}
		}
	}
	fresh := filepath.Join(r.Dir, "fresh")
	r.Git(r.Dir, "clone", "-q", "--branch", "main", r.a, fresh)
	if out, code := r.Run(fresh, "sh", "check.sh"); code != 0 {
		r.T.Errorf("the check (sh check.sh) fails on a fresh clone of main's tip: exit %d\n%s", code, out)
	}
	for _, s := range stories {
		if b, err := os.ReadFile(filepath.Join(fresh, s.file)); err != nil || string(b) != s.id+"\n" {
			r.T.Errorf("main's tip lacks %s's work: %s holds %q (%v)", s.id, s.file, b, err)
		}
	}
	if st := strings.TrimSpace(r.Git(r.a, "status", "--porcelain")); st != "" {
		r.T.Errorf("the person's checkout is not clean after the run:\n%s", st)
	}
	if b := strings.TrimSpace(r.Git(r.a, "branch", "--show-current")); b != "main" {
		r.T.Errorf("the person's checkout is on %q, want main", b)
	}
}

// assertExchange checks that only ralph/ branches were ever pushed to the
// exchange remote (its update hook logged every ref), that every task's
// branch travelled through it, and that it holds nothing else now.
func (r *fleetRun) assertExchange() {
	r.T.Helper()
	b, err := os.ReadFile(r.pushLog)
	if err != nil {
		r.T.Fatalf("the exchange's update hook logged no push: %v", err)
	}
	pushed := strings.Fields(string(b))
	for _, ref := range pushed {
		if !strings.HasPrefix(ref, "refs/heads/ralph/") {
			r.T.Errorf("%s was pushed to the exchange remote: ralph pushes only ralph/ branches there (push_target is off)", ref)
		}
	}
	for _, s := range stories {
		if !slices.ContainsFunc(pushed, func(ref string) bool { return strings.HasSuffix(ref, "/"+s.id) }) {
			r.T.Errorf("%s's branch never went through the exchange; pushed: %v", s.id, pushed)
		}
	}
	for _, ref := range strings.Fields(r.Git(r.exchange, "for-each-ref", "--format=%(refname)")) {
		if !strings.HasPrefix(ref, "refs/heads/ralph/") {
			r.T.Errorf("the exchange remote holds %s: only ralph/ branches belong there", ref)
		}
	}
}

// assertNoAgentLeft checks that no agent process is left, in particular
// not the one the killed worker left behind.
func (r *fleetRun) assertNoAgentLeft(orphans []int) {
	r.T.Helper()
	var left []int
	r.WaitFor("every agent to be gone", 15*time.Second, func() (bool, string) {
		left = append(harness.ProcessesWith(r.scenario), harness.ProcessesIn(filepath.Join(r.Dir, ".ralph-worktrees"))...)
		return len(left) == 0, describe(left)
	})
	for _, pid := range orphans {
		if harness.Alive(pid) {
			r.T.Errorf("the agent the killed worker left (pid %d) still runs: %s", pid, harness.Cmdline(pid))
		}
	}
}

func (r *fleetRun) gitMaybe(dir string, args ...string) string {
	out, _ := r.Run(dir, "git", args...)
	return out
}
