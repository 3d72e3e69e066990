package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/store"
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

// TestStatusDocumentIsOneShapeOnTemporal: the document of a build on
// Temporal is the local one with the run's Query laid over it: the same
// schema_version and top-level fields, engine "temporal", and the run's
// own state under temporal. It used to be the workflow's Query result,
// a different shape a script could not read the same way.
func TestStatusDocumentIsOneShapeOnTemporal(t *testing.T) {
	dir := newTestRepo(t)
	if err := os.MkdirAll(filepath.Join(dir, ".agents", "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".agents", "tasks", "prd.md"), []byte("### [ ] US-001: One\n- [ ] x\n\n### [ ] US-002: Two\n- [ ] y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, _, _ := testEnv(dir, nil, false)
	_, a, err := openWorkspace(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	local, _, _, err := a.Status("")
	if err != nil {
		t.Fatal(err)
	}
	onTemporal := local
	st := fleet.Status{RunState: fleet.RunState{RunID: "b-1", Target: "main", Iterations: 3, Generation: 2, Controls: []string{"hint by cli"},
		Tasks: []*fleet.Task{{ID: "US-001", State: landing.Landed, Commit: "abc"}, {ID: "US-002", State: landing.Working, Host: "h1", Attempt: 1}}}, HistoryLength: 40, Workers: 2}
	fleetOverlay(&onTemporal, st, time.Now())
	fleetEngine(&onTemporal, app.Temporal{Server: fleet.Server{Address: "127.0.0.1:7233"}, TaskQueue: "ralph"})

	keys := func(rep status.Report) map[string]any {
		b, _ := json.Marshal(rep)
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	l, r := keys(local), keys(onTemporal)
	if l["schema_version"] != 1.0 || r["schema_version"] != 1.0 || l["engine"] != "local" || r["engine"] != "temporal" {
		t.Errorf("schema_version %v / %v, engine %v / %v; want 1 and local, temporal", l["schema_version"], r["schema_version"], l["engine"], r["engine"])
	}
	for k := range l {
		if _, ok := r[k]; !ok {
			t.Errorf("the Temporal document lacks the local document's field %q", k)
		}
	}
	tp, _ := r["temporal"].(map[string]any)
	if tp == nil || tp["generation"] != 2.0 || tp["history_length"] != 40.0 || tp["address"] != "127.0.0.1:7233" || len(tp["tasks"].([]any)) != 2 {
		t.Errorf("temporal: %v", r["temporal"])
	}
	if _, ok := l["temporal"]; ok {
		t.Errorf("a local document has a temporal field: %v", l["temporal"])
	}
	if onTemporal.Board[1].State != status.StoryClaimed {
		t.Errorf("a working task's board state is %q, want the local word %q", onTemporal.Board[1].State, status.StoryClaimed)
	}
	if onTemporal.Board[0].State != status.StoryLanded || onTemporal.RunID != "b-1" || onTemporal.Parallel.Workers != 2 {
		t.Errorf("the run's Query is not laid over the board: %+v %+v", onTemporal.Board, onTemporal.Parallel)
	}
}

// The status of a parallel build says which run it is, how long it has
// gone and whether it is running: the dashboard's run card was empty
// (Run –, Elapsed 0ms) and a running build read "running or stopped".
func TestStatusOfAParallelBuild(t *testing.T) {
	dir := newTestRepo(t)
	home := filepath.Join(dir, ".ralph")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	started := testNow.Add(-90 * time.Second)
	reg := engine.Registry{SchemaVersion: engine.RegistrySchemaVersion, RunID: "par-1", Target: "main", Workers: 2, StartedAt: started,
		Tasks: map[string]*engine.TaskRecord{"US-001": {ID: "US-001", State: landing.Working, Worker: "w1", Since: started}}}
	if err := store.WriteJSON(engine.RegistryPath(home), reg); err != nil {
		t.Fatal(err)
	}
	// Its last write, 30 s after the start: where a stopped one's time ends.
	os.Chtimes(engine.RegistryPath(home), started.Add(30*time.Second), started.Add(30*time.Second))
	statusJSON := func() status.Report {
		t.Helper()
		r := run(t, dir, nil, false, "status", "--json")
		var rep status.Report
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
			t.Fatalf("status --json: %v\n%s", err, r)
		}
		return rep
	}
	// Stopped: nothing holds the workspace.
	if r := run(t, dir, nil, false, "status"); !strings.Contains(r.out, "2 workers: stopped: `ralph build --workers N` resumes it") {
		t.Errorf("a stopped parallel build:\n%s", r)
	}
	rep := statusJSON()
	if rep.RunID != "par-1" || rep.Running || rep.Parallel.Running || rep.ElapsedMillis != 30000 {
		t.Errorf("a stopped parallel build: run %q, running %v/%v, elapsed %dms", rep.RunID, rep.Running, rep.Parallel.Running, rep.ElapsedMillis)
	}
	// Running: the build holds the workspace's lock.
	lock, err := store.TryLock(filepath.Join(home, "lock"), "ralph build --workers 2")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if r := run(t, dir, nil, false, "status"); !strings.Contains(r.out, "2 workers: running\n") {
		t.Errorf("a running parallel build:\n%s", r)
	}
	rep = statusJSON()
	if rep.RunID != "par-1" || !rep.Parallel.Running || rep.ElapsedMillis < 90000 || rep.Parallel.ElapsedMillis < 90000 {
		t.Errorf("a running parallel build: run %q, running %v, elapsed %dms/%dms; want par-1, running, 90s or more", rep.RunID, rep.Parallel.Running, rep.ElapsedMillis, rep.Parallel.ElapsedMillis)
	}
}

// A control command given and not yet taken by a run is in the status,
// not invisible until taken.
func TestStatusShowsQueuedControls(t *testing.T) {
	dir := newTestRepo(t)
	f := control.Folder{Dir: filepath.Join(dir, ".ralph", "control")}
	c := control.New(control.Skip, control.ByWeb, testNow)
	c.Task = "US-002"
	if err := f.Enqueue(c); err != nil {
		t.Fatal(err)
	}
	if r := run(t, dir, nil, false, "status"); !strings.Contains(r.out, "queued: skip US-002 by web at ") {
		t.Errorf("status does not show the queued skip:\n%s", r)
	}
	r := run(t, dir, nil, false, "status", "--json")
	var rep status.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	if len(rep.Queued) != 1 || rep.Queued[0].Kind != control.Skip || rep.Queued[0].Task != "US-002" {
		t.Errorf("queued_controls = %+v, want the skip of US-002", rep.Queued)
	}
}
