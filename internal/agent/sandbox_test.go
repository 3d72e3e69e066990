package agent

import (
	"bytes"
	"context"
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

func exists(path string) bool { _, err := os.Stat(path); return err == nil }
