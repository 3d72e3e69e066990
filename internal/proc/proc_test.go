package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/wait"
)

// run is Run with the test failing on an unexpected error.
func run(t *testing.T, ctx context.Context, s Spec) Outcome {
	t.Helper()
	out, err := Run(ctx, s)
	if err != nil {
		t.Fatalf("Run(%q): %v", s.Args, err)
	}
	return out
}

// sh builds a Spec running script with sh -c.
func sh(script string) Spec { return Spec{Args: []string{"sh", "-c", script}} }

// wellBefore bounds a Run whose child would sleep 30 s unless what the test
// names (a timeout, a kill, a cancel) ends it: generous for a loaded
// machine, still far from what a Run that missed it would take.
const wellBefore = 10 * time.Second

// alive reports whether pid names a live process; zombies count as gone
// because nothing may reap them in a container without an init.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// waitGone fails the test unless pid disappears (exits or is a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	if !wait.Within(wait.Long, func() bool { return !alive(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("process %d still alive %s after Run returned", pid, wait.Long)
	}
}

func TestExitCodes(t *testing.T) {
	for _, code := range []int{0, 1, 3, 42} {
		out := run(t, context.Background(), sh("exit "+strconv.Itoa(code)))
		if out.ExitCode != code {
			t.Errorf("exit %d: ExitCode = %d", code, out.ExitCode)
		}
		if out.TimedOut || out.Idle || out.Interrupted || out.NotFound {
			t.Errorf("exit %d: unexpected flags %+v", code, out)
		}
	}
}

func TestKilledBySignalHasExitCodeMinusOne(t *testing.T) {
	out := run(t, context.Background(), sh("kill -KILL $$"))
	if out.ExitCode != -1 {
		t.Errorf("ExitCode = %d, want -1", out.ExitCode)
	}
}

func TestOutputAndStdin(t *testing.T) {
	var stdout, stderr bytes.Buffer
	s := sh("cat; echo err >&2")
	s.Stdin = strings.NewReader("hello\n")
	s.Stdout, s.Stderr = &stdout, &stderr
	run(t, context.Background(), s)
	if stdout.String() != "hello\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestNilStdinIsEmpty(t *testing.T) {
	var stdout bytes.Buffer
	s := Spec{Args: []string{"cat"}, Stdout: &stdout, Timeout: 5 * time.Second}
	out := run(t, context.Background(), s)
	if out.ExitCode != 0 || out.TimedOut || stdout.Len() != 0 {
		t.Errorf("cat with nil stdin: %+v, output %q", out, stdout.String())
	}
}

func TestSharedWriterKeepsOrder(t *testing.T) {
	var b bytes.Buffer // not safe for concurrent use: -race checks the sharing
	s := sh("for i in 1 2 3; do echo out$i; echo err$i >&2; done")
	s.Stdout, s.Stderr = &b, &b
	run(t, context.Background(), s)
	want := "out1\nerr1\nout2\nerr2\nout3\nerr3\n"
	if b.String() != want {
		t.Errorf("combined output %q, want %q", b.String(), want)
	}
}

func TestDirAndEnv(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	s := sh(`printf '%s %s' "$PWD" "$RALPH_X"`)
	s.Dir = dir
	s.Env = []string{"PATH=" + os.Getenv("PATH"), "RALPH_X=y"}
	s.Stdout = &b
	run(t, context.Background(), s)
	if b.String() != dir+" y" {
		t.Errorf("output %q, want %q", b.String(), dir+" y")
	}
}

func TestEnvPathDecidesLookup(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "ralph-test-prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho found\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	s := Spec{Args: []string{"ralph-test-prog"}, Env: []string{"PATH=" + dir}, Stdout: &b}
	run(t, context.Background(), s)
	if b.String() != "found\n" {
		t.Errorf("output %q", b.String())
	}
}

func TestNotFound(t *testing.T) {
	nonExec := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(nonExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"definitely-not-installed-xyz", "--version"},
		{"/nonexistent/dir/prog"},
		{nonExec},
	} {
		out, err := Run(context.Background(), Spec{Args: args})
		if !out.NotFound || out.ExitCode != -1 {
			t.Errorf("%q: outcome %+v, want NotFound", args, out)
		}
		if !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("%q: err %v does not match exec.ErrNotFound", args, err)
		}
	}
}

func TestBadDirIsNotNotFound(t *testing.T) {
	out, err := Run(context.Background(), Spec{Args: []string{"true"}, Dir: "/nonexistent/dir"})
	if err == nil || out.NotFound {
		t.Errorf("outcome %+v, err %v; want an error without NotFound", out, err)
	}
}

func TestTimeoutKillsQuickly(t *testing.T) {
	s := sh("sleep 30")
	s.Timeout = 100 * time.Millisecond
	start := time.Now()
	out := run(t, context.Background(), s)
	if !out.TimedOut || out.ExitCode != -1 {
		t.Errorf("outcome %+v, want TimedOut with ExitCode -1", out)
	}
	if d := time.Since(start); d > wellBefore {
		t.Errorf("Run took %v", d)
	}
}

func TestIgnoredTermIsKilledAfterGrace(t *testing.T) {
	s := sh(`trap "" TERM; sleep 30`)
	s.Timeout = 100 * time.Millisecond
	s.Grace = 300 * time.Millisecond
	start := time.Now()
	out := run(t, context.Background(), s)
	d := time.Since(start)
	if !out.TimedOut {
		t.Errorf("outcome %+v, want TimedOut", out)
	}
	if d < s.Timeout+s.Grace || d > wellBefore {
		t.Errorf("Run took %v, want about timeout+grace (%v)", d, s.Timeout+s.Grace)
	}
}

// grandchildPID runs script, which must print a background pid on its first
// line, and returns that pid.
func grandchildPID(t *testing.T, b *bytes.Buffer) int {
	t.Helper()
	line, _, _ := strings.Cut(b.String(), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("no pid in output %q", b.String())
	}
	return pid
}

func TestGrandchildKilledOnTimeout(t *testing.T) {
	var b bytes.Buffer
	// The grandchild inherits stdout, so it also holds the pipe open.
	s := sh("sleep 30 & echo $!; sleep 30")
	s.Stdout = &b
	s.Timeout = 200 * time.Millisecond
	s.Grace = 200 * time.Millisecond
	start := time.Now()
	out := run(t, context.Background(), s)
	if d := time.Since(start); d > wellBefore {
		t.Errorf("Run took %v", d)
	}
	if !out.TimedOut {
		t.Errorf("outcome %+v, want TimedOut", out)
	}
	waitGone(t, grandchildPID(t, &b))
}

func TestLeftoverGrandchildAfterNormalExit(t *testing.T) {
	var b bytes.Buffer
	s := sh("sleep 30 & echo $!; echo done")
	s.Stdout = &b
	s.Grace = 200 * time.Millisecond
	start := time.Now()
	out := run(t, context.Background(), s)
	if d := time.Since(start); d > wellBefore {
		t.Errorf("Run took %v", d)
	}
	if out.ExitCode != 0 || out.TimedOut || out.Interrupted {
		t.Errorf("outcome %+v, want a clean exit", out)
	}
	if !strings.HasSuffix(b.String(), "done\n") {
		t.Errorf("output %q lacks the final line", b.String())
	}
	waitGone(t, grandchildPID(t, &b))
}

func TestEscapedDescendantDoesNotHangRun(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Fatalf("setsid is needed for this test: %v", err)
	}
	var b bytes.Buffer
	// setsid leaves the group, so only the drain bound can end the wait.
	s := sh("setsid sleep 30 & echo $!; sleep 0.1")
	s.Stdout = &b
	s.Grace = 200 * time.Millisecond
	start := time.Now()
	run(t, context.Background(), s)
	pid := grandchildPID(t, &b)
	defer syscall.Kill(pid, syscall.SIGKILL)
	if d := time.Since(start); d > wellBefore {
		t.Errorf("Run took %v", d)
	}
}

func TestIdleTimeout(t *testing.T) {
	var b bytes.Buffer
	s := sh("echo hi; sleep 30")
	s.Stdout = &b
	s.IdleTimeout = 200 * time.Millisecond
	start := time.Now()
	out := run(t, context.Background(), s)
	if !out.Idle || out.TimedOut || out.Interrupted {
		t.Errorf("outcome %+v, want Idle only", out)
	}
	if d := time.Since(start); d < s.IdleTimeout || d > wellBefore {
		t.Errorf("Run took %v", d)
	}
	if b.String() != "hi\n" {
		t.Errorf("output %q", b.String())
	}
}

func TestSteadyOutputIsNotIdle(t *testing.T) {
	// Output goes nowhere: the idle watch must still see it. A line
	// every 100 ms for 3 s against a 1 s idle limit: the run outlasts the
	// limit, and a gap between lines stays far below it under load.
	s := sh("i=0; while [ $i -lt 30 ]; do echo $i >&2; sleep 0.1; i=$((i+1)); done")
	s.IdleTimeout = time.Second
	out := run(t, context.Background(), s)
	if out.Idle || out.ExitCode != 0 {
		t.Errorf("outcome %+v, want a clean exit", out)
	}
}

func TestContextCancelInterrupts(t *testing.T) {
	// Cancelled once the child is known to run: its first line.
	ctx, cancel := context.WithCancel(context.Background())
	s := sh("echo started; sleep 30")
	s.Stdout = cancelOnWrite(cancel)
	start := time.Now()
	out := run(t, ctx, s)
	if !out.Interrupted || out.TimedOut || out.ExitCode != -1 {
		t.Errorf("outcome %+v, want Interrupted", out)
	}
	if d := time.Since(start); d > wellBefore {
		t.Errorf("Run took %v", d)
	}
}

func TestCancelledContextDoesNotStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	marker := filepath.Join(t.TempDir(), "ran")
	out := run(t, ctx, sh("touch "+marker))
	if !out.Interrupted {
		t.Errorf("outcome %+v, want Interrupted", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("child ran despite a cancelled context")
	}
}

// cancelOnWrite calls cancel at the first write to it.
type cancelOnWrite context.CancelFunc

func (c cancelOnWrite) Write(p []byte) (int, error) { c(); return len(p), nil }

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorIsReported(t *testing.T) {
	s := sh("echo hi")
	s.Stdout = failWriter{}
	out, err := Run(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err = %v, want the write error", err)
	}
	if out.ExitCode != 0 {
		t.Errorf("ExitCode = %d", out.ExitCode)
	}
}
