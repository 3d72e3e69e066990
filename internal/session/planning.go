package session

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
)

// plan is InvokePlanner: the planner, unless questions wait for a person
// (the questioner, InvokeQuestioner, runs before it when a Q&A cycle is
// pending).
func (r *Runner) plan(ctx context.Context) error {
	s := r.prog.State
	if open, err := r.openQuestions(); err != nil {
		return err
	} else if len(open) > 0 {
		return r.waitForAnswers(open)
	}
	feedback := strings.Join(s.Blockers, "\n")
	if feedback == "" {
		feedback = "(none)"
	}
	res, ok, why, err := r.ask(ctx, prompt.Planner, role.Planner, map[string]string{
		"MODE": s.PlannerMode, "QA": r.qaText(), "FEEDBACK": feedback,
	})
	if err != nil {
		return err
	}
	if !ok {
		return r.fire(ctx, Event{Type: InvalidResponse, Role: role.Planner, Reason: why}, "invalid: "+why)
	}
	detail := res.Status
	switch res.Status {
	case role.StatusNeedsQACycle:
		if err := appendQA(r.Dir, fmt.Sprintf("## Q&A cycle %d: the planner asks\n\n%s\n", s.QACycleCount+1, bullets(res.Questions))); err != nil {
			return err
		}
		detail += ": " + strings.Join(res.Questions, " | ")
	case role.StatusCompleted:
		if err := r.adoptPlan(res.Tasks); err != nil {
			return err
		}
		if err := r.ensurePlan(res.Summary); err != nil {
			return err
		}
	case role.StatusBlocked:
		detail += ": " + strings.Join(res.Blockers, "; ")
		r.prog.State.Blockers = append(r.prog.State.Blockers, res.Blockers...)
	}
	return r.fire(ctx, Event{Type: PlannerCompleted, Status: res.Status, HasTasks: len(r.prog.Tasks) > 0,
		HasUncompletedTasks: r.prog.HasUncompleted(), Reason: strings.Join(res.Blockers, "; ")}, detail)
}

// adoptPlan makes the planner's task list the session's: done tasks stay,
// listed tasks are kept or added, to-do tasks the planner dropped go. A
// planner that returned no tasks may have written tasks.md itself.
func (r *Runner) adoptPlan(planned []role.NewTask) error {
	current, err := r.sessionTasks()
	if err != nil {
		return err
	}
	if len(planned) == 0 {
		// The planner wrote tasks.md itself: ralph keeps its own marks.
		for _, t := range current {
			if r.prog.Task(t.ID) == nil {
				r.prog.Tasks = append(r.prog.Tasks, TaskRecord{ID: t.ID, Mark: tasks.MarkTodo})
			}
		}
		return r.rewriteTasks(current)
	}
	var next []tasks.SessionTask
	for _, t := range current {
		rec := r.prog.Task(t.ID)
		if rec != nil && rec.Mark == tasks.MarkDone {
			next = append(next, t)
		}
	}
	var novel []role.NewTask
	for _, nt := range planned {
		if !hasTitle(next, nt.Title) {
			novel = append(novel, nt)
		}
	}
	planned = r.capTasks(novel, r.maxTasks()-len(next))
	for _, nt := range planned {
		if hasTitle(next, nt.Title) {
			continue
		}
		id := ""
		for _, t := range current {
			if strings.EqualFold(strings.TrimSpace(t.Title), strings.TrimSpace(nt.Title)) {
				id = t.ID
			}
		}
		if id == "" {
			id = tasks.NextTaskID(append(append([]tasks.SessionTask{}, current...), next...))
		}
		next = append(next, tasks.SessionTask{ID: id, Title: nt.Title, Criteria: nt.Criteria, Mark: tasks.MarkTodo})
	}
	var recs []TaskRecord
	for _, t := range next {
		rec := r.prog.Task(t.ID)
		if rec == nil {
			rec = &TaskRecord{ID: t.ID, Mark: tasks.MarkTodo}
		}
		recs = append(recs, *rec)
	}
	r.prog.Tasks = recs
	return r.rewriteTasks(next)
}

// ensurePlan writes plan.md from the planner's summary and the task list
// when the planner did not write it itself.
func (r *Runner) ensurePlan(summary string) error {
	if _, err := os.Stat(planPath(r.Dir)); err == nil {
		return nil
	}
	ts, err := r.sessionTasks()
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Plan: %s\n\n%s\n\n## Tasks\n\n", text.OneLine(r.prog.Title), text.OrNone(strings.TrimSpace(summary), "(none)"))
	for _, t := range ts {
		fmt.Fprintf(&b, "- %s: %s\n", t.ID, t.Title)
	}
	return store.WriteFileAtomic(planPath(r.Dir), []byte(b.String()), 0o644)
}

// rewriteTasks writes tasks.md with ralph's marks.
func (r *Runner) rewriteTasks(ts []tasks.SessionTask) error {
	for i := range ts {
		if rec := r.prog.Task(ts[i].ID); rec != nil {
			ts[i].Mark = rec.Mark
		}
	}
	return store.WriteFileAtomic(tasksPath(r.Dir), tasks.RenderTasksMD(text.OneLine(r.prog.Title), ts), 0o644)
}

// questions is InvokeQuestioner: the questioner on the planner's open
// questions. Its
// answers go to qa.md; questions only a person can answer are queued.
func (r *Runner) questions(ctx context.Context) error {
	res, ok, why, err := r.ask(ctx, prompt.Questioner, role.Questioner, map[string]string{"QUESTIONS": r.lastQuestions()})
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("\n### The questioner answers\n\n")
	if !ok {
		fmt.Fprintf(&b, "(no valid answer: %s)\n", why)
	}
	for _, a := range res.Answers {
		fmt.Fprintf(&b, "- Q: %s\n  A: %s\n", text.OneLine(a.Question), text.OneLine(a.Answer))
	}
	if len(res.HumanQuestions) > 0 {
		added, err := AddQuestions(r.Dir, role.Questioner, res.HumanQuestions, r.now())
		if err != nil {
			return err
		}
		for _, q := range added {
			fmt.Fprintf(&b, "- Q (for a person, %s): %s\n", q.ID, text.OneLine(q.Text))
		}
	}
	if err := appendQA(r.Dir, b.String()+"\n"); err != nil {
		return err
	}
	r.prog.State.PendingQA = false
	return r.save()
}

func (r *Runner) openQuestions() ([]Question, error) {
	qs, err := LoadQuestions(r.Dir)
	return OpenQuestions(qs), err
}

func (r *Runner) waitForAnswers(open []Question) error {
	var b strings.Builder
	ids := make([]string, 0, len(open))
	fmt.Fprintf(&b, "ralph: session %s waits for a person to answer:\n", r.prog.State.SessionID)
	for _, q := range open {
		fmt.Fprintf(&b, "  %s  %s\n", q.ID, q.Text)
		ids = append(ids, q.ID)
	}
	fmt.Fprintf(&b, "answer with: ralph answer %s \"...\"   then: ralph run --resume\n", open[0].ID)
	r.emit(report.Event{Kind: report.KindWait, Text: b.String(), Data: report.Wait{Questions: ids}})
	return &stopErr{trigger: WaitingForAnswers, detail: strings.Join(ids, ", "), err: ErrWaitingForAnswers}
}

// qaText is everything asked and answered so far, human answers included.
func (r *Runner) qaText() string {
	b, _ := os.ReadFile(qaPath(r.Dir))
	body := strings.TrimSpace(string(b))
	qs, _ := LoadQuestions(r.Dir)
	var answered []string
	for _, q := range qs {
		if !q.Open() {
			answered = append(answered, fmt.Sprintf("- Q (%s): %s\n  A (from a person): %s", q.ID, text.OneLine(q.Text), text.OneLine(q.Answer)))
		}
	}
	if len(answered) > 0 {
		body += "\n\n### Answers from a person\n\n" + strings.Join(answered, "\n")
	}
	if strings.TrimSpace(body) == "" {
		return "(none)"
	}
	return body
}

// lastQuestions is the planner's most recent list of questions in qa.md.
func (r *Runner) lastQuestions() string {
	b, _ := os.ReadFile(qaPath(r.Dir))
	body := string(b)
	if i := strings.LastIndex(body, "## Q&A cycle"); i >= 0 {
		body = body[i:]
		if j := strings.Index(body, "\n### "); j >= 0 {
			body = body[:j]
		}
	}
	return strings.TrimSpace(body)
}

func appendQA(dir, text string) error { return store.AppendFile(qaPath(dir), []byte(text)) }

func bullets(items []string) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "- %s\n", text.OneLine(it))
	}
	return b.String()
}
