package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/app"
)

// A session's runner takes [session] and [budget]; a role's agent comes
// from [roles.NAME], the others are the run's own.
func TestSessionFromConfig(t *testing.T) {
	dir := repo(t)
	open(t, dir, `[session]
max_task_attempts = 5
max_tasks = 7
retry_backoff = "3s"

[budget]
max_tokens = 1234

[agents.mine]
command = ["sh", "-c", "cat >/dev/null"]

[roles.reviewer]
agent = "fakeagent-that-is-not-there"
`)
	ws, cfg, err := app.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	r := app.SessionRunner(ws, filepath.Join(ws.Dir(), "sessions", "s1"), cfg)
	if r.Policy.MaxTaskAttempts != 5 || r.MaxTasks != 7 || r.Backoff != 3*time.Second || r.Budget.MaxTokens != 1234 {
		t.Errorf("SessionRunner = policy %+v, max tasks %d, backoff %s, budget %+v", r.Policy, r.MaxTasks, r.Backoff, r.Budget)
	}
	base, err := app.ResolveAgent(cfg, "mine", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.SessionRoles(cfg, base); err == nil || !strings.Contains(err.Error(), "[roles.reviewer] agent") {
		t.Errorf("SessionRoles with an unknown reviewer agent = %v, want an error naming [roles.reviewer] agent", err)
	}
}
