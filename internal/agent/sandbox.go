package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/sandbox"
)

// sandboxed returns the command line and environment that run argv
// under p instead: the agent works in dir (p's work tree unless p names
// one), keeps its own state under the hidden home, gets its credential
// variables and its run's token, and can read its program and its prompt
// file where the sandbox would hide them.
func sandboxed(p sandbox.Policy, s Spec, argv, env []string, dir, promptFile string) ([]string, []string, error) {
	home := envValue(env, "HOME")
	if p.WorkTree == "" {
		p.WorkTree = dir
	}
	if home != "" {
		state := s.StateIn(home)
		if err := makeStateDirs(state); err != nil {
			return nil, nil, err
		}
		// A credential variable that names a path moves the CLI's state
		// there (CLAUDE_CONFIG_DIR=~/.claude-work, OPENCODE_CONFIG): where
		// the sandbox hides it, it is the CLI's state too. The home or
		// /tmp as a whole never is, whatever link leads to them.
		for _, name := range s.CredentialEnv {
			v := filepath.Clean(envValue(env, name))
			if !filepath.IsAbs(v) || !hiddenIn(v, home) {
				continue
			}
			switch resolved(v) {
			case resolved(home), resolved("/tmp"), resolved(os.TempDir()):
				continue
			}
			state = append(state, v)
		}
		p.State = append(state, p.State...)
	}
	// The token is how ralph finds the agent's processes again, so it
	// crosses into the sandbox with the credentials.
	p.Env = append(append(slices.Clone(s.CredentialEnv), TokenVar), p.Env...)
	p.Environ = env
	p.Readable = slices.Clone(p.Readable)
	for _, path := range append(program(argv[0]), promptFile) {
		if path == "" {
			continue
		}
		if d := filepath.Dir(path); hiddenIn(d, home) && !inside(d, p.WorkTree) && !slices.Contains(p.Readable, d) {
			p.Readable = append(p.Readable, d)
		}
	}
	cmd, err := sandbox.Wrap(p, argv)
	return cmd.Args, cmd.Env, err
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

// hiddenIn reports whether the sandbox hides path: under the home or
// under /tmp, which it replaces with empty folders.
func hiddenIn(path, home string) bool {
	return (home != "" && inside(path, home)) || inside(path, os.TempDir()) || inside(path, "/tmp")
}

// resolved is path with its links followed, or as given when that fails.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
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

// inside reports whether path is dir or below it.
func inside(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
