package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/sandbox"
)

// sandboxed returns the command that runs argv under p instead (its
// Land is to be called once it has ended): the agent works in dir (p's work tree unless p names
// one), keeps its own state under the hidden home, gets its credential
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
	return sandbox.Wrap(p, argv)
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

// inside reports whether path is dir or below it.
func inside(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
