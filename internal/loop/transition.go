package loop

import (
	"context"
	"errors"
	"fmt"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
)

// pendingEvent is an event that waits for the next save of the state: a
// transition (t set) or a line said after one.
type pendingEvent struct {
	ev report.Event
	t  *pendingTransition
}

// pendingTransition is what the run's log says of a transition once it
// is saved.
type pendingTransition struct {
	from, to Machine
	trigger  Trigger
	taskID   string
}

// stop ends the run on err by the edge trig into STOPPED, so that the
// journal and state.json say why it stopped and the next `ralph build`
// resumes where it was. It returns err, which is what the user is told.
func (b *builder) stop(trig Trigger, why string, err error) error {
	if terr := b.transition(Event{Trigger: trig, Detail: why}); terr != nil && !errors.Is(terr, ErrNoTransition) {
		// The stop could not be recorded; the state on disk is still the
		// one before it, which resumes just the same.
		return errors.Join(err, terr)
	}
	return err
}

// transition applies the pure machine to an event, performs the
// transition's own actions, and persists the new state and the event line
// before the next state's entry action runs, unless that action is one a
// kill may simply have done again (waitsForSave): then the transition
// waits in memory for the next save of the state, which records it with
// the others that waited, in one atomic write where there were several.
func (b *builder) transition(ev Event) error {
	m := b.st.Machine
	next, actions, err := Next(m, ev)
	if err != nil {
		return err
	}
	now := b.opts.now()
	if b.st.Metrics.StateMillis == nil {
		b.st.Metrics.StateMillis = map[State]int64{}
	}
	if m.State != StateStopped {
		// Time between a stop and the resume is no time of the run.
		b.st.Metrics.StateMillis[m.State] += now.Sub(b.st.EnteredAt).Milliseconds()
	}
	for _, a := range actions[:len(actions)-1] {
		b.transitionAction(a, m, next, ev.Failure)
	}
	if m.State == StateCommit && next.State != StateStopped {
		// The next COMMIT makes its own; a stopped one resumes with its
		// token, which recognises a commit it already made.
		b.st.CommitToken = ""
	}
	if m.State == StateImplement && next.State == StateTest {
		// The commit token goes to disk with this transition, which is
		// saved before the checks run, and not with a save of its own
		// just before the commit. The agent has ended: it never sees it.
		b.st.CommitToken = gitx.NewCommitToken()
		b.freshToken = b.st.CommitToken
	}
	b.st.Machine = next
	b.st.EnteredAt = now.UTC()
	b.st.UpdatedAt = now.UTC()
	b.st.Metrics.Iterations = next.Iteration
	b.st.Metrics.TotalMillis = 0
	for _, ms := range b.st.Metrics.StateMillis {
		b.st.Metrics.TotalMillis += ms
	}
	for _, ms := range b.st.Metrics.WaitMillis {
		b.st.Metrics.TotalMillis += ms // the run's wall time includes its waits
	}
	detail := ""
	if ev.Failure != nil {
		detail = ev.Failure.Reason
	}
	if ev.Detail != "" {
		detail = ev.Detail
	}
	taskID := m.TaskID
	if taskID == "" {
		taskID = next.TaskID
	}
	e := report.Event{Kind: report.KindTransition, Time: now.UTC(), From: string(m.State), To: string(next.State), Trigger: string(ev.Trigger), Task: taskID}
	if taskID != "" {
		e.Attempt = m.RetryCount + 1
	}
	if d := clip(detail, 300); d != "" {
		e.Data = report.Transition{Detail: d}
	}
	b.pending = append(b.pending, pendingEvent{ev: e, t: &pendingTransition{from: m, to: next, trigger: ev.Trigger, taskID: taskID}})
	if b.waitsForSave(m, next) {
		return nil
	}
	return b.saveState()
}

// waitsForSave reports whether the transition from m into next may wait
// in memory for the next save of the state. It may when what next does
// before that save is quick work of ralph's own, with no agent, check or
// wait in it, that a kill before the save simply has done again from the
// state on disk, as after a kill during the previous state's action: the
// journal never holds an event the state does not. IMPLEMENT saves its
// attempt before the agent starts; COMMIT commits with the token saved
// with the transition into TEST, and a kill after its commit resumes
// before it and finds that commit by the token; MEMORY_LOAD and
// STORY_SELECT read and choose; VALIDATE without a reviewer or a
// criterion's command reads the task file. Transitions into every other
// state, and out of STOPPED, are saved at once.
func (b *builder) waitsForSave(m, next Machine) bool {
	if m.State == StateStopped {
		return false
	}
	switch next.State {
	case StateImplement, StateCommit, StateMemoryLoad, StateStorySelect:
		return true
	case StateValidate:
		return b.opts.Reviewer == nil && !b.criteriaRunCommands()
	}
	return false
}

// criteriaRunCommands reports whether VALIDATE runs a command for one of
// the selected story's criteria.
func (b *builder) criteriaRunCommands() bool {
	for _, c := range b.sel.Story.Criteria {
		if c.Verify != "" {
			return true
		}
	}
	return false
}

// persist saves the state with batch's transitions as its last events and
// then journals the batch: the state records the transitions before the
// journal gets them, so that a kill between the two is repaired on resume
// (repairJournal).
func (b *builder) persist(batch []pendingEvent) error {
	evs := make([]report.Event, len(batch))
	for i, p := range batch {
		evs[i] = p.ev
	}
	if _, err := b.em.EmitAllAfter(evs, func(stamped []report.Event) error {
		var ts []report.Event
		for i, e := range stamped {
			if batch[i].t != nil {
				ts = append(ts, e)
			}
		}
		if n := len(ts); n > 0 {
			b.st.LastEvent, b.st.EarlierEvents = &ts[n-1], ts[:n-1]
		}
		if err := b.home.save(b.st); err != nil {
			return err
		}
		CrashPoint("state-saved")
		return nil
	}); err != nil {
		return err
	}
	if err := b.journal.Err(); err != nil {
		return err
	}
	for _, p := range batch {
		if t := p.t; t != nil {
			b.log.Info("transition", "from", t.from.State, "to", t.to.State, "trigger", t.trigger, "task", t.taskID, "retry", t.to.RetryCount)
			CrashHook()
		}
	}
	return nil
}

// flushAtExit saves what still waits for a save when the run returns
// without a last transition (an error on the way): the lines said are
// shown even when the save fails, and the state on disk is then the one
// before those transitions, which resumes just the same.
func (b *builder) flushAtExit() {
	batch := b.pending
	if len(batch) == 0 || b.saveState() == nil {
		return
	}
	for _, p := range batch {
		if p.t == nil {
			b.em.Emit(p.ev)
		}
	}
}

// flush saves the transitions that wait in memory, if any.
func (b *builder) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	return b.saveState()
}

// saveState saves the run's state: with the transitions that wait in
// memory, if any, and the lines said since, else on its own. Every save
// of a build's state goes through it, so that no save writes a state
// whose transitions the journal lacks.
func (b *builder) saveState() error {
	var err error
	if batch := b.pending; len(batch) > 0 {
		b.pending = nil
		err = b.persist(batch)
	} else {
		err = b.home.save(b.st)
	}
	if err == nil {
		b.savedToken = b.st.CommitToken
	}
	return err
}

func (b *builder) transitionAction(a Action, from, to Machine, f *Failure) {
	if p := b.transitionPerformers()[a]; p != nil {
		p(from, to, f)
	}
}

// transitionPerformers perform the actions a transition itself returns,
// before the next state's entry action, with the failure the event
// carried (nil for an event without one). Every action Next can return has
// a performer here or in entryPerformers (TestEveryActionHasAPerformer).
func (b *builder) transitionPerformers() map[Action]func(from, to Machine, f *Failure) {
	return map[Action]func(from, to Machine, f *Failure){
		ActRecordFailure: func(from, to Machine, _ *Failure) {
			t := b.st.task(from.TaskID)
			t.Failures++
			t.RetryCount = to.RetryCount
			b.st.Metrics.TaskFailures++
		},
		ActRecordFeedback: func(from, to Machine, f *Failure) {
			b.st.Feedback[from.TaskID] = feedbackText(from.TaskID, f)
			b.st.Metrics.Reworks++
		},
		ActMarkBlocked: b.markBlocked,
		ActResetRetries: func(from, to Machine, _ *Failure) {
			t := b.st.task(from.TaskID)
			t.RetryCount, t.Blocker = 0, nil
			t.Successes++
			delete(b.st.Feedback, from.TaskID)
			b.st.Metrics.TaskSuccesses++
		},
		// The machine itself carries the decision (Machine.Partial): COMMIT
		// then commits the work without marking the task done.
		ActCommitPartial: func(from, to Machine, _ *Failure) {},
	}
}

// perform runs the entry action of state s and returns what happened.
func (b *builder) perform(ctx context.Context, s State) (Event, error) {
	if p := b.entryPerformers()[EntryAction(s)]; p != nil {
		return p(ctx)
	}
	return Event{}, fmt.Errorf("no action for state %s", s)
}

// entryPerformers perform the entry action of each state and turn its
// outcome into the next event.
func (b *builder) entryPerformers() map[Action]func(context.Context) (Event, error) {
	return map[Action]func(context.Context) (Event, error){
		// INIT's prerequisites (task file, plan, agent, clean tree) are
		// verified by Build before anything is written; reaching INIT means
		// they hold.
		ActVerifyInit: func(context.Context) (Event, error) { return Event{Trigger: TrigProgressFound}, nil },
		ActLoadMemory: b.memoryLoad,
		ActLoadFiles: func(context.Context) (Event, error) {
			b.say(report.KindWarning, "  ! memory unavailable, using file-only context\n", nil)
			b.logError("memory (%s) unavailable, using file-only context", b.mem.Name())
			return Event{Trigger: TrigFilesLoaded}, nil
		},
		ActSelectTask: func(context.Context) (Event, error) { return b.selectTask() },
		ActRunAgent:   b.implement,
		ActRunChecks:  b.test,
		ActValidate:   b.validate,
		ActCommit:     b.commit,
		ActLogBlocker: func(ctx context.Context) (Event, error) { return Event{Trigger: TrigBlockerLogged}, b.logBlocker(ctx) },
		// The terminal states' actions run ahead of the transition into
		// them: STORY_SELECT calls exit (the summary) so that it shows the
		// final state, and a missing progress file is refused by Build as
		// a SetupRequiredError before the run starts. No event follows.
		ActSummarize:     func(context.Context) (Event, error) { return Event{}, nil },
		ActSetupRequired: func(context.Context) (Event, error) { return Event{}, nil },
		// The run ends in STOPPED; Build has told the user why, and the
		// next run takes the resumed edge out of it.
		ActStop: func(context.Context) (Event, error) { return Event{}, nil },
	}
}
