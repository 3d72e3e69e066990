package session

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
)

// DefaultMaxTasks is the default bound on a session's tasks.
const DefaultMaxTasks = 30

func (r *Runner) maxTasks() int {
	if r.MaxTasks > 0 {
		return r.MaxTasks
	}
	return DefaultMaxTasks
}

// capTasks keeps the first room tasks of add and reports the rest as a
// blocker, so that the planner and the goal check see what was left out.
func (r *Runner) capTasks(add []role.NewTask, room int) []role.NewTask {
	if len(add) <= room {
		return add
	}
	room = max(room, 0)
	var dropped []string
	for _, t := range add[room:] {
		dropped = append(dropped, text.OneLine(t.Title))
	}
	msg := fmt.Sprintf("the session holds at most %d tasks ([session] max_tasks); not added: %s", r.maxTasks(), strings.Join(dropped, "; "))
	r.say(report.KindWarning, report.Warning{Dropped: dropped}, "ralph: ⚠ %s", msg)
	_ = r.WS.LogError(r.now(), "session "+r.prog.State.SessionID+": "+msg)
	r.prog.State.Blockers = append(r.prog.State.Blockers, msg)
	return add[:room]
}

// syncMarks makes tasks.md agree with ralph's records: a mark an agent
// changed is put back (ralph owns the marks), and a task an agent added to
// the file directly is adopted as to do.
func (r *Runner) syncMarks() error {
	data, err := os.ReadFile(tasksPath(r.Dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	ts, err := tasks.ParseTasksMD(tasksPath(r.Dir), data)
	if err != nil {
		return fmt.Errorf("%w (an agent may have broken the file: fix it by hand, then ralph run --resume)", err)
	}
	out := data
	for _, t := range ts {
		rec := r.prog.Task(t.ID)
		if rec == nil {
			r.prog.Tasks = append(r.prog.Tasks, TaskRecord{ID: t.ID, Mark: tasks.MarkTodo})
			rec = r.prog.Task(t.ID)
		}
		if t.Mark != rec.Mark {
			r.say(report.KindWarning, report.Warning{TaskID: t.ID, Mark: string(rec.Mark), AgentMark: string(t.Mark)},
				"ralph: %s is %s in ralph's records; putting back the %s an agent wrote", t.ID, rec.Mark, t.Mark)
			if out, err = tasks.SetTaskMark(tasksPath(r.Dir), out, t.ID, rec.Mark); err != nil {
				return err
			}
		}
	}
	if string(out) == string(data) {
		return nil
	}
	return store.WriteFileAtomic(tasksPath(r.Dir), out, 0o644)
}

func (r *Runner) setMark(id string, m tasks.Mark) error {
	t := r.prog.Task(id)
	if t == nil {
		return nil
	}
	t.Mark = m
	data, err := os.ReadFile(tasksPath(r.Dir))
	if err != nil {
		return err
	}
	out, err := tasks.SetTaskMark(tasksPath(r.Dir), data, id, m)
	if err != nil {
		return err
	}
	return store.WriteFileAtomic(tasksPath(r.Dir), out, 0o644)
}

// addTasks appends discovered tasks to tasks.md and progress.md, skipping
// titles that are already there.
func (r *Runner) addTasks(add []role.NewTask) ([]string, error) {
	if len(add) == 0 {
		return nil, nil
	}
	data, _ := os.ReadFile(tasksPath(r.Dir))
	existing, err := tasks.ParseTasksMD(tasksPath(r.Dir), data)
	if err != nil {
		return nil, err
	}
	var novel []role.NewTask
	for _, nt := range add {
		if !hasTitle(existing, nt.Title) {
			novel = append(novel, nt)
		}
	}
	add = r.capTasks(novel, r.maxTasks()-len(existing))
	var fresh []tasks.SessionTask
	var ids []string
	for _, nt := range add {
		if hasTitle(existing, nt.Title) {
			continue
		}
		t := tasks.SessionTask{ID: tasks.NextTaskID(existing), Title: nt.Title, Mark: tasks.MarkTodo, Criteria: nt.Criteria}
		existing = append(existing, t)
		fresh = append(fresh, t)
		ids = append(ids, t.ID)
		r.prog.Tasks = append(r.prog.Tasks, TaskRecord{ID: t.ID, Mark: tasks.MarkTodo})
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	if len(data) == 0 {
		data = tasks.RenderTasksMD(text.OneLine(r.prog.Title), nil)
	}
	r.say(report.KindNote, report.Note{Added: ids}, "ralph: added %s to %s", strings.Join(ids, ", "), r.WS.Rel(tasksPath(r.Dir)))
	return ids, store.WriteFileAtomic(tasksPath(r.Dir), tasks.AppendTasks(data, fresh), 0o644)
}

func hasTitle(ts []tasks.SessionTask, title string) bool {
	for _, t := range ts {
		if strings.EqualFold(strings.TrimSpace(t.Title), strings.TrimSpace(title)) {
			return true
		}
	}
	return false
}

// sessionTasks reads tasks.md.
func (r *Runner) sessionTasks() ([]tasks.SessionTask, error) {
	data, err := os.ReadFile(tasksPath(r.Dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return tasks.ParseTasksMD(tasksPath(r.Dir), data)
}
