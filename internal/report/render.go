package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
)

// The machines whose lines Render words: the names the runners stamp
// (loop.MachineName and the others, which import this package).
const (
	machineLoop    = "loop"
	machineSession = "session"
	machineThread  = "thread"
	machineEngine  = "engine"
	machineFleet   = "fleet"
)

// Render is the line a person reads for ev, newline included: the text
// its call site wrote for a fact its payload does not hold, else the
// line its envelope and payload determine; "" for an event that shows no
// line. The Emitter stores it in Text, so the journal, --json and the
// dashboard carry the same words as the terminal.
func Render(ev Event) string {
	if ev.Text != "" {
		return ev.Text
	}
	if s := render(ev); s != "" {
		return s + "\n"
	}
	return ""
}

// render words the facts of ev whose payload holds the whole line; ""
// for the others (whose call sites give Text) and for events that show
// no line, such as the loop's transitions.
func render(ev Event) string {
	switch d := ev.Data.(type) {
	case Transition:
		if ev.Machine == machineSession {
			return sessionTransition(ev, d)
		}
	case Run:
		return runLine(ev, d)
	case Iteration:
		if ev.Machine == machineSession && d.Role != "" {
			return fmt.Sprintf("── %s · agent %s ──", d.Role, d.Agent)
		}
	case Check:
		return checkLine(ev, d)
	case Commit:
		switch {
		case d.State == "landed":
			return queue(ev) + fmt.Sprintf("✓ landed on %s · commit %s", d.Branch, text.ShortHash(d.Commit))
		case d.BeforeRestart && d.Status == "":
			return queue(ev) + "landed before the restart · commit " + text.ShortHash(d.Commit)
		}
	case Blocker:
		return blockerLine(ev, d)
	case Limit:
		if t, err := time.Parse(time.RFC3339, d.Until); ev.Machine == machineLoop && d.Agent != "" && err == nil {
			return fmt.Sprintf("  ⏸ %s hit a usage limit: cooling down until %s", d.Agent, t.Local().Format("15:04:05"))
		}
	case Note:
		return noteLine(ev, d)
	case Summary:
		if ev.Machine == machineSession && d.Complete != nil && *d.Complete {
			return fmt.Sprintf("✓ session %s complete: %s done, goal check passed", ev.Run, words.Count(d.Tasks, "task", "tasks"))
		}
	case Control:
		return controlLine(ev, d)
	}
	return ""
}

// sessionTransition is a session's move, with its task and why.
func sessionTransition(ev Event, d Transition) string {
	line := fmt.Sprintf("session %s: %s → %s (%s", ev.Run, ev.From, ev.To, ev.Trigger)
	if ev.Task != "" {
		line += ", " + ev.Task
	}
	if d.Detail != "" {
		line += ": " + text.Clip(d.Detail, 120)
	}
	return line + ")"
}

func runLine(ev Event, d Run) string {
	switch {
	case ev.Machine == machineEngine && d.Workers > 0:
		return fmt.Sprintf("ralph: parallel build %s: %s landing on %s; worktrees in %s", ev.Run, words.Count(d.Workers, "worker", "workers"), d.Target, d.Worktrees)
	case ev.Machine == machineSession && d.State != "" && d.Dir == "":
		return fmt.Sprintf("ralph: resuming session %s at %s", ev.Run, d.State)
	case ev.Machine == machineFleet && d.Head != "":
		return "✓ verified on its branch · " + text.ShortHash(d.Head) + " pushed to the exchange"
	case ev.Machine == machineFleet && d.Retried != nil && d.WorkerAlive:
		return fmt.Sprintf("↻ retried at iteration %d (%d bytes of agent output): its worker %s is alive, the attempt itself did not finish (a timeout or an error); the loop resumes from its saved state", d.Iteration, d.LogBytes, ev.Worker)
	case ev.Machine == machineFleet && d.Retried != nil:
		return fmt.Sprintf("↻ retried after its worker was lost at iteration %d (%d bytes of agent output): the loop resumes from its saved state", d.Iteration, d.LogBytes)
	}
	return ""
}

func checkLine(ev Event, d Check) string {
	switch {
	case ev.Machine == machineThread && d.Passed != nil:
		mark := "✓"
		if !*d.Passed {
			mark = "✗"
		}
		return "  " + mark + " " + d.Name
	case ev.Machine == machineSession && len(d.Protected) > 0:
		return fmt.Sprintf("ralph: the task changed %s; running the checks again with the start's versions against the new code", strings.Join(text.ClipList(d.Protected, 5), ", "))
	}
	return ""
}

// queue marks a line of the merge queue: with its task in a parallel
// build's shared stream, plainly on a Temporal host's.
func queue(ev Event) string {
	if ev.Machine == machineFleet {
		return "queue: "
	}
	return "[queue " + ev.Task + "] "
}

func blockerLine(ev Event, d Blocker) string {
	if d.State == "sent_back" {
		if ev.Machine == machineFleet {
			return "queue: ↻ sent back: " + d.Reason
		}
		return queue(ev) + "↻ sent back to a worker: " + d.Reason
	}
	if ev.Machine != machineEngine || d.State != "blocked" {
		return ""
	}
	worker := "[" + ev.Worker + " " + ev.Task + "] "
	switch {
	case d.ByPerson:
		return fmt.Sprintf("[%s] ⛔ %s: `ralph unblock %s` clears it", ev.Task, d.Reason, ev.Task)
	case d.ByControl:
		return worker + "⛔ " + d.Reason + " (its work stays on branch " + d.Branch + ")"
	case d.Error != "":
		return worker + "✗ the worker stopped: " + text.Clip(d.Reason, 300)
	case d.Outcome != "":
		return worker + "■ not done: " + d.Reason + " (its work stays on branch " + d.Branch + ")"
	}
	return worker + "✗ " + d.Reason
}

func noteLine(ev Event, d Note) string {
	switch {
	case d.Paused != nil && !*d.Paused:
		return "▶ resumed"
	case ev.Machine == machineEngine && d.Task != "":
		return "ralph: " + d.Task + " is claimed by another ralph: leaving it to it"
	case ev.Machine == machineSession && d.PGID != 0:
		return fmt.Sprintf("ralph: stopped the agent the killed session left running (process group %d)", d.PGID)
	case ev.Machine == machineSession && d.Process != "":
		return "ralph: stopped " + d.Process + ", which had left the agent's process group"
	}
	return ""
}

// controlLine is a run's reply to a command it was given.
func controlLine(ev Event, d Control) string {
	if ev.Machine != machineLoop && ev.Machine != machineEngine {
		return ""
	}
	task := ev.Task
	if d.Task != nil {
		task = *d.Task
	}
	line := fmt.Sprintf("  ⇢ %s %s by %s: %s", d.Command, task, d.By, d.Status)
	if d.Why != "" {
		line += ": " + d.Why
	}
	return line
}
