//go:build linux

// The bubblewrap tests: real bwrap, real git.

package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// dialFlag makes the test binary a tiny client that the tests run inside
// the sandbox: it dials NETWORK ADDRESS and copies what it reads.
const dialFlag = "-sandbox-dial"

func TestMain(m *testing.M) {
	// The tests' sandboxes with network "proxy" start this binary as
	// their forwarder, as ralph's start ralph.
	if len(os.Args) > 1 && os.Args[1] == ForwardCommand {
		os.Exit(ForwardMain(os.Args[2:]))
	}
	if len(os.Args) == 4 && os.Args[1] == dialFlag {
		c, err := net.DialTimeout(os.Args[2], os.Args[3], 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		io.Copy(os.Stdout, c)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Each hostile case first does its action without the sandbox and sees it
// work, so that its failure inside says something about the sandbox and
// not about the test.

// needBwrap fails (never skips) a test that drives bubblewrap when it is
// missing: a sandbox test that passes without a sandbox proves nothing.
func needBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed: install bubblewrap (apt-get install bubblewrap); the sandbox tests run it for real")
	}
}

// world is a repository, a worktree of it on branch ralph/run/US-001 and a
// HOME with a planted SSH key, all in one temporary folder.
type world struct {
	root, home, repo, wt string
}

func newWorld(t *testing.T) world {
	t.Helper()
	needBwrap(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := world{root: root, home: filepath.Join(root, "home"), repo: filepath.Join(root, "repo"), wt: filepath.Join(root, "wt")}
	write(t, filepath.Join(w.home, ".ssh", "id_ed25519"), "PRIVATE KEY\n")
	t.Setenv("HOME", w.home)
	git(t, root, "init", "-q", "-b", "main", w.repo)
	git(t, w.repo, "config", "user.name", "Test")
	git(t, w.repo, "config", "user.email", "test@example.com")
	write(t, filepath.Join(w.repo, "README.md"), "hello\n")
	git(t, w.repo, "add", ".")
	git(t, w.repo, "commit", "-q", "-m", "start")
	git(t, w.repo, "worktree", "add", "-q", "-b", "ralph/run/US-001", w.wt)
	return w
}

// plain runs a shell script as the user, in dir.
func plain(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// boxed runs a shell script under p.
func boxed(t *testing.T, p Policy, script string) (string, error) {
	t.Helper()
	c, err := Wrap(p, []string{"bash", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Env = c.Env
	out, err := cmd.CombinedOutput()
	if lerr := c.Land(); lerr != nil {
		t.Fatal(lerr)
	}
	return string(out), err
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestWriteOutsideWorkTreeFails(t *testing.T) {
	w := newWorld(t)
	outside := filepath.Join(w.root, "outside")
	hidden := filepath.Join(w.root, "hidden")
	for _, d := range []string{outside, hidden} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := "echo owned > " + outside + "/f"
	if out, err := plain(t, w.wt, script); err != nil || !exists(outside+"/f") {
		t.Fatalf("without the sandbox the write should work: %v\n%s", err, out)
	}
	os.Remove(outside + "/f")

	p := Policy{WorkTree: w.wt, Readable: []string{outside}}
	out, err := boxed(t, p, script)
	if err == nil || !strings.Contains(out, "Read-only file system") {
		t.Errorf("a write to a readable folder outside the work tree: err %v, output %q; want Read-only file system", err, out)
	}
	// A folder that is not even visible: the write lands in the private
	// tmpfs, never on the host.
	boxed(t, p, "mkdir -p "+hidden+" && echo owned > "+hidden+"/f")
	boxed(t, p, "echo owned > "+w.repo+"/README.md")
	for _, f := range []string{outside + "/f", hidden + "/f"} {
		if exists(f) {
			t.Errorf("%s was written from inside the sandbox", f)
		}
	}
	if b, _ := os.ReadFile(w.repo + "/README.md"); string(b) != "hello\n" {
		t.Errorf("the user's checkout was written from inside the sandbox: %q", b)
	}
	// The work tree itself is writable, and what is written there stays.
	if out, err := boxed(t, p, "echo mine > made.txt"); err != nil || !exists(w.wt+"/made.txt") {
		t.Errorf("a write in the work tree: %v\n%s", err, out)
	}
}

func TestHomeIsHidden(t *testing.T) {
	w := newWorld(t)
	key := filepath.Join(w.home, ".ssh", "id_ed25519")
	if out, err := plain(t, w.wt, "cat "+key); err != nil || !strings.Contains(out, "PRIVATE KEY") {
		t.Fatalf("without the sandbox the key should be readable: %v\n%s", err, out)
	}
	out, err := boxed(t, Policy{WorkTree: w.wt}, "cat "+key)
	if err == nil || strings.Contains(out, "PRIVATE KEY") {
		t.Errorf("the planted SSH key was read from inside the sandbox: err %v, output %q", err, out)
	}

	// A work tree and an agent's state folder under the home stay
	// visible and writable above the hidden home; the key does not.
	inHome := filepath.Join(w.home, "src", "wt")
	git(t, w.repo, "worktree", "add", "-q", "-b", "ralph/run/US-002", inHome)
	state := filepath.Join(w.home, ".agent")
	write(t, filepath.Join(state, "login.json"), "{}")
	p := Policy{WorkTree: inHome, State: []string{state, filepath.Join(w.home, ".missing")}}
	out, err = boxed(t, p, "cat README.md && echo kept > made.txt && echo token > "+state+"/refreshed && ls -A $HOME")
	if err != nil {
		t.Fatalf("work in a work tree under the home: %v\n%s", err, out)
	}
	if strings.Contains(out, ".ssh") || !exists(inHome+"/made.txt") || !exists(state+"/refreshed") {
		t.Errorf("home as the sandbox shows it: %q; made.txt kept %v, state written %v", out, exists(inHome+"/made.txt"), exists(state+"/refreshed"))
	}
}

func TestPushToLocalRemoteFails(t *testing.T) {
	w := newWorld(t)
	remote := filepath.Join(w.root, "remote.git")
	git(t, w.root, "init", "-q", "--bare", remote)
	if out, err := plain(t, w.wt, "git push -q "+remote+" HEAD:refs/heads/by-user"); err != nil {
		t.Fatalf("without the sandbox the push should work: %v\n%s", err, out)
	}
	p := Policy{WorkTree: w.wt, Readable: []string{remote}}
	out, err := boxed(t, p, "git push -q "+remote+" HEAD:refs/heads/by-agent")
	if err == nil {
		t.Errorf("git push from inside the sandbox worked:\n%s", out)
	}
	if refs := git(t, remote, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/by-user" {
		t.Errorf("the remote's refs are %q, want only refs/heads/by-user", refs)
	}
}

func TestHostProcessesCannotBeSignalled(t *testing.T) {
	needBwrap(t)
	sleeper := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	first := sleeper()
	if out, err := plain(t, "/", "kill "+strconv.Itoa(first.Process.Pid)); err != nil {
		t.Fatalf("without the sandbox the kill should work: %v\n%s", err, out)
	}
	second := sleeper()
	p := Policy{WorkTree: t.TempDir()}
	// The test's own process stands for ralph: "kill -0" asks whether it
	// could be signalled without stopping the test when it could.
	for _, script := range []string{"kill " + strconv.Itoa(second.Process.Pid), "kill -0 " + strconv.Itoa(os.Getpid())} {
		if out, err := boxed(t, p, script); err == nil {
			t.Errorf("%s from inside the sandbox worked:\n%s", script, out)
		}
	}
	if err := second.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the host's process was stopped from inside the sandbox: %v", err)
	}
}

func TestEnvironmentIsAllowListed(t *testing.T) {
	needBwrap(t)
	t.Setenv("RALPH_TEST_SECRET", "s3cret-value")
	t.Setenv("RALPH_TEST_ALLOWED", "fine")
	if out, _ := plain(t, "/", "printenv RALPH_TEST_SECRET"); !strings.Contains(out, "s3cret-value") {
		t.Fatalf("without the sandbox the secret should be readable: %q", out)
	}
	p := Policy{WorkTree: t.TempDir(), Env: []string{"RALPH_TEST_ALLOWED"}}
	out, _ := boxed(t, p, "env")
	if strings.Contains(out, "s3cret-value") {
		t.Errorf("the secret reached the sandbox:\n%s", out)
	}
	for _, want := range []string{"RALPH_TEST_ALLOWED=fine", "PATH=", "HOME=", "TMPDIR=/tmp"} {
		if !strings.Contains(out, want) {
			t.Errorf("the sandbox's environment lacks %s:\n%s", want, out)
		}
	}
	c, err := Wrap(p, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(c.Args, " "), "fine") {
		t.Errorf("a variable's value is in bwrap's arguments, which every user can read: %q", c.Args)
	}
}

func TestHostNetworkIsUnreachable(t *testing.T) {
	needBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	connect := "exec 3<>/dev/tcp/127.0.0.1/" + port
	if out, err := plain(t, "/", connect); err != nil {
		t.Fatalf("without the sandbox the connection should work: %v\n%s", err, out)
	}
	p := Policy{WorkTree: t.TempDir()}
	if out, err := boxed(t, p, connect); err == nil {
		t.Errorf("the host's listener on 127.0.0.1:%s was reached from inside the sandbox:\n%s", port, out)
	}
	p.Network = NetOpen
	if out, err := boxed(t, p, connect); err != nil {
		t.Errorf("with network open the listener should be reachable: %v\n%s", err, out)
	}
}

// In proxy mode the proxy's unix socket is the one way out: it is
// reachable from inside (through the test binary, which dials it), and
// the host's loopback is not.
func TestProxySocketIsTheOneWayOut(t *testing.T) {
	needBwrap(t)
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("proxy here\n"))
			c.Close()
		}
	}()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	self, err := filepath.EvalSymlinks(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{WorkTree: t.TempDir(), Network: NetProxy, ProxySocket: sock, Readable: []string{filepath.Dir(self)}}
	c, err := Wrap(p, []string{self, dialFlag, "unix", sock})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Env = c.Env
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "proxy here") {
		t.Errorf("the proxy's socket from inside: %v\n%s", err, out)
	}
	c, err = Wrap(p, []string{self, dialFlag, "tcp", tcp.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Env = c.Env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("the host's loopback was reached in proxy mode:\n%s", out)
	}
}

func TestPrivateTmpIsBounded(t *testing.T) {
	needBwrap(t)
	fill := "head -c 4000000 /dev/zero > $TMPDIR/fill"
	if out, err := plain(t, "/", "TMPDIR="+t.TempDir()+"; "+fill); err != nil {
		t.Fatalf("without the sandbox 4 MB should fit: %v\n%s", err, out)
	}
	p := Policy{WorkTree: t.TempDir(), TmpSize: 1 << 20}
	out, err := boxed(t, p, fill)
	if err == nil || !strings.Contains(out, "No space left on device") {
		t.Errorf("4 MB into a 1 MB private /tmp: err %v, output %q; want No space left on device", err, out)
	}
	if out, err := boxed(t, p, "head -c 500000 /dev/zero > /tmp/small && test ! -e "+os.TempDir()+"/fill"); err != nil {
		t.Errorf("a small file in the private /tmp: %v\n%s", err, out)
	}
}

func TestCommitInWorktree(t *testing.T) {
	w := newWorld(t)
	p := Policy{WorkTree: w.wt}
	out, err := boxed(t, p, "echo work > story.txt && git add story.txt && git commit -q -m 'agent commit'")
	if err != nil {
		t.Fatalf("git add and commit inside the sandbox: %v\n%s", err, out)
	}
	if got := git(t, w.repo, "log", "-1", "--format=%s", "ralph/run/US-001"); got != "agent commit" {
		t.Errorf("the branch's last commit seen outside is %q, want agent commit", got)
	}
	// What commits do not need stays out of reach.
	main := git(t, w.repo, "rev-parse", "main")
	for _, script := range []string{
		"git update-ref refs/heads/main HEAD",
		"git config core.hooksPath /tmp",
		"echo 'gitdir: /tmp/evil' > .git",
		"echo /tmp/evil > $(git rev-parse --git-dir)/commondir",
	} {
		if out, err := boxed(t, p, script); err == nil {
			t.Errorf("%s: worked inside the sandbox:\n%s", script, out)
		}
	}
	if got := git(t, w.repo, "rev-parse", "main"); got != main {
		t.Errorf("main moved from inside the sandbox: %s, was %s", got, main)
	}
	if out, err := exec.Command("git", "-C", w.wt, "config", "--get", "core.hooksPath").CombinedOutput(); err == nil {
		t.Errorf("core.hooksPath was set from inside the sandbox: %q", out)
	}
}

func TestCommitInPlainCheckout(t *testing.T) {
	w := newWorld(t)
	p := Policy{WorkTree: w.repo}
	out, err := boxed(t, p, "echo work > story.txt && git add story.txt && git commit -q -m 'agent commit'")
	if err != nil {
		t.Fatalf("git add and commit inside the sandbox: %v\n%s", err, out)
	}
	if got := git(t, w.repo, "log", "-1", "--format=%s"); got != "agent commit" {
		t.Errorf("the last commit seen outside is %q, want agent commit", got)
	}
	for _, script := range []string{"git config core.hooksPath /tmp", "echo 'exit 0' > .git/hooks/pre-commit"} {
		if out, err := boxed(t, p, script); err == nil {
			t.Errorf("%s: worked inside the sandbox:\n%s", script, out)
		}
	}
}

func TestOtherWorktreeIsReadOnly(t *testing.T) {
	w := newWorld(t)
	other := filepath.Join(w.root, "other")
	git(t, w.repo, "worktree", "add", "-q", "-b", "ralph/run/US-002", other)
	script := "echo owned > " + other + "/README.md"
	if out, err := plain(t, w.wt, script); err != nil {
		t.Fatalf("without the sandbox the write should work: %v\n%s", err, out)
	}
	git(t, other, "checkout", "-q", "README.md")
	before := git(t, w.repo, "rev-parse", "ralph/run/US-002")
	p := Policy{WorkTree: w.wt, Readable: []string{other}}
	for _, s := range []string{script, "git -C " + other + " commit -q --allow-empty -m owned"} {
		if out, err := boxed(t, p, s); err == nil {
			t.Errorf("%s: worked inside the sandbox:\n%s", s, out)
		}
	}
	if b, _ := os.ReadFile(other + "/README.md"); string(b) != "hello\n" {
		t.Errorf("the other worker's worktree was written: %q", b)
	}
	if got := git(t, w.repo, "rev-parse", "ralph/run/US-002"); got != before {
		t.Errorf("the other worker's branch moved: %s, was %s", got, before)
	}
}

// The tasks of a run have their branches side by side in
// refs/heads/ralph/RUN/: an agent that could write that folder could move
// a sibling's branch, whose story would then land the agent's work or
// none. One sibling here is made after the wrap (a task that starts
// later), and one is packed, where a loose file would shadow it.
func TestSiblingBranchesAreOutOfReach(t *testing.T) {
	w := newWorld(t)
	git(t, w.repo, "branch", "ralph/run/US-003")
	git(t, w.repo, "pack-refs", "--all")
	attack := `echo work > story.txt && git add story.txt && git commit -q -m own &&
common=$(git rev-parse --git-common-dir)
git update-ref refs/heads/ralph/run/US-002 HEAD
git update-ref refs/heads/ralph/run/US-003 HEAD
git update-ref refs/heads/ralph/run/US-004 HEAD
git rev-parse HEAD > "$common/refs/heads/ralph/run/US-002"
git rev-parse HEAD > "$common/refs/heads/ralph/run/US-003"
true`
	git(t, w.repo, "branch", "ralph/run/US-002")
	if out, err := plain(t, w.wt, attack); err != nil {
		t.Fatalf("without the sandbox: %v\n%s", err, out)
	}
	if got := git(t, w.repo, "log", "-1", "--format=%s", "ralph/run/US-002"); got != "own" {
		t.Fatalf("without the sandbox the sibling should have moved; its last commit is %q", got)
	}
	git(t, w.wt, "reset", "-q", "--hard", "main")
	git(t, w.repo, "branch", "-f", "ralph/run/US-002", "main")
	git(t, w.repo, "branch", "-f", "ralph/run/US-003", "main")
	git(t, w.repo, "branch", "-D", "ralph/run/US-004")
	git(t, w.repo, "pack-refs", "--all")
	main := git(t, w.repo, "rev-parse", "main")

	c, err := Wrap(Policy{WorkTree: w.wt}, []string{"bash", "-c", attack})
	if err != nil {
		t.Fatal(err)
	}
	git(t, w.repo, "branch", "-f", "ralph/run/US-004", "main") // a task that starts while the agent works
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Env = c.Env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("inside the sandbox: %v\n%s", err, out)
	}
	if err := c.Land(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"ralph/run/US-002", "ralph/run/US-003", "ralph/run/US-004"} {
		if got := git(t, w.repo, "rev-parse", b); got != main {
			t.Errorf("the sibling %s moved from inside the sandbox: %s, was %s", b, got, main)
		}
	}
	if got := git(t, w.repo, "log", "-1", "--format=%s", "ralph/run/US-001"); got != "own" {
		t.Errorf("the agent's own commit did not reach its branch: the last commit is %q", got)
	}
	if exists(filepath.Join(w.repo, ".git", "worktrees", "wt", "sandbox-branch")) {
		t.Error("Land left the private copy of the branch behind")
	}
}

// An agent a person talks to keeps ralph's session, so that it has the
// terminal; every other one is put in a session of its own.
func TestTerminalKeepsTheSession(t *testing.T) {
	w := newWorld(t)
	session := "awk '{print $6}' /proc/self/stat"
	own, err := boxed(t, Policy{WorkTree: w.wt}, session)
	if err != nil || strings.TrimSpace(own) == "0" {
		t.Errorf("without Terminal the process should lead a session of its own inside; its session is %q (%v)", own, err)
	}
	kept, err := boxed(t, Policy{WorkTree: w.wt, Terminal: true}, session)
	if err != nil || strings.TrimSpace(kept) != "0" {
		t.Errorf("with Terminal the process should stay in ralph's session (outside the PID namespace: 0); it is %q (%v)", kept, err)
	}
}

// Set reaches inside whatever the allow list says, and wins over it.
func TestSetVariablesReachInside(t *testing.T) {
	w := newWorld(t)
	p := Policy{WorkTree: w.wt, Set: []string{"GIT_AUTHOR_NAME=Resolved Outside"}, Env: []string{"GIT_AUTHOR_NAME"},
		Environ: []string{"HOME=" + w.home, "PATH=" + os.Getenv("PATH"), "GIT_AUTHOR_NAME=from env"}}
	out, err := boxed(t, p, `printf %s "$GIT_AUTHOR_NAME"`)
	if err != nil || out != "Resolved Outside" {
		t.Errorf("GIT_AUTHOR_NAME inside is %q (%v), want the value Set gave", out, err)
	}
}

func TestCommitInRepositoryOfAnotherOwner(t *testing.T) {
	w := newWorld(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to give the repository to another user")
	}
	if out, err := exec.Command("chown", "-R", "1000:1000", w.repo, w.wt).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
	if out, err := plain(t, w.wt, "git status"); err == nil || !strings.Contains(out, "dubious ownership") {
		t.Fatalf("without the sandbox git should refuse the repository: %v\n%s", err, out)
	}
	out, err := boxed(t, Policy{WorkTree: w.wt}, "echo work > story.txt && git add story.txt && git commit -q -m 'agent commit'")
	if err != nil {
		t.Errorf("commit in a repository of another owner inside the sandbox: %v\n%s", err, out)
	}
}

// ralph stops an agent by its process group (proc): the sandboxed
// processes are in a session of their own (--new-session), so it is
// --die-with-parent and the PID namespace that must take them down with
// bwrap.
func TestTimeoutStopsEverythingInside(t *testing.T) {
	needBwrap(t)
	marker := "3" + strconv.Itoa(os.Getpid()%100000)
	c, err := Wrap(Policy{WorkTree: t.TempDir()}, []string{"bash", "-c", "sleep " + marker + " & sleep " + marker + "; wait"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // what a failed test left behind
		for _, pid := range running(t, "sleep "+marker) {
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	// The timeout must come while the sleeps run, or the test would pass
	// having stopped nothing: they are seen running before it fires.
	type result struct {
		out proc.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := proc.Run(context.Background(), proc.Spec{Args: c.Args, Env: c.Env, Timeout: 3 * time.Second, Grace: 200 * time.Millisecond})
		done <- result{out, err}
	}()
	wait.Until(t, 3*time.Second, func() bool { return len(running(t, "sleep "+marker)) == 2 }, "the two sleeps to run inside the sandbox")
	if r := <-done; r.err != nil || !r.out.TimedOut {
		t.Fatalf("proc.Run: %+v, %v", r.out, r.err)
	}
	wait.Until(t, 5*time.Second, func() bool {
		return len(running(t, "sleep "+marker)) == 0
	}, "the sandbox's processes to be gone")
}

// running lists the pids whose command line is cmdline.
func running(t *testing.T, cmdline string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ") == cmdline {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func TestWrapRefusesBadPolicies(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{WorkTree: "wt"}, `work tree "wt" is not an absolute path`},
		{Policy{WorkTree: filepath.Join(dir, "nope")}, "no such file or directory"},
		{Policy{WorkTree: dir, Writable: []string{filepath.Join(dir, "nope")}}, "writable path: lstat"},
		{Policy{WorkTree: dir, Readable: []string{"x"}}, `readable path "x" is not an absolute path`},
		{Policy{WorkTree: dir, Network: "wifi"}, `sandbox network "wifi": want none, open or proxy`},
		{Policy{WorkTree: dir, Network: NetProxy}, `proxy socket "" is not an absolute path`},
		{Policy{WorkTree: dir, Network: NetProxy, ProxySocket: dir, Allow: []string{"https://x.org"}}, `allowed host "https://x.org"`},
		{Policy{WorkTree: dir, Environ: []string{"HOME=home"}}, `HOME is "home": it must be an absolute path`},
		{Policy{WorkTree: dir, Environ: []string{"HOME=" + dir}}, "the work tree is the home folder"},
	} {
		_, err := Wrap(c.p, []string{"true"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Wrap(%+v): %v; want an error with %q", c.p, err, c.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"off", "bwrap", "auto", " auto "} {
		if _, err := ParseMode(s); err != nil {
			t.Errorf("ParseMode(%q): %v", s, err)
		}
	}
	_, err := ParseMode("docker")
	if err == nil || err.Error() != `sandbox mode "docker": want off, bwrap or auto` {
		t.Errorf("ParseMode(docker): %v", err)
	}
	if _, err := ParseNetwork("proxy"); err != nil {
		t.Errorf("ParseNetwork(proxy): %v", err)
	}
	if _, err := ParseNetwork("all"); err == nil {
		t.Error("ParseNetwork(all) took it")
	}
}

func TestProbe(t *testing.T) {
	needBwrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Probe(ctx); err != nil {
		t.Fatalf("bwrap is installed and works here: %v", err)
	}

	t.Setenv("PATH", t.TempDir())
	err := Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), "install bubblewrap (apt-get install bubblewrap)") {
		t.Errorf("without bwrap: %v", err)
	}

	// A bwrap that fails as it does where user namespaces are disabled.
	bin := t.TempDir()
	write(t, filepath.Join(bin, "bwrap"), "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n")
	os.Chmod(filepath.Join(bin, "bwrap"), 0o755)
	t.Setenv("PATH", bin)
	err = Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), "No permissions to create new namespace") {
		t.Errorf("with user namespaces disabled: %v", err)
	}
}

// BenchmarkWrapTrue measures what the sandbox adds to starting a process.
func BenchmarkWrapTrue(b *testing.B) {
	needBwrap(b)
	c, err := Wrap(Policy{WorkTree: b.TempDir()}, []string{"true"})
	if err != nil {
		b.Fatal(err)
	}
	// Network proxy adds the proxy outside and the forwarder inside.
	px, err := StartProxy(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer px.Close()
	self, _ := os.Executable()
	cp, err := Wrap(Policy{WorkTree: b.TempDir(), Network: NetProxy, ProxySocket: px.Socket, Forwarder: []string{self, ForwardCommand}}, []string{"true"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		args []string
	}{{"plain", []string{"true"}}, {"bwrap", c.Args}, {"bwrap-proxy", cp.Args}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(bc.args[0], bc.args[1:]...)
				cmd.Env = c.Env
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
			}
		})
	}
}

// A PATH folder reached through a link in a place the sandbox hides (a
// tools folder linked from a checkout in /tmp) is looked up where the
// link leads, which the sandbox shows (here because it is readable): a
// program found by name outside is found by name inside.
func TestLinkedPathFolderStaysOnPath(t *testing.T) {
	needBwrap(t)
	real := t.TempDir()
	if err := os.WriteFile(filepath.Join(real, "ralph-linked-tool"), []byte("#!/bin/sh\necho linked tool ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "bin")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", link+string(filepath.ListSeparator)+os.Getenv("PATH"))
	if out, _ := plain(t, "/", "ralph-linked-tool"); !strings.Contains(out, "linked tool ran") {
		t.Fatalf("outside the sandbox the tool should run: %q", out)
	}
	out, err := boxed(t, Policy{WorkTree: t.TempDir(), Readable: []string{real}}, "ralph-linked-tool")
	if err != nil || !strings.Contains(out, "linked tool ran") {
		t.Errorf("inside the sandbox the tool on a linked PATH folder was not found: %v: %q", err, out)
	}
}

// The base URL and allow_hosts naming the same loopback server are one
// listener inside, not a second that finds the port taken.
func TestOneListenerPerAllowedAddress(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Wrap(Policy{WorkTree: t.TempDir(), Network: NetProxy, ProxySocket: sock, Forwarder: []string{"/bin/true"},
		Allow: []string{"127.0.0.1:8787", "127.0.0.1:8787", "api.example.com"}}, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(c.Args, " "), "-listen 127.0.0.1:8787"); n != 1 {
		t.Errorf("want one listener for 127.0.0.1:8787, got %d: %q", n, c.Args)
	}
}
