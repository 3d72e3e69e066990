package session_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/session"
)

// A role agent a kill of ralph left running is stopped by the next run of
// the session even when that run cannot go on (here: progress.md cannot
// be read), so it does not go on working in the repository alone.
func TestLeftoverAgentIsStoppedWhenTheRunCannotStart(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RALPH_AGENT_TOKEN=leftover-tok"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	if err := os.WriteFile(filepath.Join(e.dir, "agent.pgid"), []byte("0 leftover-tok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := readTestFile(t, session.ProgressPath(e.dir))
	if err := os.WriteFile(session.ProgressPath(e.dir), []byte("- Attempt: x\n"+prog), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.runner(t, newInvoker(t)).Run(context.Background()); err == nil {
		t.Fatal("the run went on from a progress.md it cannot read")
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the leftover agent is still running after a run that could not start")
	}
}
