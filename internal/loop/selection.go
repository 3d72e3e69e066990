package loop

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
)

// reloadBoard reads the task file again and lays ralph's own records over
// it: blocked tasks of formats that cannot say "blocked" stay blocked, and
// a blocker a person cleared in the file is cleared here too.
func (b *builder) reloadBoard() error {
	board, err := b.src.Load()
	if err != nil {
		return err
	}
	if only := b.opts.OnlyStory; only != "" {
		board.Stories = onlyStory(board.Stories, only)
	}
	held := b.held()
	for i := range board.Stories {
		s := &board.Stories[i]
		for _, id := range storyTaskIDs(*s) {
			t := b.st.Tasks[id]
			if c, ok := held[id]; ok && s.Status != tasks.StatusComplete && !s.Done {
				t = b.holdTask(id, c)
			}
			if t == nil || t.Blocker == nil {
				continue
			}
			if s.Status == tasks.StatusComplete {
				t.Blocker = nil
				continue
			}
			if t.Blocker.ByPerson {
				if _, ok := held[id]; !ok && !b.opts.ControlPauseOnly && b.opts.OnlyStory == "" {
					if err := b.dropReleased(s, id, t); err != nil {
						return err
					}
					continue
				}
			} else if t.Blocker.InFile && s.Status != tasks.StatusBlocked {
				// The file could say blocked and now does not: a person
				// unblocked it by editing the file, as seed 000 describes.
				t.Blocker, t.RetryCount = nil, 0
				delete(b.st.Feedback, id)
				continue
			}
			s.Status = tasks.StatusBlocked
			s.Done = false
		}
		if s.Status != tasks.StatusBlocked {
			if t := b.st.Tasks[s.ID]; t != nil {
				s.RetryCount = t.RetryCount
			}
		}
	}
	b.board = board
	return nil
}

// takeSharedRun counts the iteration about to start in the ledger a
// parallel build's workers share; false when the run's iterations are
// used up by them all. Without a ledger every iteration may start.
func (b *builder) takeSharedRun() bool {
	return b.opts.Ledger == nil || b.opts.Ledger.TakeRun()
}

// onlyStory keeps story id of stories, alone: a parallel worker's loop
// works that one task. Its dependencies are the scheduler's to honour (it
// hands out only ready tasks), and they are not on the shortened board.
func onlyStory(stories []tasks.Story, id string) []tasks.Story {
	for _, s := range stories {
		if s.ID == id {
			s.DependsOn = nil
			return []tasks.Story{s}
		}
	}
	return nil
}

// storyTaskIDs lists the task ids a story can have: itself and each
// subtask.
func storyTaskIDs(s tasks.Story) []string {
	ids := []string{s.ID}
	for _, st := range s.Subtasks {
		ids = append(ids, (tasks.Selection{Story: s, Subtask: &st}).TaskID())
	}
	return ids
}

// selectTask is STORY_SELECT's action: the next task, or the end of the
// run when there is none.
func (b *builder) selectTask() (Event, tasks.Selection, error) {
	var none tasks.Selection
	if err := b.reloadBoard(); err != nil {
		return Event{}, none, err
	}
	b.reviveTransient()
	sel, finished, ok, why := b.board.Select()
	for _, id := range finished {
		if err := b.src.MarkDone(id, "", b.opts.now()); err != nil {
			return Event{}, none, err
		}
		b.event("story %s complete: all its subtasks are done", id)
	}
	if len(finished) > 0 {
		if err := b.reloadBoard(); err != nil {
			return Event{}, none, err
		}
		sel, _, ok, why = b.board.Select()
	}
	if !ok && b.board.Remaining() > 0 {
		// With nothing else left, no iterations pass for a transient
		// blocker to wait out: its one retry comes now, within the limit.
		if id := b.lastTransient(); id != "" {
			if b.st.Machine.Iteration >= b.st.MaxIterations {
				return b.limitReached()
			}
			// A person's skip is no failure: the line says who set it aside.
			why, again := "blocked by a transient failure", "retrying it now"
			if by := b.st.task(id).Blocker.SkippedBy; by != "" {
				why, again = "skipped by "+by, "taking it up again now"
			}
			if b.board.Remaining() == 1 {
				b.sayf(report.KindBlocker, "  ↻ only %s is left, %s: %s\n", id, why, again)
			} else {
				b.sayf(report.KindBlocker, "  ↻ only blocked or skipped tasks are left; %s was %s: %s\n", id, why, again)
			}
			b.revive(id, "now, as nothing else is left")
			if err := b.reloadBoard(); err != nil {
				return Event{}, none, err
			}
			sel, _, ok, why = b.board.Select()
		}
	}
	if !ok {
		if b.board.Remaining() == 0 {
			// A run never ends complete while a check fails, whoever
			// said the stories were done.
			if failing := b.st.Baseline.Failing(); len(failing) > 0 {
				b.st.Outcome = OutcomeChecksFailing
				b.st.Reason = fmt.Sprintf("every story is done, but %s %s on the final tree", strings.Join(quoteChecks(failing), ", "), words.Plural(len(failing), "fails", "fail"))
				b.sayLimit("■ "+b.st.Reason+"\n", OutcomeChecksFailing, b.st.Reason)
				return Event{Trigger: TrigAllComplete}, none, b.exit(false)
			}
			b.st.Outcome, b.st.Reason = OutcomeComplete, "all stories complete"
			return Event{Trigger: TrigAllComplete}, none, b.exit(true)
		}
		b.st.Outcome, b.st.Reason = OutcomeNeedsHuman, why
		return Event{Trigger: TrigNoneSelectable}, none, b.exit(false)
	}
	if why := b.budgetExceeded(); why != "" {
		b.st.Outcome, b.st.Reason = OutcomeBudget, "budget reached: "+why
		b.sayLimit("■ "+b.st.Reason+"\n", OutcomeBudget, b.st.Reason)
		return Event{Trigger: TrigBudgetExhausted}, none, b.exit(false)
	}
	if b.st.Machine.Iteration >= b.st.MaxIterations {
		return b.limitReached()
	}
	sel = b.pick(sel)
	id := sel.TaskID()
	b.claim(context.Background(), id) // sources that track assignees (bd update --claim)
	return Event{Trigger: TrigTaskSelected, TaskID: id, RetryCount: b.st.task(id).RetryCount}, sel, nil
}

func (b *builder) limitReached() (Event, tasks.Selection, error) {
	b.st.Outcome = OutcomeMaxIterations
	b.st.Reason = fmt.Sprintf("reached %s with %s left", words.Count(b.st.MaxIterations, "iteration", "iterations"), words.Count(b.board.Remaining(), "story", "stories"))
	b.sayLimit("■ "+b.st.Reason+"\n", OutcomeMaxIterations, b.st.Reason)
	// The table's edge out of STORY_SELECT at the limit is the seed's
	// budget_exhausted; the line's data says it is the iteration limit.
	return Event{Trigger: TrigBudgetExhausted}, tasks.Selection{}, b.exit(false)
}

// sayLimit says why the run ends at a limit or an interrupt (the "■"
// line); its data carries the run's outcome and reason, so that programs
// need not read the line, nor guess from the trigger, which at
// STORY_SELECT is budget_exhausted for the iteration limit too.
func (b *builder) sayLimit(text string, outcome Outcome, reason string) {
	b.say(report.KindLimit, text, report.Limit{Ending: &report.Ending{Outcome: string(outcome), Reason: reason}})
}

// reviveTransient gives a transiently blocked task its one automatic
// retry once three iterations have passed since it was blocked (seed 000).
func (b *builder) reviveTransient() {
	for id, t := range b.st.Tasks {
		bl := t.Blocker
		if bl == nil || bl.Type != string(tasks.BlockerTransient) || t.AutoRetried || b.st.Machine.Iteration-bl.Iteration < 3 {
			continue
		}
		if b.revive(id, "after 3 iterations") {
			b.sayf(report.KindBlocker, "  ↻ %s: transient blocker, retrying once automatically\n", id)
		}
	}
	if err := b.reloadBoard(); err != nil {
		b.logError("reload after revival: %v", err)
	}
}

// lastTransient returns the first transiently blocked task (by id) that
// has not had its automatic retry, "" when there is none.
func (b *builder) lastTransient() string {
	var ids []string
	for id, t := range b.st.Tasks {
		if bl := t.Blocker; bl != nil && bl.Type == string(tasks.BlockerTransient) && !t.AutoRetried {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// revive clears a transient blocker for its one automatic retry.
func (b *builder) revive(id, why string) bool {
	t := b.st.task(id)
	storyID, _, _ := strings.Cut(id, "/")
	if err := b.src.SetState(storyID, tasks.StatusInProgress, 0, nil, b.opts.now()); err != nil {
		b.logError("could not revive %s: %v", id, err)
		return false
	}
	t.Blocker = nil
	t.RetryCount = 0
	t.AutoRetried = true
	b.event("task %s: transient blocker retried automatically %s", id, why)
	return true
}

// findSelection rebuilds the selection of a task id after a resume.
func (b *builder) findSelection(id string) (tasks.Selection, bool) {
	for _, s := range b.board.Stories {
		if s.ID == id {
			return tasks.Selection{Story: s}, true
		}
		for i := range s.Subtasks {
			sel := tasks.Selection{Story: s, Subtask: &s.Subtasks[i]}
			if sel.TaskID() == id {
				return sel, true
			}
		}
	}
	return tasks.Selection{}, false
}

// selection is the selection of the machine's task: sel, handed on by
// the steps before, or after a resume, found again on the task file.
func (b *builder) selection(sel tasks.Selection) (tasks.Selection, error) {
	id := b.st.Machine.TaskID
	if sel.Story.ID != "" && sel.TaskID() == id {
		return sel, nil
	}
	if err := b.reloadBoard(); err != nil {
		return sel, err
	}
	sel, ok := b.findSelection(id)
	if !ok {
		return sel, fmt.Errorf("task %s is no longer in %s", id, b.ws.Rel(b.src.Path()))
	}
	return sel, nil
}
