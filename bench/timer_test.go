package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The timing shim logs agent runs only (-p or --print, not a --version
// probe), passes the CLI's output and exit status through, and its log
// reads back as runs, their time and the gaps between them.
func TestClaudeTimerTimesAgentRunsOnly(t *testing.T) {
	dir := t.TempDir()
	shim, real, times := filepath.Join(dir, "claude"), filepath.Join(dir, "real"), filepath.Join(dir, "times")
	if err := os.WriteFile(shim, []byte(claudeTimer), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("#!/bin/sh\nsleep 0.05\necho ran \"$@\"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--version"}, {"--verbose", "-p"}, {"--print", "hello"}} {
		cmd := exec.Command(shim, args...)
		cmd.Env = append(os.Environ(), "REAL_CLAUDE="+real, "AGENT_TIMES="+times)
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || len(out) == 0 {
			t.Fatalf("claude %v through the shim: %v, %q; want the CLI's output and exit 3", args, err, out)
		}
	}
	runs, total, gaps := readAgentTimes(times)
	if runs != 2 || total < 100*time.Millisecond || total > 5*time.Second || len(gaps) != 1 || gaps[0] < 0 || gaps[0] > 5*time.Second {
		t.Errorf("runs %d, total %v, gaps %v; want the two agent runs of at least 50 ms each", runs, total, gaps)
	}
}
