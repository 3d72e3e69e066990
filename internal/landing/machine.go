// Package landing is the parallel core both engines run: the task machine
// every task of a parallel build moves through, and the one landing
// procedure of the merge queue, which integrates a verified task branch on
// the target's tip, judges it against the tip's checks and moves the
// target, or sends the task back. The local engine (internal/engine) and
// the Temporal engine (internal/fleet) are two executors of it: the first
// moves a branch of the person's repository, the second a branch on the
// exchange remote, from an activity.
package landing

import (
	"fmt"
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

// TaskEdge is one row of the task machine, as Edges shows it.
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
// A row's With says whether it is a person's: taken only on a person's
// command.
var taskTable = machine.Table[TaskState, TaskEvent, TaskAction, bool]{
	edge(Ready, Dispatched, Preparing, ActPrepare, false),
	edge(SentBack, Dispatched, Preparing, ActPrepare, false),
	edge(Preparing, Prepared, Working, ActWork, false),
	edge(Preparing, HostLost, Ready, ActNone, false),
	edge(Preparing, Failed, Blocked, ActNone, false),
	edge(Working, Verified, Queued, ActNone, false),
	edge(Working, Failed, Blocked, ActNone, false),
	edge(Working, Limited, Cooling, ActCool, false),
	edge(Working, HostLost, Ready, ActNone, false),
	edge(Cooling, Cooled, Working, ActWork, false),
	edge(Queued, Taken, Landing, ActLand, false),
	edge(Landing, Integrated, Landed, ActNone, false),
	edge(Landing, Conflicted, SentBack, ActNone, false),
	edge(Landing, Exhausted, NeedsReview, ActNone, false),
	edge(Preparing, Stopped, Ready, ActNone, false),
	edge(Working, Stopped, Ready, ActNone, false),
	edge(Cooling, Stopped, Ready, ActNone, false),
	edge(Ready, BlockedBy, Blocked, ActNone, true),
	edge(SentBack, BlockedBy, Blocked, ActNone, true),
	edge(Queued, BlockedBy, Blocked, ActNone, true),
	edge(Blocked, Unblocked, Ready, ActNone, true),
	edge(NeedsReview, Unblocked, Ready, ActNone, true),
}

// edge is a row of taskTable, labelled for the diagram with its event,
// its action and whether a person takes it.
func edge(from TaskState, ev TaskEvent, to TaskState, act TaskAction, human bool) machine.Row[TaskState, TaskEvent, TaskAction, bool] {
	r := machine.Row[TaskState, TaskEvent, TaskAction, bool]{From: from, On: ev, To: to, Label: string(ev), With: human}
	if act != ActNone {
		r.Do = []TaskAction{act}
		r.Label += " / " + string(act)
	}
	if human {
		r.Label += " (person)"
	}
	return r
}

// Next is the task machine: the state after ev in from, and the action to
// take on entering it. A pair the table does not hold is an error.
func Next(from TaskState, ev TaskEvent) (TaskState, TaskAction, error) {
	r, ok := taskTable.Next(from, ev, func(machine.Guard) bool { return false })
	if !ok {
		return from, ActNone, fmt.Errorf("a %s task cannot take %q (it can take: %s)", from, ev, strings.Join(Allowed(from), ", "))
	}
	if len(r.Do) == 0 {
		return r.To, ActNone, nil
	}
	return r.To, r.Do[0], nil
}

// Allowed lists the events a task in state s takes.
func Allowed(s TaskState) []string {
	var out []string
	for _, ev := range taskTable.Events(s) {
		out = append(out, string(ev))
	}
	return out
}

// Mermaid renders the task machine as a Mermaid state diagram, generated
// from the table (`ralph diagram fleet`).
func Mermaid() string {
	arrows := []machine.Arrow{{From: machine.Pseudo, To: string(Ready)}}
	arrows = append(arrows, taskTable.Arrows()...)
	arrows = append(arrows, machine.Arrow{From: string(Landed), To: machine.Pseudo})
	return machine.Mermaid(arrows)
}
