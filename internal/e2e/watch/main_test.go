// Package watch runs `ralph watch` in a real terminal (tmux) against a
// build with the fake agent, types the keys a person would, and reads the
// screen with capture-pane.
package watch

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`.
func TestMain(m *testing.M) { clitest.Main(m) }
