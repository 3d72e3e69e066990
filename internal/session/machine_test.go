package session

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/role"
)

var policy = Policy{}.WithDefaults()

func in(st State) OrchestratorState {
	return OrchestratorState{Current: st, SessionID: "260131-144400"}
}

func executing(task string, attempt int) OrchestratorState {
	s := in(Executing)
	s.CurrentTaskID, s.CurrentAttemptNumber = task, attempt
	return s
}

func reviewing(task string, attempt int) OrchestratorState {
	s := executing(task, attempt)
	s.Current = Reviewing
	return s
}

func mustNext(t *testing.T, s OrchestratorState, e Event) (OrchestratorState, []Action) {
	t.Helper()
	n, acts, err := Next(s, e, policy)
	if err != nil {
		t.Fatalf("Next(%s, %s): %v", s.Current, e.Type, err)
	}
	return n, acts
}

func wantActions(t *testing.T, got []Action, want ...Action) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
}

// The tests below follow the seed's transition tables row by row.

func TestInitializingNewSessionPlansWithInitialize(t *testing.T) {
	n, acts := mustNext(t, in(Initializing), Event{Type: SessionResolved, NewSession: true})
	if n.Current != Planning || n.PlannerMode != role.ModeInitialize {
		t.Fatalf("got %s/%s, want Planning/INITIALIZE", n.Current, n.PlannerMode)
	}
	wantActions(t, acts, InvokePlanner)
}

func TestInitializingResumeGoesWhereProgressSays(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Event
		want State
		acts []Action
	}{
		{"tasks left", Event{Type: SessionResolved, HasTasks: true, HasUncompletedTasks: true}, Executing, []Action{SelectTask}},
		{"all done", Event{Type: SessionResolved, HasTasks: true}, Complete, []Action{RunGoalCheck}},
		{"never planned", Event{Type: SessionResolved}, Planning, []Action{InvokePlanner}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, acts := mustNext(t, in(Initializing), tc.e)
			if n.Current != tc.want {
				t.Fatalf("resume went to %s, want %s", n.Current, tc.want)
			}
			wantActions(t, acts, tc.acts...)
		})
	}
}

func TestResumeContinuesAtTheSavedStateWithItsCounters(t *testing.T) {
	for _, st := range []State{Planning, Executing, Reviewing, Complete} {
		s := reviewing("task-2", 2)
		s.Current, s.QACycleCount, s.PlanningRetries = Initializing, 1, 1
		n, acts := mustNext(t, s, Event{Type: SessionResolved, ResumeAt: st, HasTasks: true, HasUncompletedTasks: true})
		if n.Current != st || n.CurrentTaskID != "task-2" || n.CurrentAttemptNumber != 2 || n.QACycleCount != 1 || n.PlanningRetries != 1 {
			t.Fatalf("resume at %s: %+v", st, n)
		}
		if !reflect.DeepEqual(acts, EntryActions(n)) || len(acts) == 0 {
			t.Fatalf("resume at %s: actions %v, want the state's entry actions %v", st, acts, EntryActions(n))
		}
	}
}

// A critical error fails the session where ralph can find one: setting it
// up, and at a task gone from tasks.md.
func TestCriticalErrorFailsWhereRalphFindsOne(t *testing.T) {
	for _, st := range []State{Initializing, Executing, Reviewing} {
		n, acts := mustNext(t, in(st), Event{Type: CriticalError, Reason: "disk full"})
		if n.Current != Failed || n.Reason != "disk full" || !n.Final() {
			t.Fatalf("%s + error = %+v, want Failed with the reason", st, n)
		}
		wantActions(t, acts, LogBlockers, PromptUser)
	}
	for _, st := range []State{Planning, Complete} {
		if _, _, err := Next(in(st), Event{Type: CriticalError}, policy); err == nil {
			t.Errorf("%s accepted a critical error, which the runner never finds there", st)
		}
	}
}

// Every way a run ends before the session does leads to Stopped from the
// states where roles run, keeping the counters; the resume goes back there
// with that state's entry actions, and nothing else leaves Stopped.
func TestStopsAndResumes(t *testing.T) {
	for _, st := range []State{Planning, Executing, Reviewing, Complete} {
		for _, trig := range StopTriggers {
			s := reviewing("task-2", 2)
			s.Current, s.QACycleCount, s.PendingQA = st, 1, st == Planning
			n, acts, err := Next(s, Event{Type: trig}, policy)
			if trig == WaitingForAnswers && st != Planning {
				if err == nil {
					t.Errorf("%s + %s accepted; questions for a person come up only while planning", st, trig)
				}
				continue
			}
			if err != nil || n.Current != Stopped || n.StoppedIn != st || len(acts) != 0 || n.Final() {
				t.Fatalf("%s + %s = %+v, %v, %v; want Stopped in %s, no action", st, trig, n, acts, err, st)
			}
			if n.Resumes() != st || n.CurrentTaskID != "task-2" || n.CurrentAttemptNumber != 2 || n.QACycleCount != 1 {
				t.Errorf("%s + %s lost the session's place: %+v", st, trig, n)
			}
			back, acts := mustNext(t, n, Event{Type: Resumed})
			want := s
			if !reflect.DeepEqual(back, want) {
				t.Errorf("resumed from %s: %+v, want %+v", st, back, want)
			}
			wantActions(t, acts, EntryActions(want)...)
		}
	}
	stopped := OrchestratorState{Current: Stopped, StoppedIn: Executing}
	for _, trig := range append([]Trigger{SessionResolved, CriticalError, TaskSelected, InvalidResponse}, StopTriggers...) {
		if _, _, err := Next(stopped, Event{Type: trig, TaskID: "task-1", Attempt: 1}, policy); err == nil {
			t.Errorf("Stopped accepted %s; only resumed leaves it", trig)
		}
	}
	if _, _, err := Next(OrchestratorState{Current: Stopped}, Event{Type: Resumed}, policy); err == nil {
		t.Errorf("a Stopped session that does not say where it stopped was resumed")
	}
	for _, st := range []State{Initializing, Failed} {
		if _, _, err := Next(in(st), Event{Type: Interrupted}, policy); err == nil {
			t.Errorf("%s + interrupted was accepted", st)
		}
	}
}

func TestPlannerAsksForQACycleRunsQuestionerThenPlanner(t *testing.T) {
	n, acts := mustNext(t, in(Planning), Event{Type: PlannerCompleted, Status: role.StatusNeedsQACycle})
	if n.Current != Planning || !n.PendingQA || n.PlannerMode != role.ModeQACoordinate || n.QACycleCount != 1 {
		t.Fatalf("got %+v, want Planning, pending Q&A, QA_COORDINATE, cycle 1", n)
	}
	wantActions(t, acts, InvokeQuestioner, InvokePlanner)
}

func TestQALoopIsBounded(t *testing.T) {
	s := in(Planning)
	for i := 1; i <= policy.MaxQACycles; i++ {
		s, _ = mustNext(t, s, Event{Type: PlannerCompleted, Status: role.StatusNeedsQACycle})
		if s.Current != Planning || s.QACycleCount != i {
			t.Fatalf("cycle %d: %+v", i, s)
		}
	}
	s, acts := mustNext(t, s, Event{Type: PlannerCompleted, Status: role.StatusNeedsQACycle})
	if s.Current != Failed || !strings.Contains(s.Reason, "Q&A") {
		t.Fatalf("after %d cycles: %+v, want Failed naming Q&A", policy.MaxQACycles, s)
	}
	wantActions(t, acts, LogBlockers, PromptUser)
}

func TestPlannerCompletedWithTasksGoesToExecuting(t *testing.T) {
	s := in(Planning)
	s.PendingQA, s.Blockers = true, []string{"old"}
	n, acts := mustNext(t, s, Event{Type: PlannerCompleted, Status: role.StatusCompleted, HasTasks: true, HasUncompletedTasks: true})
	if n.Current != Executing || n.PendingQA || n.Blockers != nil {
		t.Fatalf("got %+v, want Executing with Q&A and blockers cleared", n)
	}
	wantActions(t, acts, SelectTask)
}

func TestPlannerCompletedWithoutTasksRetriesThenFails(t *testing.T) {
	s := in(Planning)
	e := Event{Type: PlannerCompleted, Status: role.StatusCompleted}
	for i := 1; i <= policy.MaxPlanningRetries; i++ {
		var acts []Action
		s, acts = mustNext(t, s, e)
		if s.Current != Planning || s.PlanningRetries != i {
			t.Fatalf("retry %d: %+v", i, s)
		}
		wantActions(t, acts, InvokePlanner)
	}
	s, _ = mustNext(t, s, e)
	if s.Current != Failed {
		t.Fatalf("after %d retries: %s, want Failed", policy.MaxPlanningRetries, s.Current)
	}
}

func TestInvalidPlannerResultCountsAsPlanningRetry(t *testing.T) {
	n, acts := mustNext(t, in(Planning), Event{Type: InvalidResponse, Role: role.Planner})
	if n.Current != Planning || n.PlanningRetries != 1 {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, InvokePlanner)
}

func TestPlannerBlockedFails(t *testing.T) {
	n, acts := mustNext(t, in(Planning), Event{Type: PlannerCompleted, Status: role.StatusBlocked, Reason: "needs a database"})
	if n.Current != Failed || !strings.Contains(n.Reason, "needs a database") {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, LogBlockers, PromptUser)
}

func TestNewRequirementsReplanWithUpdate(t *testing.T) {
	n, acts := mustNext(t, executing("task-1", 1), Event{Type: NewRequirements})
	if n.Current != Planning || n.PlannerMode != role.ModeUpdate {
		t.Fatalf("from Executing: %+v", n)
	}
	wantActions(t, acts, MarkRework, InvokePlanner)
}

func TestTaskSelectedInvokesExecutor(t *testing.T) {
	n, acts := mustNext(t, in(Executing), Event{Type: TaskSelected, TaskID: "task-2", Attempt: 2})
	if n.Current != Executing || n.CurrentTaskID != "task-2" || n.CurrentAttemptNumber != 2 {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, InvokeExecutor)
}

func TestTaskSelectedPastTheLimitFails(t *testing.T) {
	n, _ := mustNext(t, in(Executing), Event{Type: TaskSelected, TaskID: "task-2", Attempt: policy.MaxTaskAttempts + 1})
	if n.Current != Failed || !strings.Contains(n.Reason, "task-2 failed 3 times") {
		t.Fatalf("got %+v", n)
	}
}

func TestWhenExecutorCompletes_ThenTransitionsToReviewing(t *testing.T) {
	n, acts := mustNext(t, executing("task-1", 1), Event{Type: ExecutorCompleted, Status: role.StatusCompleted})
	if n.Current != Reviewing || n.CurrentTaskID != "task-1" {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, MarkInReview, InvokeReviewer)

	_, acts = mustNext(t, executing("task-1", 1), Event{Type: ExecutorCompleted, Status: role.StatusCompleted, NewTasks: make([]role.NewTask, 2)})
	wantActions(t, acts, MarkInReview, AddTasks, InvokeReviewer)
}

func TestExecutorBlockedReplans(t *testing.T) {
	n, acts := mustNext(t, executing("task-1", 1), Event{Type: ExecutorCompleted, Status: role.StatusBlocked, Reason: "schema unknown"})
	if n.Current != Planning || n.PlannerMode != role.ModeUpdate || len(n.Blockers) != 1 || n.Blockers[0] != "schema unknown" || n.CurrentTaskID != "" {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, MarkRework, InvokePlanner)
}

func TestAllTasksDoneGoesToComplete(t *testing.T) {
	n, acts := mustNext(t, in(Executing), Event{Type: NoTasksRemaining})
	if n.Current != Complete {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, RunGoalCheck)
}

func TestWhenReviewerQualifies_ThenTransitionsToExecuting(t *testing.T) {
	n, acts := mustNext(t, reviewing("task-1", 2), Event{Type: ReviewerCompleted, Verdict: role.VerdictQualified})
	if n.Current != Executing {
		t.Fatalf("got %s, want Executing", n.Current)
	}
	if n.CurrentTaskID != "" || n.CurrentAttemptNumber != 0 {
		t.Fatalf("task not cleared for the next selection: %+v", n)
	}
	wantActions(t, acts, CommitTask, MarkDone, SelectTask)
}

func TestFailedVerdictIncrementsTheAttempt(t *testing.T) {
	n, acts := mustNext(t, reviewing("task-1", 1), Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, Reason: "no test"})
	if n.Current != Executing || n.CurrentTaskID != "task-1" || n.CurrentAttemptNumber != 2 {
		t.Fatalf("got %+v, want Executing task-1 attempt 2", n)
	}
	wantActions(t, acts, MarkRework, InvokeExecutor)
}

func TestReviewerDiscoveredTasksAreAdded(t *testing.T) {
	_, acts := mustNext(t, reviewing("task-1", 1), Event{Type: ReviewerCompleted, Verdict: role.VerdictQualified, NewTasks: make([]role.NewTask, 1)})
	wantActions(t, acts, CommitTask, MarkDone, AddTasks, SelectTask)
	_, acts = mustNext(t, reviewing("task-1", 1), Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, NewTasks: make([]role.NewTask, 1)})
	wantActions(t, acts, MarkRework, AddTasks, InvokeExecutor)
}

func TestTaskFailedThreeTimesFails(t *testing.T) {
	s := reviewing("task-1", 1)
	for attempt := 1; attempt < policy.MaxTaskAttempts; attempt++ {
		s, _ = mustNext(t, s, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, Reason: "wrong"})
		s.Current = Reviewing
	}
	n, acts := mustNext(t, s, Event{Type: ReviewerCompleted, Verdict: role.VerdictFailed, Reason: "still wrong"})
	if n.Current != Failed || !strings.Contains(n.Reason, "task-1 failed 3 times: still wrong") {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, MarkRework, LogBlockers, PromptUser)
}

func TestInvalidExecutorOrReviewerResultIsAFailedAttempt(t *testing.T) {
	for _, s := range []OrchestratorState{executing("task-1", 1), reviewing("task-1", 1)} {
		n, acts := mustNext(t, s, Event{Type: InvalidResponse, Role: role.Executor})
		if n.Current != Executing || n.CurrentAttemptNumber != 2 {
			t.Fatalf("from %s: %+v", s.Current, n)
		}
		wantActions(t, acts, MarkRework, InvokeExecutor)
	}
}

func TestHolisticCheckPassedEndsTheSession(t *testing.T) {
	n, acts := mustNext(t, in(Complete), Event{Type: HolisticCheckPassed})
	if !n.Done || !n.Final() || n.Current != Complete {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, ReturnSummary)
	if _, _, err := Next(n, Event{Type: NewRequirements}, policy); err == nil {
		t.Fatal("a finished session accepted another event")
	}
}

func TestHolisticCheckFailedReplansWithMissingTasks(t *testing.T) {
	n, acts := mustNext(t, in(Complete), Event{Type: HolisticCheckFailed, NewTasks: make([]role.NewTask, 1), Reason: "no docs"})
	if n.Current != Planning || n.PlannerMode != role.ModeUpdate || n.GoalChecks != 1 {
		t.Fatalf("got %+v", n)
	}
	wantActions(t, acts, AddTasks, InvokePlanner)
}

func TestHolisticCheckFailuresAreBounded(t *testing.T) {
	s := in(Complete)
	for i := 1; i < policy.MaxGoalChecks; i++ {
		s, _ = mustNext(t, s, Event{Type: HolisticCheckFailed, Reason: "missing"})
		s.Current = Complete
	}
	n, _ := mustNext(t, s, Event{Type: HolisticCheckFailed, Reason: "missing"})
	if n.Current != Failed {
		t.Fatalf("got %+v", n)
	}
}

func TestIllegalEventsChangeNothing(t *testing.T) {
	all := []Trigger{SessionResolved, PlannerCompleted, NewRequirements, TaskSelected, NoTasksRemaining,
		ExecutorCompleted, ReviewerCompleted, HolisticCheckPassed, HolisticCheckFailed, InvalidResponse}
	legal := map[State]map[Trigger]bool{
		Initializing: {SessionResolved: true},
		Planning:     {PlannerCompleted: true, InvalidResponse: true},
		Executing:    {TaskSelected: true, NoTasksRemaining: true, ExecutorCompleted: true, NewRequirements: true, InvalidResponse: true},
		Reviewing:    {ReviewerCompleted: true, InvalidResponse: true},
		Complete:     {HolisticCheckPassed: true, HolisticCheckFailed: true, InvalidResponse: true},
		Failed:       {},
		Stopped:      {},
	}
	for _, st := range States {
		for _, tr := range all {
			s := executing("task-1", 1)
			s.Current = st
			e := Event{Type: tr, Status: role.StatusCompleted, Verdict: role.VerdictQualified, TaskID: "task-2", Attempt: 1, HasTasks: true, HasUncompletedTasks: true}
			n, acts, err := Next(s, e, policy)
			var ill *IllegalError
			if legal[st][tr] {
				if err != nil {
					t.Errorf("%s + %s: unexpected error %v", st, tr, err)
				}
				continue
			}
			if !errors.As(err, &ill) || !reflect.DeepEqual(n, s) || acts != nil {
				t.Errorf("%s + %s: got (%+v, %v, %v), want an IllegalError and no change", st, tr, n.Current, acts, err)
			}
		}
	}
}

func TestUnknownStatusOrVerdictIsIllegal(t *testing.T) {
	for _, tc := range []struct {
		s OrchestratorState
		e Event
	}{
		{in(Planning), Event{Type: PlannerCompleted, Status: "done"}},
		{executing("task-1", 1), Event{Type: ExecutorCompleted, Status: "maybe"}},
		{reviewing("task-1", 1), Event{Type: ReviewerCompleted, Verdict: "ok"}},
		{in(Executing), Event{Type: ExecutorCompleted, Status: role.StatusCompleted}}, // no task
		{in(Executing), Event{Type: TaskSelected}},
	} {
		if _, _, err := Next(tc.s, tc.e, policy); err == nil {
			t.Errorf("%s + %+v was accepted", tc.s.Current, tc.e)
		}
	}
}

// TestEveryActionHasAPerformer enumerates every action Next can return,
// from every state and event the diagram explores, and the entry actions
// of every state, and fails for one the runner has no performer for, or
// whose kind (a change of ralph's records, made with the transition, or
// work after it) does not match where the runner performs it.
func TestEveryActionHasAPerformer(t *testing.T) {
	r := &Runner{}
	records, work := r.recordPerformers(), r.workPerformers()
	check := func(where string, acts []Action) {
		t.Helper()
		afterRecords := false
		for _, a := range acts {
			switch {
			case a.Records() && records[a] == nil:
				t.Errorf("%s: %s changes ralph's records but has no record performer", where, a)
			case !a.Records() && work[a] == nil:
				t.Errorf("%s: %s has no performer in the runner", where, a)
			}
			if a.Records() && afterRecords {
				t.Errorf("%s: %s comes after work in %v; the records are made with the transition, before any work", where, a, acts)
			}
			afterRecords = afterRecords || !a.Records()
		}
	}
	seen := map[Action]bool{}
	explore(func(s OrchestratorState, e Event, n OrchestratorState, acts []Action) {
		for _, a := range acts {
			seen[a] = true
		}
		check(fmt.Sprintf("%s -%s-> %s", s.Current, e.Type, n.Current), acts)
		if !n.Final() && n.Current != Stopped && !slices.ContainsFunc(acts, func(a Action) bool { return !a.Records() }) {
			t.Errorf("%s -%s-> %s leaves the runner nothing to do: %v", s.Current, e.Type, n.Current, acts)
		}
	})
	for _, st := range States {
		for _, s := range []OrchestratorState{in(st), executing("task-1", 1)} {
			s.Current = st
			check("entry of "+string(st), EntryActions(s))
		}
	}
	for a := range records {
		if !a.Records() {
			t.Errorf("%s has a record performer but is not a record action", a)
		}
	}
	if len(seen) < 14 {
		t.Errorf("only %d actions seen; the enumeration is broken", len(seen))
	}
}

// EntryActions is what a session entering or resuming in s does first:
// the role of its state. A resume (after a crash or from Stopped) has no
// other record of it.
func EntryActions(s OrchestratorState) []Action {
	switch s.Current {
	case Planning:
		if s.PendingQA {
			return []Action{InvokeQuestioner, InvokePlanner}
		}
		return []Action{InvokePlanner}
	case Executing:
		if s.CurrentTaskID == "" {
			return []Action{SelectTask}
		}
		return []Action{InvokeExecutor}
	case Reviewing:
		return []Action{InvokeReviewer}
	case Complete:
		if !s.Done {
			return []Action{RunGoalCheck}
		}
	}
	return nil
}
