package thread

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

var allVerbs = []Verb{VerbAssess, VerbFinalize, VerbRevise, VerbReopen, VerbImplement, VerbChecksPass, VerbChecksFail,
	VerbRetry, VerbFixSpec, VerbStart, VerbClaimDone, VerbInterrupt, VerbStuck, VerbLoopFailed, VerbResume, VerbReconfigure,
	VerbCriteriaFailed, VerbCriteriaPassed, VerbAssist, VerbReviseSpec, VerbPolish, VerbSubmit, VerbPolishDone,
	VerbApprove, VerbRequestChanges, VerbPrepareCommit, VerbCommit, VerbAbandon}

// Verbs no phase accepts, to be refused everywhere.
var bogusVerbs = []Verb{"", "explode", "Finalize", "approve ", "done"}

var nonHuman = []Source{SourceAgent, SourceSystem, SourceTimer, SourceFlag, SourceQuick}

// seedEdges is seed 003's mermaid block read line by line, in its order:
// every "A --> B" edge, including the start and the two ends.
var seedEdges = []string{
	"[*] -> Drafting",
	// 1. Spec Creation
	"Drafting -> Assessing",
	"Assessing -> Drafting",
	"Assessing -> Finalized",
	"Drafting -> Finalized",
	"Finalized -> Drafting",
	// 2. Implementation
	"Preflight -> Configuring",
	"Preflight -> PreflightFailed",
	"PreflightFailed -> Preflight",
	"PreflightFailed -> Drafting",
	"Configuring -> Running",
	"Running -> Verifying",
	"Running -> Paused",
	"Paused -> Running",
	"Paused -> Configuring",
	"Verifying -> Running",
	"Running -> Stuck",
	"Verifying -> Stuck",
	"Stuck -> Configuring",
	"Stuck -> Running",
	"Verifying -> Implemented",
	// 3. Polish
	"Polishing -> Implemented",
	"Implemented -> Polishing",
	// 4. Review
	"PendingReview -> Approved",
	// 5. Complete
	"ReadyToCommit -> Done",
	// Phase Transitions (Forward)
	"Finalized -> Preflight",
	"Implemented -> PendingReview",
	"Approved -> ReadyToCommit",
	// Backward Transitions
	"Stuck -> Drafting",
	"PendingReview -> Running",
	"PendingReview -> Drafting",
	// Abandon
	"Drafting -> Abandoned",
	"Assessing -> Abandoned",
	"Finalized -> Abandoned",
	"Preflight -> Abandoned",
	"PreflightFailed -> Abandoned",
	"Configuring -> Abandoned",
	"Running -> Abandoned",
	"Paused -> Abandoned",
	"Verifying -> Abandoned",
	"Stuck -> Abandoned",
	"Implemented -> Abandoned",
	"Polishing -> Abandoned",
	"PendingReview -> Abandoned",
	"Approved -> Abandoned",
	"ReadyToCommit -> Abandoned",
	// Terminal States
	"Done -> [*]",
	"Abandoned -> [*]",
}

var edgeLine = regexp.MustCompile(`^    (\S+) --> (\S+?)(?:: (.+))?$`)

func TestMermaidHasExactlyTheSeedsEdges(t *testing.T) {
	d := Mermaid()
	lines := strings.Split(strings.TrimSuffix(d, "\n"), "\n")
	if lines[0] != "stateDiagram-v2" {
		t.Fatalf("not a mermaid state diagram: %q", lines[0])
	}
	var got []string
	for _, l := range lines[1:] {
		m := edgeLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line is not an edge: %q", l)
		}
		got = append(got, m[1]+" -> "+m[2])
	}
	want := append(slices.Clone(seedEdges), ralphEdges...)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diagram edges differ from the seed's and ralph's own\n got: %v\nwant: %v", got, want)
	}
	// One row per edge of the seed: only ralph's own rows share one.
	if len(Table) != len(Pairs())+len(ralphEdges) {
		t.Fatalf("%d rows for %d distinct edges and %d of ralph's own", len(Table), len(Pairs()), len(ralphEdges))
	}
}

// ralphEdges are the rows ralph adds to the seed's diagram, each a second
// arrow between two phases the seed already links: the loop failing on
// something outside the work (loop_failed) pauses the thread, as an
// interrupt does, because the seed's diagram shows no way for the loop to
// end but its own outcomes.
var ralphEdges = []string{"Running -> Paused"}

func TestMermaidIsGeneratedFromTheTable(t *testing.T) {
	d := Mermaid()
	for _, r := range Table {
		line := "    " + string(r.From) + " --> " + string(r.To) + ": " + r.Label + "\n"
		if !strings.Contains(d, line) {
			t.Errorf("diagram lacks %q", line)
		}
	}
}

func TestTableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Table {
		key := string(r.From) + "/" + string(r.On)
		if seen[key] {
			t.Errorf("%s accepts %q twice", r.From, r.On)
		}
		seen[key] = true
		if !r.From.Valid() || !r.To.Valid() || r.From.Terminal() {
			t.Errorf("bad row %+v", r)
		}
		if !slices.Contains(allVerbs, r.On) {
			t.Errorf("row %+v uses a verb missing from the test's list", r)
		}
		if r.Label == "" {
			t.Errorf("row %+v has no label", r)
		}
		if r.With.Auto != AutoNever && r.With.Actor != ActorSystem {
			t.Errorf("row %+v is automatic but not a system row", r)
		}
		if !slices.Contains([]Actor{ActorHuman, ActorAgent, ActorSystem}, r.With.Actor) {
			t.Errorf("row %+v has actor %q", r, r.With.Actor)
		}
	}
	for _, v := range allVerbs {
		if !slices.ContainsFunc(Table, func(r Transition) bool { return r.On == v }) {
			t.Errorf("verb %q is in no row", v)
		}
	}
	for _, p := range Phases {
		if EntryAction(p) == "" {
			t.Errorf("%s has no entry action", p)
		}
		auto := 0
		for _, r := range Table {
			if r.From == p && r.With.Auto != AutoNever {
				auto++
			}
		}
		if auto > 1 {
			t.Errorf("%s has %d automatic rows; AutoEvent needs at most one", p, auto)
		}
	}
	// Every phase is reachable from Drafting.
	reached := map[Phase]bool{PhaseDrafting: true}
	for changed := true; changed; {
		changed = false
		for _, r := range Table {
			if reached[r.From] && !reached[r.To] {
				reached[r.To], changed = true, true
			}
		}
	}
	for _, p := range Phases {
		if !reached[p] {
			t.Errorf("%s cannot be reached from Drafting", p)
		}
	}
}

func TestOnlyTheSeedsBackwardRowsResetTheWorkspace(t *testing.T) {
	var got []string
	for _, r := range Table {
		if r.With.ResetsWorkspace {
			got = append(got, string(r.From)+" -> "+string(r.To))
		}
	}
	want := []string{"Stuck -> Drafting", "PendingReview -> Drafting"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("resetting rows %v, want %v", got, want)
	}
}

func naturalSource(a Actor) Source {
	switch a {
	case ActorHuman:
		return SourceHuman
	case ActorAgent:
		return SourceAgent
	}
	return SourceSystem
}

func at(p Phase) Thread {
	return Thread{SchemaVersion: SchemaVersion, ID: "t1", Title: "x", Mode: ModeMethodical,
		Phase: PhaseState{Type: p}, SpecVersion: 2}
}

// snapshot is a deep copy of a thread's observable value, to prove Next
// leaves its input alone.
func snapshot(t *testing.T, th Thread) string {
	t.Helper()
	b, err := json.Marshal(th)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEveryTransitionWalksThroughNext(t *testing.T) {
	for _, r := range Table {
		in := at(r.From)
		before := snapshot(t, in)
		got, actions, err := Next(in, Event{Verb: r.On, Source: naturalSource(r.With.Actor)})
		if err != nil {
			t.Errorf("%s --%s--> %s: %v", r.From, r.On, r.To, err)
			continue
		}
		if got.Phase.Type != r.To {
			t.Errorf("%s on %s went to %s, want %s", r.From, r.On, got.Phase.Type, r.To)
		}
		if len(actions) == 0 || actions[len(actions)-1] != EntryAction(r.To) {
			t.Errorf("%s on %s: actions %v do not end with entry action %s", r.From, r.On, actions, EntryAction(r.To))
		}
		if slices.Contains(actions, ActResetWorkspace) != r.With.ResetsWorkspace {
			t.Errorf("%s on %s: actions %v, resets workspace %v", r.From, r.On, actions, r.With.ResetsWorkspace)
		}
		if snapshot(t, in) != before {
			t.Errorf("%s on %s changed its input", r.From, r.On)
		}
		// A human command may take any row; agent output, ralph itself, a
		// timer or a flag any row that is not human's.
		for _, s := range []Source{SourceHuman, SourceAgent, SourceSystem, SourceTimer, SourceFlag} {
			_, _, err := Next(in, Event{Verb: r.On, Source: s})
			if wantOK := r.With.Actor != ActorHuman || s == SourceHuman; (err == nil) != wantOK {
				t.Errorf("%s on %s from %s: err %v, want ok=%v", r.From, r.On, s, err, wantOK)
			}
		}
	}
}

// TestEveryPhaseVerbPairNotInTheTableIsRefused walks the product of phases,
// verbs and sources: Next refuses every pair the table lacks, with a
// *TransitionError naming the phase and the verbs it allows, and changes
// nothing.
func TestEveryPhaseVerbPairNotInTheTableIsRefused(t *testing.T) {
	for _, p := range Phases {
		for _, v := range append(slices.Clone(allVerbs), bogusVerbs...) {
			if _, ok := Lookup(p, v); ok {
				continue
			}
			for _, s := range Sources {
				in := at(p)
				got, actions, err := Next(in, Event{Verb: v, Source: s})
				var te *TransitionError
				if !errors.As(err, &te) || !errors.Is(err, ErrNoTransition) {
					t.Fatalf("%s on %q from %s: err %v, want a TransitionError", p, v, s, err)
				}
				if !reflect.DeepEqual(got, in) || actions != nil {
					t.Fatalf("%s on %q: refused but returned %+v %v", p, v, got, actions)
				}
				msg := err.Error()
				if !strings.Contains(msg, string(p)) {
					t.Errorf("%q does not name the phase %s", msg, p)
				}
				if te.Phase != p || !reflect.DeepEqual(te.Allowed, AllowedVerbs(p)) {
					t.Errorf("error %+v, want phase %s and allowed %v", te, p, AllowedVerbs(p))
				}
				for _, a := range AllowedVerbs(p) {
					if !strings.Contains(msg, a) {
						t.Errorf("%q does not list the allowed verb %s", msg, a)
					}
				}
			}
		}
	}
}

func TestAllowedVerbs(t *testing.T) {
	for _, tc := range []struct {
		p    Phase
		want []string
	}{
		{PhaseDrafting, []string{"abandon", "assess", "finalize"}},
		{PhaseStuck, []string{"abandon", "assist", "reconfigure", "revise_spec"}},
		{PhasePendingReview, []string{"abandon", "approve", "request_changes", "revise_spec"}},
		{PhaseVerifying, []string{"abandon", "criteria_failed", "criteria_passed", "stuck"}},
		{PhaseDone, nil},
		{PhaseAbandoned, nil},
		{"Nowhere", nil},
	} {
		if got := AllowedVerbs(tc.p); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("AllowedVerbs(%s) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// The seed's four gates, as rows: Finalize (both ways into Finalized),
// Handle Stuck (every way out of Stuck), Approve and Commit.
var wantCheckpoints = map[string]Checkpoint{
	"Drafting/finalize":     CheckpointFinalize,
	"Assessing/finalize":    CheckpointFinalize,
	"Stuck/reconfigure":     CheckpointStuck,
	"Stuck/assist":          CheckpointStuck,
	"Stuck/revise_spec":     CheckpointStuck,
	"Stuck/abandon":         CheckpointStuck,
	"PendingReview/approve": CheckpointApprove,
	"ReadyToCommit/commit":  CheckpointCommit,
}

func TestCheckpointRowsAreExactlyTheSeedsFourGates(t *testing.T) {
	got := map[string]Checkpoint{}
	for _, r := range Table {
		if r.With.Checkpoint != CheckpointNone {
			got[string(r.From)+"/"+string(r.On)] = r.With.Checkpoint
			if r.With.Actor != ActorHuman {
				t.Errorf("checkpoint row %+v is not human", r)
			}
		}
		if r.From == PhaseStuck && r.With.Checkpoint != CheckpointStuck {
			t.Errorf("%s leaves Stuck without the Handle Stuck checkpoint", r.On)
		}
	}
	if !reflect.DeepEqual(got, wantCheckpoints) {
		t.Fatalf("checkpoints %v, want %v", got, wantCheckpoints)
	}
}

func TestHumanTransitionsRefuseEverythingButAHuman(t *testing.T) {
	for _, r := range Table {
		if r.With.Actor != ActorHuman {
			continue
		}
		for _, s := range nonHuman {
			in := at(r.From)
			got, actions, err := Next(in, Event{Verb: r.On, Source: s})
			var he *HumanRequiredError
			if !errors.As(err, &he) || !errors.Is(err, ErrHumanRequired) {
				t.Fatalf("%s on %s from %s: err %v, want HumanRequiredError", r.From, r.On, s, err)
			}
			if !reflect.DeepEqual(got, in) || actions != nil {
				t.Fatalf("%s on %s from %s: refused but moved", r.From, r.On, s)
			}
			if he.Checkpoint != r.With.Checkpoint {
				t.Errorf("%s on %s: error names checkpoint %q, want %q", r.From, r.On, he.Checkpoint, r.With.Checkpoint)
			}
			if r.With.Checkpoint != CheckpointNone && !strings.Contains(err.Error(), string(r.With.Checkpoint)) {
				t.Errorf("%q does not name the checkpoint %q", err, r.With.Checkpoint)
			}
		}
		if _, _, err := Next(at(r.From), Event{Verb: r.On, Source: SourceHuman}); err != nil {
			t.Errorf("%s on %s from a human: %v", r.From, r.On, err)
		}
	}
}

func TestCheckpointMessages(t *testing.T) {
	_, _, err := Next(at(PhaseDrafting), Event{Verb: VerbFinalize, Source: SourceAgent})
	if want := `"finalize" in Drafting passes the "Finalize Spec" human checkpoint: only an explicit human command can take it, not agent output`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	_, _, err = Next(at(PhaseRunning), Event{Verb: VerbInterrupt, Source: SourceTimer})
	if want := `"interrupt" in Running needs an explicit human command, not a timer`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	_, _, err = Next(at(PhaseDrafting), Event{Verb: VerbStart, Source: SourceHuman})
	if want := `thread is Drafting, which does not accept "start"; allowed in Drafting: abandon, assess, finalize`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestEventsWithoutAValidSourceAreRefused(t *testing.T) {
	for _, s := range []Source{"", "Human", "root"} {
		_, _, err := Next(at(PhasePreflight), Event{Verb: VerbChecksPass, Source: s})
		if !errors.Is(err, ErrBadEvent) {
			t.Errorf("source %q: err %v, want ErrBadEvent", s, err)
		}
	}
	bad := at("Limbo")
	if _, _, err := Next(bad, Event{Verb: VerbAbandon, Source: SourceHuman}); !errors.Is(err, ErrBadEvent) {
		t.Errorf("unknown phase: err %v", err)
	}
}

func TestQuickModeTakesOnlyAutomaticRows(t *testing.T) {
	for _, r := range Table {
		_, _, err := Next(at(r.From), Event{Verb: r.On, Source: SourceQuick})
		switch {
		case r.With.Actor == ActorHuman:
			if !errors.Is(err, ErrHumanRequired) {
				t.Errorf("quick took human row %s/%s: %v", r.From, r.On, err)
			}
		case r.With.Auto == AutoNever:
			if !errors.Is(err, ErrNotAutomatic) {
				t.Errorf("quick took %s/%s: %v", r.From, r.On, err)
			}
		default:
			if err != nil {
				t.Errorf("quick refused automatic row %s/%s: %v", r.From, r.On, err)
			}
		}
	}
}

func TestAbandonFromEveryNonTerminalPhase(t *testing.T) {
	for _, p := range Phases {
		if p.Terminal() {
			continue
		}
		got, actions, err := Next(at(p), Event{Verb: VerbAbandon, Source: SourceHuman})
		if err != nil || got.Phase.Type != PhaseAbandoned {
			t.Errorf("abandon from %s: %v %v", p, got.Phase.Type, err)
			continue
		}
		if slices.Contains(actions, ActStopWork) != p.busy() {
			t.Errorf("abandon from %s: actions %v", p, actions)
		}
		if actions[len(actions)-1] != ActArchive {
			t.Errorf("abandon from %s: actions %v", p, actions)
		}
		if _, _, err := Next(at(p), Event{Verb: VerbAbandon, Source: SourceTimer}); !errors.Is(err, ErrHumanRequired) {
			t.Errorf("a timer abandoned %s: %v", p, err)
		}
	}
}

func TestTerminalPhasesRefuseEverything(t *testing.T) {
	for _, p := range []Phase{PhaseDone, PhaseAbandoned} {
		if !p.Terminal() || len(AllowedVerbs(p)) != 0 {
			t.Fatalf("%s is not terminal", p)
		}
		for _, v := range append(slices.Clone(allVerbs), bogusVerbs...) {
			for _, s := range Sources {
				got, actions, err := Next(at(p), Event{Verb: v, Source: s})
				if !errors.Is(err, ErrNoTransition) || got.Phase.Type != p || actions != nil {
					t.Fatalf("%s accepted %q from %s: %v", p, v, s, err)
				}
				if !strings.Contains(err.Error(), "final") {
					t.Errorf("message %q does not say the thread is final", err)
				}
			}
		}
		if _, _, moved := AutoAdvance(at(p), ModeQuick); moved {
			t.Errorf("AutoAdvance moved out of %s", p)
		}
	}
	for _, p := range Phases {
		if p.Terminal() != (p == PhaseDone || p == PhaseAbandoned) {
			t.Errorf("%s terminal=%v", p, p.Terminal())
		}
	}
}

func mustNext(t *testing.T, th Thread, ev Event) (Thread, []Action) {
	t.Helper()
	n, actions, err := Next(th, ev)
	if err != nil {
		t.Fatalf("%s on %s: %v", th.Phase.Type, ev.Verb, err)
	}
	return n, actions
}

// advance runs AutoAdvance and checks that it did not pass a human row on
// the way, by replaying each automatic step.
func advance(t *testing.T, th Thread, mode Mode) (Thread, []Action, bool) {
	t.Helper()
	for p := th.Phase.Type; ; {
		ev, ok := AutoEvent(p, mode)
		if !ok {
			break
		}
		r, _ := Lookup(p, ev.Verb)
		if r.With.Actor != ActorSystem || r.With.Checkpoint != CheckpointNone || ev.Source == SourceHuman {
			t.Fatalf("AutoEvent(%s, %s) = %+v takes row %+v", p, mode, ev, r)
		}
		p = r.To
	}
	return AutoAdvance(th, mode)
}

func refusedForQuick(t *testing.T, th Thread, v Verb, cp Checkpoint) {
	t.Helper()
	for _, s := range nonHuman {
		_, _, err := Next(th, Event{Verb: v, Source: s})
		var he *HumanRequiredError
		if !errors.As(err, &he) || he.Checkpoint != cp {
			t.Fatalf("%s in %s from %s: %v, want the %s checkpoint refused", v, th.Phase.Type, s, err, cp)
		}
	}
}

// TestQuickModeStopsAtEveryCheckpoint drives a quick thread from Drafting
// to Done with AutoAdvance between outside events: it skips assessment,
// configuration and polish, but waits at each of the four gates.
func TestQuickModeStopsAtEveryCheckpoint(t *testing.T) {
	th := at(PhaseDrafting)
	th.Mode = ModeQuick

	// Drafting: nothing automatic; it waits for a human finalize, and never
	// goes to Assessing on its own.
	th, _, moved := advance(t, th, ModeQuick)
	if moved || th.Phase.Type != PhaseDrafting {
		t.Fatalf("quick mode left Drafting by itself: %s", th.Phase.Type)
	}
	refusedForQuick(t, th, VerbFinalize, CheckpointFinalize)
	th, _ = mustNext(t, th, Event{Verb: VerbFinalize, Source: SourceHuman})

	// Finalized: begins implementation at once, then waits for preflight.
	th, actions, moved := advance(t, th, ModeQuick)
	if !moved || th.Phase.Type != PhasePreflight || !reflect.DeepEqual(actions, []Action{ActCaptureBaseline, ActRunPreflight}) {
		t.Fatalf("from Finalized: %s %v", th.Phase.Type, actions)
	}
	base := &Baseline{Branch: "main", CommitSHA: "abc123", CapturedAt: time.Unix(1, 0).UTC()}
	th, _ = mustNext(t, th, Event{Verb: VerbChecksPass, Source: SourceSystem, Baseline: base, Branch: "ralph/t1"})

	// Configuring: default configuration, straight into the loop.
	th, actions, _ = advance(t, th, ModeQuick)
	if th.Phase.Type != PhaseRunning || !reflect.DeepEqual(actions, []Action{ActRunLoop}) {
		t.Fatalf("from Configuring: %s %v", th.Phase.Type, actions)
	}
	th, _ = mustNext(t, th, Event{Verb: VerbClaimDone, Source: SourceAgent, Iteration: 3})
	th, _ = mustNext(t, th, Event{Verb: VerbCriteriaPassed, Source: SourceSystem})

	// Implemented: polish skipped, straight to review, where it waits.
	th, actions, _ = advance(t, th, ModeQuick)
	if th.Phase.Type != PhasePendingReview || !reflect.DeepEqual(actions, []Action{ActRequestReview}) {
		t.Fatalf("from Implemented: %s %v", th.Phase.Type, actions)
	}
	if th2, _, moved := advance(t, th, ModeQuick); moved {
		t.Fatalf("quick mode passed the Approve gate: %s", th2.Phase.Type)
	}
	refusedForQuick(t, th, VerbApprove, CheckpointApprove)
	th, _ = mustNext(t, th, Event{Verb: VerbApprove, Source: SourceHuman})

	// Approved: the commit is prepared, then the Commit gate waits.
	th, actions, _ = advance(t, th, ModeQuick)
	if th.Phase.Type != PhaseReadyToCommit || !reflect.DeepEqual(actions, []Action{ActPrepareCommit}) {
		t.Fatalf("from Approved: %s %v", th.Phase.Type, actions)
	}
	if _, _, moved := advance(t, th, ModeQuick); moved {
		t.Fatal("quick mode passed the Commit gate")
	}
	refusedForQuick(t, th, VerbCommit, CheckpointCommit)
	th, _ = mustNext(t, th, Event{Verb: VerbCommit, Source: SourceHuman})
	if th.Phase.Type != PhaseDone || th.Baseline == nil || *th.Baseline != *base || th.Branch != "ralph/t1" {
		t.Fatalf("end: %+v", th)
	}
}

func TestQuickModeWaitsWhenStuck(t *testing.T) {
	th := at(PhaseRunning)
	th.Mode = ModeQuick
	th, _ = mustNext(t, th, Event{Verb: VerbStuck, Source: SourceSystem})
	if _, _, moved := advance(t, th, ModeQuick); moved {
		t.Fatal("quick mode left Stuck by itself")
	}
	for _, v := range AllowedVerbs(PhaseStuck) {
		refusedForQuick(t, th, Verb(v), CheckpointStuck)
	}
}

// TestAutoAdvanceFromEveryPhase: from any phase, in either mode,
// AutoAdvance takes only system rows, never leaves a phase with a
// checkpoint, and in methodical mode only prepares the commit.
func TestAutoAdvanceFromEveryPhase(t *testing.T) {
	wantQuick := map[Phase]Phase{
		PhaseFinalized:   PhasePreflight,
		PhaseConfiguring: PhaseRunning,
		PhaseImplemented: PhasePendingReview,
		PhaseApproved:    PhaseReadyToCommit,
	}
	for _, mode := range []Mode{ModeQuick, ModeMethodical} {
		for _, p := range Phases {
			got, actions, moved := advance(t, at(p), mode)
			want, ok := wantQuick[p]
			if mode == ModeMethodical {
				ok = p == PhaseApproved
			}
			if !ok {
				want = p
			}
			if got.Phase.Type != want || moved != ok || (len(actions) > 0) != ok {
				t.Errorf("%s mode from %s: %s moved=%v %v, want %s", mode, p, got.Phase.Type, moved, actions, want)
			}
			for _, r := range Table {
				if r.From == p && r.With.Checkpoint != CheckpointNone && moved {
					t.Errorf("%s mode left %s, which has the %s checkpoint", mode, p, r.With.Checkpoint)
				}
			}
		}
	}
}

func TestPhaseDataFollowsTheLoop(t *testing.T) {
	th := at(PhaseConfiguring)
	th, _ = mustNext(t, th, Event{Verb: VerbStart, Source: SourceHuman, RunID: "run-001"})
	if th.Phase.Iteration != 0 || th.CurrentRunID != "run-001" {
		t.Fatalf("start: %+v", th)
	}
	th, _ = mustNext(t, th, Event{Verb: VerbClaimDone, Source: SourceAgent, Iteration: 3})
	if !reflect.DeepEqual(th.Phase, PhaseState{Type: PhaseVerifying, Iteration: 3}) {
		t.Fatalf("claim_done: %+v", th.Phase)
	}
	th, _ = mustNext(t, th, Event{Verb: VerbCriteriaFailed, Source: SourceSystem})
	if th.Phase.Type != PhaseRunning || th.Phase.Iteration != 3 {
		t.Fatalf("criteria_failed kept the iteration? %+v", th.Phase)
	}
	th, actions := mustNext(t, th, Event{Verb: VerbInterrupt, Source: SourceHuman, Iteration: 4})
	if th.Phase.Type != PhasePaused || th.Phase.Iteration != 4 || actions[0] != ActStopWork {
		t.Fatalf("interrupt: %+v %v", th.Phase, actions)
	}
	th, _ = mustNext(t, th, Event{Verb: VerbResume, Source: SourceHuman})
	if th.Phase.Iteration != 4 {
		t.Fatalf("resume lost the iteration: %+v", th.Phase)
	}
	th, _ = mustNext(t, th, Event{Verb: VerbStuck, Source: SourceSystem})
	if th.Stuck == nil || !reflect.DeepEqual(*th.Stuck, StuckInfo{SpecVersion: 2, Iterations: 4}) || th.Phase.Iteration != 0 {
		t.Fatalf("stuck without details: %+v %+v", th.Stuck, th.Phase)
	}
}

// TestAssistLastsUntilVerified: a manual assist stands for the agent's
// claim through Running → Verifying and ends with the verdict or with any
// other move, so that only the verification right after an assist skips
// the agent and its promise.
func TestAssistLastsUntilVerified(t *testing.T) {
	th, _ := mustNext(t, at(PhaseStuck), Event{Verb: VerbAssist, Source: SourceHuman})
	if th.Phase.Type != PhaseRunning || !th.Assisted {
		t.Fatalf("assist: %+v", th)
	}
	paused, _ := mustNext(t, th, Event{Verb: VerbInterrupt, Source: SourceHuman})
	if paused.Assisted {
		t.Fatal("an interrupted assist is still assisted after the pause")
	}
	th, _ = mustNext(t, th, Event{Verb: VerbClaimDone, Source: SourceHuman})
	if th.Phase.Type != PhaseVerifying || !th.Assisted {
		t.Fatalf("the claim lost the assist: %+v", th)
	}
	for _, v := range []Verb{VerbCriteriaPassed, VerbCriteriaFailed, VerbStuck} {
		if n, _ := mustNext(t, th, Event{Verb: v, Source: SourceSystem}); n.Assisted {
			t.Errorf("%s kept the assist", v)
		}
	}
	th, _ = mustNext(t, at(PhaseConfiguring), Event{Verb: VerbStart, Source: SourceHuman})
	if th, _ = mustNext(t, th, Event{Verb: VerbClaimDone, Source: SourceAgent}); th.Assisted {
		t.Fatal("an agent's claim counts as an assist")
	}
}

func TestStuckRecordsWhatTheSeedPreserves(t *testing.T) {
	info := &StuckInfo{Iterations: 10, CriteriaPassed: []string{"AC-1"}, CriteriaFailed: []string{"AC-2"},
		ClosestOutput: "runs/run-1/iter-7.log", DiffPath: "runs/run-1/stuck.diff"}
	th := at(PhaseVerifying)
	th.Phase.Iteration = 10
	th, _ = mustNext(t, th, Event{Verb: VerbStuck, Source: SourceSystem, Stuck: info})
	want := *info
	want.SpecVersion = 2
	if !reflect.DeepEqual(*th.Stuck, want) {
		t.Fatalf("stuck %+v, want %+v", *th.Stuck, want)
	}
	info.CriteriaFailed[0] = "changed"
	if th.Stuck.CriteriaFailed[0] != "AC-2" {
		t.Fatal("the thread shares the event's slices")
	}
}

func TestBaselineIsRecordedOnlyWhenImplementationBegins(t *testing.T) {
	base := &Baseline{Branch: "main", CommitSHA: "abc"}
	th, _ := mustNext(t, at(PhaseRunning), Event{Verb: VerbClaimDone, Source: SourceAgent, Baseline: base, Branch: "x"})
	if th.Baseline != nil || th.Branch != "" {
		t.Fatalf("claim_done recorded a baseline: %+v", th)
	}
	th, actions := mustNext(t, at(PhaseFinalized), Event{Verb: VerbImplement, Source: SourceHuman, Baseline: base})
	if th.Baseline == nil || th.Baseline == base || *th.Baseline != *base || actions[0] != ActCaptureBaseline {
		t.Fatalf("implement: %+v %v", th, actions)
	}
}

func TestResetToBaselineDropsTheBranchAndKeepsTheBaseline(t *testing.T) {
	for _, p := range []Phase{PhaseStuck, PhasePendingReview} {
		th := at(p)
		th.Baseline = &Baseline{Branch: "main", CommitSHA: "abc"}
		th.Branch = BranchName(th.ID)
		got, actions := mustNext(t, th, Event{Verb: VerbReviseSpec, Source: SourceHuman})
		if got.Phase.Type != PhaseDrafting || got.Branch != "" || got.Baseline == nil ||
			!reflect.DeepEqual(actions, []Action{ActResetWorkspace, ActDraftSpec}) {
			t.Errorf("revise_spec from %s: %+v %v", p, got, actions)
		}
	}
}

func TestPreflightFailuresAreKept(t *testing.T) {
	th, actions := mustNext(t, at(PhasePreflight), Event{Verb: VerbChecksFail, Source: SourceSystem,
		Failures: []string{"git: working tree not clean"}})
	if th.Phase.Type != PhasePreflightFailed || !reflect.DeepEqual(th.Phase.Failures, []string{"git: working tree not clean"}) ||
		!reflect.DeepEqual(actions, []Action{ActReportPreflight}) {
		t.Fatalf("%+v %v", th.Phase, actions)
	}
	th, _ = mustNext(t, th, Event{Verb: VerbRetry, Source: SourceHuman})
	if th.Phase.Failures != nil {
		t.Fatalf("retry kept the failures: %+v", th.Phase)
	}
}

func TestParsePhase(t *testing.T) {
	for in, want := range map[string]Phase{"Running": PhaseRunning, "running": PhaseRunning,
		"pending_review": PhasePendingReview, "ready-to-commit": PhaseReadyToCommit} {
		if got, ok := ParsePhase(in); !ok || got != want {
			t.Errorf("ParsePhase(%q) = %q %v", in, got, ok)
		}
	}
	if _, ok := ParsePhase("Sleeping"); ok {
		t.Error("ParsePhase accepted Sleeping")
	}
}

// AutoAdvance takes the automatic transitions from t's phase under mode
// (normally t.Mode) until none is left, and returns the thread, the actions
// of every step in order, and whether it moved. It stops at every phase that
// waits for an outside event: a check's outcome, an agent's output or a
// human command. In particular it stops at each human checkpoint and can
// never pass one: quick mode auto-advances to the gates, not through them.
func AutoAdvance(t Thread, mode Mode) (Thread, []Action, bool) {
	var actions []Action
	moved := false
	for range len(Table) { // the automatic rows form no cycle; this bounds a broken table
		ev, ok := AutoEvent(t.Phase.Type, mode)
		if !ok {
			break
		}
		n, acts, err := Next(t, ev)
		if err != nil {
			break
		}
		t, actions, moved = n, append(actions, acts...), true
	}
	return t, actions, moved
}

// Pairs returns the distinct (from, to) edges of the table, sorted.
func Pairs() []string {
	seen := map[string]bool{}
	for _, r := range Table {
		seen[string(r.From)+" -> "+string(r.To)] = true
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
