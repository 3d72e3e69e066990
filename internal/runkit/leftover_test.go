package runkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// startUnrelated starts, in dir and its own process group, a program that
// is not ralph's: it carries no agent token, as a user's editor, shell or
// dev server started in the repository after a crash does.
func startUnrelated(t *testing.T, dir string) int {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	return cmd.Process.Pid
}

func running(pid int) bool { _, ok := proc.Lookup(pid); return ok }

// A recorded process group whose number now belongs to an unrelated
// program working in the repository is left alone, whatever the record
// holds: this run's token (the program does not carry it), an older
// record's group alone, or a wrong start time. Only the token or the
// leader's recorded identity, start time included, stops a group.
func TestStopLeftoverSparesAnUnrelatedProgramInTheRepository(t *testing.T) {
	repo := t.TempDir()
	pid := startUnrelated(t, repo)
	p, ok := proc.Lookup(pid)
	if !ok {
		t.Fatal("setup: the program is not running")
	}
	for _, c := range []struct {
		token string
		start uint64
	}{{"this-run", 0}, {"", 0}, {"this-run", p.Start + 1}, {"", p.Start + 1}} {
		if st := StopLeftover(c.token, pid, c.start); st.Any() || !running(pid) {
			t.Fatalf("StopLeftover(%q, %d, %d) stopped an unrelated program in the repository: %+v", c.token, pid, c.start, st)
		}
	}
	f := AgentFile(filepath.Join(repo, "agent.pgid"))
	for _, rec := range []string{"PGID\n", "PGID this-run\n", "PGID this-run 1\n"} {
		os.WriteFile(string(f), []byte(strings.ReplaceAll(rec, "PGID", strconv.Itoa(pid))), 0o644)
		if st, found := f.StopRecorded(); !found || st.Any() || !running(pid) {
			t.Fatalf("record %q: stopped an unrelated program (found %v): %+v", rec, found, st)
		}
	}
	// Saved while the agent runs, the record holds the leader's start
	// time: that identity, not the group number alone, finds it again.
	if err := f.Save(pid, "this-run"); err != nil {
		t.Fatal(err)
	}
	st, found := f.StopRecorded()
	if !found || len(st.Groups) != 1 || st.Groups[0] != pid {
		t.Fatalf("the group of the recorded leader was not stopped (found %v): %+v", found, st)
	}
	wait.Until(t, wait.Long, func() bool { return !running(pid) }, "the recorded leader to be gone after StopRecorded")
}
