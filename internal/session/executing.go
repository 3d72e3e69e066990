package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
)

// selectTask is SelectTask: the first task not done, in the order of
// tasks.md, or none left.
func (r *Runner) selectTask(ctx context.Context) error {
	ts, err := r.sessionTasks()
	if err != nil {
		return err
	}
	for _, t := range ts {
		rec := r.prog.Task(t.ID)
		if rec != nil && rec.Mark != tasks.MarkDone {
			return r.fire(ctx, Event{Type: TaskSelected, TaskID: t.ID, Attempt: rec.Failures + 1}, text.OneLine(t.Title))
		}
	}
	return r.fire(ctx, Event{Type: NoTasksRemaining}, "")
}

// execute is InvokeExecutor: the executor on the current task.
func (r *Runner) execute(ctx context.Context) error {
	s := r.prog.State
	task, gone, err := r.currentTask(ctx)
	if err != nil || gone {
		return err
	}
	head, err := r.git().Head(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	if r.prog.TaskBase == "" {
		// A token left by a commit that failed must not be readable by
		// the next executor, which could copy it.
		r.prog.TaskBase, r.prog.CommitToken = head, ""
		if err := r.save(); err != nil {
			return err
		}
	}
	res, ok, why, err := r.ask(ctx, prompt.Executor, role.Executor, map[string]string{
		"TASK_ID": task.ID, "TASK_TITLE": task.Title, "TASK_CRITERIA": criteriaText(task),
		"ATTEMPT": strconv.Itoa(s.CurrentAttemptNumber), "MAX_ATTEMPTS": strconv.Itoa(r.Policy.MaxTaskAttempts),
		"FEEDBACK": r.feedback(task.ID), "QUALITY_GATES": check.Gates(r.Checks),
	})
	if err != nil {
		return err
	}
	if !ok {
		r.report(task.ID, s.CurrentAttemptNumber, "Executor", "no valid result: "+why)
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.Executor, Reason: why}, "invalid: "+why)
	}
	r.report(task.ID, s.CurrentAttemptNumber, "Executor ("+res.Status+")", res.Summary+blockersText(res.Blockers))
	if res.NewRequirements && res.Status != role.StatusBlocked {
		r.prog.State.Blockers = append(r.prog.State.Blockers, "new requirements found while doing "+task.ID+": "+res.Summary)
		r.prog.TaskBase = ""
		return r.fire(ctx, Event{Type: NewRequirements, NewTasks: res.NewTasks}, "new requirements: "+res.Summary)
	}
	if res.Status == role.StatusBlocked {
		r.prog.TaskBase = ""
	}
	return r.fire(ctx, Event{Type: ExecutorCompleted, Status: res.Status, NewTasks: res.NewTasks,
		Reason: task.ID + ": " + strings.Join(res.Blockers, "; ")}, res.Status+detailSuffix(res.Blockers))
}

// currentTask is the session's current task as tasks.md has it. When
// tasks.md no longer has it, the run ends on a critical error, fired
// here, and gone is true.
func (r *Runner) currentTask(ctx context.Context) (task tasks.SessionTask, gone bool, err error) {
	ts, err := r.sessionTasks()
	if err != nil {
		return tasks.SessionTask{}, false, err
	}
	id := r.prog.State.CurrentTaskID
	task, ok := findTask(ts, id)
	if !ok {
		return tasks.SessionTask{}, true, r.fire(ctx, Event{Type: CriticalError, Reason: "task " + id + " is no longer in tasks.md"}, "")
	}
	return task, false, nil
}

func findTask(ts []tasks.SessionTask, id string) (tasks.SessionTask, bool) {
	for _, t := range ts {
		if t.ID == id {
			return t, true
		}
	}
	return tasks.SessionTask{}, false
}

func criteriaText(t tasks.SessionTask) string {
	if len(t.Criteria) == 0 {
		return "(none stated: the title is the criterion)"
	}
	return bullets(t.Criteria)
}

// lastLine is the last line a failed check printed, for a reason that
// stays on one line (the next attempt gets check.Feedback).
func lastLine(res check.Result) string {
	if l := check.LastLines(res.Output, 1); len(l) > 0 {
		return ": " + text.Clip(strings.TrimSpace(l[0]), 200)
	}
	return ""
}

func blockersText(bs []string) string {
	if len(bs) == 0 {
		return ""
	}
	return "\n\nBlockers:\n" + bullets(bs)
}

func detailSuffix(bs []string) string {
	if len(bs) == 0 {
		return ""
	}
	return ": " + strings.Join(bs, "; ")
}

// report appends one section to the task's report: the history of its
// attempts, which the next executor reads as feedback.
func (r *Runner) report(task string, attempt int, who, text string) {
	p := reportPath(r.Dir, task)
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	section := fmt.Sprintf("## Attempt %d: %s\n\n%s\n\n", attempt, who, strings.TrimSpace(text))
	_ = store.AppendFile(p, []byte(section))
}

// feedback is what the previous attempts at a task were told.
func (r *Runner) feedback(task string) string {
	b, err := os.ReadFile(reportPath(r.Dir, task))
	if err != nil || len(b) == 0 {
		return "(first attempt)"
	}
	return "Earlier attempts at this task (" + r.WS.Rel(reportPath(r.Dir, task)) + "):\n\n" + string(b)
}
