// Package crash kills the real ralph binary with SIGKILL at every persisted
// transition and at random instants, in builds, sessions and threads, and
// checks that the next start resumes to where an uninterrupted run ends.
// It is a package of its own so that go test runs it side by side with
// cmd/ralph's scripts.
package crash

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`.
func TestMain(m *testing.M) { clitest.Main(m) }
