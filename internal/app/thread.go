package app

import (
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/thread"
)

// ThreadSettings are what a thread runner takes from the configuration.
func ThreadSettings(cfg config.Config) thread.Settings {
	return thread.Settings{
		Fallbacks:        cfg.Agent.Fallbacks,
		MaxIterations:    cfg.Build.MaxIterations,
		WorktreeRoot:     cfg.Build.WorktreeRoot,
		AgentTimeout:     cfg.Agent.Timeout.Duration,
		AgentIdleTimeout: cfg.Agent.IdleTimeout.Duration,
		MaxLogBytes:      cfg.Agent.MaxLogBytes,
		Budget:           Budget(cfg),
	}
}

// Budget is [budget]: the bound a build's loop and a thread's agents
// keep to.
func Budget(cfg config.Config) runkit.Budget {
	b := cfg.Budget
	return runkit.Budget{MaxTokens: b.MaxTokens, MaxCost: b.MaxCostUSD, MaxWall: b.MaxWallTime.Duration}
}
