package cli

import (
	"context"
	"errors"
	"strconv"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// openWorkspace finds the repository around the working directory and
// reads its configuration.
func openWorkspace(ctx context.Context, env *Env) (*workspace.Workspace, config.Config, error) {
	wd, err := env.WorkDir()
	if err != nil {
		return nil, config.Config{}, err
	}
	ws, err := workspace.Open(ctx, wd)
	if err != nil {
		return nil, config.Config{}, err
	}
	cfg, err := ws.LoadConfig()
	// Every log, record and prompt masks the variables config names too.
	redact.AddNames(cfg.Security.Redact...)
	// Agents never see the notification secret: with it they could sign
	// notifications ralph never sent.
	agent.StripEnv(cfg.Notify.SecretEnv)
	return ws, cfg, err
}

// resolveAgent applies the precedence: --agent, then AGENT_CMD, then
// config, then the default.
func resolveAgent(env *Env, cfg config.Config, flag string) (agent.Spec, error) {
	spec, _, err := agent.Resolve(agent.Choice{
		Flag:          flag,
		Env:           env.Getenv("AGENT_CMD"),
		ConfigDefault: cfg.Agent.Default,
		Custom:        customAgents(cfg),
	})
	return spec, err
}

// namedAgent resolves an agent that config names for a role, such as the
// reviewer or a fallback; AGENT_CMD does not apply to it. key names the
// config key for messages.
func namedAgent(cfg config.Config, name, key string) (agent.Spec, error) {
	spec, _, err := agent.Resolve(agent.Choice{Flag: name, Custom: customAgents(cfg)})
	var ue *agent.UnknownError
	if errors.As(err, &ue) {
		// The name came from config, not from the command line: exit 1.
		ue.Source = key
	}
	return spec, err
}

func customAgents(cfg config.Config) map[string]agent.Custom {
	custom := map[string]agent.Custom{}
	for name, a := range cfg.Agents {
		custom[name] = agent.Custom{Command: a.Command, Interactive: a.Interactive, Format: a.Format}
	}
	return custom
}

func checksFromConfig(cfg config.Config) []check.Check {
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

// iterationsArg reads the iteration limit of build and plan: the [N]
// argument or --max-iterations N, the name thread start uses for it;
// 0 when neither is given.
func iterationsArg(cmd *cobra.Command, args []string) (int, error) {
	n, err := parseIterations(args, 0)
	if err != nil || !cmd.Flags().Changed("max-iterations") {
		return n, err
	}
	m, _ := cmd.Flags().GetInt("max-iterations")
	switch {
	case m < 1:
		return 0, usageErrorf("--max-iterations must be a whole number of at least 1, got %d", m)
	case len(args) > 0 && n != m:
		return 0, usageErrorf("N (%d) and --max-iterations (%d) are the same limit: give one", n, m)
	}
	return m, nil
}

// parseIterations reads the optional [N] argument.
func parseIterations(args []string, def int) (int, error) {
	if len(args) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return 0, usageErrorf("iterations must be a whole number of at least 1, got %q", args[0])
	}
	return n, nil
}
