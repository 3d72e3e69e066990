package mcpserver

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/words"
)

// Summary is the status document in a few lines, for a client that reads
// text: the run, the board, a pause, what waits for a person.
func Summary(workspace string, rep status.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "workspace: %s\n", workspace)
	switch {
	case rep.Running && rep.RunID != "":
		fmt.Fprintf(&b, "run %s is going: state %s", rep.RunID, orDash(rep.State))
	case rep.Running:
		b.WriteString("a run is going")
	case rep.RunID == "":
		b.WriteString("no build has run in this workspace yet")
	case rep.Finished:
		fmt.Fprintf(&b, "last run %s finished: %s", rep.RunID, rep.Outcome)
		if rep.Reason != "" {
			fmt.Fprintf(&b, " (%s)", rep.Reason)
		}
	default:
		fmt.Fprintf(&b, "run %s stopped in %s: `ralph build` resumes it", rep.RunID, orDash(rep.State))
	}
	if rep.RunID != "" {
		fmt.Fprintf(&b, " · iteration %d", rep.Iteration)
		if rep.MaxIterations > 0 {
			fmt.Fprintf(&b, "/%d", rep.MaxIterations)
		}
		fmt.Fprintf(&b, " · elapsed %s", (time.Duration(rep.ElapsedMillis) * time.Millisecond).Round(time.Second))
	}
	b.WriteByte('\n')
	if rep.CurrentTask != "" {
		fmt.Fprintf(&b, "current task: %s\n", rep.CurrentTask)
	}
	if p := rep.Paused; p != nil {
		fmt.Fprintf(&b, "paused by %s since %s: ralph_resume goes on\n", p.By, p.Time.UTC().Format(time.RFC3339))
	}
	if rep.TaskFile != "" {
		fmt.Fprintf(&b, "task file: %s: %d of %s done\n", rep.TaskFile, rep.StoriesDone, words.Count(rep.Stories, "story", "stories"))
	}
	writeBoard(&b, rep.Board)
	if rep.PendingHints > 0 {
		fmt.Fprintf(&b, "%s queued for the next prompt\n", words.Count(rep.PendingHints, "hint", "hints"))
	}
	if len(rep.Waiting) > 0 {
		b.WriteString("waiting for a person:\n")
		for _, w := range rep.Waiting {
			fmt.Fprintf(&b, "  %s %s: %s", w.Kind, w.ID, w.Text)
			if w.Session != "" {
				fmt.Fprintf(&b, " (session %s)", w.Session)
			}
			b.WriteByte('\n')
		}
	}
	for name, until := range rep.Cooldowns {
		fmt.Fprintf(&b, "cooldown: %s until %s\n", name, until)
	}
	if br := rep.Breaker; br != nil && br.State != "" && br.State != loop.BreakerClosed {
		fmt.Fprintf(&b, "circuit breaker: %s (%s)\n", br.State, br.Reason)
	}
	return b.String()
}

// writeBoard writes one line per story.
func writeBoard(w io.Writer, board []status.Story) {
	for _, s := range board {
		line := fmt.Sprintf("  %-12s %s %s", s.State, s.ID, s.Title)
		if s.Worker != "" {
			line += " · worker " + s.Worker
		}
		if s.Attempts > 0 {
			line += " · " + words.Count(s.Attempts, "failed attempt", "failed attempts")
		}
		if s.Reason != "" {
			line += " · " + s.Reason
		}
		fmt.Fprintln(w, line)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
