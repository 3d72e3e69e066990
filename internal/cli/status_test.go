package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/runkit"
)

// The cooldowns status shows are the workspace's shared record, whichever
// run (a build, a thread's loop, one in another terminal) met the limit,
// together with those an older ralph kept in state.json.
func TestStatusShowsTheSharedCooldowns(t *testing.T) {
	dir := newTestRepo(t)
	home := filepath.Join(dir, ".ralph")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	one := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if err := runkit.OpenCooldowns(home).Set("one", one, "5-hour limit"); err != nil {
		t.Fatal(err)
	}

	// No build has run here yet: the rest is shown all the same.
	r := run(t, dir, nil, false, "status")
	if r.code != ExitOK {
		t.Fatalf("status:\n%s", r)
	}
	if want := "cooling down: one until " + one.Format(time.RFC3339) + " (usage limit)\n"; !strings.Contains(r.out, want) {
		t.Errorf("status does not show %q:\n%s", want, r)
	}

	// An older ralph's state.json with its own cooldowns.
	two := one.Add(time.Hour)
	old := fmt.Sprintf(`{"schema_version": 1, "run_id": "r1", "machine": {"state": "EXIT"}, "finished": true, "outcome": "complete", "metrics": {},
		"cooldowns": {"two": %q}}`, two.Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(home, "state.json"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, dir, nil, false, "status")
	i, j := strings.Index(r.out, "cooling down: one until "), strings.Index(r.out, "cooling down: two until "+two.Format(time.RFC3339))
	if r.code != ExitOK || i < 0 || j < i {
		t.Errorf("status does not show one, then two:\n%s", r)
	}
	r = run(t, dir, nil, false, "status", "--json")
	var rep struct {
		Cooldowns map[string]string `json:"cooldowns"`
	}
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	if rep.Cooldowns["one"] != one.Format(time.RFC3339) || rep.Cooldowns["two"] != two.Format(time.RFC3339) || len(rep.Cooldowns) != 2 {
		t.Errorf("status --json cooldowns = %v; want one and two", rep.Cooldowns)
	}
}

// A cooldowns record ralph cannot read is an error that says what to do,
// not an empty list: an agent shown as free would be asked and burn its
// quota.
func TestStatusRefusesAnUnreadableCooldownsRecord(t *testing.T) {
	dir := newTestRepo(t)
	home := filepath.Join(dir, ".ralph")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, runkit.CooldownsFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, nil, false, "status")
	if r.code == ExitOK || !strings.Contains(r.err, ".ralph/cooldowns.json") || !strings.Contains(r.err, "remove the file") {
		t.Errorf("want an error naming .ralph/cooldowns.json and what to do:\n%s", r)
	}
}
