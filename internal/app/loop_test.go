package app_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/runkit"
)

// A run's fallbacks leave out its own agent; a reviewer the registry does
// not know is config's mistake, named by its key.
func TestRolesFromConfig(t *testing.T) {
	dir := repo(t)
	a := open(t, dir, "[agent]\nfallbacks = [\"claude\", \"codex\"]\n\n[validate]\nreviewer = \"claude\"\n")
	main, err := a.Agent("codex")
	if err != nil {
		t.Fatal(err)
	}
	reviewer, fallbacks, err := a.Roles(main)
	if err != nil {
		t.Fatalf("Roles: %v", err)
	}
	if reviewer == nil || reviewer.Name != "claude" {
		t.Errorf("reviewer = %+v, want claude", reviewer)
	}
	if len(fallbacks) != 1 || fallbacks[0].Name != "claude" {
		t.Errorf("fallbacks = %+v, want claude alone (codex is the run's own agent)", fallbacks)
	}
	a = open(t, dir, "[validate]\nreviewer = \"nosuchagent\"\n")
	if _, _, err := a.Roles(main); err == nil || !strings.Contains(err.Error(), "[validate] reviewer") {
		t.Errorf("Roles with an unknown reviewer = %v, want an error naming [validate] reviewer", err)
	}
}

func TestLoopOptionsFromConfig(t *testing.T) {
	dir := repo(t)
	a := open(t, dir, `[build]
prd = "plans/prd.md"
max_iterations = 0
no_commit = true

[loop]
max_retries = 4

[agent]
timeout = "5m"

[budget]
max_tokens = 900

[[checks]]
run = "make test"
`)
	lo := a.LoopOptions(false)
	if lo.PRDPath != filepath.Join(dir, "plans/prd.md") || !lo.NoCommit || lo.MaxRetries != 4 || lo.AgentTimeout != 5*time.Minute {
		t.Errorf("LoopOptions = PRD %s, no_commit %v, retries %d, timeout %s", lo.PRDPath, lo.NoCommit, lo.MaxRetries, lo.AgentTimeout)
	}
	if lo.MaxIterations != 1 {
		t.Errorf("MaxIterations = %d, want 1 (at least one iteration)", lo.MaxIterations)
	}
	if lo.Budget != (runkit.Budget{MaxTokens: 900}) {
		t.Errorf("Budget = %+v", lo.Budget)
	}
	if len(lo.Checks) != 1 || lo.Checks[0].Name != "make test" {
		t.Errorf("Checks = %+v, want the one named by its command", lo.Checks)
	}
}
