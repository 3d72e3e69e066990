package report

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
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
	if s := render(ev, ev.Machine); s != "" {
		return s + "\n"
	}
	return ""
}

// render words the facts whose payload holds the whole line, by the
// machine (its MachineName) that told them; "" for the others, whose
// call sites give Text, and for events that show no line (the loop's
// transitions, a thread's summary).
func render(ev Event, m string) string {
	switch d := ev.Data.(type) {
	case Denied:
		return "⛔ sandbox: denied a connection to " + net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
	case Transition:
		if m == "thread" && ev.From != "" { // a new thread comes from no phase, without a line
			return "thread " + d.Thread + ": " + ev.From + " → " + ev.To
		}
		if m == "session" {
			line := fmt.Sprintf("session %s: %s → %s (%s", ev.Run, ev.From, ev.To, ev.Trigger)
			if ev.Task != "" {
				line += ", " + ev.Task
			}
			if d.Detail != "" {
				line += ": " + text.Clip(d.Detail, 120)
			}
			return line + ")"
		}
	case Run:
		switch {
		case m == "engine" && d.Workers > 0:
			return fmt.Sprintf("ralph: parallel build %s: %s landing on %s; worktrees in %s", ev.Run, words.Count(d.Workers, "worker", "workers"), d.Target, d.Worktrees)
		case m == "session" && d.State != "" && d.Dir == "":
			return fmt.Sprintf("ralph: resuming session %s at %s", ev.Run, d.State)
		case m == "fleet" && d.Head != "":
			return "✓ verified on its branch · " + text.ShortHash(d.Head) + " pushed to the exchange"
		case m == "fleet" && d.Retried != nil && d.WorkerAlive:
			return fmt.Sprintf("↻ retried at iteration %d (%d bytes of agent output): its worker %s is alive, the attempt itself did not finish (a timeout or an error); the loop resumes from its saved state", d.Iteration, d.LogBytes, ev.Worker)
		case m == "fleet" && d.Retried != nil:
			return fmt.Sprintf("↻ retried after its worker was lost at iteration %d (%d bytes of agent output): the loop resumes from its saved state", d.Iteration, d.LogBytes)
		}
	case Iteration:
		if m == "session" && d.Role != "" {
			return fmt.Sprintf("── %s · agent %s ──", d.Role, d.Agent)
		}
		if m == "loop" && d.End != nil && d.Turn != nil {
			return iterationEnd(*d.Turn, *d.End)
		}
	case Check:
		switch {
		case m == "thread" && d.Passed != nil && *d.Passed:
			return "  ✓ " + d.Name
		case m == "thread" && d.Passed != nil:
			return "  ✗ " + d.Name
		case m == "session" && len(d.Protected) > 0:
			return fmt.Sprintf("ralph: the task changed %s; running the checks again with the start's versions against the new code", strings.Join(text.ClipList(d.Protected, 5), ", "))
		}
	case Commit:
		switch {
		case m == "loop" && d.BeforeRestart:
			return fmt.Sprintf("✓ iteration %d: %s was committed before the restart · commit %s", d.Iteration, ev.Task, shortHash(d.Commit))
		case m == "loop" && d.Status == "partial":
			return fmt.Sprintf("◐ iteration %d: %s partial work committed (%s); a fresh agent continues", d.Iteration, ev.Task, shortHash(d.Commit))
		case m == "loop" && d.Judged != nil:
			how := map[bool]string{true: "done, agent's word", false: "done and verified"}[d.Verdict == "agent_word"]
			return fmt.Sprintf("✓ iteration %d: %s %s · commit %s", d.Iteration, ev.Task, how, shortHash(d.Commit))
		case d.State == "landed":
			return queue(ev) + fmt.Sprintf("✓ landed on %s · commit %s", d.Branch, text.ShortHash(d.Commit))
		case d.BeforeRestart && d.Status == "":
			return queue(ev) + "landed before the restart · commit " + text.ShortHash(d.Commit)
		}
	case Blocker:
		worker := "[" + ev.Worker + " " + ev.Task + "] "
		switch {
		case d.State == "sent_back" && m == "fleet":
			return "queue: ↻ sent back: " + d.Reason
		case d.State == "sent_back":
			return queue(ev) + "↻ sent back to a worker: " + d.Reason
		case m == "loop" && d.State == "blocked":
			return fmt.Sprintf("⛔ %s blocked (%s): %s", ev.Task, d.Type, d.Reason)
		case m != "engine" || d.State != "blocked": // a host's say more than their payload
		case d.ByPerson:
			return fmt.Sprintf("[%s] ⛔ %s: `ralph unblock %s` clears it", ev.Task, d.Reason, ev.Task)
		case d.ByControl:
			return worker + "⛔ " + d.Reason + " (its work stays on branch " + d.Branch + ")"
		case d.Error != "":
			return worker + "✗ the worker stopped: " + text.Clip(d.Reason, 300)
		case d.Outcome != "":
			return worker + "■ not done: " + d.Reason + " (its work stays on branch " + d.Branch + ")"
		default:
			return worker + "✗ " + d.Reason
		}
	case Limit:
		if m == "loop" && d.Ending != nil && d.Reason != "" {
			return "■ " + d.Reason // the limit that ends the run
		}
		if t, err := time.Parse(time.RFC3339, d.Until); m == "loop" && d.Agent != "" && err == nil {
			return fmt.Sprintf("  ⏸ %s hit a usage limit: cooling down until %s", d.Agent, t.Local().Format("15:04:05"))
		}
	case Verdict:
		if m == "loop" && d.Outcome == "verified" { // the agent's word is told with what the checks showed
			lines := make([]string, len(d.Evidence))
			for i, e := range d.Evidence {
				lines[i] = "  evidence: " + e
			}
			return strings.Join(text.ClipList(lines, 8), "\n")
		}
	case Wait: // the loop's breaker opening, every agent limited and a pause say more than their payload
		switch {
		case m != "loop":
		case d.Wait == "breaker" && d.State == "started":
			return "  ⚡ circuit breaker open (" + d.Reason + ")"
		case d.Breaker == "half_open":
			return "  ⚡ circuit breaker half-open: one iteration may try"
		case d.Wait == "limit" && d.State == "ended" && d.WaitedMS != nil:
			return fmt.Sprintf("  ▶ the usage-limit wait is over after %s: going on", (time.Duration(*d.WaitedMS) * time.Millisecond).Round(time.Second))
		case d.State == "waiting" && d.LeftMS != nil && loopWaits[d.Wait] != "":
			if until, err := time.Parse(time.RFC3339, d.Until); err == nil {
				return fmt.Sprintf("  … %s: %s left (until %s)", loopWaits[d.Wait], (time.Duration(*d.LeftMS) * time.Millisecond).Round(time.Second), until.Local().Format("15:04:05"))
			}
		}
	case Note:
		switch {
		case d.Paused != nil && !*d.Paused:
			return "▶ resumed"
		case m == "engine" && d.Task != "":
			return "ralph: " + d.Task + " is claimed by another ralph: leaving it to it"
		case m == "session" && d.PGID != 0:
			return fmt.Sprintf("ralph: stopped the agent the killed session left running (process group %d)", d.PGID)
		case m == "session" && d.Process != "":
			return "ralph: stopped " + d.Process + ", which had left the agent's process group"
		}
	case Summary:
		if m == "session" && d.Complete != nil && *d.Complete {
			return fmt.Sprintf("✓ session %s complete: %s done, goal check passed", ev.Run, words.Count(d.Tasks, "task", "tasks"))
		}
	case Control:
		// A run's reply to a command it was given.
		if task := ev.Task; m == "loop" || m == "engine" {
			if d.Task != nil {
				task = *d.Task
			}
			return strings.TrimSuffix(fmt.Sprintf("  ⇢ %s %s by %s: %s: %s", d.Command, task, d.By, d.Status, d.Why), ": ")
		}
	}
	return ""
}

// loopWaits are what a loop's countdown waits for, by its Wait.
var loopWaits = map[string]string{"breaker": "circuit breaker cooling down", "limit": "waiting for a usage limit to reset"}

// iterationEnd is the line that closes a loop's iteration; "" for one
// whose commit line told how it ended.
func iterationEnd(t Turn, e End) string {
	if e.Status == "done" || e.Status == "partial" {
		return ""
	}
	mark := text.OrNone(map[string]string{"planned": "✓", "open": "·", "interrupted": "■"}[e.Status], "✗")
	line := fmt.Sprintf("%s iteration %d: %s · %s · %s", mark, t.Iteration, strings.TrimSpace(t.Task+" "+e.Status), // a planning iteration has no task
		(time.Duration(e.DurationMS) * time.Millisecond).Round(10*time.Millisecond), words.Count(len(e.Commits), "commit", "commits"))
	if e.Reason != "" {
		line += " · " + e.Reason
	}
	return line
}

// shortHash is a commit as git shows it, "(none)" before the first.
func shortHash(hash string) string { return text.OrNone(text.ShortHash(hash), "(none)") }

// queue marks a line of the merge queue: with its task in a parallel
// build's shared stream, plainly on a Temporal host's.
func queue(ev Event) string {
	if ev.Machine == "fleet" {
		return "queue: "
	}
	return "[queue " + ev.Task + "] "
}
