package config

import (
	"fmt"
	"path"
	"strings"

	"github.com/ralphloop/ralph/internal/sandbox"
)

// SandboxSection confines the agents ralph starts (internal/sandbox).
type SandboxSection struct {
	// Mode is "off", "bwrap" (fail when bubblewrap cannot start here) or
	// "auto" (bubblewrap when it works, else a warning and no sandbox).
	// The default is "off": a sandbox hides the home, so an agent that
	// keeps its login, its git identity or its own install there changes
	// behaviour, and the network allow list is not built yet; a person
	// turns it on knowing that (`--sandbox` overrides it per command).
	Mode string `toml:"mode"`
	// Network is "open" (the host's network; the filesystem limits stay)
	// or "none". The default is "open" until the allow-list proxy that
	// lets an agent reach only its model exists: with "none" no agent
	// reaches its model. "proxy" is refused until then.
	Network string `toml:"network"`
	// Writable and Readable add paths (absolute, or "~/..." in the home)
	// to what the agent may write or read.
	Writable []string `toml:"writable"`
	Readable []string `toml:"readable"`
	// Env names more variables passed into the sandbox, besides PATH,
	// HOME, LANG, TERM and the agent's own credential variables.
	Env []string `toml:"env"`
	// AllowHosts are hosts the agent may reach besides its API hosts,
	// for the allow-list proxy (not built yet).
	AllowHosts []string `toml:"allow_hosts"`
	// Checks runs ralph's checks in the agents' sandbox too, whenever
	// the agents run in one (default true): a test suite is code the
	// agent could write.
	Checks bool `toml:"checks"`
}

// DefaultSandbox is [sandbox] when the file says nothing.
func DefaultSandbox() SandboxSection {
	return SandboxSection{Mode: string(sandbox.Off), Network: string(sandbox.NetOpen), Checks: true}
}

func (s SandboxSection) validate() error {
	if _, err := sandbox.ParseMode(s.Mode); err != nil {
		return fmt.Errorf("[sandbox] mode = %q: use off, bwrap or auto", s.Mode)
	}
	switch n, err := sandbox.ParseNetwork(s.Network); {
	case err != nil:
		return fmt.Errorf("[sandbox] network = %q: use open or none", s.Network)
	case n == sandbox.NetProxy:
		return fmt.Errorf("[sandbox] network = %q: the allow-list proxy is not built yet; use open or none", s.Network)
	}
	for key, paths := range map[string][]string{"writable": s.Writable, "readable": s.Readable} {
		for _, p := range paths {
			if !path.IsAbs(p) && !strings.HasPrefix(p, "~/") {
				return fmt.Errorf("[sandbox] %s = [%q]: give an absolute path or one in the home, like \"~/.cache/go-build\"", key, p)
			}
		}
	}
	for _, name := range s.Env {
		if name == "" || strings.ContainsAny(name, "= ") {
			return fmt.Errorf("[sandbox] env = [%q]: list names of environment variables, not their values", name)
		}
	}
	for _, h := range s.AllowHosts {
		if h == "" || strings.ContainsAny(h, "/: ") {
			return fmt.Errorf("[sandbox] allow_hosts = [%q]: give host names, like \"registry.npmjs.org\", without a scheme, port or path", h)
		}
	}
	return nil
}
