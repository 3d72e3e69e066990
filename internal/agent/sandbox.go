package agent

import (
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
// work tree unless p names one), keeps its own state under the hidden home, gets its credential
// variables and its run's token, and can read its program and its prompt
// file where the sandbox would hide them.
func sandboxed(p sandbox.Policy, s Spec, argv, env []string, dir, promptFile string) (sandbox.Cmd, error) {
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if p.WorkTree == "" {
		p.WorkTree = dir
	}
	if home != "" {
		p.State = append(s.StateIn(home), p.State...)
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
		v, ok := "", false
		for _, kv := range env {
			if x, found := strings.CutPrefix(kv, name+"="); found {
				v, ok = x, true
			}
		}
		u, err := url.Parse(strings.TrimSpace(v))
		if !ok || err != nil || u.Hostname() == "" {
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
