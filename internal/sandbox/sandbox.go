// Package sandbox confines an agent (or a check) with bubblewrap on Linux:
// the system read-only, its work tree and the agent's state folders
// writable, the rest of the home hidden, its processes in their own PID
// namespace, its environment from an allow list, and the network off or
// open. On macOS the same rules are a sandbox-exec (Seatbelt) profile,
// compiled but not exercised by this project's tests; elsewhere there is
// no sandbox.
//
// It only builds the command line and probes that it works here; who
// runs the command (and stops it) is proc's job, and which paths and
// names a run allows is app's.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Mode says whether agents run sandboxed.
type Mode string

const (
	// Off runs agents as the user, with everything the user can reach.
	Off Mode = "off"
	// Bwrap runs every agent under bubblewrap and fails when it cannot.
	Bwrap Mode = "bwrap"
	// Auto uses bubblewrap when it works here, and runs without it
	// (after a warning, which is the caller's to give) when it does not.
	Auto Mode = "auto"
)

// ParseMode reads a mode as written in config or on the command line.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(s)); m {
	case Off, Bwrap, Auto:
		return m, nil
	}
	return "", fmt.Errorf("sandbox mode %q: want off, bwrap or auto", s)
}

// Network says what the sandboxed process may reach.
type Network string

const (
	// NetNone leaves only the sandbox's own loopback.
	NetNone Network = "none"
	// NetOpen keeps the host's network (the filesystem limits stay).
	NetOpen Network = "open"
	// NetProxy is NetNone plus Policy.ProxySocket, the unix socket of an
	// allow-list proxy that ralph runs outside, bound into the sandbox at
	// the same path. The agent CLIs speak TCP to a proxy, so a forwarder
	// inside (a loopback listener to the socket) is still to be built.
	NetProxy Network = "proxy"
)

// ParseNetwork reads a network mode as written in config.
func ParseNetwork(s string) (Network, error) {
	switch n := Network(strings.TrimSpace(s)); n {
	case NetNone, NetOpen, NetProxy:
		return n, nil
	}
	return "", fmt.Errorf("sandbox network %q: want none, open or proxy", s)
}

// DefaultTmpSize bounds the private /tmp (and the empty home) when
// Policy.TmpSize is zero: both are in memory, and an agent must not be
// able to fill the host's.
const DefaultTmpSize = 512 << 20

// alwaysEnv are passed through whatever the allow list says: without
// them nothing finds its programs, its home, its language or its terminal.
var alwaysEnv = []string{"PATH", "HOME", "LANG", "TERM"}

// Policy is what one sandboxed process may touch. Paths are absolute.
type Policy struct {
	// WorkTree is the task's work tree: writable, and the working
	// directory. When it is a git checkout or worktree, its git metadata
	// is writable only as far as commits on its own branch need (see
	// gitMounts).
	WorkTree string
	// State are the agent CLI's own folders and files (its login,
	// settings, transcripts): writable. Missing ones are left out, so the
	// caller creates those that must outlive the run.
	State []string
	// Readable and Writable add paths (config's [sandbox] readable and
	// writable); they must exist. Everything outside the home is readable
	// already, so Readable matters for what is under it.
	Readable []string
	Writable []string
	// TmpSize is the size limit in bytes of the private /tmp and of the
	// empty home; 0 means DefaultTmpSize.
	TmpSize int64
	// Env names the variables passed through (the agent's credentials,
	// [sandbox] env); PATH, HOME, LANG and TERM always are. Values come
	// from Environ.
	Env []string
	// Environ is the caller's environment; nil means os.Environ().
	Environ []string
	// Network is NetNone when empty.
	Network Network
	// ProxySocket is the allow-list proxy's unix socket (NetProxy only):
	// the one way out of the sandbox's network.
	ProxySocket string
}

// Cmd is a sandboxed command: run Args with exactly Env. The values of
// the allowed variables travel in Env, not in Args, because a process's
// arguments are readable by every user of the host (/proc/PID/cmdline)
// and its environment only by its own user.
type Cmd struct {
	Args []string
	Env  []string
}

// mount is one filesystem step of the sandbox.
type mount struct {
	// kind is "tmpfs" (hidden: an empty folder under bwrap, unreadable
	// under Seatbelt), "ro", "rw", or "protect": read-only inside a
	// writable folder, whatever else asked for it.
	kind string
	path string
}

// rank orders the kinds a path can be given twice as: the higher wins.
var rank = map[string]int{"tmpfs": 0, "ro": 1, "rw": 2, "protect": 3}

// Wrap returns the command that runs argv under p: bubblewrap on Linux,
// sandbox-exec on macOS; elsewhere an error, as ralph has no sandbox there.
func Wrap(p Policy, argv []string) (Cmd, error) { return wrap(p, argv) }

// plan is a policy resolved against the filesystem: what is hidden,
// read-only and writable, in the order the rules stack (parents first, so
// that a deeper path — the work tree under the hidden home, a protected
// file inside the writable work tree — stays on top of its parent), and
// the environment. bwrap turns it into mounts, Seatbelt into rules.
type plan struct {
	workTree string
	mounts   []mount
	env      []string
}

// resolve checks p and resolves its paths. tmp is the private temporary
// folder (bwrap's tmpfs /tmp, macOS's per-user TMPDIR), which TMPDIR names.
func resolve(p Policy, argv []string, tmp mount) (plan, error) {
	if len(argv) == 0 {
		return plan{}, errors.New("sandbox: nothing to run")
	}
	switch p.Network {
	case "", NetNone, NetOpen, NetProxy:
	default:
		return plan{}, fmt.Errorf("sandbox network %q: want none, open or proxy", p.Network)
	}
	environ := p.Environ
	if environ == nil {
		environ = os.Environ()
	}
	home := lookup(environ, "HOME")
	if home == "" || !filepath.IsAbs(home) {
		return plan{}, fmt.Errorf("sandbox: HOME is %q: it must be an absolute path (the sandbox hides it)", home)
	}
	wt, err := canonical(p.WorkTree, "work tree")
	if err != nil {
		return plan{}, err
	}

	mounts := map[string]string{}
	add := func(kind, path string) {
		if old, ok := mounts[path]; !ok || rank[kind] > rank[old] {
			mounts[path] = kind
		}
	}
	add(tmp.kind, tmp.path)
	if h, err := filepath.EvalSymlinks(home); err == nil && h != "/" {
		if h == wt {
			return plan{}, fmt.Errorf("sandbox: the work tree is the home folder (%s): the sandbox could not hide ~/.ssh and the rest of it; work in a folder under it", wt)
		}
		add("tmpfs", h)
	}
	add("rw", wt)
	git, err := gitMounts(wt)
	if err != nil {
		return plan{}, err
	}
	for _, m := range git {
		add(m.kind, m.path)
	}
	for _, s := range p.State {
		if c, err := canonical(s, "agent state"); err == nil {
			add("rw", c)
		} else if !errors.Is(err, os.ErrNotExist) {
			return plan{}, err
		}
	}
	for _, list := range []struct {
		kind, what string
		paths      []string
	}{{"ro", "readable path", p.Readable}, {"rw", "writable path", p.Writable}} {
		for _, s := range list.paths {
			c, err := canonical(s, list.what)
			if err != nil {
				return plan{}, err
			}
			add(list.kind, c)
		}
	}

	if p.Network == NetProxy {
		sock, err := canonical(p.ProxySocket, "proxy socket")
		if err != nil {
			return plan{}, err
		}
		add("rw", sock)
	}

	paths := make([]string, 0, len(mounts))
	for path := range mounts {
		paths = append(paths, path)
	}
	sort.Slice(paths, func(i, j int) bool {
		di, dj := strings.Count(paths[i], "/"), strings.Count(paths[j], "/")
		if di != dj {
			return di < dj
		}
		return paths[i] < paths[j]
	})
	pl := plan{workTree: wt}
	for _, path := range paths {
		pl.mounts = append(pl.mounts, mount{mounts[path], path})
	}

	pl.env = []string{"TMPDIR=" + tmp.path}
	seen := map[string]bool{"TMPDIR": true}
	for _, name := range append(append([]string{}, alwaysEnv...), p.Env...) {
		if v, ok := lookupOK(environ, name); ok && !seen[name] {
			seen[name] = true
			pl.env = append(pl.env, name+"="+v)
		}
	}
	if foreignOwner(wt) {
		// git refuses a repository owned by another user ("dubious
		// ownership"), which is what files of another uid look like from
		// inside a user namespace; this is the one repository it may trust.
		pl.env = append(pl.env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0="+wt)
	}
	return pl, nil
}

// gitMounts opens the git metadata of the work tree wt just enough for
// commits on its own branch. For a worktree (a .git file pointing into
// another repository's .git/worktrees/NAME) that is:
//   - writable: the worktree's own gitdir (index, HEAD, its logs), the
//     common dir's objects, and the folder of its branch's ref and of
//     that ref's log (so the branches next to it in that folder are
//     writable too: a branch ralph/RUN/TASK shares refs/heads/ralph/RUN/
//     with the other tasks of its run);
//   - read-only: everything else of the common dir — config and hooks
//     (which would run code in ralph's own git calls outside the
//     sandbox), packed-refs, the other branches and ralph's refs, the
//     other worktrees' gitdirs — and the pointers that say where the
//     repository is (the .git file, the gitdir's commondir and gitdir
//     files), so that the agent cannot point ralph's git at a repository
//     of its making.
//
// For a plain checkout (.git a folder inside the writable work tree)
// only .git/config and .git/hooks are kept read-only. A work tree that
// is not in git needs nothing.
func gitMounts(wt string) ([]mount, error) {
	dotgit := filepath.Join(wt, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("sandbox: %w", err)
	case fi.IsDir():
		var ms []mount
		for _, name := range []string{"config", "hooks"} {
			if _, err := os.Stat(filepath.Join(dotgit, name)); err == nil {
				ms = append(ms, mount{"protect", filepath.Join(dotgit, name)})
			}
		}
		return ms, nil
	}
	b, err := os.ReadFile(dotgit)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return nil, fmt.Errorf("sandbox: %s is not a git worktree's .git file", dotgit)
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(wt, gitdir)
	}
	if gitdir, err = filepath.EvalSymlinks(gitdir); err != nil {
		return nil, fmt.Errorf("sandbox: the gitdir of %s: %w", wt, err)
	}
	common := gitdir
	if b, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		common = strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		if common, err = filepath.EvalSymlinks(common); err != nil {
			return nil, fmt.Errorf("sandbox: the common git dir of %s: %w", wt, err)
		}
	}
	ms := []mount{
		{"ro", common},
		{"rw", filepath.Join(common, "objects")},
		{"rw", gitdir},
		{"protect", dotgit},
	}
	for _, name := range []string{"commondir", "gitdir"} {
		if _, err := os.Stat(filepath.Join(gitdir, name)); err == nil {
			ms = append(ms, mount{"protect", filepath.Join(gitdir, name)})
		}
	}
	head, err := os.ReadFile(filepath.Join(gitdir, "HEAD"))
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: "); ok && strings.HasPrefix(ref, "refs/heads/") {
		for _, dir := range []string{filepath.Join(common, filepath.Dir(ref)), filepath.Join(common, "logs", filepath.Dir(ref))} {
			// git creates these on a branch's first commit; inside the
			// sandbox it could not, so they are made here.
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("sandbox: %w", err)
			}
			ms = append(ms, mount{"rw", dir})
		}
	}
	return ms, nil
}

// canonical is path made absolute-checked and free of symlinks, as bwrap
// needs for a mount point.
func canonical(path, what string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("sandbox: %s %q is not an absolute path", what, path)
	}
	c, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("sandbox: %s: %w", what, err)
	}
	return c, nil
}

func lookup(environ []string, name string) string {
	v, _ := lookupOK(environ, name)
	return v
}

// lookupOK is the last value of name in environ, as exec takes it.
func lookupOK(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(environ[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// unsupported is why there is no sandbox on goos: ralph sandboxes with
// bubblewrap on Linux and sandbox-exec on macOS, and nothing else.
func unsupported(goos string) error {
	if goos == "windows" {
		return errors.New("sandbox: ralph has no sandbox on Windows: run ralph in WSL2, where bubblewrap works")
	}
	return fmt.Errorf("sandbox: ralph has no sandbox on %s, only on Linux (bubblewrap) and macOS (sandbox-exec)", goos)
}
