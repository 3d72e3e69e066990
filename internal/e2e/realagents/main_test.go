// Package realagents runs the real ralph binary with the real agent CLIs
// (Claude Code, Codex, opencode, Gemini CLI, installed by
// scripts/install-agents.sh) against the scripted model server. It is a
// package of its own so that go test runs it side by side with the other
// end-to-end tests.
package realagents

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// TestMain makes the test binary double as `ralph`.
func TestMain(m *testing.M) { clitest.Main(m) }
