package realagents

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/testing/modelserver"
)

// sandboxNetwork is the [sandbox] network of the sandboxed runs: the one
// switch between the network modes. It is "proxy", the default once the
// sandbox is on: the runs reach the model server through the forwarder on
// the sandbox's own 127.0.0.1:PORT and ralph's allow-list proxy, which
// allow_hosts opens to it. "open" (the host's network) is the other
// mode these runs know.
const sandboxNetwork = "proxy"

// plantedKey is the content of the private key the test plants in the
// HOME ralph runs with: the sandbox hides that home from the agent.
const plantedKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted-by-the-sandboxed-real-agents-test\n-----END OPENSSH PRIVATE KEY-----\n"

// leakCmd is what the model first has the CLI's shell tool run: copy the
// planted key into the work tree, and say which home the CLI saw. The
// errors go nowhere so that a key it cannot read leaves leaked.txt empty.
const leakCmd = `cat ~/.ssh/id_ed25519 > leaked.txt 2>/dev/null; ls -A ~ > home-seen.txt 2>/dev/null; true`

// TestRealAgentsSandboxed runs `ralph build --sandbox bwrap` with each real
// agent CLI against the scripted model server on loopback (its address is
// the allowed host; see sandboxNetwork). In one story the model first has
// the CLI's shell tool copy a planted ~/.ssh/id_ed25519 into the work
// tree, then implement the story. For every CLI it shows that the CLI
// starts and works inside the sandbox with its state folders (the agent
// spec's State) and [sandbox] env, that it could not read the key, and
// that ralph verifies, commits and completes the story.
func TestRealAgentsSandboxed(t *testing.T) {
	ralph, bin := realSetup(t)
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("the sandboxed real agents need bubblewrap: install it (apt-get install bubblewrap, or bash scripts/install-debs.sh)")
	}
	for _, a := range realAgentTable {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			turns := append([]modelserver.Turn{modelserver.Tool(leakCmd)}, implementTurns()...)
			r := newRealRun(t, a, ralph, bin, turns, false, true)
			key := filepath.Join(r.home, ".ssh", "id_ed25519")
			if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(key, []byte(plantedKey), 0o600); err != nil {
				t.Fatal(err)
			}
			r.ralphCmd(t, "build", "3", "--sandbox", "bwrap")
			r.wantCompleted(t)
			it := r.iteration(t, 1)
			r.wantDone(t, it)
			if n := r.srv.Consumed(); n != 3 {
				t.Errorf("the CLI consumed %d turns, want 3 (leak attempt, tool call, final text)", n)
			}
			// The leak attempt ran (its files are there) and found no key.
			leaked, err := os.ReadFile(filepath.Join(r.work, "leaked.txt"))
			if err != nil {
				t.Errorf("the CLI's shell did not run the leak attempt: %v", err)
			}
			if strings.Contains(string(leaked), "planted-by") {
				t.Errorf("the sandboxed %s read the planted ~/.ssh/id_ed25519: leaked.txt = %q", a.name, leaked)
			}
			seen, err := os.ReadFile(filepath.Join(r.work, "home-seen.txt"))
			if err != nil {
				t.Errorf("the CLI's shell did not list its home: %v", err)
			}
			t.Logf("the home %s saw: %q", a.name, seen)
			if strings.Contains(string(seen), ".ssh") {
				t.Errorf("the sandboxed %s saw ~/.ssh in its home: %q", a.name, seen)
			}
			if log := r.git(t, "log", "-p", "--all"); strings.Contains(log, "planted-by") {
				t.Errorf("the planted key is in the repository's history")
			}
			// What the CLI wrote in its state folders (named by the agent
			// spec, made by ralph when missing) outlives the sandbox.
			for _, p := range sandboxKept[a.name] {
				if _, err := os.Stat(filepath.Join(r.home, p)); err != nil {
					t.Errorf("%s's ~/%s is not in the home after the run: the sandbox kept it in its own (%v)", a.name, p, err)
				}
			}
		})
	}
}

// sandboxKept are files and folders (under HOME) that each CLI writes in
// a story, in the state folders its agent spec names: its transcripts,
// database, locks and downloaded tools. This HOME starts with only the
// config files the modelserver environments write.
var sandboxKept = map[string][]string{
	"claude":   {".claude/projects"},
	"codex":    {".codex/sessions"},
	"gemini":   {".gemini/tmp"},
	"opencode": {".local/share/opencode/opencode.db", ".local/state/opencode/locks", ".cache/opencode/bin"},
}

// sandboxEnv are the variables of the modelserver environments that the
// sandbox must pass on besides the agent spec's own (CredentialEnv): the
// key variable of the Codex provider the test defines, and the switches
// that keep opencode from fetching models, updates and plugins. A person
// with such settings lists them in [sandbox] env the same way.
var sandboxEnv = map[string][]string{
	"codex":    {"STUB_API_KEY"},
	"opencode": {"OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_LSP_DOWNLOAD", "OPENCODE_DISABLE_DEFAULT_PLUGINS"},
}

// sandboxConfig is the [sandbox] section of a sandboxed run of agent
// against the model server at serverURL, with the CLIs installed in
// tools. The agent spec's state folders and the files its variables name
// (opencode's OPENCODE_CONFIG in the hidden home) are the agent's without
// naming them; the one path named is where the CLIs are installed, as a
// user whose CLIs live under the home or /tmp names it (a clone of this
// repository in /tmp has them there, and the sandbox hides /tmp).
func sandboxConfig(agent, serverURL, tools string) string {
	env := sandboxEnv[agent]
	extra := []string{fmt.Sprintf("readable = [%q]", tools)}
	switch sandboxNetwork {
	case "open":
		// The modelserver environments point HTTP(S)_PROXY at the server,
		// which records and refuses every other host the CLI tries
		// (ralphCmd fails the test for one it does not know). With the
		// network open nothing else would see those attempts.
		env = append(env, "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy")
	case "proxy":
		// ralph's proxy allows the model server and sets the proxy
		// variables itself.
		u, err := url.Parse(serverURL)
		if err != nil {
			panic(err)
		}
		extra = append(extra, fmt.Sprintf("allow_hosts = [%q]", u.Host))
	}
	quoted := make([]string, len(env))
	for i, name := range env {
		quoted[i] = fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("[sandbox]\nnetwork = %q\nenv = [%s]\n%s\n", sandboxNetwork, strings.Join(quoted, ", "), strings.Join(extra, "\n"))
}
