package loop

import (
	"context"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// markBlocked runs on the transition into BLOCKER: it records the blocker
// in ralph's state; BLOCKER's entry action then writes the task file.
func (b *builder) markBlocked(from, to Machine, f *Failure) {
	if f == nil {
		f = &Failure{Reason: "the reason was not recorded"}
	}
	id := from.TaskID
	t := b.st.task(id)
	t.RetryCount = to.RetryCount
	typ := f.Type
	review := typ == "review"
	if typ == "" || review {
		typ = "permanent"
	}
	if t.AutoRetried {
		typ = "permanent" // the one automatic retry of a transient blocker failed
	}
	fixes := []string{}
	if t.Blocker != nil {
		fixes = t.Blocker.AttemptedFixes
	}
	fixes = append(fixes, fmt.Sprintf("iteration %d: %s", from.Iteration, f.Reason))
	t.Blocker = &BlockerRecord{Reason: f.Reason, Type: typ, RequiresHuman: typ == "permanent", AttemptedFixes: fixes, Iteration: from.Iteration, Review: review}
	b.st.Metrics.Blocked++
	delete(b.st.Feedback, id)
}

func (b *builder) logBlocker(ctx context.Context) error {
	id := b.st.Machine.TaskID
	t := b.st.task(id)
	bl := t.Blocker
	if bl == nil {
		// markBlocked records it with the transition into BLOCKER, saved
		// before this runs: only a state written by an older ralph lacks it.
		bl = &BlockerRecord{Reason: "the reason was not recorded", Type: "permanent", RequiresHuman: true}
		t.Blocker = bl
	}
	storyID, _, _ := strings.Cut(id, "/")
	now := b.opts.now()
	err := b.src.SetState(storyID, tasks.StatusBlocked, t.RetryCount, &tasks.Blocker{
		Reason: bl.Reason, Type: tasks.BlockerType(bl.Type), RequiresHuman: bl.RequiresHuman, AttemptedFixes: bl.AttemptedFixes,
	}, now)
	if err != nil {
		b.logError("could not mark %s blocked in %s: %v", id, b.ws.Rel(b.src.Path()), err)
	}
	if board, lerr := b.src.Load(); lerr == nil {
		for _, s := range board.Stories {
			if s.ID == storyID && s.Status == tasks.StatusBlocked {
				bl.InFile = true
			}
		}
	}
	// Set the failed attempt's work aside so that the next task starts
	// from a clean tree; a ref of the run's own keeps it for the person
	// who unblocks.
	bg := context.WithoutCancel(ctx)
	if !b.st.NoCommit {
		b.setAsideBlocked(bg, id, bl)
	}
	b.mem.Add(bg, memory.Node{ID: fmt.Sprintf("blk-%s-%d", b.id, b.st.Machine.Iteration), Name: id + " blocked: " + bl.Reason, MemoryType: memory.TypeBlocker, Text: strings.Join(bl.AttemptedFixes, "; "),
		Props: map[string]string{"event": memory.EventTaskBlocker, "task": id, "blocker_type": bl.Type, "run": b.id, "fix_sources_tried": "checks, acceptance criteria"}})
	b.logError("task %s blocked (%s): %s", id, bl.Type, bl.Reason)
	b.appendProgress(fmt.Sprintf("%s BLOCKED (%s, requires_human=%v): %s", id, bl.Type, bl.RequiresHuman, bl.Reason))
	b.tell(report.Blocker{State: "blocked", Type: bl.Type, Reason: bl.Reason, RequiresHuman: report.Ptr(bl.RequiresHuman)})
	switch {
	case bl.Review:
		b.sayf(report.KindBlocker, "   a person must decide: read the test change (git diff %s^ %s), then `ralph approve %s` to accept it, or `ralph unblock %s` to have it done again\n", bl.Ref, bl.Ref, id, id)
	case bl.Type == "permanent":
		hint := b.opts.UnblockHint
		if hint == "" {
			hint = "ralph unblock " + id
		}
		b.sayf(report.KindBlocker, "   a person must decide: fix it, then `%s`\n", hint)
	}
	b.st.TaskBase, b.st.TaskBaseFor = "", ""
	return b.saveState()
}

// setAside keeps the attempt's work in a commit at ref and puts the files
// it touched back as they are at HEAD. Not git stash: refs/stash is shared
// by every worktree of the repository, so two runs in two worktrees would
// take each other's work (and the user's). ralph's own files (its folder,
// the task file, the plan) stay: they hold the blocker just written and
// the records of the run. It returns "" when the attempt left nothing
// outside those files.
func (b *builder) setAside(ctx context.Context, ref, msg string) (string, error) {
	return b.git.SetAside(ctx, ref, msg, workspace.DirName, b.ws.Rel(b.src.Path()), b.ws.Rel(b.opts.PlanPath))
}

// AttemptRef is the ref that keeps run's blocked attempt at task: one per
// run and task, so that no two runs, in this worktree or another, share it.
func AttemptRef(run, task string) string {
	return "refs/ralph/attempts/" + refPart(run) + "/" + refPart(task)
}

// refPart makes s safe as part of a ref name: task ids come from task
// files, and git refuses spaces, "..", a leading dot and such.
func refPart(s string) string {
	var sb strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '/':
			sb.WriteRune(c)
		default:
			sb.WriteByte('_')
		}
	}
	parts := strings.Split(sb.String(), "/")
	for i, p := range parts {
		if p == "" {
			parts[i] = "_"
		}
	}
	return strings.Join(parts, "/")
}

func (b *builder) maxRetries() int {
	if b.st.Machine.MaxRetries > 0 {
		return b.st.Machine.MaxRetries
	}
	return DefaultMaxRetries
}
