package runkit

import (
	"fmt"
	"time"
)

// Budget bounds what a run spends across resumes. It is persisted with the
// run, so a resumed run honours the budget it started with. Zero fields
// are no bound.
type Budget struct {
	MaxTokens int64         `json:"max_tokens,omitempty"`
	MaxCost   float64       `json:"max_cost_usd,omitempty"`
	MaxWall   time.Duration `json:"max_wall_time,omitempty"`
}

// Spent is what a run has used so far: the tokens and estimated cost of
// every agent run of every role (executor, reviewer, planner, spec
// agents), and its wall time.
type Spent struct {
	Tokens  int64
	CostUSD float64
	Wall    time.Duration
}

// Exceeded names the first limit of b that spent has reached, in the words
// of the config key, "" when none: one judgement for every machine.
func (b Budget) Exceeded(s Spent) string {
	switch {
	case b.MaxTokens > 0 && s.Tokens >= b.MaxTokens:
		return fmt.Sprintf("max_tokens (%d of %d tokens used)", s.Tokens, b.MaxTokens)
	case b.MaxCost > 0 && s.CostUSD >= b.MaxCost:
		return fmt.Sprintf("max_cost_usd (estimated %s of %s)", dollars(s.CostUSD), dollars(b.MaxCost))
	case b.MaxWall > 0 && s.Wall >= b.MaxWall:
		return fmt.Sprintf("max_wall_time (%s of %s)", s.Wall.Round(time.Second), b.MaxWall)
	}
	return ""
}

// dollars writes an amount with cents, and with four decimals below a
// dollar, so that a small budget never reads "$0.00 of $0.00".
func dollars(v float64) string {
	if v < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}
