package fakeagent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// agentCmd runs this test binary as the fake agent with the given scenario.
func agentCmd(t *testing.T, scenarioPath, prompt string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envTestMain+"=1", EnvScenario+"="+scenarioPath)
	cmd.Stdin = strings.NewReader(prompt)
	return cmd
}

// startUntilReady starts cmd and waits until it prints the line "ready".
func startUntilReady(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		if l != "ready" {
			t.Fatalf("first line = %q, want ready", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fake agent did not print ready")
	}
}

func waitChan(cmd *exec.Cmd) <-chan error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done
}

func signalOf(t *testing.T, err error) syscall.Signal {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("wait: %v, want death by signal", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		t.Fatalf("exited with %d, want death by signal", ws.ExitStatus())
	}
	return ws.Signal()
}

func TestHangIgnoresSigtermButNotSigkill(t *testing.T) {
	path, _ := setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{
		{IgnoreSigterm: true}, say("ready"), {Hang: true},
	}}}})
	cmd := agentCmd(t, path, "prompt")
	startUntilReady(t, cmd)
	done := waitChan(cmd)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the fake agent died on SIGTERM: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if sig := signalOf(t, err); sig != syscall.SIGKILL {
			t.Fatalf("died by %v, want SIGKILL", sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGKILL did not end the fake agent")
	}
}

func TestHangDiesOnSigterm(t *testing.T) {
	path, _ := setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{say("ready"), {Hang: true}}}}})
	cmd := agentCmd(t, path, "prompt")
	startUntilReady(t, cmd)
	done := waitChan(cmd)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if sig := signalOf(t, err); sig != syscall.SIGTERM {
			t.Fatalf("died by %v, want SIGTERM", sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not end a hanging fake agent")
	}
}

// TestConcurrentProcessesKeepCounts runs many agent processes at once; the
// flock around the state file must not lose a single use.
func TestConcurrentProcessesKeepCounts(t *testing.T) {
	const procs, limited = 12, 5
	path, _ := setup(t, Scenario{Invocations: []Invocation{
		{Times: limited, Steps: []Step{say("limited")}},
		{Steps: []Step{say("fallback")}},
	}})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[string]int{}
		errs   []error
	)
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := agentCmd(t, path, fmt.Sprintf("prompt %d", i))
			out, err := cmd.Output()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			counts[strings.TrimSpace(string(out))]++
		}(i)
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("agent processes failed: %v", errs)
	}
	if counts["limited"] != limited || counts["fallback"] != procs-limited {
		t.Fatalf("counts = %v, want %d limited and %d fallback", counts, limited, procs-limited)
	}
	st, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Calls != procs || st.Used[0] != limited || st.Used[1] != procs-limited {
		t.Fatalf("state = %+v", st)
	}
}

// TestStreamsEventsAsTheyHappen reads the first claude event while the
// process is still sleeping: output is flushed per event.
func TestStreamsEventsAsTheyHappen(t *testing.T) {
	path, _ := setup(t, Scenario{Format: FormatClaude, Invocations: []Invocation{{Steps: []Step{
		say("ready"), {Sleep: "30s"}, final("late"),
	}}}})
	cmd := agentCmd(t, path, "prompt")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 4)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	for _, want := range []string{`"type":"system"`, `"text":"ready"`} {
		select {
		case l := <-lines:
			if !strings.Contains(l, want) {
				t.Fatalf("line %q does not contain %s", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line with %s before the sleep ended: output is not flushed per event", want)
		}
	}
}
