package store

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Asking whether the lock is held, as `ralph status` does, must never make
// a starting ralph find the lock busy: Held only looks.
func TestHeldNeverMakesTryLockFail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				Held(p)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 3000 {
		// One attempt, without the re-check, so that a single instant in
		// which Held took the lock would show.
		l, err := tryLockOnce(p, "ralph build")
		if err != nil {
			t.Fatalf("attempt %d: %v while another goroutine only asked whether the lock is held", i, err)
		}
		l.Unlock()
	}
}

func TestHeldReportsTheHolderWithoutCreatingTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	if _, held := Held(p); held {
		t.Fatal("a missing lock file is held")
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("Held created the lock file: %v", err)
	}
	l, err := TryLock(p, "ralph build")
	if err != nil {
		t.Fatal(err)
	}
	h, held := Held(p)
	if !held || h == nil || h.PID != os.Getpid() || h.Command != "ralph build" {
		t.Fatalf("while held: Held = %+v, %v; want this process named", h, held)
	}
	l.Unlock()
	if _, held := Held(p); held {
		t.Fatal("still held after Unlock")
	}
}

// A holder that lets go within the short wait does not make TryLock
// refuse: a ralph that is just exiting is not "another ralph".
func TestTryLockSucceedsWhenReleasedWithinTheRecheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	l, err := TryLock(p, "ralph build")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(lockRecheck/4, func() { l.Unlock() })
	l2, err := TryLock(p, "ralph build")
	if err != nil {
		t.Fatalf("lock released %v after the refusal: %v", lockRecheck/4, err)
	}
	l2.Unlock()
}

// A child started by the holder (an agent, a check) must not keep the
// lock once the holder is gone: a restart right after kill -9 works.
func TestLockIsNotInheritedByChildren(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	startHolder(t, p, "exec")
	l, err := TryLock(p, "ralph build")
	if err != nil {
		t.Fatalf("holder killed, its child still running: %v", err)
	}
	l.Unlock()
}

// When something the dead holder left behind does keep the lock, the
// refusal says the named ralph has exited and how to find what holds it,
// rather than sending the user to wait for a dead pid.
func TestRefusalSaysWhenTheHolderHasExited(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	pid := startHolder(t, p, "leak")
	_, err := TryLock(p, "ralph build")
	if !IsLocked(err) {
		t.Fatalf("err = %v, want a refusal: the leaked descriptor still holds the lock", err)
	}
	for _, want := range []string{"has exited", "pid " + strconv.Itoa(pid), "fuser"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}

// startHolder runs this test binary as a ralph that takes the lock at path
// and starts `sleep` as its child, then kills it with SIGKILL while the
// child keeps running. mode "leak" hands the child the locked descriptor on
// purpose, as a leaked one would be. It returns the killed holder's pid.
func startHolder(t *testing.T, path, mode string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$")
	cmd.Env = append(os.Environ(), "RALPH_LOCK_HOLDER="+mode+":"+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("holder did not start: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "child ")))
	if err != nil {
		t.Fatalf("holder said %q", line)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if _, held := Held(path); !held {
		t.Fatal("the holder does not hold the lock")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if syscall.Kill(child, 0) != nil {
		t.Fatal("the holder's child did not outlive it")
	}
	return cmd.Process.Pid
}

// TestLockHolderProcess is the holder that startHolder runs; on its own it
// does nothing.
func TestLockHolderProcess(t *testing.T) {
	mode, path, ok := strings.Cut(os.Getenv("RALPH_LOCK_HOLDER"), ":")
	if !ok {
		return
	}
	l, err := TryLock(path, "ralph build")
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "60")
	if mode == "leak" {
		child.ExtraFiles = []*os.File{l.f}
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("child " + strconv.Itoa(child.Process.Pid) + "\n")
	// The holder must outlive the test's look at the lock, which kills it:
	// the sleep is the behaviour (a ralph that holds the lock), not a sync.
	time.Sleep(time.Minute)
	os.Exit(0)
}
