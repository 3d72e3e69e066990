// Package browser tests `ralph serve` end to end: the built ralph against
// real workspaces and real git, its control API with the real steerer,
// and its page in a real browser (Debian's chromium, driven by chromedp)
// during a build with the fake agent.
package browser

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`.
func TestMain(m *testing.M) { clitest.Main(m) }
