// Package clitest is the setup that every package of end-to-end tests of
// the ralph binary shares: cmd/ralph's scripts and the packages under
// internal/e2e (crash, real agent CLIs, real bd). It is test code.
//
// The end-to-end tests live in several packages so that `go test ./...` runs
// them side by side and each package stays far inside its timeout; each
// package's TestMain calls [Main], which makes the test binary double as the
// `ralph` and `fakeagent` commands.
package clitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/cli"
	"github.com/ralphloop/ralph/internal/fakeagent"
	"github.com/rogpeppe/go-internal/testscript"
)

// Main is a TestMain: testscript.Main copies the test binary onto PATH as
// `ralph` and `fakeagent` (the scripted test double for an agent CLI), so
// that scripts and exec.LookPath find both, then runs the tests (m is a
// *testing.M, or one wrapped to stop what its tests shared).
func Main(m testscript.TestingM) {
	testscript.Main(m, map[string]func(){
		"ralph":     func() { os.Exit(cli.Main()) },
		"fakeagent": func() { os.Exit(fakeagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// NoExitSleep is the GORACE value for the processes a test starts: under
// -race every process the test binary becomes (ralph, the fake agent)
// sleeps a second on exit (the race runtime's atexit_sleep_ms), and the
// end-to-end tests start hundreds of them. Options already in GORACE are
// kept.
func NoExitSleep() string {
	return strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
}

// NeedGit fails the test when git is not on PATH: every end-to-end test
// runs real git.
func NeedGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the end-to-end tests need git on PATH: install it (apt-get install git)")
	}
}

// RepoRoot is the module's root directory, found upwards from the working
// directory (go test runs a package's tests in its own directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod in %s or above it: run the tests with go test from inside the repository", dir)
		}
	}
}

// ScriptParams are the testscript parameters of the scripts in dir: each
// is a user's session with the real ralph binary, real git and the fake
// agent, in a fresh HOME with its own git configuration.
func ScriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:   dir,
		Setup: setup,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile": cmdWaitFile,
			"needbd":   cmdNeedBD,
		},
	}
}

func setup(env *testscript.Env) error {
	home := filepath.Join(env.WorkDir, ".home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	env.Setenv("HOME", home)
	env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	// The fake agent's scenario and its use counts live in the work tree;
	// a global excludes file keeps them out of git's view, as a user's
	// global ignore would.
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
	env.Setenv("GORACE", NoExitSleep())
	// Scripts whose checks run go test share the user's build cache, so
	// each does not compile the standard library again in its fresh HOME;
	// no toolchain is ever downloaded.
	if c := goCache(); c != "" {
		env.Setenv("GOCACHE", c)
	}
	env.Setenv("GOTOOLCHAIN", "local")
	env.Setenv("GOFLAGS", "-mod=mod")
	env.Setenv("GOPROXY", "off")
	return nil
}

// goCache is the user's Go build cache, "" when go is not installed.
var goCache = sync.OnceValue(func() string {
	if c := os.Getenv("GOCACHE"); c != "" {
		return c
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})

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
	ts.Fatalf("waitfile: %s did not appear within %s", args[0], limit)
}

// cmdNeedBD puts the pinned bd that scripts/install-bd.sh builds into
// .tools/bd/bd on the script's PATH (and in RALPH_BD), and fails, never
// skips, when it is missing: `make test` builds it first.
func cmdNeedBD(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: needbd")
	}
	root, err := RepoRoot()
	ts.Check(err)
	bin := filepath.Join(root, ".tools", "bd", "bd")
	if _, err := os.Stat(bin); err != nil {
		ts.Fatalf("the beads integration tests need the pinned bd at .tools/bd/bd: run `bash scripts/install-bd.sh` (or `make bd`) first (%v)", err)
	}
	ts.Setenv("RALPH_BD", bin)
	ts.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+ts.Getenv("PATH"))
	ts.Setenv("BD_NON_INTERACTIVE", "1")
	ts.Setenv("BEADS_ACTOR", "tester")
}
