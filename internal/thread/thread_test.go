package thread

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/store"
)

func TestPhaseJSONIsTagged(t *testing.T) {
	for _, tc := range []struct {
		p    PhaseState
		want string
	}{
		{PhaseState{Type: PhaseDrafting}, `{"type":"Drafting"}`},
		{PhaseState{Type: PhaseRunning, Iteration: 3}, `{"type":"Running","data":{"iteration":3}}`},
		{PhaseState{Type: PhaseRunning}, `{"type":"Running","data":{"iteration":0}}`},
		{PhaseState{Type: PhasePaused, Iteration: 2}, `{"type":"Paused","data":{"iteration":2}}`},
		{PhaseState{Type: PhaseVerifying, Iteration: 5}, `{"type":"Verifying","data":{"iteration":5}}`},
		{PhaseState{Type: PhasePreflightFailed, Failures: []string{"dirty tree"}}, `{"type":"PreflightFailed","data":{"failures":["dirty tree"]}}`},
		{PhaseState{Type: PhaseDone, Iteration: 9}, `{"type":"Done"}`}, // unit variants carry nothing
	} {
		b, err := json.Marshal(tc.p)
		if err != nil || string(b) != tc.want {
			t.Errorf("marshal %+v = %s %v, want %s", tc.p, b, err, tc.want)
		}
	}
	// Every phase survives a round trip.
	for _, p := range Phases {
		in := PhaseState{Type: p}
		if p.hasIteration() {
			in.Iteration = 7
		}
		if p == PhasePreflightFailed {
			in.Failures = []string{"a", "b"}
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out PhaseState
		if err := json.Unmarshal(b, &out); err != nil || !reflect.DeepEqual(in, out) {
			t.Errorf("%s: round trip %s gave %+v %v", p, b, out, err)
		}
	}
}

func TestPhaseJSONRefusesWhatItCannotRead(t *testing.T) {
	for in, want := range map[string]string{
		`"Running"`:                   "must be an object",
		`{"type":"Sleeping"}`:         `unknown phase "Sleeping"`,
		`{}`:                          `no "type"`,
		`{"type":"Running","data":1}`: "Running data",
		`[1]`:                         "cannot unmarshal",
	} {
		var p PhaseState
		if err := json.Unmarshal([]byte(in), &p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
	if _, err := json.Marshal(PhaseState{Type: "Sleeping"}); err == nil {
		t.Error("marshalled an unknown phase")
	}
	var p PhaseState
	if err := json.Unmarshal([]byte(`{"type":"Drafting","data":{"x":1}}`), &p); err != nil || p.Type != PhaseDrafting {
		t.Errorf("unit variant with data: %+v %v", p, err)
	}
}

func sample(t *testing.T) Thread {
	t.Helper()
	th, err := New("abc123", "Add feature X", ModeQuick, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	th.Phase = PhaseState{Type: PhaseRunning, Iteration: 3}
	th.CurrentRunID = "run-001"
	th.SpecVersion = 2
	th.Baseline = &Baseline{Branch: "main", CommitSHA: "0123abcd", CapturedAt: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)}
	th.Branch = BranchName(th.ID)
	th.Stuck = &StuckInfo{SpecVersion: 1, Iterations: 10, CriteriaPassed: []string{"AC-1"}, CriteriaFailed: []string{"AC-2"},
		ClosestOutput: "runs/run-000/iter-9.log", DiffPath: "runs/run-000/stuck.diff"}
	return th
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	th := sample(t)
	created := th.CreatedAt
	if err := Save(dir, &th); err != nil {
		t.Fatal(err)
	}
	if th.CreatedAt != created || th.UpdatedAt.Before(created) || th.SchemaVersion != 1 {
		t.Fatalf("stamps: %+v", th)
	}
	got, err := Load(dir, "abc123")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, th) {
		t.Fatalf("round trip\n got %+v\nwant %+v", got, th)
	}
	raw, _ := os.ReadFile(Path(dir, "abc123"))
	for _, want := range []string{`"schema_version": 1`, `"type": "Running"`, `"iteration": 3`, `"commit_sha": "0123abcd"`,
		`"current_run_id": "run-001"`, `"closest_output": "runs/run-000/iter-9.log"`, `"mode": "quick"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("thread.json lacks %s:\n%s", want, raw)
		}
	}
	entries, _ := os.ReadDir(Dir(dir, "abc123"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestSaveRefusesAnInvalidThread(t *testing.T) {
	dir := t.TempDir()
	for _, th := range []Thread{
		{ID: "../escape", Mode: ModeQuick, Phase: PhaseState{Type: PhaseDrafting}},
		{ID: "ok", Mode: "fast", Phase: PhaseState{Type: PhaseDrafting}},
		{ID: "ok", Mode: ModeQuick, Phase: PhaseState{Type: "Limbo"}},
	} {
		if err := Save(dir, &th); err == nil {
			t.Errorf("saved %+v", th)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); err == nil {
		t.Error("wrote outside threads/")
	}
}

func writeDoc(t *testing.T, dir, id, doc string) {
	t.Helper()
	if err := os.MkdirAll(Dir(dir, id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(Path(dir, id), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMigratesVersion0(t *testing.T) {
	dir := t.TempDir()
	writeDoc(t, dir, "old1", `{
  "id": "old1",
  "title": "Fix the login page",
  "phase": "Running",
  "current_run_id": "run-007",
  "baseline": {"branch": "main", "commit_sha": "abc", "captured_at": "2025-06-01T10:00:00Z"},
  "created_at": "2025-06-01T09:00:00Z",
  "updated_at": "2025-06-01T10:00:00Z"
}`)
	before, _ := os.ReadFile(Path(dir, "old1"))
	th, err := Load(dir, "old1")
	if err != nil {
		t.Fatal(err)
	}
	if th.SchemaVersion != 1 || !reflect.DeepEqual(th.Phase, PhaseState{Type: PhaseRunning}) || th.Mode != ModeMethodical ||
		th.Title != "Fix the login page" || th.CurrentRunID != "run-007" || th.Baseline == nil || th.Baseline.CommitSHA != "abc" {
		t.Fatalf("migrated: %+v", th)
	}
	// Loading does not rewrite the file; the next save writes version 1.
	if after, _ := os.ReadFile(Path(dir, "old1")); string(after) != string(before) {
		t.Fatal("Load rewrote the file")
	}
	if err := Save(dir, &th); err != nil {
		t.Fatal(err)
	}
	again, err := Load(dir, "old1")
	if err != nil || !reflect.DeepEqual(again, th) {
		t.Fatalf("after save: %+v %v", again, err)
	}
	raw, _ := os.ReadFile(Path(dir, "old1"))
	if !strings.Contains(string(raw), `"schema_version": 1`) || !strings.Contains(string(raw), `"type": "Running"`) {
		t.Fatalf("saved:\n%s", raw)
	}
}

func TestMigrationVariants(t *testing.T) {
	dir := t.TempDir()
	// Phase names in other spellings, and a phase already tagged.
	for id, doc := range map[string]string{
		"v0a": `{"id":"v0a","phase":"pending_review","mode":"quick"}`,
		"v0b": `{"id":"v0b","phase":{"type":"PendingReview"},"mode":"quick"}`,
	} {
		writeDoc(t, dir, id, doc)
		th, err := Load(dir, id)
		if err != nil || th.Phase.Type != PhasePendingReview || th.Mode != ModeQuick {
			t.Errorf("%s: %+v %v", id, th, err)
		}
	}
	for id, tc := range map[string]struct{ doc, want string }{
		"bad1": {`{"id":"bad1","phase":"Sleeping"}`, `unknown phase "Sleeping"`},
		"bad2": {`{"id":"bad2"}`, `no "phase"`},
		"bad3": {`{"schema_version":1,"id":"bad3","mode":"quick","phase":"Running"}`, "must be an object"},
		"bad4": {`{"schema_version":-1,"id":"bad4","phase":"Running"}`, "cannot be migrated"},
		"bad5": {`{"schema_version":1,"id":"other","mode":"quick","phase":{"type":"Done"}}`, `id is "other"`},
		"bad6": {`{"schema_version":1,"id":"bad6","mode":"fast","phase":{"type":"Done"}}`, `unknown mode "fast"`},
		"bad7": {`{"id": "bad7",`, "line 1"},
		"bad8": {`null`, "not a JSON object"},
	} {
		writeDoc(t, dir, id, tc.doc)
		if _, err := Load(dir, id); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", id, err, tc.want)
		}
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeDoc(t, dir, "future", `{"schema_version":2,"id":"future","phase":{"type":"Warp"},"mode":"quick"}`)
	_, err := Load(dir, "future")
	var se *store.SchemaError
	if !errors.As(err, &se) || se.Found != 2 || se.Current != 1 {
		t.Fatalf("err %v, want a SchemaError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "schema_version 2") || !strings.Contains(msg, "upgrade ralph") {
		t.Errorf("unclear message: %s", msg)
	}
}

func TestLoadMissingThread(t *testing.T) {
	_, err := Load(t.TempDir(), "nope")
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), `no thread "nope"`) {
		t.Fatalf("err %v", err)
	}
	if _, err := Load(t.TempDir(), "../etc"); err == nil || !strings.Contains(err.Error(), "not a thread id") {
		t.Fatalf("err %v", err)
	}
}

func TestCreateAndList(t *testing.T) {
	dir := t.TempDir()
	if got, err := List(dir); err != nil || got != nil {
		t.Fatalf("empty workspace: %v %v", got, err)
	}
	a, err := Create(dir, "first", ModeMethodical)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(dir, "second", ModeQuick)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID >= b.ID || a.Phase.Type != PhaseDrafting || a.CreatedAt.IsZero() {
		t.Fatalf("created %+v %+v", a, b)
	}
	if _, err := Create(dir, "x", "fast"); err == nil {
		t.Fatal("created a thread with an unknown mode")
	}
	writeDoc(t, dir, "broken", `{`)
	got, err := List(dir)
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID || got[1].Mode != ModeQuick {
		t.Fatalf("list: %+v", got)
	}
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("list did not report the broken thread: %v", err)
	}
}

// The whole cycle a runner performs: load, Next, save.
func TestTransitionsPersist(t *testing.T) {
	dir := t.TempDir()
	th, err := Create(dir, "t", ModeMethodical)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []Event{
		{Verb: VerbFinalize, Source: SourceHuman},
		{Verb: VerbImplement, Source: SourceHuman},
		{Verb: VerbChecksFail, Source: SourceSystem, Failures: []string{"tools: claude not found"}},
	} {
		loaded, err := Load(dir, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		next, _, err := Next(loaded, ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := Save(dir, &next); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Load(dir, th.ID)
	if err != nil || !reflect.DeepEqual(got.Phase, PhaseState{Type: PhasePreflightFailed, Failures: []string{"tools: claude not found"}}) {
		t.Fatalf("%+v %v", got.Phase, err)
	}
}
