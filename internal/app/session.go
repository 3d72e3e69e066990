package app

import (
	"fmt"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/session"
)

// RoleNames are a session's roles, in the order they work.
var RoleNames = config.RoleNames

// SessionRoles resolves each session role's agent: [roles.NAME] agent
// and model, else the run's agent (flag is --agent: Agent's precedence).
// Every agent must be installed.
func (a *App) SessionRoles(flag string) (map[string]agent.Spec, error) {
	base, err := a.Agent(flag)
	if err != nil {
		return nil, err
	}
	specs := map[string]agent.Spec{}
	for _, name := range config.RoleNames {
		spec := base
		rc := a.cfg.Roles[name]
		if rc.Agent != "" {
			var err error
			if spec, err = a.NamedAgent(rc.Agent, "[roles."+name+"] agent"); err != nil {
				return nil, err
			}
		}
		spec, err := agent.WithModel(spec, rc.Model)
		if err != nil {
			return nil, fmt.Errorf("[roles.%s] model: %w", name, err)
		}
		argv, _ := agent.Argv(spec.Headless, "prompt.md")
		if err := agent.CheckInstalled(spec, argv); err != nil {
			return nil, fmt.Errorf("the %s's agent: %w", name, err)
		}
		specs[name] = spec
	}
	return specs, nil
}

// SessionRunner is the runner of the session in dir with what config
// sets ([session], [budget], [[checks]]); the command adds the invoker,
// the events, the control and the limit wait.
func (a *App) SessionRunner(dir string) *session.Runner {
	s := a.cfg.Session
	return &session.Runner{
		WS: a.WS, Dir: dir, Checks: a.Checks(),
		Policy: session.Policy{MaxTaskAttempts: s.MaxTaskAttempts, MaxQACycles: s.MaxQACycles,
			MaxPlanningRetries: s.MaxPlanningRetries, MaxGoalChecks: s.MaxGoalChecks},
		Backoff: s.RetryBackoff.Duration, MaxAgentRetries: s.AgentRetries, MaxTasks: s.MaxTasks,
		Budget: a.budget(),
	}
}

// Attempt is at bounded as [agent] says: its timeouts, its log's size
// and the patterns that tell a usage limit.
func (a *App) Attempt(at runkit.Attempt) runkit.Attempt {
	ag := a.cfg.Agent
	at.Timeout, at.IdleTimeout, at.MaxLogBytes, at.LimitPatterns = ag.Timeout.Duration, ag.IdleTimeout.Duration, ag.MaxLogBytes, ag.LimitPatterns
	return at
}

// LimitCooldown is the wait at a usage limit that names no reset time.
func (a *App) LimitCooldown() time.Duration { return a.cfg.Agent.LimitCooldown.Duration }
