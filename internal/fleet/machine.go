// Package fleet runs ralph's parallel build on Temporal, across many
// machines: the workflow holds the run's state and the task machine's pure
// Next; every action that touches a checkout is an activity on the task
// queue of the host that holds it; usage-limit cooldowns are durable
// timers; control commands are Signals and Updates; status is a Query.
//
// The workflow never touches a disk, a process or a clock of its own: what
// it decides comes from its input, the activities' results and the
// commands it was sent, so Temporal can replay it on any machine.
package fleet

import "github.com/ralphloop/ralph/internal/landing"

// TaskState is where one task of a run is: a state of the parallel core's
// task machine (landing), which the local engine's tasks move through too.
type TaskState = landing.TaskState

const (
	Ready       = landing.Ready
	Preparing   = landing.Preparing
	Working     = landing.Working
	Cooling     = landing.Cooling
	Queued      = landing.Queued
	Landing     = landing.Landing
	Landed      = landing.Landed
	SentBack    = landing.SentBack
	Blocked     = landing.Blocked
	NeedsReview = landing.NeedsReview
)

// Mermaid is the task machine's diagram (`ralph diagram fleet`).
func Mermaid() string { return landing.Mermaid() }
