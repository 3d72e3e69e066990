package app

import (
	"testing"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/verify"
)

// A story its agent ticked is shown as being verified while ralph checks
// it, never as done; a story ralph accepted says how: verified, with its
// evidence, or done on the agent's word. The counts follow the board.
func TestStatusBoardNeverShowsTheAgentsTickAsDone(t *testing.T) {
	board := &tasks.Board{Stories: []tasks.Story{
		{ID: "US-001", Title: "Ticked by its agent", Status: tasks.StatusComplete, Done: true},
		{ID: "US-002", Title: "Verified", Status: tasks.StatusComplete, Done: true},
		{ID: "US-003", Title: "Agent's word", Status: tasks.StatusComplete, Done: true},
		{ID: "US-004", Title: "Done before ralph", Status: tasks.StatusComplete, Done: true},
		{ID: "US-005", Title: "Open", Status: tasks.StatusNotStarted},
	}}
	st := &loop.LoopState{RunID: "r1", Machine: loop.Machine{State: loop.StateValidate, TaskID: "US-001"}, Tasks: map[string]*loop.TaskRecord{
		"US-002": {Done: &loop.DoneRecord{Outcome: verify.Verified, Evidence: []string{"TestB failed at the start and passes now (go test)"}}},
		"US-003": {Done: &loop.DoneRecord{Outcome: verify.AgentWord}},
	}}
	for _, running := range []bool{true, false} {
		rep := status.Report{Running: running}
		fillBoard(&rep, board, st)
		got := map[string]string{}
		for _, s := range rep.Board {
			got[s.ID] = s.State
		}
		want := map[string]string{"US-001": status.StoryVerifying, "US-002": status.StoryVerified, "US-003": status.StoryAgentWord,
			"US-004": status.StoryDone, "US-005": status.StoryTodo}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("running=%v: %s is %q, want %q", running, id, got[id], w)
			}
		}
		if rep.StoriesDone != 3 || rep.StoriesVerified != 1 || rep.StoriesAgentWord != 1 || rep.StoriesVerifying != 1 {
			t.Errorf("running=%v: done %d, verified %d, agent's word %d, verifying %d; want 3, 1, 1, 1",
				running, rep.StoriesDone, rep.StoriesVerified, rep.StoriesAgentWord, rep.StoriesVerifying)
		}
		if ev := rep.Board[1].Evidence; len(ev) != 1 {
			t.Errorf("the verified story's evidence is not on the board: %v", ev)
		}
	}
	// Once ralph accepted it, the run moves on: the same tick is done.
	st.Machine = loop.Machine{State: loop.StateMemoryLoad}
	st.Tasks["US-001"] = &loop.TaskRecord{Done: &loop.DoneRecord{Outcome: verify.Verified}}
	rep := status.Report{Running: true}
	fillBoard(&rep, board, st)
	if rep.Board[0].State != status.StoryVerified {
		t.Errorf("US-001 after COMMIT is %q, want verified", rep.Board[0].State)
	}
}
