package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/verify"
)

func (b *builder) commit(ctx context.Context) (Event, error) {
	if err := b.ensureSelection(); err != nil {
		return Event{}, err
	}
	b.ensureRecord()
	bg := context.WithoutCancel(ctx)
	m := b.st.Machine
	story := b.sel.Story
	taskID := b.sel.TaskID()
	now := b.opts.now()
	subtaskID := ""
	if b.sel.Subtask != nil {
		subtaskID = b.sel.Subtask.ID
	}
	// COMMIT may run again after a crash: every step below is idempotent,
	// and a commit that already landed for this iteration is recognised by
	// the token saved before it was made, never by the task and run
	// trailers, which are in the agent's prompt and which an agent can copy
	// into a commit of its own.
	// A token this process made and has not committed with yet is on no
	// commit: only a resumed COMMIT looks for its commit.
	var hash string
	committed := false
	if b.st.CommitToken != b.freshToken {
		hash, committed = runkit.Committed(bg, b.git, b.st.CommitToken)
	}
	if committed {
		// A crash may have come between the commit and the audit note.
		if a, ok := b.src.(Auditor); ok && !m.Partial {
			b.audit(bg, a, story.ID, hash)
		}
		b.rec.Status, b.rec.Progress = StatusDone, true // a commit is progress, whichever run made it
		if m.Partial {
			b.rec.Status = StatusPartial
		}
		b.say(report.KindCommit, fmt.Sprintf("✓ iteration %d: %s was committed before the restart · commit %s\n", m.Iteration, taskID, short(hash)),
			report.Commit{Iteration: m.Iteration, Commit: hash, Status: b.rec.Status, BeforeRestart: true})
		b.closeIteration()
		return Event{Trigger: TrigCommitted}, nil
	}
	eventID := ""
	// The task file as it was before ralph marks the task done: a commit
	// that fails puts it back, so a blocked task never reads as done.
	taskBytes, _ := inputlimit.ReadFile(b.src.Path())
	if !m.Partial {
		if err := b.src.MarkDone(story.ID, subtaskID, now); err != nil {
			return b.fail(TrigCommitFailed, "could not mark the task done: "+err.Error(), "", "permanent")
		}
		id, err := b.mem.Add(bg, memory.Node{ID: fmt.Sprintf("evt-%s-%d", b.id, m.Iteration), Name: taskID + " complete: " + story.Title, MemoryType: memory.TypeEvent,
			Props: map[string]string{"event": memory.EventTaskComplete, "task": taskID, "run": b.id}})
		if err == nil {
			eventID = id
		} else {
			b.log.Warn("memory event not logged", "err", err)
		}
	}
	if !m.Partial {
		b.appendProgress(fmt.Sprintf("%s: %s %s (run %s, iteration %d)", taskID, story.Title, b.acceptedHow(), b.id, m.Iteration))
	}
	// This commit takes progress.md along, with the notes of blockers
	// before it: none is left for EXIT to commit.
	b.notesWritten = false
	hash = ""
	// after is the tree once the work is committed, read by the commit
	// itself; made is the commit ralph made, nil when there was nothing to
	// commit.
	var pre, after gitx.Snapshot
	var made *gitx.Commit
	if !b.st.NoCommit {
		snap, known, err := b.treeBeforeCommit(bg)
		if err != nil {
			return b.fail(TrigCommitFailed, "git: "+err.Error(), "", "permanent")
		}
		pre = snap
		if err := b.checkHistory(bg, b.attemptHead(), snap); err != nil {
			// Never commit on another branch, or over lost commits.
			return Event{}, err
		}
		after = snap // nothing to commit: the tree is as it was
		if known || len(snap.Dirty) > 0 {
			var saved bool
			var saveErr error
			var staged []string
			msg := b.commitMessage(taskID, story, m.Partial, eventID)
			msg.Token = b.freshToken
			b.freshToken = "" // a COMMIT entered again looks for this commit
			after, staged, err = runkit.CommitListed(bg, b.git, msg, func(token string) error {
				if token == b.savedToken {
					// On disk since the transition into TEST. The
					// transitions since wait for the next save: a kill
					// before it resumes in TEST, and the COMMIT after the
					// checks finds this commit by its token.
					saved = true
					return nil
				}
				b.st.CommitToken = token
				saveErr = b.saveState()
				saved = saveErr == nil
				return saveErr
			}, b.commitTrace(snap))
			// What the checks and ralph changed since the agent is what
			// the staging took in.
			pre.Dirty = slices.Compact(slices.Sorted(slices.Values(append(pre.Dirty, staged...))))
			switch {
			case saveErr != nil:
				// Nothing was committed: a commit whose token is not on
				// disk would be made again after a crash.
				return Event{}, saveErr
			case err != nil && !saved:
				return b.commitFailed(taskBytes, "git add failed (a lock in .git may have refused it)", err)
			case err != nil && !errors.Is(err, gitx.ErrNothingToCommit):
				return b.commitFailed(taskBytes, "git commit failed (a pre-commit hook or a lock in .git refused it)", err)
			case err != nil && known:
				// Nothing to commit after all: the tree is not the one
				// read after the agent (a check put files back).
				if after, err = b.git.Snapshot(bg); err != nil {
					return b.fail(TrigCommitFailed, "git: "+err.Error(), "", "permanent")
				}
				pre = after
			case err != nil:
				after = snap
			default:
				made = &gitx.Commit{Hash: after.Head, Subject: strings.TrimSpace(msg.Subject)}
			}
		}
		hash = after.Head
		if eventID != "" && hash != "" {
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
	if a, ok := b.src.(Auditor); ok && !m.Partial {
		b.audit(bg, a, story.ID, hash)
		// The note may have changed files of the tree (bd's own): the
		// tree the commit left is no longer the tree.
		if now, err := b.git.Snapshot(bg); err == nil {
			after = now
		}
	}
	if after, err := b.commitDelta(bg, pre, after, made); err == nil {
		b.snap = after
		b.keepFresh(after)
	}
	if hash != "" && hash != b.attemptHead() {
		b.rec.Progress = true
	}
	if m.Partial {
		b.rec.Status = StatusPartial
		b.say(report.KindCommit, fmt.Sprintf("◐ iteration %d: %s partial work committed (%s); a fresh agent continues\n", m.Iteration, taskID, short(hash)),
			report.Commit{Iteration: m.Iteration, Commit: hash, Status: StatusPartial})
	} else {
		b.rec.Status = StatusDone
		j := b.judgement()
		b.rec.Verdict, b.rec.Evidence = string(j.Outcome), j.Evidence
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
	b.closeIteration()
	return Event{Trigger: TrigCommitted}, nil
}

// commitFailed records a commit git refused (a pre-commit hook, an
// index.lock an agent left behind), or the staging before it, as the
// task's failure: the task file loses the done mark ralph had just set,
// and the reason says what failed (what) and what git and the hook said,
// so the person who unblocks the task knows what to fix.
func (b *builder) commitFailed(taskBytes []byte, what string, err error) (Event, error) {
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
	return b.fail(TrigCommitFailed, what+": "+clip(strings.Join(strings.Fields(said), " "), 200), said, "permanent")
}

// commitMessage is the message of a task's commit: the subject, the
// acceptance criteria report, and the trailers that tie the commit to
// ralph's records. runkit.Commit adds the Ralph-Commit token last.
func (b *builder) commitMessage(taskID string, story tasks.Story, partial bool, eventID string) runkit.Message {
	m := runkit.Message{Subject: taskID + ": " + story.Title}
	if b.sel.Subtask != nil {
		m.Subject = taskID + ": " + b.sel.Subtask.Title
	}
	if partial {
		m.Subject = taskID + ": partial work (context exhausted)"
	}
	if b.rec != nil && b.rec.ACReport != "" {
		m.Body = "Acceptance criteria:\n" + b.rec.ACReport
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
	return b.snap.Head
}
