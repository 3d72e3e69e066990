package app

import (
	"errors"
	"maps"
	"slices"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
)

// Agent applies the precedence of the agent a run uses: flag (the
// command line's --agent), then AGENT_CMD, then [agent] default, then the
// registry's default; [agents.NAME] add custom ones.
func (a *App) Agent(flag string) (agent.Spec, error) {
	spec, _, err := a.resolve(flag)
	return spec, err
}

func (a *App) resolve(flag string) (agent.Spec, string, error) {
	return agent.Resolve(agent.Choice{
		Flag:          flag,
		Env:           a.getenv("AGENT_CMD"),
		ConfigDefault: a.cfg.Agent.Default,
		Custom:        a.CustomAgents(),
	})
}

// NamedAgent resolves an agent that config names for a role, such as the
// reviewer or a fallback; AGENT_CMD does not apply to it. key names the
// config key, for messages.
func (a *App) NamedAgent(name, key string) (agent.Spec, error) {
	spec, _, err := agent.Resolve(agent.Choice{Flag: name, Custom: a.CustomAgents()})
	var ue *agent.UnknownError
	if errors.As(err, &ue) {
		// The name came from config, not from the command line: exit 1.
		ue.Source = key
	}
	return spec, err
}

// CustomAgents are the agents [agents.NAME] defines, by name.
func (a *App) CustomAgents() map[string]agent.Custom {
	custom := map[string]agent.Custom{}
	for name, c := range a.cfg.Agents {
		custom[name] = agent.Custom{Command: c.Command, Interactive: c.Interactive, Format: c.Format}
	}
	return custom
}

// Checks are the project's checks, [[checks]]; a check without a name is
// called by its command.
func (a *App) Checks() []check.Check {
	out := make([]check.Check, len(a.cfg.Checks))
	for i, c := range a.cfg.Checks {
		name := c.Name
		if name == "" {
			name = c.Run
		}
		out[i] = check.Check{Name: name, Kind: c.Kind, Run: c.Run, Timeout: c.Timeout.Duration, Format: c.Format, Report: c.Report}
	}
	return out
}

// UsedAgent is an agent the configuration uses, with the roles it has
// ("build agent (config)", "reviewer", "[agents.NAME]", "built-in"), or
// one that could not be resolved: then Problem says why.
type UsedAgent struct {
	Spec    agent.Spec
	Roles   []string
	Problem string
}

// UsedAgents lists the agents `ralph doctor` checks, in its report's
// order: the build agent (flag is --agent), the reviewer, the config's
// agents by name, then (with all) the remaining built-ins in table order.
// An agent reached in several ways is listed once, with all its roles. An
// unknown --agent is the one error: the command line is wrong.
func (a *App) UsedAgents(flag string, all bool) ([]UsedAgent, error) {
	var used []UsedAgent
	add := func(s agent.Spec, role string) {
		for i := range used {
			u := &used[i]
			if u.Spec.Name == s.Name && slices.Equal(u.Spec.Headless, s.Headless) {
				if !slices.Contains(u.Roles, role) {
					u.Roles = append(u.Roles, role)
				}
				return
			}
		}
		used = append(used, UsedAgent{Spec: s, Roles: []string{role}})
	}
	failed := func(name, role, problem string) {
		used = append(used, UsedAgent{Spec: agent.Spec{Name: name}, Roles: []string{role}, Problem: problem})
	}

	spec, source, err := a.resolve(flag)
	role := "build agent (" + source + ")"
	var unknown *agent.UnknownError
	switch {
	case err == nil:
		add(spec, role)
	case errors.As(err, &unknown) && unknown.Source == "--agent":
		return nil, err
	case errors.As(err, &unknown):
		failed(unknown.Name, role, unknown.Name+": "+err.Error())
	default:
		failed(source, role, source+": "+err.Error())
	}

	if r := a.cfg.Validate.Reviewer; r != "" {
		if s, err := a.NamedAgent(r, "[validate] reviewer"); err == nil {
			add(s, "reviewer")
		} else {
			failed(r, "reviewer", r+": "+err.Error())
		}
	}

	custom := a.CustomAgents()
	for _, n := range slices.Sorted(maps.Keys(custom)) {
		if s, err := a.NamedAgent(n, "[agents."+n+"]"); err == nil {
			add(s, "[agents."+n+"]")
		} else {
			failed(n, "[agents."+n+"]", n+": "+err.Error())
		}
	}

	if all {
		for _, b := range agent.Builtins() {
			// A config table named like a built-in replaces it.
			if _, ok := custom[b.Name]; ok {
				continue
			}
			add(b, "built-in")
		}
	}
	return used, nil
}
