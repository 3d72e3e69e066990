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
	// The default is "off": a sandbox hides the home and limits the
	// network to the agent's API hosts, for the checks too, so an agent or
	// a test suite that relies on something under the home (a login kept
	// elsewhere, a tool, a module cache) or on other hosts fails inside
	// until it is named; turned on silently, that breaks a night's run. A
	// person turns it on knowing that (`--sandbox` overrides it per
	// command).
	Mode string `toml:"mode"`
	// Network is "proxy" (the default: only the agent's API hosts and
	// AllowHosts, through ralph's allow-list proxy, which reports every
	// other try), "none" (no network at all: no agent reaches its model)
	// or "open" (the host's network; the filesystem limits stay).
	Network string `toml:"network"`
	// Writable and Readable add paths (absolute, or "~/..." in the home)
	// to what the agent may write or read.
	Writable []string `toml:"writable"`
	Readable []string `toml:"readable"`
	// Env names more variables passed into the sandbox, besides PATH,
	// HOME, LANG, TERM and the agent's own credential variables.
	Env []string `toml:"env"`
	// AllowHosts are where the agent may connect besides its API hosts
	// (network "proxy"): "host" (ports 80 and 443), "host:port",
	// "*.domain" (its subdomains), IP addresses.
	AllowHosts []string `toml:"allow_hosts"`
	// Checks runs ralph's checks in the agents' sandbox too, whenever
	// the agents run in one (default true): a test suite is code the
	// agent could write.
	Checks bool `toml:"checks"`
}

// DefaultSandbox is [sandbox] when the file says nothing.
func DefaultSandbox() SandboxSection {
	return SandboxSection{Mode: string(sandbox.Off), Network: string(sandbox.NetProxy), Checks: true}
}

func (s SandboxSection) validate() error {
	if _, err := sandbox.ParseMode(s.Mode); err != nil {
		return fmt.Errorf("[sandbox] mode = %q: use off, bwrap or auto", s.Mode)
	}
	if _, err := sandbox.ParseNetwork(s.Network); err != nil {
		return fmt.Errorf("[sandbox] network = %q: use proxy, none or open", s.Network)
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
		if err := sandbox.CheckAllowed(h); err != nil {
			return fmt.Errorf("[sandbox] allow_hosts = [%q]: give a host name, like \"registry.npmjs.org\", \"host:port\", \"*.domain\" or an IP address, without a scheme or path", h)
		}
	}
	return nil
}
