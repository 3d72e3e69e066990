package sandbox

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sbplRule is one file rule of a profile: allow or deny, its operations,
// and the paths it matches (subpath: the path and all under it).
type sbplRule struct {
	allow    bool
	ops      []string
	subpaths []string
	literals []string
}

var sbplLine = regexp.MustCompile(`^\((allow|deny) ((?:file-[a-z*-]+ ?)+)((?:\((?:subpath|literal) "[^"]*"\) ?)+)\)$`)
var sbplPath = regexp.MustCompile(`\((subpath|literal) "([^"]*)"\)`)

// sbplAllows answers as Seatbelt does for the file rules of profile (the
// last rule that matches decides; deny by default), for op file-read* or
// file-write* on path. It reads only the one-line file rules this package
// writes, which is what the test holds the generator to; that Seatbelt
// itself agrees is what macOS would show, and this project does not run it.
func sbplAllows(t *testing.T, profile, op, path string) bool {
	t.Helper()
	allowed := false
	for _, line := range strings.Split(profile, "\n") {
		if line == "(allow file-read*)" && op == "file-read*" {
			allowed = true
			continue
		}
		m := sbplLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r := sbplRule{allow: m[1] == "allow", ops: strings.Fields(m[2])}
		for _, pm := range sbplPath.FindAllStringSubmatch(m[3], -1) {
			if pm[1] == "subpath" {
				r.subpaths = append(r.subpaths, pm[2])
			} else {
				r.literals = append(r.literals, pm[2])
			}
		}
		if !containsOp(r.ops, op) {
			continue
		}
		match := false
		for _, s := range r.subpaths {
			match = match || path == s || strings.HasPrefix(path, s+"/")
		}
		for _, l := range r.literals {
			match = match || path == l
		}
		if match {
			allowed = r.allow
		}
	}
	return allowed
}

func containsOp(ops []string, op string) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// TestSeatbeltProfileHasTheSameRules holds the macOS profile to the rules
// the bubblewrap tests hold bwrap to, for a worktree under the home.
func TestSeatbeltProfileHasTheSameRules(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	repo, wt, other := filepath.Join(home, "src", "repo"), filepath.Join(home, "src", "wt"), filepath.Join(home, "src", "other")
	state, cache, tmp := filepath.Join(home, ".claude"), filepath.Join(root, "cache"), filepath.Join(root, "T")
	sock := filepath.Join(root, "proxy.sock")
	write(t, filepath.Join(home, ".ssh", "id_ed25519"), "PRIVATE KEY\n")
	write(t, filepath.Join(state, "settings.json"), "{}\n")
	write(t, filepath.Join(cache, "x"), "")
	write(t, filepath.Join(tmp, "x"), "")
	write(t, sock, "")
	git(t, root, "init", "-q", "-b", "main", repo)
	git(t, repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "start")
	git(t, repo, "worktree", "add", "-q", "-b", "ralph/run/US-001", wt)
	git(t, repo, "worktree", "add", "-q", "-b", "ralph/run/US-002", other)

	p := Policy{WorkTree: wt, State: []string{state}, Writable: []string{cache}, Network: NetProxy, ProxySocket: sock,
		Environ: []string{"HOME=" + home, "TMPDIR=" + tmp, "PATH=/usr/bin:/bin", "SECRET=x"}}
	profile, err := SeatbeltProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(profile, "(version 1)\n(deny default)\n") {
		t.Errorf("the profile does not deny by default:\n%s", profile)
	}
	for _, c := range []struct {
		op, path string
		want     bool
	}{
		{"file-read*", "/etc/passwd", true},
		{"file-write*", "/etc/passwd", false},
		{"file-write*", "/usr/local/bin/x", false},
		{"file-write*", "/dev/null", true},
		// the home, hidden
		{"file-read*", filepath.Join(home, ".ssh", "id_ed25519"), false},
		{"file-write*", filepath.Join(home, ".ssh", "authorized_keys"), false},
		{"file-read*", filepath.Join(home, ".aws", "credentials"), false},
		// the work tree, the agent's state, Writable, the temporary folder
		{"file-write*", filepath.Join(wt, "story.txt"), true},
		{"file-read*", filepath.Join(wt, "README.md"), true},
		{"file-write*", filepath.Join(state, "settings.json"), true},
		{"file-write*", filepath.Join(cache, "y"), true},
		{"file-write*", filepath.Join(tmp, "y"), true},
		// git: the agent's own commits, nothing more
		{"file-write*", filepath.Join(repo, ".git", "objects", "ab", "cdef"), true},
		{"file-write*", filepath.Join(repo, ".git", "worktrees", "wt", "index"), true},
		{"file-write*", filepath.Join(repo, ".git", "refs", "heads", "ralph", "run", "US-001"), true},
		{"file-write*", filepath.Join(repo, ".git", "logs", "refs", "heads", "ralph", "run", "US-001"), true},
		{"file-read*", filepath.Join(repo, ".git", "config"), true},
		{"file-write*", filepath.Join(repo, ".git", "config"), false},
		{"file-write*", filepath.Join(repo, ".git", "hooks", "pre-commit"), false},
		{"file-write*", filepath.Join(repo, ".git", "refs", "heads", "main"), false},
		{"file-write*", filepath.Join(wt, ".git"), false},
		{"file-write*", filepath.Join(repo, ".git", "worktrees", "wt", "commondir"), false},
		{"file-write*", filepath.Join(repo, ".git", "worktrees", "wt", "gitdir"), false},
		// the user's checkout and another worker's worktree
		{"file-write*", filepath.Join(repo, "README.md"), false},
		{"file-write*", filepath.Join(other, "story.txt"), false},
		{"file-write*", filepath.Join(repo, ".git", "worktrees", "other", "index"), false},
	} {
		if got := sbplAllows(t, profile, c.op, c.path); got != c.want {
			t.Errorf("%s %s: allowed %v, want %v", c.op, c.path, got, c.want)
		}
	}
	for _, want := range []string{
		"(allow signal (target same-sandbox))",
		`(allow network-outbound (remote unix-socket (path-literal "` + sock + `")))`,
	} {
		if !strings.Contains(profile, want) {
			t.Errorf("the profile has no %s:\n%s", want, profile)
		}
	}
	for _, not := range []string{"(allow network*)", "(allow signal)\n", "(allow mach-lookup)\n", "(allow default)"} {
		if strings.Contains(profile, not) {
			t.Errorf("the profile has %s:\n%s", not, profile)
		}
	}

	p.Network = NetNone
	if profile, err = SeatbeltProfile(p); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(profile, "(allow network") {
		t.Errorf("network none allows some network:\n%s", profile)
	}
	p.Network = NetOpen
	if profile, err = SeatbeltProfile(p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(profile, "(allow network*)") {
		t.Errorf("network open does not allow the network:\n%s", profile)
	}
}

// TestSeatbeltProfileQuotesPaths: a path is data, not SBPL.
func TestSeatbeltProfileQuotesPaths(t *testing.T) {
	if got, want := sbplString(`/a "b"\c`), `"/a \"b\"\\c"`; got != want {
		t.Errorf("sbplString: %s, want %s", got, want)
	}
}

func TestSeatbeltProfileRefusesBadPolicies(t *testing.T) {
	if _, err := SeatbeltProfile(Policy{WorkTree: "wt"}); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("SeatbeltProfile with a relative work tree: %v", err)
	}
}

func TestNoSandboxOnWindows(t *testing.T) {
	if err := unsupported("windows"); err == nil || !strings.Contains(err.Error(), "no sandbox on Windows: run ralph in WSL2") {
		t.Errorf("unsupported(windows): %v", err)
	}
}
