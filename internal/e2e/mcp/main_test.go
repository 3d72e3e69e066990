// Package mcp drives `ralph mcp`, the built binary, with a real MCP client
// (the official Go SDK's, over a command transport): it lists the tools,
// reads the status and the journal, and steers a fake-agent build with
// them. It is a package of its own so that go test runs it side by side
// with the other end-to-end packages.
package mcp

import (
	"testing"

	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// TestMain makes the test binary double as `ralph` and `fakeagent`.
func TestMain(m *testing.M) { clitest.Main(m) }
