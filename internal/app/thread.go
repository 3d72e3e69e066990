package app

import (
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/thread"
)

// ThreadSettings are what a thread runner takes from the configuration.
func (a *App) ThreadSettings() thread.Settings {
	cfg := a.cfg
	return thread.Settings{
		Fallbacks:        cfg.Agent.Fallbacks,
		MaxIterations:    cfg.Build.MaxIterations,
		WorktreeRoot:     cfg.Build.WorktreeRoot,
		AgentTimeout:     cfg.Agent.Timeout.Duration,
		AgentIdleTimeout: cfg.Agent.IdleTimeout.Duration,
		MaxLogBytes:      cfg.Agent.MaxLogBytes,
		Budget:           a.budget(),
	}
}

// budget is [budget]: the bound a build's loop, a session and a thread's
// agents keep to.
func (a *App) budget() runkit.Budget {
	b := a.cfg.Budget
	return runkit.Budget{MaxTokens: b.MaxTokens, MaxCost: b.MaxCostUSD, MaxWall: b.MaxWallTime.Duration}
}
