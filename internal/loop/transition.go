package loop

import (
	"context"
	"fmt"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
)

// transitionStep is one transition of the loop machine, as the runner
// kernel takes it.
type transitionStep = runkit.Step[Machine, Event, Action]

// kernel is the run's runner kernel over the loop machine: the transition
// protocol (actions, save, journal, crash points) and the batching of
// transitions whose save may wait (waitsForSave).
func (b *builder) kernel() *runkit.Kernel[Machine, Event, Action] {
	k := &b.k
	if k.Next != nil {
		return k
	}
	k.State = func() Machine { return b.st.Machine }
	k.Next = Next
	k.Begin = b.enter
	k.Record = b.transitionPerformers()
	k.Event = b.transitionEvent
	k.Store = func(_ []*transitionStep, ts []report.Event) error {
		if n := len(ts); n > 0 {
			b.st.LastEvent, b.st.EarlierEvents = &ts[n-1], ts[:n-1]
		}
		if err := b.home.save(b.st); err != nil {
			return err
		}
		b.savedToken = b.st.CommitToken
		return nil
	}
	k.Saved = "state-saved"
	k.After = func(st *transitionStep) error {
		if err := b.journal.Err(); err != nil {
			return err
		}
		b.log.Info("transition", "from", st.From.State, "to", st.To.State, "trigger", st.Event.Trigger, "task", stepTask(st), "retry", st.To.RetryCount)
		return nil
	}
	k.Defer = func(st *transitionStep) bool { return b.waitsForSave(st.From, st.To) }
	k.Emitter = b.em
	return k
}

// stop ends the run on err by the edge trig into STOPPED, so that the
// journal and state.json say why it stopped and the next `ralph build`
// resumes where it was. It returns err, which is what the user is told.
func (b *builder) stop(trig Trigger, why string, err error) error {
	return b.kernel().Stop(context.Background(), Event{Trigger: trig, Detail: why}, err)
}

// transition applies the pure machine to an event, performs the
// transition's own actions, and persists the new state and the event line
// before the next state's entry action runs, unless that action is one a
// kill may simply have done again (waitsForSave): then the transition
// waits in memory for the next save of the state, which records it with
// the others that waited, in one atomic write where there were several.
func (b *builder) transition(ev Event) error {
	_, err := b.kernel().Take(context.Background(), ev)
	return err
}

// enter makes the run's state take st: the time spent in the state left,
// the commit token, the metrics.
func (b *builder) enter(st *transitionStep) func() {
	m, next := st.From, st.To
	now := b.opts.now()
	if b.st.Metrics.StateMillis == nil {
		b.st.Metrics.StateMillis = map[State]int64{}
	}
	if m.State != StateStopped {
		// Time between a stop and the resume is no time of the run.
		b.st.Metrics.StateMillis[m.State] += now.Sub(b.st.EnteredAt).Milliseconds()
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
	return nil
}

// transitionEvent is st's line in the journal, at the time it was entered.
func (b *builder) transitionEvent(st *transitionStep) report.Event {
	detail := st.Event.Detail
	if f := st.Event.Failure; f != nil && detail == "" {
		detail = f.Reason
	}
	taskID := stepTask(st)
	e := report.Event{Kind: report.KindTransition, Time: b.st.EnteredAt, From: string(st.From.State), To: string(st.To.State), Trigger: string(st.Event.Trigger), Task: taskID}
	if taskID != "" {
		e.Attempt = st.From.RetryCount + 1
	}
	if d := clip(detail, 300); d != "" {
		e.Data = report.Transition{Detail: d}
	}
	return e
}

// stepTask is the task a transition is about: the one left, else the one
// entered.
func stepTask(st *transitionStep) string {
	if st.From.TaskID != "" {
		return st.From.TaskID
	}
	return st.To.TaskID
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
		return b.opts.Reviewer == nil && !b.criteriaRunCommands(next.TaskID)
	}
	return false
}

// criteriaRunCommands reports whether VALIDATE runs a command for one of
// the criteria of task id's story, as the board read at its selection has
// them.
func (b *builder) criteriaRunCommands(id string) bool {
	sel, _ := b.findSelection(id)
	for _, c := range sel.Story.Criteria {
		if c.Verify != "" {
			return true
		}
	}
	return false
}

// flushAtExit saves what still waits for a save when the run returns
// without a last transition (an error on the way).
func (b *builder) flushAtExit() { b.kernel().Close() }

// flush saves the transitions that wait in memory, if any.
func (b *builder) flush() error {
	if !b.k.Waiting() {
		return nil
	}
	return b.saveState()
}

// saveState saves the run's state: with the transitions that wait in
// memory, if any, and the lines said since, else on its own.
func (b *builder) saveState() error { return b.kernel().Save() }

// transitionPerformers perform the actions a transition itself returns,
// before the next state's entry action, with the failure the event
// carried (nil for an event without one). Every action Next can return has
// a performer here or in entryPerformers (TestEveryActionHasAPerformer).
func (b *builder) transitionPerformers() map[Action]func(context.Context, *transitionStep) error {
	return map[Action]func(context.Context, *transitionStep) error{
		ActRecordFailure: func(_ context.Context, st *transitionStep) error {
			t := b.st.task(st.From.TaskID)
			t.Failures++
			t.RetryCount = st.To.RetryCount
			b.st.Metrics.TaskFailures++
			return nil
		},
		ActRecordFeedback: func(_ context.Context, st *transitionStep) error {
			b.st.Feedback[st.From.TaskID] = feedbackText(st.From.TaskID, st.Event.Failure)
			b.st.Metrics.Reworks++
			return nil
		},
		ActMarkBlocked: func(_ context.Context, st *transitionStep) error {
			b.markBlocked(st.From, st.To, st.Event.Failure)
			return nil
		},
		ActResetRetries: func(_ context.Context, st *transitionStep) error {
			t := b.st.task(st.From.TaskID)
			t.RetryCount, t.Blocker = 0, nil
			t.Successes++
			delete(b.st.Feedback, st.From.TaskID)
			b.st.Metrics.TaskSuccesses++
			return nil
		},
		// The machine itself carries the decision (Machine.Partial): COMMIT
		// then commits the work without marking the task done.
		ActCommitPartial: func(context.Context, *transitionStep) error { return nil },
	}
}

// perform runs the entry action of state s on the iteration the steps
// before it handed on, and returns what happened and what it hands on.
func (b *builder) perform(ctx context.Context, s State, it iteration) (Event, iteration, error) {
	if p := b.entryPerformers()[EntryAction(s)]; p != nil {
		return p(ctx, it)
	}
	return Event{}, it, fmt.Errorf("no action for state %s", s)
}

// performer performs a state's entry action on the iteration handed on.
type performer = func(context.Context, iteration) (Event, iteration, error)

// entryPerformers perform the entry action of each state and turn its
// outcome into the next event.
func (b *builder) entryPerformers() map[Action]performer {
	// alone is an action that takes nothing of the iteration: it hands
	// on what it was given.
	alone := func(f func(context.Context) (Event, error)) performer {
		return func(ctx context.Context, it iteration) (Event, iteration, error) {
			ev, err := f(ctx)
			return ev, it, err
		}
	}
	nothing := alone(func(context.Context) (Event, error) { return Event{}, nil })
	return map[Action]performer{
		// INIT's prerequisites (task file, plan, agent, clean tree) are
		// verified by Build before anything is written; reaching INIT means
		// they hold.
		ActVerifyInit: alone(func(context.Context) (Event, error) { return Event{Trigger: TrigProgressFound}, nil }),
		ActLoadMemory: alone(b.memoryLoad),
		ActLoadFiles: alone(func(context.Context) (Event, error) {
			b.say(report.KindWarning, "  ! memory unavailable, using file-only context\n", nil)
			b.logError("memory (%s) unavailable, using file-only context", b.mem.Name())
			return Event{Trigger: TrigFilesLoaded}, nil
		}),
		ActSelectTask: func(_ context.Context, it iteration) (Event, iteration, error) {
			ev, sel, err := b.selectTask()
			return ev, iteration{sel: sel, resumedFrom: it.resumedFrom}, err
		},
		ActRunAgent:   b.implement,
		ActRunChecks:  b.continued(b.test),
		ActValidate:   b.continued(b.validate),
		ActCommit:     b.continued(b.commit),
		ActLogBlocker: alone(func(ctx context.Context) (Event, error) { return Event{Trigger: TrigBlockerLogged}, b.logBlocker(ctx) }),
		// The terminal states' actions run ahead of the transition into
		// them: STORY_SELECT calls exit (the summary) so that it shows the
		// final state, and a missing progress file is refused by Build as
		// a SetupRequiredError before the run starts. No event follows.
		ActSummarize:     nothing,
		ActSetupRequired: nothing,
		// The run ends in STOPPED; Build has told the user why, and the
		// next run takes the resumed edge out of it.
		ActStop: nothing,
	}
}

// continued performs step, one of the steps after IMPLEMENT, on the
// iteration handed on to it; a run resumed in TEST, VALIDATE or COMMIT
// has none and rebuilds it from the saved state.
func (b *builder) continued(step func(context.Context, iteration) (Event, error)) performer {
	return func(ctx context.Context, it iteration) (Event, iteration, error) {
		sel, err := b.selection(it.sel)
		if err != nil {
			return Event{}, it, err
		}
		it.sel = sel
		if it.rec == nil || it.rec.Iteration != b.st.Machine.Iteration {
			it.rec = b.rebuiltRecord(sel)
		}
		ev, err := step(ctx, it)
		return ev, it, err
	}
}
