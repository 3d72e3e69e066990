package main

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`.
func TestMain(m *testing.M) { clitest.Main(m) }

// TestScripts runs the end-to-end CLI scripts in testdata/script: each is a
// user's session with the real ralph binary, real git and the fake agent.
// The crash, real agent CLI and real bd tests are in internal/e2e.
func TestScripts(t *testing.T) {
	clitest.NeedGit(t)
	testscript.Run(t, withCmds(clitest.ScriptParams("testdata/script")))
}
