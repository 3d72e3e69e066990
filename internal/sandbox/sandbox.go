// Package sandbox confines an agent (or a check) with bubblewrap on Linux:
// the system read-only, its work tree and the agent's state folders
// writable, the rest of the home hidden, its processes in their own PID
// namespace, its environment from an allow list, and the network off,
// open, or reached only through an allow-list proxy (proxy.go,
// forward.go). On macOS the same rules are a sandbox-exec (Seatbelt)
// profile, compiled but not exercised by this project's tests; elsewhere
// there is no sandbox.
//
// It only builds the command line and probes that it works here; who
// runs the command (and stops it) is proc's job, and which paths and
// names a run allows is app's.
package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
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
	// allow-list proxy that ralph runs outside (StartProxy), bound into
	// the sandbox at the same path. The agent CLIs speak TCP to a proxy,
	// so the forwarder (ForwardMain) runs first inside and serves it on
	// the sandbox's loopback.
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
	// Allow is the proxy's allow list (NetProxy only): its loopback
	// entries with a port are also served inside, at the same address.
	Allow []string
	// Forwarder is the program and leading arguments that run
	// ForwardMain (NetProxy only); nil means this program with
	// ForwardCommand.
	Forwarder []string
	// Set are variables (NAME=value) set inside whatever Env says: values
	// ralph resolved outside, such as the commit identity that the hidden
	// ~/.gitconfig would have given.
	Set []string
	// Terminal keeps the process in ralph's session, for an agent that a
	// person talks to: without it the process has no controlling terminal
	// (no /dev/tty, no job control, no window size changes). The cost is
	// that the agent can push input into that terminal (TIOCSTI where the
	// kernel allows it), which the shell reads after ralph ends.
	Terminal bool
}

// proxyPort is where the forwarder serves the proxy inside the sandbox
// when no allowed loopback address takes it.
const proxyPort = 3128

// Cmd is a sandboxed command: run Args with exactly Env. The values of
// the allowed variables travel in Env, not in Args, because a process's
// arguments are readable by every user of the host (/proc/PID/cmdline)
// and its environment only by its own user.
type Cmd struct {
	Args []string
	Env  []string
	// branch is the private folder the agent's branch is committed in
	// (see gitMounts); Land brings it back.
	branch *branchCopy
}

// mount is one filesystem step of the sandbox.
type mount struct {
	// kind is "tmpfs" (hidden: an empty folder under bwrap, unreadable
	// under Seatbelt), "ro", "rw", or "protect": read-only inside a
	// writable folder, whatever else asked for it.
	kind string
	path string
	// from, when set, is bound at path in place of path itself (rw).
	from string
}

// rank orders the kinds a path can be given twice as: the higher wins.
var rank = map[string]int{"tmpfs": 0, "ro": 1, "rw": 2, "protect": 3}

// Wrap returns the command that runs argv under p: bubblewrap on Linux,
// sandbox-exec on macOS; elsewhere an error, as ralph has no sandbox there.
func Wrap(p Policy, argv []string) (Cmd, error) { return wrap(p, argv) }

// plan is a policy resolved against the filesystem: what is hidden,
// read-only and writable, in the order the rules stack (parents first, so
// that a deeper path — the work tree under the hidden home, a protected
// file inside the writable work tree — stays on top of its parent), the
// environment, the command (behind the forwarder under NetProxy) and the
// private copy of the branch. bwrap turns it into mounts, Seatbelt into
// rules.
type plan struct {
	workTree string
	mounts   []mount
	env      []string
	argv     []string
	branch   *branchCopy
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
	from := map[string]string{}
	add := func(kind, path string) {
		if old, ok := mounts[path]; !ok || rank[kind] > rank[old] {
			mounts[path] = kind
		}
	}
	add(tmp.kind, tmp.path)
	realHome := home
	if h, err := filepath.EvalSymlinks(home); err == nil && h != "/" {
		realHome = h
		if h == wt {
			return plan{}, fmt.Errorf("sandbox: the work tree is the home folder (%s): the sandbox could not hide ~/.ssh and the rest of it; work in a folder under it", wt)
		}
		add("tmpfs", h)
	}
	add("rw", wt)
	git, branch, err := gitMounts(wt)
	if err != nil {
		return plan{}, err
	}
	for _, m := range git {
		add(m.kind, m.path)
		if m.from != "" {
			from[m.path] = m.from
		}
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

	var proxyEnv []string
	if p.Network == NetProxy {
		sock, err := canonical(p.ProxySocket, "proxy socket")
		if err != nil {
			return plan{}, err
		}
		add("rw", sock)
		fwd := p.Forwarder
		if len(fwd) == 0 {
			if fwd, err = defaultForwarder(); err != nil {
				return plan{}, err
			}
		}
		exe, err := canonical(fwd[0], "forwarder")
		if err != nil {
			return plan{}, err
		}
		// ralph itself is often in the home (~/go/bin), which the
		// sandbox hides; in the work tree it is shown already, writable.
		if !Inside(exe, wt) && Hides(exe, realHome) {
			add("ro", exe)
		}
		port, listens := proxyPort, []string{}
		taken := map[int]bool{}
		for _, s := range p.Allow {
			a, err := parseAllowed(s)
			if err != nil {
				return plan{}, fmt.Errorf("sandbox: %w", err)
			}
			// Two entries for one address (the base URL and
			// allow_hosts both naming the model server) are one
			// listener: a second would find the port taken.
			if a.loopback() && !slices.Contains(listens, a.String()) {
				listens = append(listens, "-listen", a.String())
				taken[a.port] = true
			}
		}
		for taken[port] {
			port++
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port)
		for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
			proxyEnv = append(proxyEnv, name+"="+url)
		}
		proxyEnv = append(proxyEnv, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
		fwd = append(append(slices.Clone(fwd), "-socket", sock, "-port", strconv.Itoa(port)), listens...)
		argv = append(append(fwd, "--"), argv...)
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
	pl := plan{workTree: wt, argv: argv, branch: branch}
	for _, path := range paths {
		pl.mounts = append(pl.mounts, mount{kind: mounts[path], path: path, from: from[path]})
	}

	// The proxy's variables are the sandbox's own: the caller's would
	// point at a proxy the sandbox cannot reach.
	pl.env = append([]string{"TMPDIR=" + tmp.path}, proxyEnv...)
	seen := map[string]bool{"TMPDIR": true}
	for _, kv := range proxyEnv {
		seen[kv[:strings.IndexByte(kv, '=')]] = true
	}
	for _, kv := range p.Set {
		if name, _, _ := strings.Cut(kv, "="); !seen[name] {
			seen[name] = true
			pl.env = append(pl.env, kv)
		}
	}
	for _, name := range append(append([]string{}, alwaysEnv...), p.Env...) {
		if v, ok := lookupOK(environ, name); ok && !seen[name] {
			seen[name] = true
			if name == "PATH" {
				v = realPath(v)
			}
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
//   - writable: the worktree's own gitdir (index, HEAD, its logs) and the
//     common dir's objects;
//   - its branch's ref (and that ref's log) in a private folder bound
//     where the folder of the ref is: a branch ralph/RUN/TASK shares
//     refs/heads/ralph/RUN/ with the other tasks of its run (and a
//     thread's ralph/ID all of refs/heads/ralph/), so the real folder
//     would let the agent move its siblings. Commits inside move the
//     copy; Cmd.Land moves the real branch after;
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
func gitMounts(wt string) ([]mount, *branchCopy, error) {
	dotgit := filepath.Join(wt, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	case fi.IsDir():
		var ms []mount
		for _, name := range []string{"config", "hooks"} {
			if _, err := os.Stat(filepath.Join(dotgit, name)); err == nil {
				ms = append(ms, mount{kind: "protect", path: filepath.Join(dotgit, name)})
			}
		}
		return ms, nil, nil
	}
	b, err := os.ReadFile(dotgit)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return nil, nil, fmt.Errorf("sandbox: %s is not a git worktree's .git file", dotgit)
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(wt, gitdir)
	}
	if gitdir, err = filepath.EvalSymlinks(gitdir); err != nil {
		return nil, nil, fmt.Errorf("sandbox: the gitdir of %s: %w", wt, err)
	}
	common := gitdir
	if b, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
		common = strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitdir, common)
		}
		if common, err = filepath.EvalSymlinks(common); err != nil {
			return nil, nil, fmt.Errorf("sandbox: the common git dir of %s: %w", wt, err)
		}
	}
	ms := []mount{
		{kind: "ro", path: common},
		{kind: "rw", path: filepath.Join(common, "objects")},
		{kind: "rw", path: gitdir},
		{kind: "protect", path: dotgit},
	}
	for _, name := range []string{"commondir", "gitdir"} {
		if _, err := os.Stat(filepath.Join(gitdir, name)); err == nil {
			ms = append(ms, mount{kind: "protect", path: filepath.Join(gitdir, name)})
		}
	}
	head, err := os.ReadFile(filepath.Join(gitdir, "HEAD"))
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !ok || !strings.HasPrefix(ref, "refs/heads/") {
		return ms, nil, nil
	}
	private := filepath.Join(gitdir, "sandbox-branch")
	bc := &branchCopy{wt: wt, ref: ref, dir: private, file: filepath.Join(private, "refs", filepath.Base(ref))}
	if err := os.RemoveAll(private); err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	folder := filepath.Dir(ref)
	for _, m := range []struct{ real, copy string }{
		{filepath.Join(common, folder), filepath.Join(private, "refs")},
		{filepath.Join(common, "logs", folder), filepath.Join(private, "logs")},
	} {
		// The real folders are the mount points (git would make them on
		// the branch's first commit, which inside it could not).
		for _, dir := range []string{m.real, m.copy} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, nil, fmt.Errorf("sandbox: %w", err)
			}
		}
		ms = append(ms, mount{kind: "rw", path: m.real, from: m.copy})
	}
	// A packed (or unborn) branch has no file: git inside reads the
	// read-only packed-refs, and its first commit writes the copy.
	if b, err := os.ReadFile(filepath.Join(common, ref)); err == nil {
		bc.before = b
		if err := os.WriteFile(bc.file, b, 0o644); err != nil {
			return nil, nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	return ms, bc, nil
}

// branchCopy is a work tree's branch as the sandboxed process sees it:
// the file of ref in the private folder dir, copied from the real one
// (before; nil when the branch had no file of its own).
type branchCopy struct {
	wt, ref, dir, file string
	before             []byte
}

// Land moves the work tree's branch to the commit the sandboxed process
// left on its private copy (see gitMounts), and removes the copy. Call
// it once the process has ended, before anything reads the branch; a
// command that needed no copy lands nothing. The branch moves only from
// where it was when the process started.
func (c Cmd) Land() error {
	b := c.branch
	if b == nil {
		return nil
	}
	defer os.RemoveAll(b.dir)
	after, err := os.ReadFile(b.file)
	if errors.Is(err, os.ErrNotExist) || (err == nil && bytes.Equal(after, b.before)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: the agent's branch %s: %w", b.ref, err)
	}
	args := []string{"-C", b.wt, "update-ref", "-m", "commit (in the sandbox)", b.ref, strings.TrimSpace(string(after))}
	if foreignOwner(b.wt) {
		// The repository git inside was told to trust (see Wrap).
		args = append([]string{"-c", "safe.directory=" + b.wt}, args...)
	}
	if b.before != nil {
		args = append(args, strings.TrimSpace(string(b.before)))
	}
	if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("sandbox: moving %s to the agent's commit: %v: %s", b.ref, err, strings.TrimSpace(string(out)))
	}
	return nil
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

// Hides reports whether a sandbox hides path: under the home or under
// /tmp, which it replaces with empty folders.
func Hides(path, home string) bool {
	return (home != "" && Inside(path, home)) || Inside(path, os.TempDir()) || Inside(path, "/tmp")
}

// Inside reports whether path is dir or below it.
func Inside(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
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

// realPath is the PATH list with each folder that is reached through a
// link (a tools folder linked from a checkout in /tmp or the home) given
// by where it leads: the sandbox shows a folder at its real place, so a
// program looked up by name inside is found where it was outside.
func realPath(list string) string {
	dirs := filepath.SplitList(list)
	for i, d := range dirs {
		if filepath.IsAbs(d) {
			if r, err := filepath.EvalSymlinks(d); err == nil {
				dirs[i] = r
			}
		}
	}
	return strings.Join(dirs, string(filepath.ListSeparator))
}

// ForwarderProgram is the forwarder on its own (cmd/ralph-sandbox-net),
// installed next to ralph: a small program that starts in a few
// milliseconds where ralph itself, with everything it links, takes
// tens; and less code inside the sandbox beside the agent.
const ForwarderProgram = "ralph-sandbox-net"

// defaultForwarder is ForwarderProgram next to this program when it is
// there, else this program's ForwardCommand.
func defaultForwarder() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: the forwarder: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	own := filepath.Join(filepath.Dir(exe), ForwarderProgram)
	if fi, err := os.Stat(own); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return []string{own}, nil
	}
	return []string{exe, ForwardCommand}, nil
}
