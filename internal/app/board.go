package app

import (
	"fmt"
	"slices"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/workspace"
)

// fillBoard puts every story of board on rep.Board, with what the loop's
// state and the parallel build say of it: a story ralph accepted is
// verified or done on the agent's word; one whose agent ticked it while
// ralph still checks it is verifying, never done; a story in a worker's
// hands or in the merge queue says so, and a blocked one carries its
// blocker's reason. StoriesDone counts only what ralph accepted.
func fillBoard(rep *status.Report, board *tasks.Board, st *loop.LoopState) {
	rep.Board = []status.Story{}
	if board == nil {
		return
	}
	worker := map[string]status.Worker{}
	queued := map[string]status.Queued{}
	review := map[string]status.Queued{}
	landed := map[string]bool{}
	if p := rep.Parallel; p != nil && !p.Finished {
		for _, w := range p.Working {
			worker[storyOf(w.Task)] = w
		}
		for _, q := range p.Queue {
			queued[storyOf(q.Task)] = q
		}
	}
	if p := rep.Parallel; p != nil {
		for _, q := range p.NeedsReview {
			review[storyOf(q.Task)] = q
		}
		for _, id := range p.LandedTasks {
			landed[storyOf(id)] = true
		}
	}
	// The story the loop is on, and whether its agent is done with it.
	current, checking := "", false
	if st != nil && !st.Finished {
		current, _ = tasks.ParseTaskID(st.Machine.TaskID)
		switch st.Machine.Resumes() {
		case loop.StateTest, loop.StateValidate, loop.StateCommit:
			checking = true
		}
	}
	rep.StoriesDone, rep.StoriesVerified, rep.StoriesAgentWord, rep.StoriesVerifying = 0, 0, 0, 0
	for _, s := range board.Stories {
		row := status.Story{ID: s.ID, Title: s.Title, State: status.StoryTodo}
		var done *loop.DoneRecord
		if st != nil {
			for id, t := range st.Tasks {
				if storyOf(id) != s.ID {
					continue
				}
				row.Attempts += t.RetryCount
				if t.Blocker != nil {
					row.State, row.Reason = status.StoryBlocked, t.Blocker.Reason
					if t.Blocker.Review {
						row.State = status.StoryNeedsReview
					}
				}
				if id == s.ID && t.Done != nil {
					done = t.Done
				}
			}
		}
		for _, b := range rep.Blocked {
			if b.ByPerson && storyOf(b.ID) == s.ID && !s.Done {
				row.State, row.Reason = status.StoryBlocked, b.Reason
			}
		}
		switch {
		case s.Done && current == s.ID && (checking || rep.Running):
			// The agent's tick is its claim; ralph has not accepted it.
			row.State, row.Reason = status.StoryVerifying, ""
		case s.Done && landed[s.ID]:
			row.State, row.Reason = status.StoryLanded, ""
		case s.Done && done != nil && done.Outcome == verify.AgentWord:
			row.State, row.Reason = status.StoryAgentWord, ""
		case s.Done && done != nil:
			row.State, row.Reason, row.Evidence = status.StoryVerified, "", done.Evidence
		case s.Done:
			row.State, row.Reason = status.StoryDone, ""
		case review[s.ID].Task != "":
			row.State, row.Reason = status.StoryNeedsReview, review[s.ID].Reason
		case queued[s.ID].Task != "":
			row.State = status.StoryQueued
		case worker[s.ID].Worker != "":
			row.State, row.Worker = workerState(worker[s.ID].State), worker[s.ID].Worker
		case s.Status == tasks.StatusBlocked:
			row.State = status.StoryBlocked
			if s.Blocker != nil && row.Reason == "" {
				row.Reason = s.Blocker.Reason
			}
		case rep.Running && current == s.ID && checking:
			row.State = status.StoryVerifying
		case rep.Running && current == s.ID:
			row.State = status.StoryClaimed
		}
		switch row.State {
		case status.StoryVerified:
			rep.StoriesVerified++
		case status.StoryAgentWord:
			rep.StoriesAgentWord++
		case status.StoryVerifying:
			rep.StoriesVerifying++
		}
		if status.Accepted(row.State) {
			rep.StoriesDone++
		}
		rep.Board = append(rep.Board, row)
	}
}

// workerState is the board state of a story in a worker's hands: being
// checked once the worker's loop is past its agent.
func workerState(loopState string) string {
	switch loop.State(loopState) {
	case loop.StateTest, loop.StateValidate, loop.StateCommit:
		return status.StoryVerifying
	}
	return status.StoryClaimed
}

func storyOf(task string) string {
	id, _ := tasks.ParseTaskID(task)
	return id
}

// fillControl puts the pause in force, the runs that take commands and
// what waits for a person on rep.
func fillControl(ws *workspace.Workspace, rep *status.Report) {
	f := control.Folder{Dir: ws.Path("control")}
	rep.Steerable = f.Attached()
	if rep.Steerable == nil {
		rep.Steerable = []control.Run{}
	}
	if len(rep.Steerable) > 0 {
		rep.Paused = f.Paused()
	}
	// A command given is shown until a run takes it, not only once
	// taken: a person sees that the skip they gave is waiting.
	rep.Queued, _ = f.Queued()
	if rep.Queued == nil {
		rep.Queued = []control.Command{}
	}
	rep.Waiting = []status.Waiting{}
	if dir, err := SessionDir(ws, ""); err == nil && pathExists(ActiveSessionPath(ws)) {
		qs, _ := session.LoadQuestions(dir)
		sid := ""
		if rep.Session != nil {
			sid = rep.Session.ID
		}
		for _, q := range session.OpenQuestions(qs) {
			rep.Waiting = append(rep.Waiting, status.Waiting{Kind: status.WaitQuestion, ID: q.ID, Text: q.Text, Session: sid,
				Hint: fmt.Sprintf("ralph answer %s \"...\"", q.ID)})
		}
	}
	threads, _ := thread.List(ws.Dir())
	for _, t := range threads {
		var steps []string
		for _, c := range thread.AllowedCommands(t.Phase.Type) {
			if slices.Contains(control.Checkpoints, c) && c != "abandon" {
				steps = append(steps, c)
			}
		}
		if len(steps) == 0 || t.Phase.Type == thread.PhaseDrafting {
			continue // drafting waits for a person too, but for the spec's writing, not a decision
		}
		rep.Waiting = append(rep.Waiting, status.Waiting{Kind: status.WaitCheckpoint, ID: t.ID, Text: fmt.Sprintf("thread %s (%s) is %s", t.ID, t.Title, t.Phase.Type),
			Steps: steps, Hint: fmt.Sprintf("ralph thread %s %s", steps[0], t.ID)})
	}
	for _, b := range rep.Blocked {
		if b.RequiresHuman {
			rep.Waiting = append(rep.Waiting, status.Waiting{Kind: status.WaitBlocked, ID: b.ID, Text: b.Reason, Hint: "ralph unblock " + b.ID})
		}
	}
}
