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

// Mermaid is the task machine's diagram (`ralph diagram fleet`).
func Mermaid() string { return landing.Mermaid() }
