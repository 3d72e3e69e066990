package loop

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
)

// closeRunRecord completes the record of a finished run whose process died
// between its last transition and writing run.json.
func closeRunRecord(home *Home, st *LoopState) {
	p := filepath.Join(home.RunsDir(), st.RunID, "run.json")
	var rec RunRecord
	if _, err := store.ReadJSON(p, 1, &rec); err != nil || rec.Outcome != "" {
		return
	}
	rec.Outcome, rec.Reason, rec.EndedAt = st.Outcome, st.Reason, st.UpdatedAt
	rec.Iterations = st.Machine.Iteration
	store.WriteJSONRecord(p, rec)
}

// rebuiltRecord is the record of the iteration at sel that a resume into
// TEST, VALIDATE or COMMIT continues, rebuilt from the saved attempt.
func (b *builder) rebuiltRecord(sel tasks.Selection) *IterationRecord {
	a := b.st.Attempt
	rec := &IterationRecord{SchemaVersion: 1, RunID: b.id, Iteration: b.st.Machine.Iteration, Kind: "build",
		TaskID: b.st.Machine.TaskID, Agent: b.opts.Agent.Name, StartedAt: b.opts.now().UTC()}
	if a != nil {
		rec.StartedAt, rec.HeadBefore, rec.ExitCode, rec.DurationMillis, rec.PromptFile, rec.LogFile = a.StartedAt, a.HeadBefore, a.ExitCode, a.Millis, a.Prompt, a.Log
		// The rebuilt record keeps the progress the attempt made before
		// the kill; otherwise every resume would count as an iteration
		// without progress and kills alone could open the breaker.
		if snap, err := b.git.Snapshot(context.Background()); err == nil {
			rec.Progress = snap.Head != a.HeadBefore || (a.TreeBefore != "" && worktreeDigest(b.ws.Root, snap) != a.TreeBefore)
		}
	}
	rec.StoryID, rec.StoryTitle = sel.Story.ID, sel.Story.Title
	return rec
}

// closeIteration writes the iteration's record once its outcome is known.
func (b *builder) closeIteration(rec *IterationRecord) {
	if rec.Status == "" {
		rec.Status = StatusFailed
	}
	rec.UncommittedFiles = b.trees.last.Dirty
	if rec.UncommittedFiles == nil {
		rec.UncommittedFiles = []string{}
	}
	// The completion signal is a claim; the task file is the truth.
	if slices.Contains(rec.Signals, "COMPLETE") {
		if err := b.reloadBoard(); err == nil && b.board.Remaining() == 0 {
			rec.SignalAccepted = true
		} else {
			msg := fmt.Sprintf("signal rejected: the agent said COMPLETE but %s not done", words.Count(b.board.Remaining(), "story is", "stories are"))
			b.logError("iteration %d (%s): %s", rec.Iteration, rec.TaskID, msg)
			b.event("iteration %d: %s", rec.Iteration, msg)
			b.sayf(report.KindWarning, "  ! %s\n", msg)
		}
	}
	if b.st.Breaker.observe(b.opts.Breaker, rec, b.opts.now()) {
		msg := fmt.Sprintf("circuit breaker OPEN: %s; it lets one iteration try again after %s", b.st.Breaker.Reason, b.breakerCooldown())
		b.logError("%s", msg)
		b.event("%s", msg)
		b.say(report.KindWait, "  ⚡ "+msg+"\n", report.Wait{Breaker: "open", Reason: b.st.Breaker.Reason,
			CooldownMS: report.Ptr(b.breakerCooldown().Milliseconds())})
	}
	b.saveIteration(rec)
	if rec.Status != StatusDone && rec.Status != StatusPartial {
		b.printIteration(rec, rec.Reason)
	} else {
		// The commit line told the person; programs still get the one
		// closing event every iteration has, with no text of its own.
		b.say(report.KindIteration, "", iterationEnd(rec, text.OrNone(rec.TaskID, rec.StoryID), rec.Reason))
	}
}

func (b *builder) appendProgress(line string) {
	// After a crash the same step may run twice; the line is written once.
	if data, err := os.ReadFile(b.ws.ProgressPath()); err == nil && strings.Contains(string(data), "- "+line+"\n") {
		return
	}
	entry := fmt.Sprintf("\n## %s (ralph)\n- %s\n---\n", b.opts.now().Format("2006-01-02 15:04:05"), line)
	if err := store.AppendFile(b.ws.ProgressPath(), []byte(entry)); err != nil {
		b.logError("could not append to progress.md: %v", err)
		return
	}
	b.notesWritten = true
}

// tailOfFile returns the last n bytes of a file, "" when unreadable.
func tailOfFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

func (r *run) printIteration(rec *IterationRecord, why string) {
	mark := map[string]string{StatusDone: "✓", StatusPlanned: "✓", StatusOpen: "·", StatusInterrupted: "■", StatusPartial: "◐"}[rec.Status]
	if mark == "" {
		mark = "✗"
	}
	id := text.OrNone(rec.TaskID, rec.StoryID)
	what := rec.Status
	if id != "" { // planning iterations have no task
		what = id + " " + what
	}
	line := fmt.Sprintf("%s iteration %d: %s · %s · %s", mark, rec.Iteration, what,
		(time.Duration(rec.DurationMillis) * time.Millisecond).Round(10*time.Millisecond), words.Count(len(rec.Commits), "commit", "commits"))
	if why != "" {
		line += " · " + why
	}
	r.say(report.KindIteration, line+"\n", iterationEnd(rec, id, why))
}

// iterationEnd is the data of the event that closes an iteration, whatever
// its status: one shape for programs (notifications, receipts) to read,
// where the text differs with the outcome.
func iterationEnd(rec *IterationRecord, task, why string) report.Iteration {
	end := &report.End{IterationEnd: true, Status: rec.Status, DurationMS: rec.DurationMillis, Tokens: rec.Tokens, CostUSD: rec.CostUSD, Commits: rec.Commits, Reason: why}
	if rec.Verdict != "" {
		// How ralph accepted the task: verified on its evidence, or on
		// the agent's word; programs need not read it from the text.
		end.Accepted = &report.Accepted{Verdict: rec.Verdict, Evidence: rec.Evidence}
	}
	var failing, atStart []string
	for _, c := range rec.Checks {
		if !c.Passed {
			failing = append(failing, c.Name)
			if c.FailedAtStart {
				atStart = append(atStart, c.Name)
			}
		}
	}
	if len(failing) > 0 {
		end.Failed = &report.Failed{FailingChecks: failing, FailedAtStartToo: atStart}
	}
	return report.Iteration{Turn: &report.Turn{Iteration: rec.Iteration, Task: task}, End: end}
}
