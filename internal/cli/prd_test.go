package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const oldPRD = "# PRD: todos\n\n### [x] US-001: Add todos\n- [x] add\n\n### [ ] US-002: Due dates\n- [ ] due\n"

// prdRepo is a repository with a PRD holding finished work and an agent
// whose interactive run replaces it.
func prdRepo(t *testing.T) (dir, prd string) {
	return prdRepoWith(t, "printf '### [ ] US-001: New\\n- [ ] new\\n' > .agents/tasks/prd.md")
}

// prdRepoWith is prdRepo with an agent that runs script.
func prdRepoWith(t *testing.T, script string) (dir, prd string) {
	t.Helper()
	dir = newTestRepo(t)
	prd = filepath.Join(dir, ".agents", "tasks", "prd.md")
	config := `[agent]
default = "writer"
[agents.writer]
command = ["sh", "-c", "exit 1"]
interactive = ["sh", "-c", "` + script + `", "{prompt}"]
`
	for path, content := range map[string]string{prd: oldPRD, filepath.Join(dir, ".ralph", "config.toml"): config} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, prd
}

// On a terminal, replacing a PRD is a y/N question; anything but yes keeps
// it and writes nothing.
func TestPRDAsksBeforeReplacingOnATerminal(t *testing.T) {
	for _, answer := range []string{"n\n", "\n", ""} {
		dir, prd := prdRepo(t)
		r := run(t, dir, strings.NewReader(answer), true, "prd", "something else")
		if r.code != ExitOK {
			t.Fatalf("answer %q: want exit 0, got:\n%s", answer, r)
		}
		if !strings.Contains(r.out, ".agents/tasks/prd.md already holds a PRD with 2 stories (1 done). Replace it (the old one is kept as .agents/tasks/prd.md.bak)? [y/N]") {
			t.Errorf("answer %q: no y/N question naming the PRD:\n%s", answer, r)
		}
		if !strings.Contains(r.out, "kept .agents/tasks/prd.md; nothing was written") {
			t.Errorf("answer %q: does not say the PRD was kept:\n%s", answer, r)
		}
		if b, _ := os.ReadFile(prd); string(b) != oldPRD {
			t.Errorf("answer %q: PRD changed to %q", answer, b)
		}
		if exists(prd + ".bak") {
			t.Errorf("answer %q: a .bak was written", answer)
		}
	}
}

// A yes keeps the old PRD as .bak, then the agent writes the new one. The
// request typed at the terminal and the answer come from one input.
func TestPRDReplacesAfterYesAndKeepsTheOldOne(t *testing.T) {
	dir, prd := prdRepo(t)
	r := run(t, dir, strings.NewReader("something else\ny\n"), true, "prd")
	if r.code != ExitOK {
		t.Fatalf("want exit 0, got:\n%s", r)
	}
	if b, _ := os.ReadFile(prd + ".bak"); string(b) != oldPRD {
		t.Errorf(".bak holds %q, want the old PRD", b)
	}
	if b, _ := os.ReadFile(prd); !strings.Contains(string(b), "US-001: New") {
		t.Errorf("PRD is %q, want the agent's new one", b)
	}
	if !strings.Contains(r.out, "next: ralph plan") {
		t.Errorf("no next step after a new PRD:\n%s", r)
	}
}

// An agent that fails and writes nothing is reported as a failure: no
// "next: ralph plan" under the old PRD, which stays as it was.
func TestPRDReportsAnAgentThatFails(t *testing.T) {
	dir, prd := prdRepoWith(t, "exit 5")
	r := run(t, dir, strings.NewReader("y\n"), true, "prd", "something else")
	if r.code == ExitOK {
		t.Fatalf("want a non-zero exit, got:\n%s", r)
	}
	if !strings.Contains(r.err, "the agent writer failed (exit code 5) and .agents/tasks/prd.md was not changed (the old PRD is still there)") {
		t.Errorf("stderr does not report the failure and the unchanged PRD:\n%s", r)
	}
	if strings.Contains(r.out, "next: ralph plan") {
		t.Errorf("a failed agent is followed by the next step:\n%s", r)
	}
	if b, _ := os.ReadFile(prd); string(b) != oldPRD {
		t.Errorf("PRD changed to %q", b)
	}
}
