package agent

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/sandbox"
)

// sandboxed returns the command that runs argv under p instead (its
// Land is to be called once it has ended): the agent works in dir (p's
// work tree unless p names one), keeps its own state under the hidden
// home, gets its credential variables and its run's token, and can read
// its program and its prompt file where the sandbox would hide them.
func sandboxed(p sandbox.Policy, s Spec, argv, env []string, dir, promptFile string) (sandbox.Cmd, error) {
	home := envValue(env, "HOME")
	if p.WorkTree == "" {
		p.WorkTree = dir
	}
	if home != "" {
		state := s.StateIn(home)
		if err := makeStateDirs(state); err != nil {
			return sandbox.Cmd{}, err
		}
		// A credential variable that names a path moves the CLI's state
		// there (CLAUDE_CONFIG_DIR=~/.claude-work, OPENCODE_CONFIG): where
		// the sandbox hides it, it is the CLI's state too. The home or
		// /tmp as a whole never is, whatever link leads to them.
		for _, name := range s.CredentialEnv {
			v := filepath.Clean(envValue(env, name))
			if filepath.IsAbs(v) && sandbox.Hides(v, home) && !hiddenRoot(v, home) {
				state = append(state, v)
			}
		}
		p.State = append(state, p.State...)
	}
	// The token is how ralph finds the agent's processes again, so it
	// crosses into the sandbox with the credentials.
	p.Env = append(append(append(slices.Clone(s.CredentialEnv), s.BaseURLEnv...), TokenVar), p.Env...)
	p.Environ = env
	p.Readable = slices.Clone(p.Readable)
	for _, path := range append(program(argv[0]), promptFile) {
		if path == "" {
			continue
		}
		show := filepath.Dir(path)
		if hiddenRoot(show, home) {
			// Showing the whole home or /tmp would undo the hiding
			// (the host's /tmp, read-only, would replace the private
			// one): only the file then. A program whose files lie
			// beside it there needs [sandbox] readable.
			show = path
		}
		if sandbox.Hides(show, home) && !sandbox.Inside(show, p.WorkTree) && !slices.Contains(p.Readable, show) {
			p.Readable = append(p.Readable, show)
		}
	}
	return sandbox.Wrap(p, argv)
}

// startProxy starts the allow-list proxy of a run under p when its
// network is "proxy", for as long as the run lasts (stop ends it), and
// points p at it. onDenied is told each connection it refuses.
func startProxy(p *sandbox.Policy, s Spec, env []string, onDenied func(sandbox.Denied)) (stop func(), err error) {
	if p.Network != sandbox.NetProxy {
		return func() {}, nil
	}
	p.Allow = allowList(s, env, p.Allow)
	px, err := sandbox.StartProxy(p.Allow, onDenied)
	if err != nil {
		return nil, err
	}
	p.ProxySocket = px.Socket
	return func() { px.Close() }, nil
}

// allowList is where an agent may connect through the proxy: its spec's
// hosts or, when one of its base-URL variables is set in env (the user
// pointed it at a gateway or a local server), the host and port of those
// URLs instead; then extra ([sandbox] allow_hosts).
func allowList(s Spec, env []string, extra []string) []string {
	var hosts []string
	for _, name := range s.BaseURLEnv {
		u, err := url.Parse(strings.TrimSpace(envValue(env, name)))
		if err != nil || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80"}[u.Scheme]
		}
		if port == "" {
			port = "443"
		}
		hosts = append(hosts, net.JoinHostPort(u.Hostname(), port))
	}
	if len(hosts) == 0 {
		hosts = slices.Clone(s.Hosts)
	}
	return append(hosts, extra...)
}

// makeStateDirs creates the agent's state folders that do not exist yet
// (a CLI never run before, a cache it has not made): the sandbox binds
// only what exists, and what the CLI writes in the hidden home instead
// (its sessions, its caches, its login) is gone when the run ends. A file
// (a name with an extension, like .claude.json) is the CLI's to create.
func makeStateDirs(paths []string) error {
	for _, p := range paths {
		if ext := filepath.Ext(p); ext != "" && ext != filepath.Base(p) {
			continue
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			return fmt.Errorf("sandbox: the agent's state folder: %w", err)
		}
	}
	return nil
}

// envValue is name's last value in env, as exec takes it ("" when unset).
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if rest, ok := strings.CutPrefix(kv, name+"="); ok {
			v = rest
		}
	}
	return v
}

// program is where argv[0] is found on PATH and, when that is a link,
// the file it leads to: the sandbox must show both.
func program(name string) []string {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		return []string{path, real}
	}
	return []string{path}
}

// hiddenRoot reports whether dir is one of the folders the sandbox
// replaces with an empty one: the home or the temporary folder.
func hiddenRoot(dir, home string) bool {
	for _, root := range []string{home, os.TempDir(), "/tmp"} {
		if root == "" {
			continue
		}
		if dir == root {
			return true
		}
		if a, err := filepath.EvalSymlinks(dir); err == nil {
			if b, err := filepath.EvalSymlinks(root); err == nil && a == b {
				return true
			}
		}
	}
	return false
}
