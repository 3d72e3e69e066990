package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
		Env:      sc.Env,
		Writable: inHome(sc.Writable, home),
		Readable: inHome(sc.Readable, home),
	}, "", nil
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
