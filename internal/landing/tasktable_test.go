package landing

import (
	"reflect"
	"strings"
	"testing"
)

// tableBefore is the task machine as it was written before it was a
// machine.Table: the rows it must still hold, in their order.
var tableBefore = []TaskEdge{
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

// TestTaskTableIsTheOneBefore: every row gives what it gave before (the
// state, the action, a person's or not), and Next takes each of them.
func TestTaskTableIsTheOneBefore(t *testing.T) {
	if got := Edges(); !reflect.DeepEqual(got, tableBefore) {
		t.Fatalf("edges:\n%v\nbefore:\n%v", got, tableBefore)
	}
	for _, e := range tableBefore {
		if to, act, err := Next(e.From, e.Event); err != nil || to != e.To || act != e.Action {
			t.Errorf("Next(%s, %s) = %s, %q, %v; before: %s, %q", e.From, e.Event, to, act, err, e.To, e.Action)
		}
	}
}

// TestTaskTableIsWellFormed: every state is reached from ready and no
// (state, event) is defined twice.
func TestTaskTableIsWellFormed(t *testing.T) {
	if u := taskTable.Unreachable(Ready, TaskStates); u != nil {
		t.Errorf("states no task reaches: %v", u)
	}
	if d := taskTable.Duplicates(); d != nil {
		t.Errorf("rows defined twice:\n%s", strings.Join(d, "\n"))
	}
}
