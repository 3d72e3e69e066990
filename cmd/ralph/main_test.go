package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/cli"
	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ralph": func() { os.Exit(cli.Main()) },
		// fakeagent is the scripted test double for an agent CLI.
		"fakeagent": func() { os.Exit(fakeagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script: each is a
// user's session with the real ralph binary, real git and the fake agent.
func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("these tests need git on PATH: install it (apt-get install git)")
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, ".home")
			if err := os.MkdirAll(home, 0o755); err != nil {
				return err
			}
			env.Setenv("HOME", home)
			env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			// The fake agent's scenario and its use counts live in the
			// work tree; a global excludes file keeps them out of git's
			// view, as a user's global ignore would.
			excludes := filepath.Join(home, "gitignore")
			if err := os.WriteFile(excludes, []byte("scenario.json*\n.home/\n"), 0o644); err != nil {
				return err
			}
			gitconfig := filepath.Join(home, ".gitconfig")
			if err := os.WriteFile(gitconfig, []byte("[core]\n\texcludesFile = "+excludes+"\n"), 0o644); err != nil {
				return err
			}
			env.Setenv("GIT_CONFIG_GLOBAL", gitconfig)
			env.Setenv("GIT_AUTHOR_NAME", "Test")
			env.Setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
			env.Setenv("GIT_COMMITTER_NAME", "Test")
			env.Setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
			env.Setenv("FAKEAGENT_SCENARIO", filepath.Join(env.WorkDir, "scenario.json"))
			env.Setenv("AGENT_CMD", "")
			// Under -race every ralph and fake-agent process sleeps a
			// second on exit; the scripts start hundreds of them.
			env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"needbd":   cmdNeedBD,
		},
	})
}

// cmdWaitFile waits until a file exists: waitfile PATH [SECONDS].
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: waitfile PATH [SECONDS]")
	}
	limit := 20 * time.Second
	if len(args) > 1 {
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		limit = time.Duration(n) * time.Second
	}
	p := ts.MkAbs(args[0])
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("%s", fmt.Sprintf("waitfile: %s did not appear within %s", args[0], limit))
}
