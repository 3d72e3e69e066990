// Package beads runs the end-to-end scripts of the beads task source in
// testdata/script: the real ralph binary, real git, the fake agent and the
// pinned real bd (scripts/install-bd.sh builds it; the scripts' needbd
// fails without it). It is a package of its own so that go test runs it
// side by side with cmd/ralph's scripts.
package beads

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`.
func TestMain(m *testing.M) { clitest.Main(m) }

func TestScripts(t *testing.T) {
	clitest.NeedGit(t)
	testscript.Run(t, clitest.ScriptParams("testdata/script"))
}
