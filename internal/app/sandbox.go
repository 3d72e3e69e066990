package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/sandbox"
)

// Sandbox is the sandbox policy for a run's agents: [sandbox], with its
// mode replaced by flag (--sandbox; "" keeps config's). A nil policy runs
// the agents as the user; warning is set when mode auto found that the
// sandbox cannot start here. Mode bwrap that cannot start is an error,
// returned before the run changes anything. The policy names no work
// tree: each agent run is confined to its own (the checkout, a worker's
// worktree).
func (a *App) Sandbox(ctx context.Context, flag sandbox.Mode) (p *sandbox.Policy, warning string, err error) {
	sc := a.cfg.Sandbox
	mode, from := sandbox.Mode(sc.Mode), "[sandbox] mode"
	if flag != "" {
		mode, from = flag, "--sandbox"
	}
	if mode == sandbox.Off {
		return nil, "", nil
	}
	// bwrap and auto mean the OS's sandbox: bubblewrap on Linux,
	// sandbox-exec on macOS, so that one config serves both; Probe says
	// plainly that Windows has none.
	if err = sandbox.Probe(ctx); err != nil {
		if mode == sandbox.Auto {
			return nil, fmt.Sprintf("ralph: agents run without a sandbox (%s auto): %v", from, err), nil
		}
		return nil, "", fmt.Errorf("%s %s: %w; or run with --sandbox off", from, mode, err)
	}
	home, _ := os.UserHomeDir()
	return &sandbox.Policy{
		Network:  sandbox.Network(sc.Network),
		Allow:    sc.AllowHosts,
		Env:      sc.Env,
		Writable: inHome(sc.Writable, home),
		Readable: inHome(sc.Readable, home),
		Set:      a.commitIdentity(ctx),
	}, "", nil
}

// Checker is the port every runner runs ralph's checks through: inside
// box, the agents' own policy, when box is set and [sandbox] checks is on
// (the default), so that a test suite the agent wrote reaches no more
// than the agent could; otherwise as the user.
func (a *App) Checker(box *sandbox.Policy) runkit.CheckPort {
	if box == nil || !a.cfg.Sandbox.Checks {
		return runkit.ExecChecks{}
	}
	return runkit.ExecChecks{Sandbox: box}
}

// commitIdentity is who git outside says makes a commit in the workspace,
// as GIT_AUTHOR_* and GIT_COMMITTER_* settings (only those it knows). The
// sandbox hides ~/.gitconfig, where the identity usually is, so an
// agent's own commits inside would have none, or one made up from the
// host's names. Only the names and emails cross, never the rest of the
// user's git configuration, which may hold credential helpers.
func (a *App) commitIdentity(ctx context.Context) []string {
	if a.WS == nil {
		return nil
	}
	// Nothing configured is no error: git inside says what is missing.
	out, _ := a.WS.Repo.Runner.Git(ctx, a.WS.Root, "config", "--get-regexp", `^(user|author|committer)\.(name|email)$`)
	cfg := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if key, value, ok := strings.Cut(line, " "); ok {
			cfg[key] = value // the last one wins, as in git
		}
	}
	var set []string
	for _, role := range []string{"author", "committer"} {
		for _, field := range []string{"name", "email"} {
			name := "GIT_" + strings.ToUpper(role) + "_" + strings.ToUpper(field)
			// git's own order: the variable, then author.* or
			// committer.*, then user.*.
			v := a.getenv(name)
			if v == "" {
				v = cfg[role+"."+field]
			}
			if v == "" {
				v = cfg["user."+field]
			}
			if v != "" {
				set = append(set, name+"="+v)
			}
		}
	}
	return set
}

// inHome turns "~/x" into a path in home.
func inHome(paths []string, home string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			p = filepath.Join(home, rest)
		}
		out[i] = p
	}
	return out
}

// SandboxMode is [sandbox] mode.
func (a *App) SandboxMode() sandbox.Mode { return sandbox.Mode(a.cfg.Sandbox.Mode) }
