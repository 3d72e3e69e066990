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

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/machine"
)

// TaskState is where one task of a run is.
type TaskState string

const (
	Ready       TaskState = "ready"        // waiting for a worker (its dependencies may not be done yet)
	Preparing   TaskState = "preparing"    // a host is making its worktree and branch
	Working     TaskState = "working"      // its loop runs on the host that holds its worktree
	Cooling     TaskState = "cooling"      // every agent is at a usage limit: a durable timer runs
	Queued      TaskState = "queued"       // verified on its branch, waiting for the merge queue
	Landing     TaskState = "landing"      // the integration host integrates and checks it
	Landed      TaskState = "landed"       // its commit is on the target branch
	SentBack    TaskState = "sent_back"    // it could not land: a worker redoes it on the new tip
	Blocked     TaskState = "blocked"      // its loop failed too often, or a person blocked it
	NeedsReview TaskState = "needs_review" // it could not land after the retry limit
)

// TaskStates are every state, in the order a diagram lists them.
var TaskStates = []TaskState{Ready, Preparing, Working, Cooling, Queued, Landing, Landed, SentBack, Blocked, NeedsReview}

// TaskEvent is what happened to a task.
type TaskEvent string

const (
	Dispatched TaskEvent = "dispatched" // a worker slot took it
	Prepared   TaskEvent = "prepared"   // a host made its worktree
	Verified   TaskEvent = "verified"   // its loop completed it and the branch is on the exchange
	Failed     TaskEvent = "failed"     // its loop blocked it (failed attempts, a blocker)
	Limited    TaskEvent = "limited"    // every agent is at a usage limit
	Cooled     TaskEvent = "cooled"     // the cooldown's timer fired
	HostLost   TaskEvent = "host_lost"  // its host did not take the work in time, or its worktree is gone
	Taken      TaskEvent = "taken"      // the merge queue took it
	Integrated TaskEvent = "integrated" // it landed on the target
	Conflicted TaskEvent = "conflicted" // a conflict or a check after integration: redo with attempts left
	Exhausted  TaskEvent = "exhausted"  // the same, with no landing attempts left
	BlockedBy  TaskEvent = "block"      // a person blocked it
	Unblocked  TaskEvent = "unblock"    // a person unblocked it
	Stopped    TaskEvent = "stopped"    // the run stopped with it in flight: it starts again next run
)

// TaskAction is what the workflow does on entering a state.
type TaskAction string

const (
	ActPrepare TaskAction = "prepare" // activity Prepare on the shared queue: any host takes it
	ActWork    TaskAction = "work"    // activity Work on the host's own queue
	ActCool    TaskAction = "cool"    // a durable timer until the earliest reset
	ActLand    TaskAction = "land"    // activity Land on the integration host's queue
	ActNone    TaskAction = ""
)

// TaskEdge is one row of the table.
type TaskEdge struct {
	From   TaskState
	Event  TaskEvent
	To     TaskState
	Action TaskAction
	// Human edges are taken only on a person's command.
	Human bool
}

// taskTable is the task machine. Every way a task moves is a row; a pair
// not in the table is refused (and an Update naming it fails validation).
var taskTable = []TaskEdge{
	{Ready, Dispatched, Preparing, ActPrepare, false},
	{SentBack, Dispatched, Preparing, ActPrepare, false},
	{Preparing, Prepared, Working, ActWork, false},
	{Preparing, HostLost, Ready, ActNone, false},
	{Preparing, Failed, Blocked, ActNone, false},
	{Working, Verified, Queued, ActNone, false},
	{Working, Failed, Blocked, ActNone, false},
	{Working, Limited, Cooling, ActCool, false},
	{Working, HostLost, Ready, ActNone, false},
	{Cooling, Cooled, Working, ActWork, false},
	{Queued, Taken, Landing, ActLand, false},
	{Landing, Integrated, Landed, ActNone, false},
	{Landing, Conflicted, SentBack, ActNone, false},
	{Landing, Exhausted, NeedsReview, ActNone, false},
	{Preparing, Stopped, Ready, ActNone, false},
	{Working, Stopped, Ready, ActNone, false},
	{Cooling, Stopped, Ready, ActNone, false},
	{Ready, BlockedBy, Blocked, ActNone, true},
	{SentBack, BlockedBy, Blocked, ActNone, true},
	{Queued, BlockedBy, Blocked, ActNone, true},
	{Blocked, Unblocked, Ready, ActNone, true},
	{NeedsReview, Unblocked, Ready, ActNone, true},
}

// Next is the task machine: the state after ev in from, and the action to
// take on entering it. A pair the table does not hold is an error.
func Next(from TaskState, ev TaskEvent) (TaskState, TaskAction, error) {
	for _, e := range taskTable {
		if e.From == from && e.Event == ev {
			return e.To, e.Action, nil
		}
	}
	return from, ActNone, fmt.Errorf("a %s task cannot take %q (it can take: %s)", from, ev, strings.Join(Allowed(from), ", "))
}

// Allowed lists the events a task in state s takes.
func Allowed(s TaskState) []string {
	var out []string
	for _, e := range taskTable {
		if e.From == s {
			out = append(out, string(e.Event))
		}
	}
	return out
}

// Edges returns the table, for tests and the diagram.
func Edges() []TaskEdge { return slices.Clone(taskTable) }

// Mermaid renders the task machine as a Mermaid state diagram, generated
// from the table (`ralph diagram fleet`).
func Mermaid() string {
	arrows := []machine.Arrow{{From: machine.Pseudo, To: string(Ready)}}
	for _, e := range taskTable {
		label := string(e.Event)
		if e.Action != ActNone {
			label += " / " + string(e.Action)
		}
		if e.Human {
			label += " (person)"
		}
		arrows = append(arrows, machine.Arrow{From: string(e.From), To: string(e.To), Label: label})
	}
	arrows = append(arrows, machine.Arrow{From: string(Landed), To: machine.Pseudo})
	return machine.Mermaid(arrows)
}
