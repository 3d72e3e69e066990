package loop

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/words"
)

// LimitWait is one usage or rate limit met during an iteration.
type LimitWait struct {
	Agent        string    `json:"agent"`
	Message      string    `json:"message"`
	ResetsAt     time.Time `json:"resets_at"`
	Source       string    `json:"source"` // "event" (structured) or "pattern"
	WaitedMillis int64     `json:"waited_ms"`
}

// BreakerConfig sets when the circuit breaker opens and how long it stays
// open before it lets one iteration try (half-open).
type BreakerConfig struct {
	NoProgress        int           `json:"no_progress"`
	SameError         int           `json:"same_error"`
	PermissionDenials int           `json:"permission_denials"`
	Cooldown          time.Duration `json:"cooldown"`
}

// Breaker states.
const (
	BreakerClosed   = "CLOSED"
	BreakerHalfOpen = "HALF_OPEN"
	BreakerOpen     = "OPEN"
)

// Breaker is the circuit breaker's persisted state. It opens on iterations
// that make no progress, repeat the same error or are denied permissions,
// and recovers by itself after a cooldown: unattended runs never need a
// manual reset.
type Breaker struct {
	State      string    `json:"state"`
	Reason     string    `json:"reason,omitempty"`
	OpenedAt   time.Time `json:"opened_at,omitzero"`
	NoProgress int       `json:"no_progress"`
	SameError  int       `json:"same_error"`
	LastError  string    `json:"last_error,omitempty"`
	Denials    int       `json:"permission_denials"`
	Opened     int       `json:"times_opened"`
}

// observe updates the breaker with one finished iteration and reports
// whether it just opened.
func (b *Breaker) observe(cfg BreakerConfig, rec *IterationRecord, now time.Time) bool {
	if b.State == "" {
		b.State = BreakerClosed
	}
	if rec.Progress {
		b.NoProgress = 0
	} else {
		b.NoProgress++
	}
	switch {
	case rec.Reason == "" || rec.Status == StatusDone:
		b.SameError, b.LastError = 0, ""
	case rec.Reason == b.LastError:
		b.SameError++
	default:
		b.SameError, b.LastError = 1, rec.Reason
	}
	if rec.PermissionDenials > 0 {
		b.Denials++
	} else {
		b.Denials = 0
	}
	if b.State == BreakerHalfOpen {
		if rec.Progress {
			*b = Breaker{State: BreakerClosed, Opened: b.Opened}
			return false
		}
		b.open("the half-open trial iteration made no progress either", now)
		return true
	}
	reason := ""
	switch {
	case cfg.NoProgress > 0 && b.NoProgress >= cfg.NoProgress:
		reason = fmt.Sprintf("%s without progress (no commit, no change)", words.Count(b.NoProgress, "iteration", "iterations"))
	case cfg.SameError > 0 && b.SameError >= cfg.SameError:
		reason = fmt.Sprintf("%s with the same error: %s", words.Count(b.SameError, "iteration", "iterations"), clip(b.LastError, 120))
	case cfg.PermissionDenials > 0 && b.Denials >= cfg.PermissionDenials:
		reason = fmt.Sprintf("%s with permission denials", words.Count(b.Denials, "iteration", "iterations"))
	}
	if reason != "" && b.State == BreakerClosed {
		b.open(reason, now)
		return true
	}
	return false
}

func (b *Breaker) open(reason string, now time.Time) {
	b.State, b.Reason, b.OpenedAt = BreakerOpen, reason, now.UTC()
	b.Opened++
}

// rotation returns the agents in the order they are tried.
func (b *builder) rotation() []agent.Spec {
	return append([]agent.Spec{b.opts.Agent}, b.opts.Fallbacks...)
}

// availableAgent returns the first agent of the rotation that is not
// resting after a usage limit, or, when all are, the time the first of them
// is free again. The rests are the home's shared record, read afresh, so an
// agent another run of this workspace found limited is not asked either.
func (b *builder) availableAgent(now time.Time) (agent.Spec, bool, time.Time, error) {
	rot := b.rotation()
	names := make([]string, len(rot))
	for i, s := range rot {
		names[i] = s.Name
	}
	name, ok, free, err := b.home.Cooldowns().Pick(names, now)
	if err != nil || !ok {
		return agent.Spec{}, false, free, b.home.cooldownsErr(err)
	}
	return rot[slices.Index(names, name)], true, time.Time{}, nil
}

// firstFree names the agent of the rotation that is free again at until
// (the earliest reset a limit wait waits for), "" when none is known.
func (b *builder) firstFree(until time.Time) string {
	for _, s := range b.rotation() {
		if t, ok := b.home.Cooldowns().Until(s.Name, b.opts.now()); ok && t.Equal(until) {
			return s.Name
		}
	}
	return ""
}

// coolDown records a limit in the shared record: the agent rests until the
// reset time it gave, or for the configured cooldown. A rest that could
// not be recorded stops the run, since the limited agent would be asked
// again at once.
func (b *builder) coolDown(spec agent.Spec, l *agent.Limit, source string, now time.Time) (LimitWait, error) {
	reset := l.ResetsAt
	if reset.IsZero() || !reset.After(now) {
		d := b.opts.LimitCooldown
		if d <= 0 {
			d = 30 * time.Minute
		}
		reset = now.Add(d)
	}
	msg := l.Message
	if msg == "" {
		msg = l.Kind
	}
	c := b.home.Cooldowns()
	if err := c.Set(spec.Name, reset, clip(msg, 300)); err != nil {
		return LimitWait{}, b.home.cooldownsErr(err)
	}
	// Another run may have recorded a later reset: that one holds.
	if until, ok := c.Until(spec.Name, now); ok {
		reset = until
	}
	b.logError("agent %s hit a usage limit (%s): cooling down until %s", spec.Name, clip(msg, 200), reset.Local().Format("2006-01-02 15:04:05"))
	b.say(report.KindLimit, "", report.Limit{Agent: spec.Name, Until: reset.UTC().Format(time.RFC3339)})
	return LimitWait{Agent: spec.Name, Message: clip(msg, 300), ResetsAt: reset.UTC(), Source: source}, nil
}

// waitUntil sleeps until t, showing a countdown, and returns early with
// ErrInterrupted when ctx is cancelled. The time slept is a wait of the
// given reason (WaitBreaker, WaitLimit) in the metrics, not time in the
// current state: the state's clock (EnteredAt) moves on by as much.
func (b *builder) waitUntil(ctx context.Context, t time.Time, reason, what string) error {
	start := b.opts.now()
	defer b.bookWait(reason, start)
	return runkit.Wait(ctx, t, 0, func(left time.Duration) {
		ms := left.Milliseconds()
		b.say(report.KindWait, fmt.Sprintf("  … %s: %s left (until %s)\n", what, left.Round(time.Second), t.Local().Format("15:04:05")),
			report.Wait{Wait: reason, State: "waiting", LeftMS: &ms, Until: t.UTC().Format(time.RFC3339)})
	})
}

// bookWait books the time since start as a wait of reason, not as time
// in the current state: the state's clock (EnteredAt) moves on by as
// much, and the state is saved, since status reads the waits from it.
func (b *builder) bookWait(reason string, start time.Time) {
	waited := b.opts.now().Sub(start)
	if waited <= 0 {
		return
	}
	m := &b.st.Metrics
	if m.WaitMillis == nil {
		m.WaitMillis = map[string]int64{}
	}
	m.WaitMillis[reason] += waited.Milliseconds()
	m.TotalMillis += waited.Milliseconds()
	b.st.EnteredAt = b.st.EnteredAt.Add(waited)
	b.saveState()
}

// countUsage adds one agent run's time, tokens and cost to the run's
// metrics, which the budget is checked against. Every agent run counts:
// the executor's and the reviewer's.
func (b *builder) countUsage(out agent.Outcome) {
	b.st.Metrics.AgentMillis += out.Duration.Milliseconds()
	b.st.Metrics.Tokens = b.st.Metrics.Tokens.Add(out.Result.Usage)
	cost := 0.0
	if out.Result.CostKnown {
		cost = out.Result.CostUSD
		b.st.Metrics.CostUSD += cost
	}
	if l := b.opts.Ledger; l != nil {
		u := out.Result.Usage
		l.Add(runkit.Spent{Tokens: u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens, CostUSD: cost, Wall: out.Duration})
	}
}

// budgetExceeded says which budget the run has used up, "" for none.
func (b *builder) budgetExceeded() string {
	m := b.st.Metrics
	before := b.opts.SpentBefore
	if l := b.opts.Ledger; l != nil {
		// A parallel build's budget is the sum over its workers: the
		// ledger has this run's usage with every other worker's.
		t := l.Total()
		return b.st.Budget.Exceeded(runkit.Spent{Tokens: before.Tokens + t.Tokens, CostUSD: before.CostUSD + t.CostUSD, Wall: before.Wall + t.Wall})
	}
	return b.st.Budget.Exceeded(runkit.Spent{
		Tokens:  before.Tokens + m.Tokens.InputTokens + m.Tokens.OutputTokens + m.Tokens.CacheReadTokens + m.Tokens.CacheWriteTokens,
		CostUSD: before.CostUSD + m.CostUSD, Wall: before.Wall + time.Duration(m.TotalMillis)*time.Millisecond})
}

// cooldownSummary lists the agents resting after a usage limit, for
// messages.
func (b *builder) cooldownSummary() string {
	return b.home.Cooldowns().Summary(b.opts.now())
}
