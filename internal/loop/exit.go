package loop

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
)

// exit performs EXIT's entry action ahead of the transition so that its
// summary reflects the final state. A format with a metrics block
// (progress.txt) gets them first and they are committed (seed 000: write
// the summary, update the metrics, commit); that commit cannot name
// itself, so "final commit" is the last commit of the run's work, the one
// the metrics commit follows, in the file and in the summary alike, and
// the summary names the metrics commit too.
func (b *builder) exit(allDone bool) error {
	st := b.st
	st.Finished = true
	elapsed := b.opts.now().Sub(st.StartedAt).Round(time.Second)
	head := b.trees.head()
	done := len(b.board.Stories) - b.board.Remaining()
	metrics := map[string]string{
		"stories_completed": strconv.Itoa(done),
		"total_iterations":  strconv.Itoa(st.Machine.Iteration),
		"final_commit":      head,
		"time_elapsed":      elapsed.String(),
	}
	// Only a format with a metrics block keeps them; its file then changed
	// after the last task's commit, so the change is committed too.
	var metricsCommit string
	m, ok := b.src.(tasks.MetricsRecorder)
	if ok {
		if err := m.SetMetrics(metrics, b.opts.now()); err != nil {
			b.logError("could not write metrics to %s: %v", b.ws.Rel(b.src.Path()), err)
		}
	}
	if ok && !st.NoCommit {
		bg := context.Background()
		if snap, err := b.git.Snapshot(bg); err == nil && len(snap.Dirty) > 0 {
			if err := b.git.AddAll(bg); err == nil {
				msg := "ralph: final summary and metrics\n\nRalph-Run: " + b.id + "\n"
				if head != "" {
					msg = "ralph: final summary and metrics\n\nThe run's work ends at " + head + " (final_commit).\n\nRalph-Run: " + b.id + "\n"
				}
				if h, err := b.git.Commit(bg, msg); err == nil && h != head {
					metricsCommit = h
				}
			}
		}
	}
	b.commitNotes()
	// The summary is one event: its text is the block a person reads.
	var text strings.Builder
	text.WriteString("\n")
	if allDone {
		// The tag is printed by ralph, never taken from the agent.
		text.WriteString("<promise>COMPLETED</promise>\n\n")
	}
	tally := TallyOf(b.board, b.st)
	final := short(head)
	if metricsCommit != "" {
		final += fmt.Sprintf(" (then %s: ralph's metrics in %s)", short(metricsCommit), b.ws.Rel(b.src.Path()))
	}
	fmt.Fprintf(&text, "Summary:\n- Stories completed: %d of %d%s\n- Total iterations: %d\n- Final commit: %s\n- Time elapsed: %s\n",
		done, len(b.board.Stories), tally.String(), st.Machine.Iteration, final, elapsed)
	blocked := b.blockedIDs()
	if len(blocked) > 0 {
		fmt.Fprintf(&text, "- Blocked: %s (see `ralph status`)\n", strings.Join(blocked, ", "))
	}
	failing := st.Baseline.Failing()
	if len(failing) > 0 {
		fmt.Fprintf(&text, "- Failing checks on the final tree: %s\n", strings.Join(failing, ", "))
	}
	data := report.Summary{Complete: &allDone, Iterations: report.Ptr(st.Machine.Iteration), Blocked: &blocked, Outcome: string(st.Outcome),
		Build: &report.Build{StoriesCompleted: done, StoriesTotal: len(b.board.Stories), StoriesVerified: tally.Verified,
			StoriesAgentWord: tally.AgentWord, StoriesDoneBefore: tally.Before, FinalCommit: head, ElapsedMS: elapsed.Milliseconds(),
			FailingChecks: failing, Reason: st.Reason, MetricsCommit: metricsCommit}}
	b.say(report.KindSummary, text.String(), data)
	return nil
}

// commitNotes commits progress.md when this run appended a note to it
// that no task's commit took along: a run that blocks a task and then
// ends (its iteration limit, a stop) would otherwise leave the blocker's
// note uncommitted, for the next person's commit to carry. Only that file
// goes in, and only in a run that left a note so.
func (b *builder) commitNotes() {
	if !b.notesWritten || b.st.NoCommit {
		return
	}
	rel := b.ws.Rel(b.ws.ProgressPath())
	if _, err := b.git.CommitPaths(context.Background(), "ralph: progress notes\n\nRalph-Run: "+b.id+"\n", rel); err != nil {
		b.logError("could not commit the notes in %s: %v", rel, err)
	}
	b.notesWritten = false
}

func (b *builder) blockedIDs() []string {
	var ids []string
	for id, t := range b.st.Tasks {
		if t.Blocker != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
