package runkit

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// crashAfter is a test hook: with RALPH_TEST_CRASH_AFTER=N set, ralph kills
// itself with SIGKILL right after the Nth state transition is persisted, so
// that tests can prove a crash at any transition resumes correctly.
var crashAfter, transitions = func() int {
	n, _ := strconv.Atoi(os.Getenv("RALPH_TEST_CRASH_AFTER"))
	return n
}(), 0

// CrashHook counts one persisted transition; callers invoke it right after
// writing the state a crash must resume from.
func CrashHook() {
	if crashAfter <= 0 {
		return
	}
	transitions++
	if transitions == crashAfter {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

// crashAt is a test hook like crashAfter for the instants between two
// transitions: with RALPH_TEST_CRASH_AT=NAME (or NAME@N, the Nth time the
// point is reached) set, CrashPoint(NAME) kills ralph with SIGKILL.
var crashAt, crashAtCount = func() (string, int) {
	name, n, ok := strings.Cut(os.Getenv("RALPH_TEST_CRASH_AT"), "@")
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 1 {
		count = 1
	}
	return name, count
}()

var crashAtSeen int

// CrashPoint kills the process when RALPH_TEST_CRASH_AT names point.
func CrashPoint(point string) {
	if crashAt == "" || crashAt != point {
		return
	}
	if crashAtSeen++; crashAtSeen == crashAtCount {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
