package session

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/text"
)

// review is InvokeReviewer: ralph's checks, then the reviewer. A
// Qualified verdict's transition commits the task (CommitTask).
func (r *Runner) review(ctx context.Context) error {
	s := r.prog.State
	bg := context.WithoutCancel(ctx)
	// A crash after ralph's commit but before progress.md recorded it:
	// the commit carries the token saved just before it was made. The
	// task trailers alone prove nothing: an executor can copy them.
	if _, ok := runkit.Committed(bg, r.git(), r.prog.CommitToken); ok {
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictQualified}, "Qualified")
	}
	task, gone, err := r.currentTask(ctx)
	if err != nil || gone {
		return err
	}
	results, passed := r.runChecks(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	checks := checksText(results)
	if !passed {
		last := results[len(results)-1]
		reason := fmt.Sprintf("ralph's check %q failed (exit %d)%s", last.Check.Name, last.ExitCode, lastLine(last))
		r.report(task.ID, s.CurrentAttemptNumber, "Review (Failed by ralph's checks)", reason+"\n\n"+check.Feedback(last))
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, Reason: reason}, "Failed: "+reason)
	}
	// The checks pass: with the executor's own tests, if it changed them.
	// They must pass with the start's too, or the reviewer would judge a
	// diff whose tests were bent to pass.
	if reason, feedback, err := r.startTestsHold(ctx); err != nil {
		return err
	} else if reason != "" {
		r.report(task.ID, s.CurrentAttemptNumber, "Review (Failed by ralph's checks with the start's tests)", reason+"\n\n"+feedback)
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, Reason: reason}, "Failed: "+reason)
	}
	diff, err := r.git().Diff(bg, r.prog.TaskBase, false, 60_000)
	if err != nil {
		return err
	}
	res, ok, why, err := r.ask(ctx, prompt.SessionReview, role.Reviewer, map[string]string{
		"TASK_ID": task.ID, "TASK_TITLE": task.Title, "TASK_CRITERIA": criteriaText(task),
		"ATTEMPT": strconv.Itoa(s.CurrentAttemptNumber), "DIFF": text.OrNone(diff, "(none)"), "CHECKS": checks,
		"EXECUTOR_SUMMARY": r.lastSection(task.ID),
	})
	if err != nil {
		return err
	}
	if !ok {
		r.report(task.ID, s.CurrentAttemptNumber, "Review", "no valid verdict: "+why)
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.Reviewer, Reason: "reviewer gave no verdict: " + why}, "invalid: "+why)
	}
	r.report(task.ID, s.CurrentAttemptNumber, "Review ("+res.Verdict+")", strings.TrimSpace(res.Summary+"\n\n"+bullets(res.Reasons)))
	if res.Verdict == role.VerdictFailed {
		return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, NewTasks: res.NewTasks,
			Reason: strings.Join(res.Reasons, "; ")}, "Failed: "+strings.Join(res.Reasons, "; "))
	}
	return r.fire(ctx, Event{Type: ReviewerCompleted, Verdict: role.VerdictQualified, NewTasks: res.NewTasks}, "Qualified")
}

// commitTask is CommitTask: ralph's commit of the task's work, made before
// the Qualified transition is recorded. The token saved with the session
// still in Reviewing is in the commit, so that a crash in between is
// recognised on resume and the work is never committed twice. A task that
// changed nothing has no commit.
func (r *Runner) commitTask(ctx context.Context, t *transition) error {
	ctx = context.WithoutCancel(ctx)
	hash, err := r.taskCommit(ctx, t)
	if err != nil {
		return err
	}
	if rec := r.prog.Task(stepTask(t)); rec != nil {
		rec.Commit = shortHash(hash)
	}
	r.prog.TaskBase = ""
	return nil
}

func (r *Runner) taskCommit(ctx context.Context, t *transition) (string, error) {
	if hash, ok := runkit.Committed(ctx, r.git(), r.prog.CommitToken); ok {
		return hash, nil
	}
	snap, err := r.git().Snapshot(ctx)
	if err != nil {
		return "", err
	}
	if snap.Clean() {
		// The executor committed the work itself: its commit is the
		// task's. Nothing at all since the task began: no commit.
		if snap.Head != r.prog.TaskBase {
			return snap.Head, nil
		}
		return "", nil
	}
	ts, err := r.sessionTasks()
	if err != nil {
		return "", err
	}
	task, ok := findTask(ts, stepTask(t))
	if !ok {
		return "", fmt.Errorf("task %s is no longer in %s: ralph cannot name its commit", stepTask(t), r.WS.Rel(tasksPath(r.Dir)))
	}
	msg := runkit.Message{
		Subject: fmt.Sprintf("%s: %s", task.ID, text.Clip(text.OneLine(task.Title), 60)),
		Trailers: []runkit.Trailer{
			{Key: "Ralph-Session", Value: t.From.SessionID},
			{Key: "Ralph-Task", Value: task.ID},
			{Key: "Ralph-Attempt", Value: strconv.Itoa(t.From.CurrentAttemptNumber)},
		},
	}
	return runkit.Commit(ctx, r.git(), msg, func(token string) error {
		r.prog.CommitToken = token
		return r.saveAt(t.From)
	})
}

func (r *Runner) lastSection(task string) string {
	b, _ := os.ReadFile(reportPath(r.Dir, task))
	body := string(b)
	if i := strings.LastIndex(body, "## Attempt"); i >= 0 {
		body = body[i:]
	}
	return text.OrNone(strings.TrimSpace(body), "(none)")
}

func checksText(results []check.Result) string {
	if len(results) == 0 {
		return "(no checks configured)"
	}
	var b strings.Builder
	for _, res := range results {
		mark := "passed"
		if !res.Passed() {
			mark = fmt.Sprintf("FAILED (exit %d)", res.ExitCode)
		}
		fmt.Fprintf(&b, "- %s: %s in %s\n", res.Check.Name, mark, res.Duration.Round(time.Millisecond))
	}
	return b.String()
}

// goalCheck is RunGoalCheck: a holistic pass over the request and the diff
// since the session's baseline.
func (r *Runner) goalCheck(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	stat, err := r.git().Diff(bg, r.prog.Baseline, true, 20_000)
	if err != nil {
		return err
	}
	tb, _ := os.ReadFile(tasksPath(r.Dir))
	res, ok, why, err := r.ask(ctx, prompt.GoalCheck, role.GoalCheck, map[string]string{
		"TASKS": text.OrNone(string(tb), "(none)"), "DIFF_STAT": text.OrNone(stat, "(none)"), "BASELINE": orDash(r.prog.Baseline),
	})
	if err != nil {
		return err
	}
	if !ok {
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.GoalCheck, Reason: why}, "invalid: "+why)
	}
	if res.Status == role.StatusPassed {
		return r.fire(ctx, Event{Type: HolisticCheckPassed}, "passed")
	}
	reason := strings.Join(res.Reasons, "; ")
	r.prog.State.Blockers = append(r.prog.State.Blockers, "goal check: "+reason)
	return r.fire(ctx, Event{Type: HolisticCheckFailed, NewTasks: res.NewTasks, Reason: reason}, "failed: "+reason)
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
