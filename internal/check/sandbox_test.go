package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

func needBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: install bubblewrap (apt-get install bubblewrap); the sandboxed checks' tests run it for real")
	}
}

// A hostile check (a test suite the agent wrote) copies a planted
// ~/.ssh key into the tree, appends to a file outside it and dumps its
// environment. As the user it does all three; in the sandbox it does
// none, and gets only the allow list of variables.
func TestSandboxedCheckKeepsToItsWorkTree(t *testing.T) {
	needBwrap(t)
	home, outside := t.TempDir(), filepath.Join(t.TempDir(), "victim.txt")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("PRIVATE KEY\n"), 0o600)
	os.WriteFile(outside, []byte("original\n"), 0o644)
	t.Setenv("HOME", home)
	t.Setenv("OUTSIDE", outside)
	t.Setenv("AGENT_API_KEY", "sk-not-for-checks")
	t.Setenv("CHECK_LISTED", "listed")
	hostile := Check{Name: "hostile", Format: FormatNone, Run: `cp "$HOME/.ssh/id_ed25519" stolen.txt; echo escaped >> "$OUTSIDE"; env > env.txt`}

	asUser := t.TempDir()
	Run(context.Background(), asUser, hostile)
	if b, _ := os.ReadFile(filepath.Join(asUser, "stolen.txt")); !strings.Contains(string(b), "PRIVATE KEY") {
		t.Fatalf("as the user the check did not read the key: the test proves nothing")
	}
	os.WriteFile(outside, []byte("original\n"), 0o644)

	wt := t.TempDir()
	res := RunIn(context.Background(), wt, hostile, &sandbox.Policy{Network: sandbox.NetOpen, Env: []string{"CHECK_LISTED", "OUTSIDE"}})
	if _, err := os.Stat(filepath.Join(wt, "stolen.txt")); err == nil {
		t.Error("the sandboxed check copied the key into its work tree")
	}
	if b, _ := os.ReadFile(outside); string(b) != "original\n" {
		t.Errorf("the sandboxed check wrote outside its work tree: %q", b)
	}
	env, err := os.ReadFile(filepath.Join(wt, "env.txt"))
	if err != nil {
		t.Fatalf("the sandboxed check could not write into its work tree: %v\n%s", err, res.Output)
	}
	if strings.Contains(string(env), "AGENT_API_KEY") || !strings.Contains(string(env), "CHECK_LISTED=listed") || !strings.Contains(string(env), "HOME="+home) {
		t.Errorf("the sandboxed check's environment:\n%s", env)
	}
}

// A program the sandbox hides is missing, and the output says where to
// look, rather than the check failing for no reason a person can see.
func TestSandboxedMissingProgramSaysTheSandboxHidesTheHome(t *testing.T) {
	needBwrap(t)
	res := RunIn(context.Background(), t.TempDir(), Check{Run: "definitely-not-installed-xyz"}, &sandbox.Policy{})
	if !res.Missing || res.Passed() || !strings.Contains(res.Output, "add its folder to [sandbox] readable") {
		t.Errorf("result %+v", res)
	}
}

// The check's timeout still takes down everything it started inside the
// sandbox (bwrap runs with --die-with-parent), and the processes it
// stopped were in the sandbox's own PID namespace, not ralph's.
func TestSandboxedCheckTimeoutStopsEverythingInside(t *testing.T) {
	needBwrap(t)
	marker := "4" + strconv.Itoa(os.Getpid()%100000)
	t.Cleanup(func() { // what a failed test left behind
		for _, pid := range sleeping(t, marker) {
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	done := make(chan Result, 1)
	go func() {
		done <- RunIn(context.Background(), t.TempDir(), Check{Name: "sleeps", Format: FormatNone, Timeout: 3 * time.Second,
			Run: "sleep " + marker + " & sleep " + marker + "; wait"}, &sandbox.Policy{})
	}()
	// The timeout must come while the sleeps run, or the test would pass
	// having stopped nothing.
	wait.Until(t, 3*time.Second, func() bool { return len(sleeping(t, marker)) == 2 }, "the two sleeps to run inside the sandbox")
	ours, _ := os.Readlink("/proc/self/ns/pid")
	for _, pid := range sleeping(t, marker) {
		if ns, _ := os.Readlink(filepath.Join("/proc", pid, "ns", "pid")); ns == ours {
			t.Errorf("sleep %s runs in ralph's PID namespace: the check was not sandboxed", pid)
		}
	}
	if r := <-done; !r.TimedOut || r.Passed() {
		t.Fatalf("result %+v, want TimedOut", r)
	}
	wait.Until(t, 5*time.Second, func() bool { return len(sleeping(t, marker)) == 0 }, "the sandbox's processes to be gone")
}

// sleeping lists the pids of "sleep marker".
func sleeping(t *testing.T, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ") == "sleep "+marker {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// What the sandbox adds to a check: `true` as the user (through sh, as a
// sandboxed check always is) and in the sandbox.
func BenchmarkRunShTrue(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		Run(context.Background(), dir, Check{Run: "true;", Format: FormatNone})
	}
}

func BenchmarkRunInSandboxTrue(b *testing.B) {
	needBwrap(b)
	dir := b.TempDir()
	for b.Loop() {
		RunIn(context.Background(), dir, Check{Run: "true", Format: FormatNone}, &sandbox.Policy{})
	}
}
