package loop

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ralphloop/ralph/internal/machine"
)

// State is a state of the loop machine (seed 000).
type State string

// The loop machine's states, named as in seed 000.
const (
	StateInit                State = "INIT"
	StateMemoryLoad          State = "MEMORY_LOAD"
	StateStorySelectFallback State = "STORY_SELECT_FALLBACK"
	StateStorySelect         State = "STORY_SELECT"
	StateImplement           State = "IMPLEMENT"
	StateTest                State = "TEST"
	StateValidate            State = "VALIDATE"
	StateCommit              State = "COMMIT"
	StateBlocker             State = "BLOCKER"
	// StateStopped ends a run that did not reach its end: interrupted, every
	// agent at its usage limit, an agent that cannot run, history changed
	// under the run, or an error. Unlike EXIT it is not final: the run stays
	// unfinished in state.json, Machine.StoppedIn remembers where it was, and
	// the next `ralph build` takes the resumed edge back there.
	StateStopped State = "STOPPED"
	StateExit    State = "EXIT"
	StateError   State = "ERROR"
)

// States lists every state in diagram order.
var States = []State{StateInit, StateMemoryLoad, StateStorySelectFallback, StateStorySelect, StateImplement,
	StateTest, StateValidate, StateCommit, StateBlocker, StateStopped, StateExit, StateError}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s == StateExit || s == StateError }

// Ends reports whether a run that reaches s ends there: a terminal state,
// or STOPPED, which the next run leaves.
func (s State) Ends() bool { return s.Terminal() || s == StateStopped }

// Trigger is what happened in a state: the outcome of its entry action.
type Trigger string

// Triggers. Each names an outcome the runner observed; the table decides
// where it leads.
const (
	TrigProgressFound     Trigger = "progress_found"
	TrigProgressMissing   Trigger = "progress_missing"
	TrigMemoryLoaded      Trigger = "memory_loaded"
	TrigMemoryUnavailable Trigger = "memory_unavailable"
	TrigFilesLoaded       Trigger = "files_loaded"
	TrigTaskSelected      Trigger = "task_selected"
	TrigAllComplete       Trigger = "all_complete"
	TrigNoneSelectable    Trigger = "none_selectable"
	TrigBudgetExhausted   Trigger = "budget_exhausted"
	TrigCodeWritten       Trigger = "code_written"
	TrigImplementFailed   Trigger = "implement_failed"
	TrigUnresolvable      Trigger = "unresolvable"
	TrigContextExhausted  Trigger = "context_exhausted"
	TrigTestsPassed       Trigger = "tests_passed"
	TrigTestsFailed       Trigger = "tests_failed"
	TrigRunnerMissing     Trigger = "test_runner_missing"
	TrigACsMet            Trigger = "acs_met"
	TrigACsFailed         Trigger = "acs_failed"
	// TrigNeedsReview is an attempt that changed tests its story says
	// must change, while the start's tests fail against the new code: a
	// behaviour change a person approves (`ralph approve ID`), never one
	// ralph waives or retries.
	TrigNeedsReview   Trigger = "needs_review"
	TrigCommitted     Trigger = "committed"
	TrigCommitFailed  Trigger = "commit_failed"
	TrigBlockerLogged Trigger = "blocker_logged"
	// The ways a run ends before its work does.
	TrigIterationLimit Trigger = "iteration_limit"
	TrigAllLimited     Trigger = "all_agents_limited"
	TrigAgentCannotRun Trigger = "agent_cannot_run"
	TrigHistoryChanged Trigger = "history_changed"
	TrigInterrupted    Trigger = "interrupted"
	TrigError          Trigger = "error"
	// TrigResumed leaves STOPPED for the state the run stopped in.
	TrigResumed Trigger = "resumed"
)

// Guard chooses between transitions that share a state and a trigger.
type Guard = machine.Guard

// Guards over the retry count after the failure is counted.
const (
	GuardNone             Guard = ""
	GuardRetriesLeft      Guard = "retry_count < max"
	GuardRetriesExhausted Guard = "retry_count >= max"
)

// stoppedIn guards the resumed rows out of STOPPED: the machine remembers
// which one is its way back.
func stoppedIn(s State) Guard { return Guard("stopped_in = " + string(s)) }

// Transition is one row of the table: From, On (the trigger), Guard, To
// and, as Label, the seed's wording shown in the diagram. The loop's
// actions follow from the trigger and the state entered (Next), so rows
// carry none.
type Transition = machine.Row[State, Trigger, Action, struct{}]

// row is a Transition without actions.
func row(from State, on Trigger, g Guard, to State, label string) Transition {
	return Transition{From: from, On: on, Guard: g, To: to, Label: label}
}

// Table is the loop machine, as data. It holds seed 000's transitions plus
// three the seed describes in prose rather than in its diagram: IMPLEMENT
// retrying itself ("Failure → retry increment → IMPLEMENT or BLOCKER"),
// IMPLEMENT committing partial work when the context is exhausted ("Hard
// Escalation: commit all work, respawn fresh"), and COMMIT failing into
// BLOCKER ("Git Failure → BLOCKER"). After those come the other ways a run
// ends, so that the diagram shows every one: the iteration limit and the
// budget end it (EXIT); an interrupt, a usage limit on every agent, an
// agent that cannot run, changed history and errors stop it where it is
// (STOPPED), and the next `ralph build` resumes it there.
var Table = machine.Table[State, Trigger, Action, struct{}]{
	row(StateInit, TrigProgressFound, GuardNone, StateMemoryLoad, "progress.txt exists"),
	row(StateInit, TrigProgressMissing, GuardNone, StateError, "progress.txt missing (setup required)"),
	row(StateMemoryLoad, TrigMemoryLoaded, GuardNone, StateStorySelect, "memory connected"),
	row(StateMemoryLoad, TrigMemoryUnavailable, GuardNone, StateStorySelectFallback, "memory timeout (file-only context)"),
	row(StateStorySelectFallback, TrigFilesLoaded, GuardNone, StateStorySelect, "memory loaded from files only"),
	row(StateStorySelect, TrigTaskSelected, GuardNone, StateImplement, "task selected (not blocked, not complete)"),
	row(StateStorySelect, TrigAllComplete, GuardNone, StateExit, "all stories complete"),
	row(StateStorySelect, TrigNoneSelectable, GuardNone, StateExit, "only blocked stories left (needs a human)"),
	row(StateStorySelect, TrigBudgetExhausted, GuardNone, StateExit, "iteration limit reached"),
	row(StateImplement, TrigCodeWritten, GuardNone, StateTest, "code written (subtask complete)"),
	row(StateImplement, TrigImplementFailed, GuardRetriesLeft, StateImplement, "agent failed (retry_count < max)"),
	row(StateImplement, TrigImplementFailed, GuardRetriesExhausted, StateBlocker, "max retries exceeded"),
	row(StateImplement, TrigUnresolvable, GuardNone, StateBlocker, "unresolvable error"),
	row(StateImplement, TrigContextExhausted, GuardNone, StateCommit, "context exhausted (commit partial work)"),
	row(StateTest, TrigTestsPassed, GuardNone, StateValidate, "all tests pass"),
	row(StateTest, TrigTestsFailed, GuardRetriesLeft, StateImplement, "tests fail (retry_count < max)"),
	row(StateTest, TrigTestsFailed, GuardRetriesExhausted, StateBlocker, "tests fail (retry_count >= max)"),
	row(StateTest, TrigRunnerMissing, GuardNone, StateBlocker, "test runner missing"),
	row(StateTest, TrigNeedsReview, GuardNone, StateBlocker, "tests changed as the story asks (a person approves)"),
	row(StateValidate, TrigACsMet, GuardNone, StateCommit, "ACs verified"),
	row(StateValidate, TrigACsFailed, GuardRetriesLeft, StateImplement, "ACs not met (retry_count < max)"),
	row(StateValidate, TrigACsFailed, GuardRetriesExhausted, StateBlocker, "ACs not met (retry_count >= max)"),
	row(StateValidate, TrigNeedsReview, GuardNone, StateBlocker, "tests changed as the story asks (a person approves)"),
	row(StateCommit, TrigCommitted, GuardNone, StateMemoryLoad, "git commit + memory log"),
	row(StateCommit, TrigCommitFailed, GuardNone, StateBlocker, "git failure"),
	row(StateBlocker, TrigBlockerLogged, GuardNone, StateMemoryLoad, "blocker logged (next task)"),

	// The iteration limit also bounds retries, which never pass through
	// STORY_SELECT; the budget is checked before every agent run.
	row(StateImplement, TrigIterationLimit, GuardNone, StateExit, "iteration limit reached while retrying"),
	row(StateImplement, TrigBudgetExhausted, GuardNone, StateExit, "budget reached (cost or tokens)"),

	// Stops that need the world to change first; the task is not charged.
	row(StateImplement, TrigAllLimited, GuardNone, StateStopped, "every agent is at its usage limit (resume later)"),
	row(StateImplement, TrigAgentCannotRun, GuardNone, StateStopped, "the agent cannot run (fix it, then ralph build)"),
	row(StateImplement, TrigHistoryChanged, GuardNone, StateStopped, "git history changed under the run (put it back, then ralph build)"),

	// Ctrl-C, or a signal, in a state whose action can be cut short.
	row(StateMemoryLoad, TrigInterrupted, GuardNone, StateStopped, "interrupted"),
	row(StateImplement, TrigInterrupted, GuardNone, StateStopped, "interrupted"),
	row(StateTest, TrigInterrupted, GuardNone, StateStopped, "interrupted"),
	row(StateValidate, TrigInterrupted, GuardNone, StateStopped, "interrupted"),
	row(StateCommit, TrigInterrupted, GuardNone, StateStopped, "interrupted"),
	row(StateBlocker, TrigInterrupted, GuardNone, StateStopped, "interrupted"),

	// An error ralph could not turn into an outcome of the task (a file it
	// cannot write, a task file it cannot read).
	row(StateMemoryLoad, TrigError, GuardNone, StateStopped, "error"),
	row(StateStorySelect, TrigError, GuardNone, StateStopped, "error"),
	row(StateImplement, TrigError, GuardNone, StateStopped, "error"),
	row(StateTest, TrigError, GuardNone, StateStopped, "error"),
	row(StateValidate, TrigError, GuardNone, StateStopped, "error"),
	row(StateCommit, TrigError, GuardNone, StateStopped, "error"),
	row(StateBlocker, TrigError, GuardNone, StateStopped, "error"),

	// The next `ralph build` goes back to where the run stopped.
	row(StateStopped, TrigResumed, stoppedIn(StateMemoryLoad), StateMemoryLoad, "ralph build (resume)"),
	row(StateStopped, TrigResumed, stoppedIn(StateStorySelect), StateStorySelect, "ralph build (resume)"),
	row(StateStopped, TrigResumed, stoppedIn(StateImplement), StateImplement, "ralph build (resume)"),
	row(StateStopped, TrigResumed, stoppedIn(StateTest), StateTest, "ralph build (resume)"),
	row(StateStopped, TrigResumed, stoppedIn(StateValidate), StateValidate, "ralph build (resume)"),
	row(StateStopped, TrigResumed, stoppedIn(StateCommit), StateCommit, "ralph build (resume)"),
	row(StateStopped, TrigResumed, stoppedIn(StateBlocker), StateBlocker, "ralph build (resume)"),
}

// Action is work the runner does on entering a state.
type Action string

// Entry actions.
const (
	ActLoadMemory     Action = "load_memory"
	ActLoadFiles      Action = "load_files"
	ActSelectTask     Action = "select_task"
	ActRunAgent       Action = "run_agent"
	ActRunChecks      Action = "run_checks"
	ActValidate       Action = "validate"
	ActCommit         Action = "commit"
	ActLogBlocker     Action = "log_blocker"
	ActSummarize      Action = "summarize"
	ActSetupRequired  Action = "setup_required"
	ActVerifyInit     Action = "verify_init"
	ActRecordFailure  Action = "record_failure"
	ActResetRetries   Action = "reset_retries"
	ActMarkBlocked    Action = "mark_blocked"
	ActCommitPartial  Action = "commit_partial"
	ActRecordFeedback Action = "record_feedback"
	ActStop           Action = "stop"
)

var entry = map[State]Action{
	StateInit:                ActVerifyInit,
	StateMemoryLoad:          ActLoadMemory,
	StateStorySelectFallback: ActLoadFiles,
	StateStorySelect:         ActSelectTask,
	StateImplement:           ActRunAgent,
	StateTest:                ActRunChecks,
	StateValidate:            ActValidate,
	StateCommit:              ActCommit,
	StateBlocker:             ActLogBlocker,
	StateStopped:             ActStop,
	StateExit:                ActSummarize,
	StateError:               ActSetupRequired,
}

// EntryAction is the action performed on entering s.
func EntryAction(s State) Action { return entry[s] }

// DefaultMaxRetries is the number of failed attempts after which a task is
// blocked (seed 000: "retry count >= 2"; seed 004: "after 2 consecutive
// failures").
const DefaultMaxRetries = 2

// Machine is the whole state the pure transition function needs. It is
// persisted in state.json at every transition.
type Machine struct {
	State State `json:"state"`
	// TaskID is the task being worked on, "" between tasks.
	TaskID string `json:"task_id,omitempty"`
	// RetryCount is the number of failed attempts at TaskID so far.
	RetryCount int `json:"retry_count"`
	// MaxRetries is the number of failed attempts that blocks a task.
	MaxRetries int `json:"max_retries"`
	// Iteration counts the agent runs (entries into IMPLEMENT) of the run.
	Iteration int `json:"iteration"`
	// Partial is set while committing work that does not finish the task
	// (context exhausted): COMMIT then does not mark the task done.
	Partial bool `json:"partial,omitempty"`
	// StoppedIn is the state a STOPPED run resumes in.
	StoppedIn State `json:"stopped_in,omitempty"`
}

// Resumes is the state the next run continues in: where a stopped run
// stopped, else the state itself.
func (m Machine) Resumes() State {
	if m.State == StateStopped {
		return m.StoppedIn
	}
	return m.State
}

// Event is an outcome observed by the runner.
type Event struct {
	Trigger Trigger
	// TaskID and RetryCount come with task_selected: the task and the
	// failed attempts it already has from earlier runs.
	TaskID     string
	RetryCount int
	// Detail says what happened, for the journal: why the run stopped.
	Detail string
	// Failure is why an attempt failed, with the event that says so
	// (implement_failed, tests_failed, acs_failed and the blocking
	// triggers): the transition's actions read it, the blocker record and
	// the next prompt's feedback are made from it.
	Failure *Failure
}

// Failure is why an attempt failed.
type Failure struct {
	// Reason is one line for the journal, the terminal and the blocker.
	Reason string
	// Feedback is what the next attempt's prompt shows, in the one
	// feedback format (check.Feedback for a failed check).
	Feedback string
	// Type is the blocker type the failure asks for: "permanent",
	// "transient" or "review" (a person must look).
	Type string
}

// ErrNoTransition is returned for a trigger that the table does not allow
// in the current state.
var ErrNoTransition = errors.New("no such transition")

// Next is the loop machine: a pure function of the current machine and an
// event. It returns the next machine and the actions to perform, in order:
// the transition's own actions, then the entry action of the new state.
func Next(m Machine, ev Event) (Machine, []Action, error) {
	max := m.MaxRetries
	if max <= 0 {
		max = DefaultMaxRetries
	}
	next := m
	var actions []Action
	retried := ev.Trigger == TrigImplementFailed || ev.Trigger == TrigTestsFailed || ev.Trigger == TrigACsFailed
	if retried {
		next.RetryCount = m.RetryCount + 1
	}
	chosen, ok := Table.Next(m.State, ev.Trigger, func(g Guard) bool {
		switch g {
		case GuardRetriesLeft:
			return next.RetryCount < max
		case GuardRetriesExhausted:
			return next.RetryCount >= max
		}
		return g == stoppedIn(m.StoppedIn)
	})
	switch {
	case !ok && slices.Contains(Table.Events(m.State), ev.Trigger):
		return m, nil, fmt.Errorf("%w: %s on %s back to %q", ErrNoTransition, m.State, ev.Trigger, m.StoppedIn)
	case !ok:
		return m, nil, fmt.Errorf("%w: %s on %s", ErrNoTransition, m.State, ev.Trigger)
	case ev.Trigger == TrigResumed:
		next.StoppedIn = ""
	case retried:
		actions = append(actions, ActRecordFailure)
		if chosen.Guard == GuardRetriesLeft {
			actions = append(actions, ActRecordFeedback)
		}
	}
	switch ev.Trigger {
	case TrigTaskSelected:
		next.TaskID = ev.TaskID
		next.RetryCount = ev.RetryCount
	case TrigContextExhausted:
		next.Partial = true
		actions = append(actions, ActCommitPartial)
	case TrigUnresolvable, TrigRunnerMissing, TrigCommitFailed:
		actions = append(actions, ActRecordFailure)
	}
	// Stopping and resuming change nothing about the task: a task resumed
	// in BLOCKER was marked blocked before the stop, and its blocker is
	// logged, which ends the task, only after the resume.
	if chosen.To == StateBlocker && m.State != StateStopped {
		actions = append(actions, ActMarkBlocked)
	}
	if (m.State == StateCommit && ev.Trigger == TrigCommitted) || (m.State == StateBlocker && ev.Trigger == TrigBlockerLogged) {
		// A landed commit or a logged blocker ends the task: the next one
		// starts with its own count. A failed commit does not: BLOCKER
		// still needs to know whose work it is, and it is no success.
		next.TaskID, next.RetryCount, next.Partial = "", 0, false
		if m.State == StateCommit && !m.Partial {
			actions = append(actions, ActResetRetries)
		}
	}
	if ev.Trigger == TrigCommitFailed {
		next.RetryCount = m.RetryCount + 1
		next.Partial = false
	}
	if chosen.To == StateStopped {
		next.StoppedIn = m.State
	}
	next.State = chosen.To
	// Going back to IMPLEMENT after a stop continues the iteration that
	// stopped; the resumed run decides whether it was cut short.
	if next.State == StateImplement && m.State != StateStopped {
		next.Iteration++
	}
	return next, append(actions, EntryAction(next.State)), nil
}

// Mermaid renders the table as a mermaid state diagram, so that the
// documentation is generated from the code and cannot drift from it.
func Mermaid() string {
	arrows := []machine.Arrow{{From: machine.Pseudo, To: string(StateInit), Label: "ralph build"}}
	for _, t := range Table {
		arrows = append(arrows, machine.Arrow{From: string(t.From), To: string(t.To), Label: t.Label})
	}
	arrows = append(arrows,
		machine.Arrow{From: string(StateExit), To: machine.Pseudo},
		machine.Arrow{From: string(StateError), To: machine.Pseudo},
		machine.Arrow{From: string(StateStopped), To: machine.Pseudo, Label: "until the next ralph build"})
	return machine.Mermaid(arrows)
}
