package loop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/verify"

	"github.com/ralphloop/ralph/internal/report"
)

// Auditor is implemented by task sources that keep an audit trail of their
// own (beads: `bd comments add`). COMMIT calls it once per completed task,
// after the git commit, with a one-line summary of the iteration: task id,
// agent, duration, the checks that passed and the commit hash. A failure is
// a warning, never fatal: the task is already done and committed.
//
// key identifies the iteration ("run R iteration N") and is part of the
// summary; an Auditor that already holds a note with key adds none, so
// that COMMIT, which runs again after a crash, never writes two.
type Auditor interface {
	Audit(ctx context.Context, taskID, key, summary string) error
}

// auditKey names the current iteration in an audit note.
func (b *builder) auditKey() string {
	return fmt.Sprintf("run %s iteration %d", b.id, b.st.Machine.Iteration)
}

// audit hands the summary of iteration it to an Auditor source.
func (b *builder) audit(ctx context.Context, a Auditor, it iteration, hash string) {
	storyID := it.sel.Story.ID
	if err := a.Audit(ctx, storyID, b.auditKey(), b.auditSummary(it, hash)); err != nil {
		b.log.Warn("task source audit failed", "task", storyID, "err", err)
		b.sayf(report.KindWarning, "  ⚠ could not record the audit note for %s in %s: %s\n", storyID, b.src.Kind(), clip(err.Error(), 300))
	}
}

// auditSummary is the one-line account of the current iteration, e.g.
// "ralph: rl-a done and verified at 2026-11-22T10:00:00Z · run r1
// iteration 2 · agent claude · 41.2s · checks passed: test, lint · commit
// 3f2a9c1d0b7e".
func (b *builder) auditSummary(it iteration, hash string) string {
	now := b.opts.now()
	var sb strings.Builder
	j := b.judgement()
	how := "done and verified"
	if j.Outcome == verify.AgentWord {
		how = b.agentWordHow()
	}
	fmt.Fprintf(&sb, "ralph: %s %s at %s · %s", it.sel.TaskID(), how, now.UTC().Format(time.RFC3339), b.auditKey())
	if len(j.Evidence) > 0 {
		fmt.Fprintf(&sb, " · evidence: %s", strings.Join(clipList(j.Evidence, 3), "; "))
	}
	if len(j.Failing) > 0 {
		fmt.Fprintf(&sb, " · still failing, as before: %s", strings.Join(j.Failing, ", "))
	}
	rec := it.rec
	if rec.Agent != "" {
		fmt.Fprintf(&sb, " · agent %s", rec.Agent)
	}
	if !rec.StartedAt.IsZero() {
		fmt.Fprintf(&sb, " · %s", now.Sub(rec.StartedAt).Round(100*time.Millisecond))
	}
	var passed []string
	for _, c := range rec.Checks {
		if c.Passed {
			passed = append(passed, c.Name)
		}
	}
	if len(passed) > 0 {
		fmt.Fprintf(&sb, " · checks passed: %s", strings.Join(passed, ", "))
	} else {
		sb.WriteString(" · no checks configured")
	}
	if hash != "" {
		fmt.Fprintf(&sb, " · commit %s", hash)
	} else {
		sb.WriteString(" · not committed")
	}
	return sb.String()
}
