// Package thread is the outer lifecycle of a piece of work (seed 003): the
// thread machine, its phases and human checkpoints, and the thread's files
// under .ralph/threads/<id>/.
//
// Like the loop machine, the thread machine is a transition table held as
// data (Table), a pure function Next, and a diagram generated from the table
// (Mermaid), so that `ralph diagram thread` can never drift from the code.
//
// A runner calls Next with the thread and an Event, performs the returned
// actions in order with the thread as it was before the transition still at
// hand (the workspace reset needs the old baseline), and only then saves the
// new thread. If an action fails the old thread stays on disk.
//
// Runner is that runner. Every action has one performer (performers.go):
// the steps ahead of the save, what the person is told, and the work of
// the phase an action enters: preflight, the loop run, verification,
// polish, the assessment, quick mode's automatic steps. The work's
// outcome is the thread's next event, so every way the work ends is a row
// of the table. The runner reaches the spec agents, the loop, git and the
// checks through ports (ports.go). What it needs from the command line
// (the agent a name means, the loop's options, a person's yes) comes in
// through Env as plain values and functions, so that this package never
// depends on the command line. Errors that call for a particular exit
// status are typed (ErrInterrupted, UsageError, BudgetError); the command
// line maps them.
package thread

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ralphloop/ralph/internal/machine"
)

// Phase is a phase of the thread machine, named as in seed 003.
type Phase string

// The thread machine's phases.
const (
	PhaseDrafting        Phase = "Drafting"
	PhaseAssessing       Phase = "Assessing"
	PhaseFinalized       Phase = "Finalized"
	PhasePreflight       Phase = "Preflight"
	PhasePreflightFailed Phase = "PreflightFailed"
	PhaseConfiguring     Phase = "Configuring"
	PhaseRunning         Phase = "Running"
	PhasePaused          Phase = "Paused"
	PhaseVerifying       Phase = "Verifying"
	PhaseStuck           Phase = "Stuck"
	PhaseImplemented     Phase = "Implemented"
	PhasePolishing       Phase = "Polishing"
	PhasePendingReview   Phase = "PendingReview"
	PhaseApproved        Phase = "Approved"
	PhaseReadyToCommit   Phase = "ReadyToCommit"
	PhaseDone            Phase = "Done"
	PhaseAbandoned       Phase = "Abandoned"
)

// Phases lists every phase in the seed's order.
var Phases = []Phase{PhaseDrafting, PhaseAssessing, PhaseFinalized, PhasePreflight, PhasePreflightFailed,
	PhaseConfiguring, PhaseRunning, PhasePaused, PhaseVerifying, PhaseStuck, PhaseImplemented, PhasePolishing,
	PhasePendingReview, PhaseApproved, PhaseReadyToCommit, PhaseDone, PhaseAbandoned}

// Valid reports whether p is one of the seventeen phases.
func (p Phase) Valid() bool { return slices.Contains(Phases, p) }

// Terminal reports whether no transition leaves p.
func (p Phase) Terminal() bool { return p == PhaseDone || p == PhaseAbandoned }

// hasIteration reports whether the phase carries the loop's iteration as
// data: {"type":"Running","data":{"iteration":3}}.
func (p Phase) hasIteration() bool {
	return p == PhaseRunning || p == PhasePaused || p == PhaseVerifying
}

// busy reports whether work may be in progress in p (an agent or a check),
// which has to be stopped when the thread leaves p on a human command.
func (p Phase) busy() bool {
	switch p {
	case PhaseAssessing, PhasePreflight, PhaseRunning, PhaseVerifying, PhasePolishing:
		return true
	}
	return false
}

// ParsePhase reads a phase name, ignoring case, '_' and '-' so that
// "pending_review" and "PendingReview" are the same phase.
func ParsePhase(s string) (Phase, bool) {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	}
	for _, p := range Phases {
		if norm(string(p)) == norm(s) {
			return p, true
		}
	}
	return "", false
}

// Verb is what happened, or what was asked, in a phase: a human command, an
// agent outcome or a system observation. The table decides where it leads.
type Verb string

// Verbs. A verb can be allowed in several phases (abandon, reconfigure,
// revise_spec, stuck); within one phase it names exactly one transition.
const (
	VerbAssess         Verb = "assess"          // Drafting: request the AI review
	VerbFinalize       Verb = "finalize"        // Drafting, Assessing: lock the spec
	VerbRevise         Verb = "revise"          // Assessing: the review found issues
	VerbReopen         Verb = "reopen"          // Finalized: back to drafting
	VerbImplement      Verb = "implement"       // Finalized: begin implementation
	VerbChecksPass     Verb = "checks_pass"     // Preflight
	VerbChecksFail     Verb = "checks_fail"     // Preflight
	VerbRetry          Verb = "retry"           // PreflightFailed: run preflight again
	VerbFixSpec        Verb = "fix_spec"        // PreflightFailed: back to drafting
	VerbStart          Verb = "start"           // Configuring: start the loop
	VerbClaimDone      Verb = "claim_done"      // Running: the model output its promise tag
	VerbInterrupt      Verb = "interrupt"       // Running: Ctrl+C
	VerbStuck          Verb = "stuck"           // Running, Verifying: no way forward
	VerbLoopFailed     Verb = "loop_failed"     // Running: the loop stopped on an error that is not the work's
	VerbResume         Verb = "resume"          // Paused
	VerbReconfigure    Verb = "reconfigure"     // Paused, Stuck
	VerbCriteriaFailed Verb = "criteria_failed" // Verifying: iterations remain
	VerbCriteriaPassed Verb = "criteria_passed" // Verifying
	VerbAssist         Verb = "assist"          // Stuck: the human edited files, run again
	VerbReviseSpec     Verb = "revise_spec"     // Stuck, PendingReview: the spec was wrong
	VerbPolish         Verb = "polish"          // Implemented: add docs/tests
	VerbSubmit         Verb = "submit"          // Implemented: ready for review
	VerbPolishDone     Verb = "polish_done"     // Polishing
	VerbApprove        Verb = "approve"         // PendingReview
	VerbRequestChanges Verb = "request_changes" // PendingReview: implementation bugs
	VerbPrepareCommit  Verb = "prepare_commit"  // Approved
	VerbCommit         Verb = "commit"          // ReadyToCommit
	VerbAbandon        Verb = "abandon"         // every non-terminal phase
)

// Actor is who takes a transition.
type Actor string

// Actors. Only a human may take a human transition; agent and system
// transitions are outcomes ralph observes or steps it may take by itself
// (and which a human command may also take, e.g. `start` in methodical mode).
const (
	ActorHuman  Actor = "human"
	ActorAgent  Actor = "agent"
	ActorSystem Actor = "system"
)

// Checkpoint names one of the seed's four human gates.
type Checkpoint string

// The four gates that always require a human (seed 003, "Human Checkpoints").
const (
	CheckpointNone     Checkpoint = ""
	CheckpointFinalize Checkpoint = "Finalize Spec"
	CheckpointStuck    Checkpoint = "Handle Stuck"
	CheckpointApprove  Checkpoint = "Approve Review"
	CheckpointCommit   Checkpoint = "Commit"
)

// Auto says when ralph takes a system transition by itself, without a
// command: never, only in quick mode, or in both modes.
type Auto int

// Auto values.
const (
	// AutoNever: the transition waits for its event (a check's outcome, an
	// agent's output, a command).
	AutoNever Auto = iota
	// AutoQuick: quick mode takes it at once; methodical mode stops here
	// for the user's command (manual configuration, the polish prompt).
	AutoQuick
	// AutoAlways: both modes take it at once.
	AutoAlways
)

// Rule is what a row of the thread machine says besides where it leads:
// who may take it and what it passes or does on the way.
type Rule struct {
	Actor Actor
	// Checkpoint is set on the rows that pass one of the four human gates.
	Checkpoint Checkpoint
	// Auto is when ralph takes a system row without being asked.
	Auto Auto
	// ResetsWorkspace is set on the backward rows that restore the
	// workspace to the baseline (seed: "Reset to baseline").
	ResetsWorkspace bool
}

// Transition is one row of the table: From, On (the verb), To, its Rule
// as With, and as Label the seed's wording, shown in the diagram. The
// thread's actions follow from the verb and the phase entered (Next), so
// rows carry none, and no row has a guard: within one phase a verb names
// one transition.
type Transition = machine.Row[Phase, Verb, Action, Rule]

// row is a Transition, written in the order the seed's tables read.
func row(from Phase, verb Verb, to Phase, actor Actor, cp Checkpoint, auto Auto, resets bool, label string) Transition {
	return Transition{From: from, On: verb, To: to, Label: label,
		With: Rule{Actor: actor, Checkpoint: cp, Auto: auto, ResetsWorkspace: resets}}
}

// Table is the thread machine, as data: the edges of seed 003's diagram,
// one row per edge, and one row the seed leaves out (loop_failed), so that
// every way the thread's work can end is a row. Actors follow the seed's transition tables
// ("User ..." is human, "AI found issues" and "Model outputs promise tag" are
// agent, check outcomes are system), with three user steps made system rows
// that quick mode takes by itself, because the seed's quick mode skips
// exactly those stops: beginning implementation once the spec is finalized,
// starting the loop with the default configuration, and going to review
// without polish. Methodical mode waits for the user's command there.
var Table = machine.Table[Phase, Verb, Action, Rule]{
	// 1. Spec creation.
	row(PhaseDrafting, VerbAssess, PhaseAssessing, ActorHuman, CheckpointNone, AutoNever, false, "request review"),
	row(PhaseAssessing, VerbRevise, PhaseDrafting, ActorAgent, CheckpointNone, AutoNever, false, "revise needed"),
	row(PhaseAssessing, VerbFinalize, PhaseFinalized, ActorHuman, CheckpointFinalize, AutoNever, false, "human approves"),
	row(PhaseDrafting, VerbFinalize, PhaseFinalized, ActorHuman, CheckpointFinalize, AutoNever, false, "human approves (skip assess)"),
	row(PhaseFinalized, VerbReopen, PhaseDrafting, ActorHuman, CheckpointNone, AutoNever, false, "reopen spec"),

	// 2. Implementation.
	row(PhasePreflight, VerbChecksPass, PhaseConfiguring, ActorSystem, CheckpointNone, AutoNever, false, "checks pass"),
	row(PhasePreflight, VerbChecksFail, PhasePreflightFailed, ActorSystem, CheckpointNone, AutoNever, false, "checks fail"),
	row(PhasePreflightFailed, VerbRetry, PhasePreflight, ActorHuman, CheckpointNone, AutoNever, false, "retry"),
	row(PhasePreflightFailed, VerbFixSpec, PhaseDrafting, ActorHuman, CheckpointNone, AutoNever, false, "fix spec"),
	row(PhaseConfiguring, VerbStart, PhaseRunning, ActorSystem, CheckpointNone, AutoQuick, false, "start loop"),
	row(PhaseRunning, VerbClaimDone, PhaseVerifying, ActorAgent, CheckpointNone, AutoNever, false, "model claims done"),
	row(PhaseRunning, VerbInterrupt, PhasePaused, ActorHuman, CheckpointNone, AutoNever, false, "user interrupt"),
	// Not in the seed's diagram, which shows only the work's own endings:
	// the loop can also stop on something outside the work (an agent that
	// cannot run, git history changed under it, a broken task file). That
	// is no failed attempt, so not Stuck; the thread waits where the
	// person can fix it and resume, as after an interrupt.
	row(PhaseRunning, VerbLoopFailed, PhasePaused, ActorSystem, CheckpointNone, AutoNever, false, "the loop failed (fix it, then resume)"),
	row(PhasePaused, VerbResume, PhaseRunning, ActorHuman, CheckpointNone, AutoNever, false, "resume"),
	row(PhasePaused, VerbReconfigure, PhaseConfiguring, ActorHuman, CheckpointNone, AutoNever, false, "reconfigure"),
	row(PhaseVerifying, VerbCriteriaFailed, PhaseRunning, ActorSystem, CheckpointNone, AutoNever, false, "criteria failed, iterations remain"),
	row(PhaseRunning, VerbStuck, PhaseStuck, ActorSystem, CheckpointNone, AutoNever, false, "max iterations or all models exhausted"),
	row(PhaseVerifying, VerbStuck, PhaseStuck, ActorSystem, CheckpointNone, AutoNever, false, "criteria failed, no iterations remain"),
	row(PhaseStuck, VerbReconfigure, PhaseConfiguring, ActorHuman, CheckpointStuck, AutoNever, false, "reconfigure"),
	row(PhaseStuck, VerbAssist, PhaseRunning, ActorHuman, CheckpointStuck, AutoNever, false, "manual assist"),
	row(PhaseVerifying, VerbCriteriaPassed, PhaseImplemented, ActorSystem, CheckpointNone, AutoNever, false, "all criteria pass"),

	// 3. Polish.
	row(PhasePolishing, VerbPolishDone, PhaseImplemented, ActorAgent, CheckpointNone, AutoNever, false, "polish done"),
	row(PhaseImplemented, VerbPolish, PhasePolishing, ActorHuman, CheckpointNone, AutoNever, false, "add docs/tests"),

	// 4. Review.
	row(PhasePendingReview, VerbApprove, PhaseApproved, ActorHuman, CheckpointApprove, AutoNever, false, "human approves"),

	// 5. Complete.
	row(PhaseReadyToCommit, VerbCommit, PhaseDone, ActorHuman, CheckpointCommit, AutoNever, false, "human commits"),

	// Forward between stages.
	row(PhaseFinalized, VerbImplement, PhasePreflight, ActorSystem, CheckpointNone, AutoQuick, false, "begin implementation"),
	row(PhaseImplemented, VerbSubmit, PhasePendingReview, ActorSystem, CheckpointNone, AutoQuick, false, "ready for review"),
	row(PhaseApproved, VerbPrepareCommit, PhaseReadyToCommit, ActorSystem, CheckpointNone, AutoAlways, false, "prepare commit"),

	// Backward.
	row(PhaseStuck, VerbReviseSpec, PhaseDrafting, ActorHuman, CheckpointStuck, AutoNever, true, "spec was wrong"),
	row(PhasePendingReview, VerbRequestChanges, PhaseRunning, ActorHuman, CheckpointNone, AutoNever, false, "implementation bugs"),
	row(PhasePendingReview, VerbReviseSpec, PhaseDrafting, ActorHuman, CheckpointNone, AutoNever, true, "spec was wrong"),

	// Abandon, from every non-terminal phase. Abandoning a stuck thread is
	// one of the Handle Stuck decisions.
	row(PhaseDrafting, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseAssessing, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseFinalized, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhasePreflight, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhasePreflightFailed, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseConfiguring, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseRunning, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhasePaused, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseVerifying, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseStuck, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointStuck, AutoNever, false, "abandon"),
	row(PhaseImplemented, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhasePolishing, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhasePendingReview, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseApproved, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
	row(PhaseReadyToCommit, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"),
}

// Lookup returns the row that verb takes from phase.
func Lookup(phase Phase, verb Verb) (Transition, bool) {
	return Table.Next(phase, verb, func(machine.Guard) bool { return false })
}

// AllowedVerbs lists, sorted, the verbs that phase accepts. It is empty for
// the terminal phases and for an unknown phase.
func AllowedVerbs(phase Phase) []string {
	var out []string
	for _, v := range Table.Events(phase) {
		out = append(out, string(v))
	}
	sort.Strings(out)
	return out
}

// Mode is how many stops a thread makes (seed 003, "Quick Mode vs Methodical
// Mode"). Both modes use the same phases and the same human checkpoints.
type Mode string

// Modes.
const (
	ModeMethodical Mode = "methodical"
	ModeQuick      Mode = "quick"
)

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool { return m == ModeMethodical || m == ModeQuick }

// Source is who or what caused an event.
type Source string

// Sources. The zero Source is invalid, so that a forgotten field can never
// pass for a human.
const (
	SourceHuman  Source = "human"  // an explicit command typed by a person
	SourceAgent  Source = "agent"  // an agent's output
	SourceSystem Source = "system" // ralph's own observation: a check, a counter
	SourceTimer  Source = "timer"  // a timeout or schedule
	SourceFlag   Source = "flag"   // a configuration value or command-line flag
	SourceQuick  Source = "quick"  // quick mode advancing by itself
)

// Sources lists every valid source.
var Sources = []Source{SourceHuman, SourceAgent, SourceSystem, SourceTimer, SourceFlag, SourceQuick}

// Valid reports whether s is a known source.
func (s Source) Valid() bool { return slices.Contains(Sources, s) }

func (s Source) describe() string {
	switch s {
	case SourceAgent:
		return "agent output"
	case SourceSystem:
		return "ralph itself"
	case SourceTimer:
		return "a timer"
	case SourceFlag:
		return "a flag or setting"
	case SourceQuick:
		return "quick mode"
	case SourceHuman:
		return "a human command"
	}
	return fmt.Sprintf("source %q", string(s))
}

// Event is a verb and who caused it, with the facts the runner observed.
type Event struct {
	Verb   Verb
	Source Source
	// Iteration is the loop's iteration, for the phases that carry it
	// (Running, Paused, Verifying). Zero keeps the current one.
	Iteration int
	// RunID, when set, becomes the thread's current run.
	RunID string
	// Baseline and Branch are recorded with implement or checks_pass: the
	// baseline is captured when implementation begins and verified by the
	// preflight checks.
	Baseline *Baseline
	Branch   string
	// Worktree, with implement, is the worktree the thread's work is to
	// happen in (Thread.Worktree); "" keeps the thread's choice.
	Worktree string
	// Failures are the preflight checks that failed, with checks_fail.
	Failures []string
	// Stuck describes the failed attempt, with stuck. When nil, the thread
	// records the spec version and iteration it knows.
	Stuck *StuckInfo
	// Reason says in words why ralph raised the event (why the thread is
	// stuck, why the loop failed): it is shown, and journaled with the
	// transition.
	Reason string
	// Err, when set, is what the command ends with once the thread has
	// taken the event: the interrupt, or the loop's failure with what to do.
	Err error
}

// Action is work the runner does for a transition.
type Action string

// Actions. Next returns a transition's own actions, then the entry action
// of the new phase.
const (
	ActStopWork        Action = "stop_work"        // stop the agent or checks in progress (process group)
	ActResetWorkspace  Action = "reset_workspace"  // ask first, then restore the baseline and delete the thread's branch
	ActCaptureBaseline Action = "capture_baseline" // record branch and HEAD, create ralph/<id>
	ActDraftSpec       Action = "draft_spec"
	ActAssessSpec      Action = "assess_spec"
	ActFreezeSpec      Action = "freeze_spec"
	ActRunPreflight    Action = "run_preflight"
	ActReportPreflight Action = "report_preflight"
	ActConfigure       Action = "configure" // manual selection in methodical mode, defaults in quick mode
	ActRunLoop         Action = "run_loop"
	ActAwaitHuman      Action = "await_human"
	ActVerify          Action = "verify"
	ActRecordStuck     Action = "record_stuck"
	ActOfferPolish     Action = "offer_polish"
	ActPolish          Action = "polish"
	ActRequestReview   Action = "request_review" // with "Recommend Approve" in quick mode when the checks pass
	ActRecordApproval  Action = "record_approval"
	ActPrepareCommit   Action = "prepare_commit_message"
	ActCommit          Action = "commit"
	ActArchive         Action = "archive"
)

var entry = map[Phase]Action{
	PhaseDrafting:        ActDraftSpec,
	PhaseAssessing:       ActAssessSpec,
	PhaseFinalized:       ActFreezeSpec,
	PhasePreflight:       ActRunPreflight,
	PhasePreflightFailed: ActReportPreflight,
	PhaseConfiguring:     ActConfigure,
	PhaseRunning:         ActRunLoop,
	PhasePaused:          ActAwaitHuman,
	PhaseVerifying:       ActVerify,
	PhaseStuck:           ActRecordStuck,
	PhaseImplemented:     ActOfferPolish,
	PhasePolishing:       ActPolish,
	PhasePendingReview:   ActRequestReview,
	PhaseApproved:        ActRecordApproval,
	PhaseReadyToCommit:   ActPrepareCommit,
	PhaseDone:            ActCommit,
	PhaseAbandoned:       ActArchive,
}

// EntryAction is the action performed on entering p.
func EntryAction(p Phase) Action { return entry[p] }

// ErrNoTransition is wrapped by every *TransitionError.
var ErrNoTransition = errors.New("no such transition")

// TransitionError is a verb that the thread's phase does not accept.
type TransitionError struct {
	Phase   Phase
	Verb    Verb
	Allowed []string
}

func (e *TransitionError) Error() string {
	verb := fmt.Sprintf("%q", e.Verb)
	if e.Verb == "" {
		verb = "an empty command"
	}
	if e.Phase.Terminal() {
		return fmt.Sprintf("thread is %s, which is final: it accepts nothing (not %s); start a new thread", e.Phase, verb)
	}
	return fmt.Sprintf("thread is %s, which does not accept %s; allowed in %s: %s",
		e.Phase, verb, e.Phase, strings.Join(e.Allowed, ", "))
}

func (e *TransitionError) Unwrap() error { return ErrNoTransition }

// ErrHumanRequired is wrapped by every *HumanRequiredError.
var ErrHumanRequired = errors.New("human command required")

// HumanRequiredError is a human transition attempted by anything but a
// human command: agent output, a timer, a flag, ralph itself or quick mode.
type HumanRequiredError struct {
	Phase      Phase
	Verb       Verb
	Checkpoint Checkpoint // "" for a human transition that is not one of the four gates
	Source     Source
}

func (e *HumanRequiredError) Error() string {
	if e.Checkpoint != CheckpointNone {
		return fmt.Sprintf("%q in %s passes the %q human checkpoint: only an explicit human command can take it, not %s",
			e.Verb, e.Phase, string(e.Checkpoint), e.Source.describe())
	}
	return fmt.Sprintf("%q in %s needs an explicit human command, not %s", e.Verb, e.Phase, e.Source.describe())
}

func (e *HumanRequiredError) Unwrap() error { return ErrHumanRequired }

// ErrNotAutomatic is returned when quick mode tries a transition that it
// does not take by itself.
var ErrNotAutomatic = errors.New("not an automatic transition")

// ErrBadEvent is returned for an event without a valid source, or a thread
// in an unknown phase.
var ErrBadEvent = errors.New("bad event")

// Next is the thread machine: a pure function of the thread and an event.
// It returns the next thread and the actions to perform, in order: the
// transition's own actions, then the entry action of the new phase. On error
// the thread is returned unchanged with no actions.
//
// It refuses a verb the phase does not allow (*TransitionError), a human
// transition from any source but a human (*HumanRequiredError, naming the
// checkpoint), and quick mode taking a transition that is not automatic.
func Next(t Thread, ev Event) (Thread, []Action, error) {
	from := t.Phase.Type
	if !from.Valid() {
		return t, nil, fmt.Errorf("%w: thread %s is in unknown phase %q", ErrBadEvent, t.ID, from)
	}
	if !ev.Source.Valid() {
		return t, nil, fmt.Errorf("%w: %q has no valid source (got %q)", ErrBadEvent, ev.Verb, ev.Source)
	}
	row, ok := Lookup(from, ev.Verb)
	if !ok {
		return t, nil, &TransitionError{Phase: from, Verb: ev.Verb, Allowed: AllowedVerbs(from)}
	}
	if row.With.Actor == ActorHuman && ev.Source != SourceHuman {
		return t, nil, &HumanRequiredError{Phase: from, Verb: ev.Verb, Checkpoint: row.With.Checkpoint, Source: ev.Source}
	}
	if ev.Source == SourceQuick && row.With.Auto == AutoNever {
		return t, nil, fmt.Errorf("%w: quick mode cannot take %q in %s; it only skips assessment, manual configuration and polish",
			ErrNotAutomatic, ev.Verb, from)
	}

	n := t
	n.Phase = PhaseState{Type: row.To}
	if row.To.hasIteration() {
		it := ev.Iteration
		if it <= 0 && from.hasIteration() {
			it = t.Phase.Iteration
		}
		n.Phase.Iteration = max(it, 0)
	}
	if row.To == PhasePreflightFailed {
		n.Phase.Failures = slices.Clone(ev.Failures)
	}
	if ev.RunID != "" {
		n.CurrentRunID = ev.RunID
	}
	// A manual assist is the claim that the work is done, so it lasts
	// through the claim (Running → Verifying) and ends with the verdict,
	// or with anything else that moves the thread.
	n.Assisted = ev.Verb == VerbAssist || (t.Assisted && ev.Verb == VerbClaimDone)

	var actions []Action
	if ev.Verb == VerbInterrupt || (ev.Verb == VerbAbandon && from.busy()) {
		actions = append(actions, ActStopWork)
	}
	if row.With.ResetsWorkspace {
		// The reset deletes the thread's branch; the baseline stays, it is
		// what the workspace was reset to until implementation begins again.
		actions = append(actions, ActResetWorkspace)
		n.Branch = ""
	}
	switch ev.Verb {
	case VerbImplement, VerbChecksPass:
		if ev.Verb == VerbImplement {
			actions = append(actions, ActCaptureBaseline)
		}
		if ev.Baseline != nil {
			b := *ev.Baseline
			n.Baseline = &b
		}
		if ev.Branch != "" {
			n.Branch = ev.Branch
		}
		if ev.Verb == VerbImplement && ev.Worktree != "" {
			n.Worktree = ev.Worktree
		}
	case VerbStuck:
		s := StuckInfo{}
		if ev.Stuck != nil {
			s = ev.Stuck.clone()
		}
		if s.SpecVersion == 0 {
			s.SpecVersion = t.SpecVersion
		}
		if s.Iterations == 0 {
			s.Iterations = t.Phase.Iteration
		}
		n.Stuck = &s
	}
	return n, append(actions, EntryAction(row.To)), nil
}

// AutoEvent is the event ralph raises by itself in phase p under mode, if
// any: the AutoAlways rows in both modes, the AutoQuick rows in quick mode.
// It never returns a human transition.
func AutoEvent(p Phase, mode Mode) (Event, bool) {
	for _, r := range Table {
		if r.From != p || r.With.Actor != ActorSystem {
			continue
		}
		switch {
		case r.With.Auto == AutoAlways:
			return Event{Verb: r.On, Source: SourceSystem}, true
		case r.With.Auto == AutoQuick && mode == ModeQuick:
			return Event{Verb: r.On, Source: SourceQuick}, true
		}
	}
	return Event{}, false
}

// Mermaid renders the table as a mermaid state diagram (`ralph diagram
// thread`), so that the documentation is generated from the code and cannot
// drift from it.
func Mermaid() string {
	arrows := []machine.Arrow{{From: machine.Pseudo, To: string(PhaseDrafting), Label: "new thread"}}
	for _, r := range Table {
		arrows = append(arrows, machine.Arrow{From: string(r.From), To: string(r.To), Label: r.Label})
	}
	for _, p := range Phases {
		if p.Terminal() {
			arrows = append(arrows, machine.Arrow{From: string(p), To: machine.Pseudo})
		}
	}
	return machine.Mermaid(arrows)
}
