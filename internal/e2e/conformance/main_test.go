// Package conformance runs one list of parallel-build scenarios against
// every executor of the parallel core: the local engine (`ralph build
// --workers N`, in process) and the Temporal engine (`[engine] kind =
// "temporal"`, a real dev server and a `ralph worker`). Each scenario is a
// user's repository, a scripted agent and a check; it starts a build,
// may stop, kill or resume it, and judges what the user sees: the target
// branch's commits, the tasks' states in `ralph status --json`, the
// journal and the build's last words. An executor that does not do what
// a scenario asks fails it, never skips it (the shape of go-workflows'
// backend/test: one interface, its implementations, one suite).
//
// The Temporal dev server is the pinned CLI that `make temporal` builds
// into .tools/temporal/temporal; one server serves every scenario, each
// on its own task queue (so its own workflow id).
package conformance

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`, and
// stops the shared dev server once every test ran.
func TestMain(m *testing.M) { clitest.Main(afterRun{m}) }

// afterRun runs the tests, then stops what they shared.
type afterRun struct{ m *testing.M }

func (a afterRun) Run() int {
	code := a.m.Run()
	devServer.stop()
	return code
}
