package app

import (
	"fmt"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/workspace"
)

// SessionRoles resolves each session role's agent: [roles.NAME] agent
// and model, else base (the run's agent). Every agent must be installed.
func SessionRoles(cfg config.Config, base agent.Spec) (map[string]agent.Spec, error) {
	specs := map[string]agent.Spec{}
	for _, name := range config.RoleNames {
		spec := base
		rc := cfg.Roles[name]
		if rc.Agent != "" {
			var err error
			if spec, err = NamedAgent(cfg, rc.Agent, "[roles."+name+"] agent"); err != nil {
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
func SessionRunner(ws *workspace.Workspace, dir string, cfg config.Config) *session.Runner {
	s := cfg.Session
	return &session.Runner{
		WS: ws, Dir: dir, Checks: Checks(cfg),
		Policy: session.Policy{MaxTaskAttempts: s.MaxTaskAttempts, MaxQACycles: s.MaxQACycles,
			MaxPlanningRetries: s.MaxPlanningRetries, MaxGoalChecks: s.MaxGoalChecks},
		Backoff: s.RetryBackoff.Duration, MaxAgentRetries: s.AgentRetries, MaxTasks: s.MaxTasks,
		Budget: Budget(cfg),
	}
}
