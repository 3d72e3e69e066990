package app_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A session's runner takes [session] and [budget]; a role's agent comes
// from [roles.NAME], the others are the run's own.
func TestSessionFromConfig(t *testing.T) {
	dir := repo(t)
	a := open(t, dir, `[session]
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
	r := a.SessionRunner(filepath.Join(a.WS.Dir(), "sessions", "s1"))
	if r.Policy.MaxTaskAttempts != 5 || r.MaxTasks != 7 || r.Backoff != 3*time.Second || r.Budget.MaxTokens != 1234 {
		t.Errorf("SessionRunner = policy %+v, max tasks %d, backoff %s, budget %+v", r.Policy, r.MaxTasks, r.Backoff, r.Budget)
	}
	if _, err := a.SessionRoles("mine"); err == nil || !strings.Contains(err.Error(), "[roles.reviewer] agent") {
		t.Errorf("SessionRoles with an unknown reviewer agent = %v, want an error naming [roles.reviewer] agent", err)
	}
}
