package cli

import "github.com/ralphloop/ralph/internal/status"

// The status document's types live in package status, which the front
// ends (watch, serve, mcp) read without importing cli.
type (
	StatusReport   = status.Report
	BlockedTask    = status.Blocked
	ParallelStatus = status.Parallel
	WorkerStatus   = status.Worker
	QueuedTask     = status.Queued
	SessionStatus  = status.Session
	BeadsStatus    = status.Beads
)
