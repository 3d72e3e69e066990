package cli

import (
	"fmt"
	"slices"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/workspace"
)

// fillBoard puts every story of board on rep.Board, with what the loop's
// state and the parallel build say of it: a done story is done whatever
// the state says, a story in a worker's hands or in the merge queue says
// so, and a blocked one carries its blocker's reason.
func fillBoard(rep *StatusReport, board *tasks.Board, st *loop.LoopState) {
	rep.Board = []status.Story{}
	if board == nil {
		return
	}
	worker := map[string]string{}
	queued := map[string]status.Queued{}
	review := map[string]status.Queued{}
	if p := rep.Parallel; p != nil && !p.Finished {
		for _, w := range p.Working {
			worker[storyOf(w.Task)] = w.Worker
		}
		for _, q := range p.Queue {
			queued[storyOf(q.Task)] = q
		}
	}
	if p := rep.Parallel; p != nil {
		for _, q := range p.NeedsReview {
			review[storyOf(q.Task)] = q
		}
	}
	for _, s := range board.Stories {
		row := status.Story{ID: s.ID, Title: s.Title, State: status.StoryTodo}
		if st != nil {
			for id, t := range st.Tasks {
				if storyOf(id) != s.ID {
					continue
				}
				row.Attempts += t.RetryCount
				if t.Blocker != nil {
					row.State, row.Reason = status.StoryBlocked, t.Blocker.Reason
				}
			}
		}
		switch {
		case s.Done:
			row.State, row.Reason = status.StoryDone, ""
		case review[s.ID].Task != "":
			row.State, row.Reason = status.StoryNeedsReview, review[s.ID].Reason
		case queued[s.ID].Task != "":
			row.State = status.StoryQueued
		case worker[s.ID] != "":
			row.State, row.Worker = status.StoryInFlight, worker[s.ID]
		case s.Status == tasks.StatusBlocked:
			row.State = status.StoryBlocked
			if s.Blocker != nil && row.Reason == "" {
				row.Reason = s.Blocker.Reason
			}
		case rep.Running && rep.CurrentStory == s.ID:
			row.State = status.StoryInFlight
		}
		rep.Board = append(rep.Board, row)
	}
}

func storyOf(task string) string {
	id, _ := tasks.ParseTaskID(task)
	return id
}

// fillControl puts the pause in force, the runs that take commands and
// what waits for a person on rep.
func fillControl(ws *workspace.Workspace, rep *StatusReport) {
	f := control.Folder{Dir: ws.Path("control")}
	rep.Steerable = f.Attached()
	if rep.Steerable == nil {
		rep.Steerable = []control.Run{}
	}
	if len(rep.Steerable) > 0 {
		rep.Paused = f.Paused()
	}
	rep.Waiting = []status.Waiting{}
	if dir, err := sessionDir(ws, ""); err == nil && pathExists(activeSessionPath(ws)) {
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
