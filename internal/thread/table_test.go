package thread

import (
	"strings"
	"testing"
)

// rowBefore is a row of the thread machine as it was written before the
// table was a machine.Table.
type rowBefore struct {
	From            Phase
	Verb            Verb
	To              Phase
	Actor           Actor
	Checkpoint      Checkpoint
	Auto            Auto
	ResetsWorkspace bool
	Label           string
}

// tableBefore is that table: the rows Table must still hold, in order.
var tableBefore = []rowBefore{
	// 1. Spec creation.
	{PhaseDrafting, VerbAssess, PhaseAssessing, ActorHuman, CheckpointNone, AutoNever, false, "request review"},
	{PhaseAssessing, VerbRevise, PhaseDrafting, ActorAgent, CheckpointNone, AutoNever, false, "revise needed"},
	{PhaseAssessing, VerbFinalize, PhaseFinalized, ActorHuman, CheckpointFinalize, AutoNever, false, "human approves"},
	{PhaseDrafting, VerbFinalize, PhaseFinalized, ActorHuman, CheckpointFinalize, AutoNever, false, "human approves (skip assess)"},
	{PhaseFinalized, VerbReopen, PhaseDrafting, ActorHuman, CheckpointNone, AutoNever, false, "reopen spec"},

	// 2. Implementation.
	{PhasePreflight, VerbChecksPass, PhaseConfiguring, ActorSystem, CheckpointNone, AutoNever, false, "checks pass"},
	{PhasePreflight, VerbChecksFail, PhasePreflightFailed, ActorSystem, CheckpointNone, AutoNever, false, "checks fail"},
	{PhasePreflightFailed, VerbRetry, PhasePreflight, ActorHuman, CheckpointNone, AutoNever, false, "retry"},
	{PhasePreflightFailed, VerbFixSpec, PhaseDrafting, ActorHuman, CheckpointNone, AutoNever, false, "fix spec"},
	{PhaseConfiguring, VerbStart, PhaseRunning, ActorSystem, CheckpointNone, AutoQuick, false, "start loop"},
	{PhaseRunning, VerbClaimDone, PhaseVerifying, ActorAgent, CheckpointNone, AutoNever, false, "model claims done"},
	{PhaseRunning, VerbInterrupt, PhasePaused, ActorHuman, CheckpointNone, AutoNever, false, "user interrupt"},
	// Not in the seed's diagram, which shows only the work's own endings:
	// the loop can also stop on something outside the work (an agent that
	// cannot run, git history changed under it, a broken task file). That
	// is no failed attempt, so not Stuck; the thread waits where the
	// person can fix it and resume, as after an interrupt.
	{PhaseRunning, VerbLoopFailed, PhasePaused, ActorSystem, CheckpointNone, AutoNever, false, "the loop failed (fix it, then resume)"},
	{PhasePaused, VerbResume, PhaseRunning, ActorHuman, CheckpointNone, AutoNever, false, "resume"},
	{PhasePaused, VerbReconfigure, PhaseConfiguring, ActorHuman, CheckpointNone, AutoNever, false, "reconfigure"},
	{PhaseVerifying, VerbCriteriaFailed, PhaseRunning, ActorSystem, CheckpointNone, AutoNever, false, "criteria failed, iterations remain"},
	{PhaseRunning, VerbStuck, PhaseStuck, ActorSystem, CheckpointNone, AutoNever, false, "max iterations or all models exhausted"},
	{PhaseVerifying, VerbStuck, PhaseStuck, ActorSystem, CheckpointNone, AutoNever, false, "criteria failed, no iterations remain"},
	{PhaseStuck, VerbReconfigure, PhaseConfiguring, ActorHuman, CheckpointStuck, AutoNever, false, "reconfigure"},
	{PhaseStuck, VerbAssist, PhaseRunning, ActorHuman, CheckpointStuck, AutoNever, false, "manual assist"},
	{PhaseVerifying, VerbCriteriaPassed, PhaseImplemented, ActorSystem, CheckpointNone, AutoNever, false, "all criteria pass"},

	// 3. Polish.
	{PhasePolishing, VerbPolishDone, PhaseImplemented, ActorAgent, CheckpointNone, AutoNever, false, "polish done"},
	{PhaseImplemented, VerbPolish, PhasePolishing, ActorHuman, CheckpointNone, AutoNever, false, "add docs/tests"},

	// 4. Review.
	{PhasePendingReview, VerbApprove, PhaseApproved, ActorHuman, CheckpointApprove, AutoNever, false, "human approves"},

	// 5. Complete.
	{PhaseReadyToCommit, VerbCommit, PhaseDone, ActorHuman, CheckpointCommit, AutoNever, false, "human commits"},

	// Forward between stages.
	{PhaseFinalized, VerbImplement, PhasePreflight, ActorSystem, CheckpointNone, AutoQuick, false, "begin implementation"},
	{PhaseImplemented, VerbSubmit, PhasePendingReview, ActorSystem, CheckpointNone, AutoQuick, false, "ready for review"},
	{PhaseApproved, VerbPrepareCommit, PhaseReadyToCommit, ActorSystem, CheckpointNone, AutoAlways, false, "prepare commit"},

	// Backward.
	{PhaseStuck, VerbReviseSpec, PhaseDrafting, ActorHuman, CheckpointStuck, AutoNever, true, "spec was wrong"},
	{PhasePendingReview, VerbRequestChanges, PhaseRunning, ActorHuman, CheckpointNone, AutoNever, false, "implementation bugs"},
	{PhasePendingReview, VerbReviseSpec, PhaseDrafting, ActorHuman, CheckpointNone, AutoNever, true, "spec was wrong"},

	// Abandon, from every non-terminal phase. Abandoning a stuck thread is
	// one of the Handle Stuck decisions.
	{PhaseDrafting, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseAssessing, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseFinalized, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhasePreflight, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhasePreflightFailed, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseConfiguring, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseRunning, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhasePaused, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseVerifying, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseStuck, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointStuck, AutoNever, false, "abandon"},
	{PhaseImplemented, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhasePolishing, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhasePendingReview, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseApproved, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
	{PhaseReadyToCommit, VerbAbandon, PhaseAbandoned, ActorHuman, CheckpointNone, AutoNever, false, "abandon"},
}

// TestEveryRowIsTheOneBefore walks the table: each row leads where it
// led, with the same actor, checkpoint, automation, reset and label, and
// Lookup finds it.
func TestEveryRowIsTheOneBefore(t *testing.T) {
	if len(Table) != len(tableBefore) {
		t.Fatalf("%d rows, %d before", len(Table), len(tableBefore))
	}
	for i, r := range Table {
		b := tableBefore[i]
		got := rowBefore{r.From, r.On, r.To, r.With.Actor, r.With.Checkpoint, r.With.Auto, r.With.ResetsWorkspace, r.Label}
		if got != b || r.Guard != "" || r.Do != nil {
			t.Errorf("row %d: %+v (guard %q, actions %v); before: %+v", i, got, r.Guard, r.Do, b)
		}
		if l, ok := Lookup(b.From, b.Verb); !ok || l.To != b.To {
			t.Errorf("Lookup(%s, %s) = %v, %v; before it led to %s", b.From, b.Verb, l.To, ok, b.To)
		}
	}
}

// TestTableHasNoDeadRows: every phase is reached from Drafting and no
// (phase, verb) is defined twice.
func TestTableHasNoDeadRows(t *testing.T) {
	if u := Table.Unreachable(PhaseDrafting, Phases); u != nil {
		t.Errorf("phases no row reaches from Drafting: %v", u)
	}
	if d := Table.Duplicates(); d != nil {
		t.Errorf("rows defined twice:\n%s", strings.Join(d, "\n"))
	}
}
