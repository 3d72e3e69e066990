// Package fleet runs the Temporal engine end to end: a real Temporal dev
// server, two `ralph worker` processes on two clones of one repository
// (two hosts on one machine), a bare repository as the exchange remote,
// and `ralph build --workers 2` across them, with one worker killed by
// SIGKILL in the middle of an agent attempt. It is a package of its own so
// that go test runs it side by side with the other end-to-end packages.
//
// The dev server is the pinned Temporal CLI that `make temporal`
// (scripts/install-temporal.sh) builds into .tools/temporal/temporal; the
// test fails, never skips, when it is missing.
package fleet

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`.
func TestMain(m *testing.M) { clitest.Main(m) }
