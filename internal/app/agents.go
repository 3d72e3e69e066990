package app

import (
	"errors"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/config"
)

// ResolveAgent applies the precedence of the agent a run uses: flag (the
// command line's --agent), then agentCmd (AGENT_CMD), then [agent]
// default, then the registry's default; [agents.NAME] add custom ones.
func ResolveAgent(cfg config.Config, flag, agentCmd string) (agent.Spec, error) {
	spec, _, err := agent.Resolve(agent.Choice{
		Flag:          flag,
		Env:           agentCmd,
		ConfigDefault: cfg.Agent.Default,
		Custom:        CustomAgents(cfg),
	})
	return spec, err
}

// NamedAgent resolves an agent that config names for a role, such as the
// reviewer or a fallback; AGENT_CMD does not apply to it. key names the
// config key, for messages.
func NamedAgent(cfg config.Config, name, key string) (agent.Spec, error) {
	spec, _, err := agent.Resolve(agent.Choice{Flag: name, Custom: CustomAgents(cfg)})
	var ue *agent.UnknownError
	if errors.As(err, &ue) {
		// The name came from config, not from the command line: exit 1.
		ue.Source = key
	}
	return spec, err
}

// CustomAgents are the agents [agents.NAME] defines, by name.
func CustomAgents(cfg config.Config) map[string]agent.Custom {
	custom := map[string]agent.Custom{}
	for name, a := range cfg.Agents {
		custom[name] = agent.Custom{Command: a.Command, Interactive: a.Interactive, Format: a.Format}
	}
	return custom
}

// Checks are the project's checks, [[checks]]; a check without a name is
// called by its command.
func Checks(cfg config.Config) []check.Check {
	out := make([]check.Check, len(cfg.Checks))
	for i, c := range cfg.Checks {
		name := c.Name
		if name == "" {
			name = c.Run
		}
		out[i] = check.Check{Name: name, Kind: c.Kind, Run: c.Run, Timeout: c.Timeout.Duration, Format: c.Format, Report: c.Report}
	}
	return out
}
