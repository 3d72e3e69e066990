package loop

import (
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

var allTriggers = []Trigger{TrigProgressFound, TrigProgressMissing, TrigMemoryLoaded, TrigMemoryUnavailable,
	TrigFilesLoaded, TrigTaskSelected, TrigAllComplete, TrigNoneSelectable, TrigBudgetExhausted, TrigCodeWritten,
	TrigImplementFailed, TrigUnresolvable, TrigContextExhausted, TrigTestsPassed, TrigTestsFailed, TrigRunnerMissing,
	TrigACsMet, TrigACsFailed, TrigCommitted, TrigCommitFailed, TrigBlockerLogged,
	TrigIterationLimit, TrigAllLimited, TrigAgentCannotRun, TrigHistoryChanged, TrigInterrupted, TrigError, TrigResumed}

// The seed's diagram edges, plus the three the seed states in prose, plus
// the other ways a run ends (so that the diagram shows all of them).
var wantPairs = []string{
	"BLOCKER -> MEMORY_LOAD",
	"BLOCKER -> STOPPED", // interrupted or an error while logging the blocker
	"COMMIT -> BLOCKER",  // prose: Git Failure -> BLOCKER
	"COMMIT -> MEMORY_LOAD",
	"COMMIT -> STOPPED", // interrupted or an error while committing
	"IMPLEMENT -> BLOCKER",
	"IMPLEMENT -> COMMIT",    // prose: context exhausted, commit and respawn
	"IMPLEMENT -> EXIT",      // iteration limit during retries; budget reached
	"IMPLEMENT -> IMPLEMENT", // prose: failure -> retry increment -> IMPLEMENT
	"IMPLEMENT -> STOPPED",   // interrupted, all agents limited, agent cannot run, history changed, error
	"IMPLEMENT -> TEST",
	"INIT -> ERROR",
	"INIT -> MEMORY_LOAD",
	"MEMORY_LOAD -> STOPPED", // interrupted while retrying the memory store, or an error
	"MEMORY_LOAD -> STORY_SELECT",
	"MEMORY_LOAD -> STORY_SELECT_FALLBACK",
	"STOPPED -> BLOCKER", // resumed: the next ralph build goes back where the run stopped
	"STOPPED -> COMMIT",
	"STOPPED -> IMPLEMENT",
	"STOPPED -> MEMORY_LOAD",
	"STOPPED -> STORY_SELECT",
	"STOPPED -> TEST",
	"STOPPED -> VALIDATE",
	"STORY_SELECT -> EXIT",
	"STORY_SELECT -> IMPLEMENT",
	"STORY_SELECT -> STOPPED", // an error reading the task file
	"STORY_SELECT_FALLBACK -> STORY_SELECT",
	"TEST -> BLOCKER",
	"TEST -> IMPLEMENT",
	"TEST -> STOPPED", // interrupted while the checks run, or an error
	"TEST -> VALIDATE",
	"VALIDATE -> BLOCKER",
	"VALIDATE -> COMMIT",
	"VALIDATE -> IMPLEMENT",
	"VALIDATE -> STOPPED", // interrupted while the reviewer runs, or an error
}

func TestTableHasExactlyTheSeedsEdges(t *testing.T) {
	if got := tablePairs(); !reflect.DeepEqual(got, wantPairs) {
		t.Fatalf("edges:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantPairs, "\n"))
	}
}

// TestEveryStateTriggerPair walks the whole product of states and
// triggers: Next succeeds exactly where the table has a row, lands where
// the row says, and refuses everything else without changing the machine.
func TestEveryStateTriggerPair(t *testing.T) {
	for _, s := range States {
		for _, trig := range allTriggers {
			var rows []Transition
			for _, r := range Table {
				if r.From == s && r.On == trig {
					rows = append(rows, r)
				}
			}
			for _, retry := range []int{0, 1} {
				m := Machine{State: s, TaskID: "US-001", RetryCount: retry, MaxRetries: 2, StoppedIn: StateImplement}
				got, actions, err := Next(m, Event{Trigger: trig, TaskID: "US-002"})
				if len(rows) == 0 {
					if !errors.Is(err, ErrNoTransition) || got != m || actions != nil {
						t.Errorf("%s on %s: got %v, %v; want refusal", s, trig, got.State, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s on %s: %v", s, trig, err)
					continue
				}
				if !slices.ContainsFunc(rows, func(r Transition) bool { return r.To == got.State }) {
					t.Errorf("%s on %s went to %s, not in the table", s, trig, got.State)
				}
				if last := actions[len(actions)-1]; last != EntryAction(got.State) {
					t.Errorf("%s on %s: last action %s, want entry action %s", s, trig, last, EntryAction(got.State))
				}
			}
		}
	}
}

// A stop keeps everything the resumed run needs: the state it stopped
// in, the task, its retries and the iteration; resuming goes back there
// without counting a new iteration, and nothing counts as a failure.
func TestStopAndResumeReturnWhereTheRunWas(t *testing.T) {
	stops := map[State][]Trigger{}
	for _, r := range Table {
		if r.To == StateStopped {
			stops[r.From] = append(stops[r.From], r.On)
		}
	}
	for from, trigs := range stops {
		for _, trig := range trigs {
			m := Machine{State: from, TaskID: "US-001", RetryCount: 1, MaxRetries: 2, Iteration: 3}
			stopped, actions, err := Next(m, Event{Trigger: trig})
			if err != nil || stopped.State != StateStopped || stopped.StoppedIn != from || !slices.Equal(actions, []Action{ActStop}) {
				t.Errorf("%s on %s: %+v %v %v; want STOPPED remembering %s, no other action", from, trig, stopped, actions, err, from)
				continue
			}
			if !stopped.State.Ends() || stopped.State.Terminal() || stopped.Resumes() != from {
				t.Errorf("STOPPED must end the run yet not be final, and resume in %s: resumes in %s", from, stopped.Resumes())
			}
			back, actions, err := Next(stopped, Event{Trigger: TrigResumed})
			if err != nil || back != m || actions[len(actions)-1] != EntryAction(from) {
				t.Errorf("resume after %s on %s: %+v %v %v; want %+v", from, trig, back, actions, err, m)
			}
		}
	}
	for _, want := range []State{StateMemoryLoad, StateImplement, StateTest, StateValidate, StateCommit, StateBlocker} {
		if !slices.Contains(stops[want], TrigInterrupted) {
			t.Errorf("an interrupt in %s has no edge", want)
		}
	}
	if _, _, err := Next(Machine{State: StateStopped}, Event{Trigger: TrigResumed}); !errors.Is(err, ErrNoTransition) {
		t.Errorf("resuming a stop that does not say where it was: %v; want a refusal", err)
	}
}

// The iteration limit during retries and the budget end the run in EXIT,
// with the task's counts kept for the next run.
func TestLimitsEndTheRunFromImplement(t *testing.T) {
	for _, trig := range []Trigger{TrigIterationLimit, TrigBudgetExhausted} {
		m := Machine{State: StateImplement, TaskID: "US-001", RetryCount: 1, Iteration: 5}
		got, actions, err := Next(m, Event{Trigger: trig})
		if err != nil || got.State != StateExit || got.RetryCount != 1 || got.Iteration != 5 || !slices.Equal(actions, []Action{ActSummarize}) {
			t.Errorf("IMPLEMENT on %s: %+v %v %v; want EXIT with the counts kept", trig, got, actions, err)
		}
	}
}

func TestTerminalStatesHaveNoWayOut(t *testing.T) {
	for _, s := range []State{StateExit, StateError} {
		if !s.Terminal() {
			t.Errorf("%s is not terminal", s)
		}
		for _, trig := range allTriggers {
			if _, _, err := Next(Machine{State: s}, Event{Trigger: trig}); err == nil {
				t.Errorf("%s accepted %s", s, trig)
			}
		}
	}
}

// The seed's decision logic: a failure with retry_count < 2 goes back to
// IMPLEMENT, at 2 to BLOCKER; the same for TEST and VALIDATE; a task is
// blocked after its second failed attempt.
func TestRetryRules(t *testing.T) {
	for _, tc := range []struct {
		from       State
		trig       Trigger
		retry      int
		max        int
		want       State
		wantRetry  int
		wantAction Action
	}{
		{StateTest, TrigTestsFailed, 0, 2, StateImplement, 1, ActRecordFeedback},
		{StateTest, TrigTestsFailed, 1, 2, StateBlocker, 2, ActMarkBlocked},
		{StateValidate, TrigACsFailed, 0, 2, StateImplement, 1, ActRecordFeedback},
		{StateValidate, TrigACsFailed, 1, 2, StateBlocker, 2, ActMarkBlocked},
		{StateImplement, TrigImplementFailed, 0, 2, StateImplement, 1, ActRecordFeedback},
		{StateImplement, TrigImplementFailed, 1, 2, StateBlocker, 2, ActMarkBlocked},
		{StateTest, TrigTestsFailed, 1, 3, StateImplement, 2, ActRecordFeedback},
		{StateTest, TrigTestsFailed, 2, 3, StateBlocker, 3, ActMarkBlocked},
		{StateTest, TrigTestsFailed, 0, 0, StateImplement, 1, ActRecordFeedback}, // 0 means the default, 2
	} {
		m := Machine{State: tc.from, TaskID: "US-001", RetryCount: tc.retry, MaxRetries: tc.max, Iteration: 4}
		got, actions, err := Next(m, Event{Trigger: tc.trig})
		if err != nil || got.State != tc.want || got.RetryCount != tc.wantRetry || !slices.Contains(actions, tc.wantAction) {
			t.Errorf("%s on %s at retry %d/%d: got %s retry %d %v (%v); want %s retry %d with %s",
				tc.from, tc.trig, tc.retry, tc.max, got.State, got.RetryCount, actions, err, tc.want, tc.wantRetry, tc.wantAction)
		}
		if got.TaskID != "US-001" {
			t.Errorf("a failure must keep the task, got %q", got.TaskID)
		}
	}
}

func TestUnresolvableAndMissingRunnerBlockAtOnce(t *testing.T) {
	for _, tc := range []struct {
		from State
		trig Trigger
	}{{StateImplement, TrigUnresolvable}, {StateTest, TrigRunnerMissing}, {StateCommit, TrigCommitFailed}} {
		got, actions, _ := Next(Machine{State: tc.from, TaskID: "T", RetryCount: 0}, Event{Trigger: tc.trig})
		if got.State != StateBlocker || !slices.Contains(actions, ActMarkBlocked) {
			t.Errorf("%s on %s -> %s %v", tc.from, tc.trig, got.State, actions)
		}
	}
}

func TestSelectionIterationAndTaskLifecycle(t *testing.T) {
	m := Machine{State: StateStorySelect, Iteration: 2}
	m, actions, _ := Next(m, Event{Trigger: TrigTaskSelected, TaskID: "US-003", RetryCount: 1})
	if m.State != StateImplement || m.TaskID != "US-003" || m.RetryCount != 1 || m.Iteration != 3 || actions[len(actions)-1] != ActRunAgent {
		t.Fatalf("after selection: %+v %v", m, actions)
	}
	m, _, _ = Next(m, Event{Trigger: TrigCodeWritten})
	m, _, _ = Next(m, Event{Trigger: TrigTestsPassed})
	m, actions, _ = Next(m, Event{Trigger: TrigACsMet})
	if m.State != StateCommit || actions[len(actions)-1] != ActCommit {
		t.Fatalf("after validation: %+v %v", m, actions)
	}
	m, actions, _ = Next(m, Event{Trigger: TrigCommitted})
	if m.State != StateMemoryLoad || m.TaskID != "" || m.RetryCount != 0 || !slices.Contains(actions, ActResetRetries) {
		t.Fatalf("after commit: %+v %v", m, actions)
	}
	if m.Iteration != 3 {
		t.Fatalf("iteration changed outside IMPLEMENT: %d", m.Iteration)
	}
}

func TestContextExhaustedCommitsPartialWorkWithoutFinishingTheTask(t *testing.T) {
	m := Machine{State: StateImplement, TaskID: "US-001", RetryCount: 1, Iteration: 1}
	m, actions, _ := Next(m, Event{Trigger: TrigContextExhausted})
	if m.State != StateCommit || !m.Partial || !slices.Contains(actions, ActCommitPartial) || m.RetryCount != 1 {
		t.Fatalf("%+v %v", m, actions)
	}
	m, actions, _ = Next(m, Event{Trigger: TrigCommitted})
	if m.State != StateMemoryLoad || m.Partial || slices.Contains(actions, ActResetRetries) {
		t.Fatalf("partial commit reset the task: %+v %v", m, actions)
	}
}

func TestMermaidIsGeneratedFromTheTable(t *testing.T) {
	d := Mermaid()
	if !strings.HasPrefix(d, "stateDiagram-v2\n") {
		t.Fatal("not a mermaid state diagram")
	}
	for _, r := range Table {
		line := "    " + string(r.From) + " --> " + string(r.To) + ": " + r.Label + "\n"
		if !strings.Contains(d, line) {
			t.Errorf("diagram lacks %q", line)
		}
	}
	for _, s := range States {
		if s.Ends() && !strings.Contains(d, "    "+string(s)+" --> [*]") {
			t.Errorf("diagram does not show that a run ends in %s", s)
		}
	}
}

// A failed commit (a pre-commit hook, a stale index.lock) is one failure of
// the task being committed: BLOCKER must still know the task, and the
// task's success must not be counted.
func TestFailedCommitKeepsTheTaskAndCountsOneFailure(t *testing.T) {
	m := Machine{State: StateCommit, TaskID: "US-001", RetryCount: 0, Iteration: 1}
	m, actions, err := Next(m, Event{Trigger: TrigCommitFailed})
	if err != nil {
		t.Fatal(err)
	}
	if m.State != StateBlocker || m.TaskID != "US-001" || m.RetryCount != 1 {
		t.Fatalf("after a failed commit: %+v, want BLOCKER on US-001 with one failure", m)
	}
	if slices.Contains(actions, ActResetRetries) || !slices.Contains(actions, ActRecordFailure) || !slices.Contains(actions, ActMarkBlocked) {
		t.Fatalf("actions %v: want a recorded failure and a blocker, no success", actions)
	}
	m, _, _ = Next(m, Event{Trigger: TrigBlockerLogged})
	if m.TaskID != "" || m.RetryCount != 0 {
		t.Fatalf("leaving BLOCKER must end the task: %+v", m)
	}
}

// A state.json that stopped must say where the next build resumes; one
// that does not is refused on load, before anything is written.
func TestStoppedStateMustNameWhereItResumes(t *testing.T) {
	for _, tc := range []struct {
		m  Machine
		ok bool
	}{
		{Machine{State: StateStopped}, false},
		{Machine{State: StateStopped, StoppedIn: StateExit}, false},
		{Machine{State: StateStopped, StoppedIn: "NOWHERE"}, false},
		{Machine{State: StateStopped, StoppedIn: StateImplement}, false}, // IMPLEMENT works on a task
		{Machine{State: StateStopped, StoppedIn: StateImplement, TaskID: "US-001"}, true},
		{Machine{State: StateStopped, StoppedIn: StateMemoryLoad}, true},
	} {
		st := &LoopState{RunID: "r1", Machine: tc.m}
		if err := st.validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: validate = %v; want ok %v", tc.m, err, tc.ok)
		}
	}
}

// tablePairs returns the distinct (from, to) edges of the table, sorted.
func tablePairs() []string {
	seen := map[string]bool{}
	for _, t := range Table {
		seen[string(t.From)+" -> "+string(t.To)] = true
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
