package agent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/sandbox"
)

// An agent run under a sandbox policy cannot read the home's keys or
// write outside its work tree, but keeps its state folder, its
// credentials and its token; the same run without the policy reaches
// both, so the sandbox is what stops it.
func TestRunUnderSandboxKeepsTheAgentInItsWorkTree(t *testing.T) {
	if err := sandbox.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	home, dir, outside := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", "kept")
	t.Setenv("UNLISTED_SECRET", "leaked")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("PRIVATE KEY"), 0o600)
	os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
	script := `cat "$HOME/.ssh/id_ed25519"; echo x > ` + outside + `/escaped; echo state > "$HOME/.codex/state";` +
		` echo "codex_home=$CODEX_HOME secret=$UNLISTED_SECRET token=${RALPH_AGENT_TOKEN:+set}"; echo in > here`
	spec := Spec{Name: "codex", Headless: []string{"sh", "-c", script}, Format: FormatPlain, State: []string{".codex"}, CredentialEnv: []string{"CODEX_HOME"}}
	run := func(p *sandbox.Policy) string {
		os.Remove(filepath.Join(outside, "escaped"))
		var log bytes.Buffer
		if _, err := Run(context.Background(), Invocation{Spec: spec, Dir: dir, Log: &log, Sandbox: p}); err != nil {
			t.Fatal(err)
		}
		return log.String()
	}
	plain := run(nil)
	if !strings.Contains(plain, "PRIVATE KEY") || !exists(filepath.Join(outside, "escaped")) {
		t.Fatalf("without the sandbox the script should reach both: %q", plain)
	}
	boxed := run(&sandbox.Policy{})
	if strings.Contains(boxed, "PRIVATE KEY") || exists(filepath.Join(outside, "escaped")) {
		t.Errorf("the sandboxed agent read the key or wrote outside its work tree: %q", boxed)
	}
	if !strings.Contains(boxed, "codex_home=kept secret= token=set") {
		t.Errorf("the sandboxed agent's environment is wrong: %q", boxed)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".codex", "state")); string(b) != "state\n" {
		t.Errorf("the agent's state folder was not writable: %q", b)
	}
	if !exists(filepath.Join(dir, "here")) {
		t.Errorf("the agent could not write its work tree: %q", boxed)
	}
}

// TestRunUnderSandboxKeepsStateTheAgentMakes: a CLI run for the first time
// writes its sessions into state folders that do not exist yet; they are
// made before the sandbox starts, so what it writes there outlives the run.
func TestRunUnderSandboxKeepsStateTheAgentMakes(t *testing.T) {
	if err := sandbox.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	home, dir := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	script := `mkdir -p "$HOME/.fresh/sessions" && echo s1 > "$HOME/.fresh/sessions/s1" && echo {} > "$HOME/.fresh.json"`
	spec := Spec{Name: "fresh", Headless: []string{"sh", "-c", script}, Format: FormatPlain, State: []string{".fresh", ".fresh.json"}}
	var log bytes.Buffer
	res, err := Run(context.Background(), Invocation{Spec: spec, Dir: dir, Log: &log, Sandbox: &sandbox.Policy{}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the sandboxed agent failed: %v, exit %d: %s", err, res.ExitCode, log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".fresh", "sessions", "s1")); string(b) != "s1\n" {
		t.Errorf("the session the agent wrote in its new state folder is gone: %q", b)
	}
	// A state file is the CLI's own to create: ralph makes no folder in
	// its place.
	if fi, err := os.Stat(filepath.Join(home, ".fresh.json")); err == nil && fi.IsDir() {
		t.Errorf("~/.fresh.json was made a folder")
	}
}

// TestRunUnderSandboxFollowsStateMovedByItsVariables: a credential variable
// that points the CLI at its config elsewhere in the home (OPENCODE_CONFIG,
// CLAUDE_CONFIG_DIR) makes that file or folder the agent's state; a
// variable naming the home itself, or a link to it, does not open the home.
func TestRunUnderSandboxFollowsStateMovedByItsVariables(t *testing.T) {
	if err := sandbox.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	home, dir := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	os.MkdirAll(filepath.Join(home, "work-account"), 0o700)
	os.WriteFile(filepath.Join(home, "my-config.json"), []byte("provider=stub\n"), 0o600)
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("PRIVATE KEY"), 0o600)
	t.Setenv("MY_CONFIG", filepath.Join(home, "my-config.json"))
	t.Setenv("MY_CONFIG_DIR", filepath.Join(home, "work-account"))
	t.Setenv("MY_HOME", home)
	link := filepath.Join(t.TempDir(), "home-link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MY_HOME_LINK", link)
	script := `cat "$MY_CONFIG"; echo session > "$MY_CONFIG_DIR/session"; cat "$MY_HOME/.ssh/id_ed25519" "$MY_HOME_LINK/.ssh/id_ed25519"`
	spec := Spec{Name: "moved", Headless: []string{"sh", "-c", script}, Format: FormatPlain, CredentialEnv: []string{"MY_CONFIG", "MY_CONFIG_DIR", "MY_HOME", "MY_HOME_LINK"}}
	var log bytes.Buffer
	if _, err := Run(context.Background(), Invocation{Spec: spec, Dir: dir, Log: &log, Sandbox: &sandbox.Policy{}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "provider=stub") {
		t.Errorf("the agent could not read the config its variable names: %q", log.String())
	}
	if b, _ := os.ReadFile(filepath.Join(home, "work-account", "session")); string(b) != "session\n" {
		t.Errorf("the agent's write into the folder its variable names is gone: %q", b)
	}
	if strings.Contains(log.String(), "PRIVATE KEY") {
		t.Errorf("a variable naming the home, or a link to it, opened the home: %q", log.String())
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// Under network "proxy" the agent reaches the endpoint its base-URL
// variable names, at that URL, and nothing else: a second server on the
// same loopback is refused, and the refusal is in the Result and told
// to OnDenied as it happens.
func TestRunUnderProxyReachesOnlyItsEndpoint(t *testing.T) {
	if err := sandbox.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "model-ok") }))
	defer model.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other-ok") }))
	defer other.Close()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("ANTHROPIC_BASE_URL", model.URL)
	script := `curl -sS "$ANTHROPIC_BASE_URL/v1/messages"; echo; curl -sS --noproxy '' ` + other.URL + `; echo`
	spec := Spec{Name: "claude", Headless: []string{"sh", "-c", script}, Format: FormatPlain, Hosts: []string{"api.anthropic.com"}, BaseURLEnv: []string{"ANTHROPIC_BASE_URL"}}
	var told []sandbox.Denied
	var log bytes.Buffer
	out, err := Run(context.Background(), Invocation{Spec: spec, Dir: t.TempDir(), Log: &log,
		Sandbox: &sandbox.Policy{Network: sandbox.NetProxy}, OnDenied: func(d sandbox.Denied) { told = append(told, d) }})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "model-ok") || strings.Contains(log.String(), "other-ok") {
		t.Errorf("want the model reached and the other server not: %q", log.String())
	}
	port := other.Listener.Addr().(*net.TCPAddr).Port
	if d := out.Result.Denied; len(d) != 1 || d[0].Host != "127.0.0.1" || d[0].Port != port || len(told) != 1 {
		t.Errorf("Result.Denied = %+v, told %+v; want the other server's address once", d, told)
	}
}

func TestAllowListFollowsTheBaseURL(t *testing.T) {
	claude := Spec{Hosts: []string{"api.anthropic.com"}, BaseURLEnv: []string{"ANTHROPIC_BASE_URL"}}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, "api.anthropic.com registry.npmjs.org"},
		{[]string{"ANTHROPIC_BASE_URL=http://127.0.0.1:8787"}, "127.0.0.1:8787 registry.npmjs.org"},
		{[]string{"ANTHROPIC_BASE_URL=https://gateway.example.com/anthropic"}, "gateway.example.com:443 registry.npmjs.org"},
		{[]string{"ANTHROPIC_BASE_URL="}, "api.anthropic.com registry.npmjs.org"},
	} {
		if got := strings.Join(allowList(claude, c.env, []string{"registry.npmjs.org"}), " "); got != c.want {
			t.Errorf("env %q: allow list %q, want %q", c.env, got, c.want)
		}
	}
}

// An agent whose program lies directly in /tmp (where test binaries and
// one-off scripts live) still gets the sandbox's private /tmp: showing
// the program's folder would have put the host's /tmp, with everything
// other processes left in it, inside.
func TestProgramInTmpKeepsTheTmpPrivate(t *testing.T) {
	if err := sandbox.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", t.TempDir())
	prog, err := os.CreateTemp("/tmp", "ralph-agent-*.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(prog.Name()) })
	planted, err := os.CreateTemp("/tmp", "ralph-host-secret-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(planted.Name()) })
	planted.WriteString("HOST TMP SECRET")
	planted.Close()
	fmt.Fprintf(prog, "#!/bin/sh\ncat %s; echo; echo ran\n", planted.Name())
	prog.Close()
	os.Chmod(prog.Name(), 0o755)
	spec := Spec{Name: "plain", Headless: []string{prog.Name()}, Format: FormatPlain}
	var log bytes.Buffer
	if _, err := Run(context.Background(), Invocation{Spec: spec, Dir: t.TempDir(), Log: &log, Sandbox: &sandbox.Policy{Network: sandbox.NetNone}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "ran") {
		t.Fatalf("the agent in /tmp did not run: %q", log.String())
	}
	if strings.Contains(log.String(), "HOST TMP SECRET") {
		t.Errorf("the sandboxed agent read a file of the host's /tmp: %q", log.String())
	}
}
