package app

import (
	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Roles are the agents config gives a run besides its own: the reviewer
// ([validate] reviewer; nil when none) and the fallbacks tried at a usage
// limit ([agent] fallbacks, leaving out main, the run's own agent). A name
// the registry does not know is an error naming its key.
func Roles(cfg config.Config, main agent.Spec) (reviewer *agent.Spec, fallbacks []agent.Spec, err error) {
	if cfg.Validate.Reviewer != "" {
		r, err := NamedAgent(cfg, cfg.Validate.Reviewer, "[validate] reviewer")
		if err != nil {
			return nil, nil, err
		}
		reviewer = &r
	}
	for _, name := range cfg.Agent.Fallbacks {
		f, err := NamedAgent(cfg, name, "[agent] fallbacks")
		if err != nil {
			return nil, nil, err
		}
		if f.Name != main.Name {
			fallbacks = append(fallbacks, f)
		}
	}
	return reviewer, fallbacks, nil
}

// LoopOptions are the loop's options as config sets them for a build of
// ws: the PRD, the plan, the checks, the agents' bounds, retries,
// context, budget, breaker and verification. The command adds what its
// flags and its run decide (the agent, the roles, the source, memory,
// the iterations, the sink) and may override these.
func LoopOptions(ws *workspace.Workspace, cfg config.Config) loop.Options {
	return loop.Options{
		MaxIterations: max(cfg.Build.MaxIterations, 1),
		PRDPath:       ws.Abs(cfg.Build.PRD),
		PlanPath:      ws.Abs(cfg.Build.Plan),
		NoCommit:      cfg.Build.NoCommit,
		RequirePlan:   cfg.Build.RequirePlan,
		AgentTimeout:  cfg.Agent.Timeout.Duration,
		Checks:        Checks(cfg),
		MaxRetries:    cfg.Loop.MaxRetries,
		ContextSoft:   cfg.Loop.ContextSoft,
		ContextHard:   cfg.Loop.ContextHard,
		LimitCooldown: cfg.Agent.LimitCooldown.Duration,
		LimitPatterns: cfg.Agent.LimitPatterns,
		IdleTimeout:   cfg.Agent.IdleTimeout.Duration,
		MaxLogBytes:   cfg.Agent.MaxLogBytes,
		Budget:        Budget(cfg),
		Breaker: loop.BreakerConfig{NoProgress: cfg.Breaker.NoProgress, SameError: cfg.Breaker.SameError,
			PermissionDenials: cfg.Breaker.PermissionDenials, Cooldown: cfg.Breaker.Cooldown.Duration},
		OnFailingBaseline: cfg.Build.OnFailingBaseline,
		RequireEvidence:   cfg.Verify.RequireEvidence,
		RedGreen:          cfg.Verify.RedGreen,
		Protected:         cfg.Verify.Protected,
	}
}
