package loop

import (
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/runkit"
)

func TestBreakerOpensOnNoProgressAndRecoversHalfOpen(t *testing.T) {
	cfg := BreakerConfig{NoProgress: 2, SameError: 3, PermissionDenials: 3, Cooldown: time.Minute}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var b Breaker
	if b.observe(cfg, &IterationRecord{Status: StatusNoChanges, Reason: "a"}, now) {
		t.Fatal("opened after one iteration without progress")
	}
	if !b.observe(cfg, &IterationRecord{Status: StatusNoChanges, Reason: "b"}, now) || b.State != BreakerOpen {
		t.Fatalf("did not open after two: %+v", b)
	}
	b.State = BreakerHalfOpen // what the gate does after the cooldown
	if b.observe(cfg, &IterationRecord{Status: StatusNoChanges}, now) == false || b.State != BreakerOpen || b.Opened != 2 {
		t.Fatalf("a failed half-open trial must reopen: %+v", b)
	}
	b.State = BreakerHalfOpen
	b.observe(cfg, &IterationRecord{Status: StatusDone, Progress: true}, now)
	if b.State != BreakerClosed || b.NoProgress != 0 {
		t.Fatalf("progress in half-open must close: %+v", b)
	}
}

// An agent that commits its own work is making progress (frankbria #141).
func TestBreakerCountsCommitsAsProgress(t *testing.T) {
	cfg := BreakerConfig{NoProgress: 2}
	var b Breaker
	for i := 0; i < 5; i++ {
		if b.observe(cfg, &IterationRecord{Status: StatusTestsFailed, Reason: "x", Progress: true}, time.Now()) {
			t.Fatal("opened although every iteration changed something")
		}
	}
}

func TestBreakerSameErrorAndDenials(t *testing.T) {
	var b Breaker
	cfg := BreakerConfig{SameError: 3}
	for i := 0; i < 2; i++ {
		b.observe(cfg, &IterationRecord{Status: StatusTestsFailed, Reason: "tests failed: x", Progress: true}, time.Now())
	}
	if !b.observe(cfg, &IterationRecord{Status: StatusTestsFailed, Reason: "tests failed: x", Progress: true}, time.Now()) {
		t.Fatalf("same error three times did not open: %+v", b)
	}
	var d Breaker
	cfgD := BreakerConfig{PermissionDenials: 2}
	d.observe(cfgD, &IterationRecord{PermissionDenials: 1, Progress: true}, time.Now())
	if !d.observe(cfgD, &IterationRecord{PermissionDenials: 4, Progress: true}, time.Now()) {
		t.Fatalf("repeated permission denials did not open: %+v", d)
	}
}

// Patterns are read only from the final message and reported errors: a
// limit mentioned in tool output or code never counts.
func TestBudgetExceededSaysWhich(t *testing.T) {
	b := &builder{run: &run{}, st: &LoopState{}}
	b.st.Budget = runkit.Budget{MaxTokens: 1000}
	b.st.Metrics.Tokens = agent.Usage{InputTokens: 900, OutputTokens: 200}
	if got := b.budgetExceeded(); got != "max_tokens (1100 of 1000 tokens used)" {
		t.Fatalf("got %q", got)
	}
	b.st.Budget = runkit.Budget{MaxCost: 1}
	b.st.Metrics.CostUSD = 0.5
	if got := b.budgetExceeded(); got != "" {
		t.Fatalf("under budget reported %q", got)
	}
	b.st.Budget = runkit.Budget{MaxWall: time.Minute}
	b.st.Metrics.TotalMillis = 61000
	if got := b.budgetExceeded(); got != "max_wall_time (1m1s of 1m0s)" {
		t.Fatalf("got %q", got)
	}
}
