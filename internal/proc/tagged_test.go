package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/wait"
)

// startTagged starts script with sh -c in its own process group and tag in
// its environment, as ralph starts an agent, and waits for the pids it
// writes (one per line) to pidFile. The leader is reaped once it exits.
func startTagged(t *testing.T, tag, script string, want int) (leader int, pids []int) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), tag, "PIDS="+pidFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	wait.Until(t, wait.Long, func() bool {
		b, _ := os.ReadFile(pidFile)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
		return len(pids) >= want
	}, fmt.Sprintf("the script to write %d pids", want))
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	return cmd.Process.Pid, pids
}

func pidsOf(ps []Process) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.PID)
	}
	return out
}

func TestFindTaggedFindsTheWholeTreeAndNothingElse(t *testing.T) {
	tag := Tag("RALPH_AGENT_TOKEN", "find-"+strconv.Itoa(os.Getpid()))
	leader, pids := startTagged(t, tag, `sleep 30 & echo $! >>"$PIDS"; setsid sleep 31 & echo $! >>"$PIDS"; echo $$ >>"$PIDS"; wait`, 3)
	other := exec.Command("sleep", "30")
	other.Env = append(os.Environ(), tag+"-not")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()

	found := pidsOf(FindTagged(tag))
	for _, p := range pids {
		if !slices.Contains(found, p) {
			t.Errorf("FindTagged = %v, missing %d (leader %d)", found, p, leader)
		}
	}
	if slices.Contains(found, other.Process.Pid) {
		t.Errorf("FindTagged found a process whose variable only starts like the tag")
	}
	if got := FindTagged(""); got != nil {
		t.Errorf("FindTagged(\"\") = %v, want nothing", got)
	}
}

// The agent's leader exited, a background writer of its group lives on:
// the group is stopped although its leader, and with it /proc/PGID/cwd, is
// gone.
func TestStopTaggedStopsAGroupWhoseLeaderExited(t *testing.T) {
	tag := Tag("RALPH_AGENT_TOKEN", "leader-"+strconv.Itoa(os.Getpid()))
	leader, pids := startTagged(t, tag, `(while :; do sleep 0.05; done) & echo $! >>"$PIDS"; exit 0`, 1)
	writer := pids[0]
	wait.Until(t, wait.Long, func() bool { return !alive(leader) }, "the group's leader to exit")
	if !alive(writer) {
		t.Fatalf("setup: leader alive %v, writer alive %v", alive(leader), alive(writer))
	}
	if _, ok := Lookup(leader); ok {
		t.Fatalf("setup: the exited leader is still there; a check of the leader alone would have worked")
	}
	st := StopTagged(tag, leader, nil, time.Second)
	if alive(writer) {
		t.Fatalf("the background writer %d survived StopTagged: %+v", writer, st)
	}
	if !slices.Contains(st.Groups, leader) || len(st.Escaped) != 0 {
		t.Errorf("StopTagged = %+v, want group %d stopped and nothing escaped", st, leader)
	}
}

// A process that left the agent's group with setsid is stopped and
// reported, with its pid and command.
func TestStopTaggedStopsAndReportsASetsidEscapee(t *testing.T) {
	tag := Tag("RALPH_AGENT_TOKEN", "setsid-"+strconv.Itoa(os.Getpid()))
	leader, pids := startTagged(t, tag, `setsid sh -c 'echo $$ >>"$PIDS"; exec sleep 33' & sleep 30 & echo $! >>"$PIDS"; wait`, 2)
	st := StopTagged(tag, leader, nil, time.Second)
	for _, p := range pids {
		if alive(p) {
			t.Errorf("process %d survived StopTagged", p)
		}
	}
	if len(st.Escaped) != 1 || !slices.Contains(pids, st.Escaped[0].PID) || !strings.Contains(st.Escaped[0].String(), "sleep 33") {
		t.Errorf("Escaped = %v, want the setsid sleep 33 among %v", st.Escaped, pids)
	}
	if !st.Any() {
		t.Errorf("Any() = false after stopping processes")
	}
}

// Without a tag match, the recorded group is stopped only when keep
// accepts a member: a pid reused by an unrelated program is never killed.
func TestStopTaggedRecordedGroupNeedsKeep(t *testing.T) {
	leader, pids := startTagged(t, "UNRELATED=1", `sleep 30 & echo $! >>"$PIDS"; wait`, 1)
	st := StopTagged(Tag("RALPH_AGENT_TOKEN", "none"), leader, func(Process) bool { return false }, time.Second)
	if st.Any() || !alive(pids[0]) {
		t.Fatalf("an unrelated group was stopped: %+v", st)
	}
	st = StopTagged(Tag("RALPH_AGENT_TOKEN", "none"), leader, func(p Process) bool { return p.PID == pids[0] }, time.Second)
	if !slices.Contains(st.Groups, leader) || alive(pids[0]) {
		t.Fatalf("the recorded group was not stopped: %+v", st)
	}
}

// A recorded group whose number now belongs to an untagged program (a
// user's editor, shell or dev server after a pid was reused) is not
// stopped without keep, and Identity accepts its leader only with the
// start time recorded for it, not with any other.
func TestStopTaggedUntaggedGroupNeedsItsIdentity(t *testing.T) {
	leader, pids := startTagged(t, "UNRELATED=1", `echo $$ >>"$PIDS"; exec sleep 30`, 1)
	if pids[0] != leader {
		t.Fatalf("setup: leader %d wrote %d", leader, pids[0])
	}
	p, ok := Lookup(leader)
	if !ok || p.Start == 0 {
		t.Fatalf("setup: Lookup(%d) = %+v, %v", leader, p, ok)
	}
	for _, keep := range []func(Process) bool{nil, Identity(leader, 0), Identity(leader, p.Start+1), Identity(leader+1, p.Start)} {
		if st := StopTagged(Tag("RALPH_AGENT_TOKEN", "none"), leader, keep, time.Second); st.Any() || !alive(leader) {
			t.Fatalf("an unrelated group was stopped: %+v", st)
		}
	}
	if st := StopTagged("", leader, Identity(leader, p.Start), time.Second); !slices.Contains(st.Groups, leader) || alive(leader) {
		t.Fatalf("the group of the recorded identity was not stopped: %+v", st)
	}
}
