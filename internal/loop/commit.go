package loop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/verify"
)

// commit is COMMIT's action: the accepted attempt (or the partial work
// of an exhausted context) committed with its trailers, the task marked
// done, and the iteration's record written.
func (b *builder) commit(ctx context.Context, it iteration) (Event, error) {
	bg := context.WithoutCancel(ctx)
	m, rec := b.st.Machine, it.rec
	story := it.sel.Story
	taskID := it.sel.TaskID()
	now := b.opts.now()
	subtaskID := ""
	if it.sel.Subtask != nil {
		subtaskID = it.sel.Subtask.ID
	}
	// COMMIT may run again after a crash: every step below is idempotent,
	// and a commit that already landed for this iteration is recognised by
	// the token saved before it was made, never by the task and run
	// trailers, which are in the agent's prompt and which an agent can copy
	// into a commit of its own.
	hash, committed := b.trees.committedWith(bg, b.st.CommitToken)
	if committed {
		// A crash may have come between the commit and the audit note.
		if a, ok := b.src.(Auditor); ok && !m.Partial {
			b.audit(bg, a, it, hash)
		}
		rec.Status, rec.Progress = StatusDone, true // a commit is progress, whichever run made it
		if m.Partial {
			rec.Status = StatusPartial
		}
		b.say(report.KindCommit, fmt.Sprintf("✓ iteration %d: %s was committed before the restart · commit %s\n", m.Iteration, taskID, short(hash)),
			report.Commit{Iteration: m.Iteration, Commit: hash, Status: rec.Status, BeforeRestart: true})
		b.closeIteration(rec)
		return Event{Trigger: TrigCommitted}, nil
	}
	eventID := ""
	// The task file as it was before ralph marks the task done: a commit
	// that fails puts it back, so a blocked task never reads as done.
	taskBytes, _ := inputlimit.ReadFile(b.src.Path())
	if !m.Partial {
		if err := b.src.MarkDone(story.ID, subtaskID, now); err != nil {
			return b.fail(it, TrigCommitFailed, "could not mark the task done: "+err.Error(), "", "permanent"), nil
		}
		id, err := b.mem.Add(bg, memory.Node{ID: fmt.Sprintf("evt-%s-%d", b.id, m.Iteration), Name: taskID + " complete: " + story.Title, MemoryType: memory.TypeEvent,
			Props: map[string]string{"event": memory.EventTaskComplete, "task": taskID, "run": b.id}})
		if err == nil {
			eventID = id
		} else {
			b.log.Warn("memory event not logged", "err", err)
		}
		b.appendProgress(fmt.Sprintf("%s: %s %s (run %s, iteration %d)", taskID, story.Title, b.acceptedHow(), b.id, m.Iteration))
	}
	// This commit takes progress.md along, with the notes of blockers
	// before it: none is left for EXIT to commit.
	b.notesWritten = false
	var c treeCommit
	if !b.st.NoCommit {
		var saveErr, err error
		msg := b.commitMessage(it, m.Partial, eventID)
		c, err = b.trees.commit(bg, m.Iteration, b.st.Branch, b.attemptHead(), msg, func(token string) error {
			b.st.CommitToken = token
			saveErr = b.saveState()
			return saveErr
		})
		var refused *commitRefused
		switch {
		case saveErr != nil:
			// Nothing was committed: a commit whose token is not on disk
			// would be made again after a crash.
			return Event{}, saveErr
		case errors.As(err, &refused) && refused.what == "git":
			return b.fail(it, TrigCommitFailed, err.Error(), "", "permanent"), nil
		case errors.As(err, &refused):
			return b.commitFailed(it, taskBytes, refused.what, refused.err), nil
		case err != nil:
			// Never commit on another branch, or over lost commits.
			return Event{}, err
		}
		if hash = c.after.Head; eventID != "" && hash != "" {
			b.mem.Link(bg, eventID, "commit", hash)
		}
	}
	CrashPoint("after-commit")
	if !m.Partial {
		// The task is done: its old blockers leave the next prompts'
		// known issues (they stay in memory, marked resolved).
		if err := b.mem.Resolve(bg, taskID, now); err != nil {
			b.log.Warn("memory blockers not resolved", "task", taskID, "err", err)
		}
	}
	a, audits := b.src.(Auditor)
	audits = audits && !m.Partial
	if audits {
		b.audit(bg, a, it, hash)
	}
	// The audit note may have changed files of the tree (bd's own): the
	// tree is read again. Sources that write outside the task file on the
	// way (bd's claim and audit note) keep no tree for the next IMPLEMENT.
	done := commitDone{start: b.attemptHead(), noCommit: b.st.NoCommit, reread: audits}
	if _, claims := b.src.(Claimer); !claims && !audits && !b.st.NoCommit {
		done.taskFile = b.src.Path()
	}
	b.trees.recordCommit(bg, rec, c, done)
	if hash != "" && hash != b.attemptHead() {
		rec.Progress = true
	}
	if m.Partial {
		rec.Status = StatusPartial
		b.say(report.KindCommit, fmt.Sprintf("◐ iteration %d: %s partial work committed (%s); a fresh agent continues\n", m.Iteration, taskID, short(hash)),
			report.Commit{Iteration: m.Iteration, Commit: hash, Status: StatusPartial})
	} else {
		rec.Status = StatusDone
		j := b.judgement()
		rec.Verdict, rec.Evidence = string(j.Outcome), j.Evidence
		b.st.task(taskID).Done = &DoneRecord{Outcome: j.Outcome, Evidence: j.Evidence, Commit: hash, Run: b.id}
		b.moveBaseline(hash)
		how := "done and verified"
		if j.Outcome == verify.AgentWord {
			how = "done, agent's word"
		}
		b.say(report.KindCommit, fmt.Sprintf("✓ iteration %d: %s %s · commit %s\n", m.Iteration, taskID, how, short(hash)),
			report.Commit{Iteration: m.Iteration, Commit: hash, Status: StatusDone, Judged: &report.Judged{Verdict: string(j.Outcome), Evidence: j.Evidence, Failing: j.Failing}})
	}
	b.st.TaskBase, b.st.TaskBaseFor = "", ""
	b.closeIteration(rec)
	return Event{Trigger: TrigCommitted}, nil
}

// commitFailed records a commit git refused (a pre-commit hook, an
// index.lock an agent left behind), or the staging before it, as the
// task's failure: the task file loses the done mark ralph had just set,
// and the reason says what failed (what) and what git and the hook said,
// so the person who unblocks the task knows what to fix.
func (b *builder) commitFailed(it iteration, taskBytes []byte, what string, err error) Event {
	if taskBytes != nil {
		if werr := store.WriteFileAtomic(b.src.Path(), taskBytes, 0o644); werr != nil {
			b.logError("could not put back %s after the failed commit: %v", b.ws.Rel(b.src.Path()), werr)
		}
	}
	said := err.Error()
	var ee *gitx.ExitError
	if errors.As(err, &ee) && ee.Stderr != "" {
		said = ee.Stderr
	}
	b.git.Unstage(context.Background()) // unstage; the work stays in the tree
	return b.fail(it, TrigCommitFailed, what+": "+clip(strings.Join(strings.Fields(said), " "), 200), said, "permanent")
}

// commitMessage is the message of the commit of iteration it: the
// subject, the acceptance criteria report, and the trailers that tie the
// commit to ralph's records. runkit.Commit adds the Ralph-Commit token
// last.
func (b *builder) commitMessage(it iteration, partial bool, eventID string) runkit.Message {
	taskID, story := it.sel.TaskID(), it.sel.Story
	m := runkit.Message{Subject: taskID + ": " + story.Title}
	if it.sel.Subtask != nil {
		m.Subject = taskID + ": " + it.sel.Subtask.Title
	}
	if partial {
		m.Subject = taskID + ": partial work (context exhausted)"
	}
	if it.rec.ACReport != "" {
		m.Body = "Acceptance criteria:\n" + it.rec.ACReport
	}
	if !partial {
		j := b.judgement()
		var how strings.Builder
		if j.Outcome == verify.AgentWord {
			how.WriteString("Done on the agent's word: " + b.checksState() + ", but nothing ralph ran shows it done.")
		} else {
			how.WriteString("Verified by ralph:")
			for _, e := range j.Evidence {
				how.WriteString("\n- " + e)
			}
		}
		if len(j.Failing) > 0 {
			how.WriteString("\nStill failing, as before this work: " + strings.Join(j.Failing, ", "))
		}
		m.Body = strings.TrimSpace(strings.TrimSpace(m.Body) + "\n\n" + how.String())
	}
	m.Trailers = []runkit.Trailer{{Key: "Ralph-Task", Value: taskID}, {Key: "Ralph-Story", Value: story.ID},
		{Key: "Ralph-Run", Value: b.id}, {Key: "Ralph-Iteration", Value: strconv.Itoa(b.st.Machine.Iteration)}}
	if eventID != "" {
		m.Trailers = append(m.Trailers, runkit.Trailer{Key: "Ralph-Memory-Event", Value: eventID})
	}
	return m
}

func (b *builder) attemptHead() string {
	if b.st.Attempt != nil {
		return b.st.Attempt.HeadBefore
	}
	return b.trees.last.Head
}
