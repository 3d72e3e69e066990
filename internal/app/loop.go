package app

import (
	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
)

// Roles are the agents config gives a run besides its own: the reviewer
// ([validate] reviewer; nil when none) and the fallbacks tried at a usage
// limit ([agent] fallbacks, leaving out main, the run's own agent). A name
// the registry does not know is an error naming its key.
func (a *App) Roles(main agent.Spec) (reviewer *agent.Spec, fallbacks []agent.Spec, err error) {
	if name := a.cfg.Validate.Reviewer; name != "" {
		r, err := a.NamedAgent(name, "[validate] reviewer")
		if err != nil {
			return nil, nil, err
		}
		reviewer = &r
	}
	for _, name := range a.cfg.Agent.Fallbacks {
		f, err := a.NamedAgent(name, "[agent] fallbacks")
		if err != nil {
			return nil, nil, err
		}
		if f.Name != main.Name {
			fallbacks = append(fallbacks, f)
		}
	}
	return reviewer, fallbacks, nil
}

// LoopOptions are the loop's options as config sets them for a build (or,
// planning, a plan) of the workspace: the PRD, the plan, the checks, the
// agents' bounds, retries, context, budget, breaker and verification.
// The command adds what its flags and its run decide (the agent, the
// roles, the source, memory, the iterations, the sink) and may override
// these.
func (a *App) LoopOptions(planning bool) loop.Options {
	cfg, ws := a.cfg, a.WS
	iterations := cfg.Build.MaxIterations
	if planning {
		iterations = cfg.Plan.MaxIterations
	}
	return loop.Options{
		MaxIterations: max(iterations, 1),
		PRDPath:       ws.Abs(cfg.Build.PRD),
		PlanPath:      ws.Abs(cfg.Build.Plan),
		NoCommit:      cfg.Build.NoCommit,
		RequirePlan:   cfg.Build.RequirePlan,
		AgentTimeout:  cfg.Agent.Timeout.Duration,
		Checks:        a.Checks(),
		MaxRetries:    cfg.Loop.MaxRetries,
		ContextSoft:   cfg.Loop.ContextSoft,
		ContextHard:   cfg.Loop.ContextHard,
		LimitCooldown: cfg.Agent.LimitCooldown.Duration,
		LimitPatterns: cfg.Agent.LimitPatterns,
		IdleTimeout:   cfg.Agent.IdleTimeout.Duration,
		MaxLogBytes:   cfg.Agent.MaxLogBytes,
		Budget:        a.budget(),
		Breaker: loop.BreakerConfig{NoProgress: cfg.Breaker.NoProgress, SameError: cfg.Breaker.SameError,
			PermissionDenials: cfg.Breaker.PermissionDenials, Cooldown: cfg.Breaker.Cooldown.Duration},
		OnFailingBaseline: cfg.Build.OnFailingBaseline,
		RequireEvidence:   cfg.Verify.RequireEvidence,
		RedGreen:          cfg.Verify.RedGreen,
		Protected:         cfg.Verify.Protected,
	}
}
