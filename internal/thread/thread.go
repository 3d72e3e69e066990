package thread

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/ralphloop/ralph/internal/store"
)

// SchemaVersion is the version of thread.json this ralph writes.
const SchemaVersion = 1

// Thread is one feature or fix, persisted as .ralph/threads/<id>/thread.json.
type Thread struct {
	SchemaVersion int        `json:"schema_version"`
	ID            string     `json:"id"`
	Title         string     `json:"title"`
	Mode          Mode       `json:"mode"`
	Phase         PhaseState `json:"phase"`
	CurrentRunID  string     `json:"current_run_id,omitempty"`
	// SpecVersion is the spec revision the thread works from
	// (threads/<id>/spec/v<N>.md); 0 before the first one is written.
	SpecVersion int       `json:"spec_version"`
	Baseline    *Baseline `json:"baseline,omitempty"`
	Branch      string    `json:"branch,omitempty"`
	// Worktree, when set, is the thread's own worktree (absolute), outside
	// the repository: the thread's branch is checked out there and its
	// loop, checks and reviews work there, so that the person's checkout
	// is left alone and several threads can run at once. It is chosen
	// with --worktree when implementation begins and kept for the
	// thread's life; the folder itself exists only while there is work in
	// it (from implementation until commit, abandon or a reset).
	Worktree  string     `json:"worktree,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	Stuck     *StuckInfo `json:"stuck,omitempty"`
	// Assisted is set from a manual assist until verification has judged
	// the person's edits: the assist stands for the agent's claim that
	// the work is done, so no agent runs and no promise is asked for.
	// It is kept in the thread, saved with the phase, so that a resume
	// after a kill still verifies rather than runs the agent.
	Assisted bool `json:"assisted,omitempty"`
}

// Baseline is where the workspace was when implementation began: what a
// reset restores.
type Baseline struct {
	Branch     string    `json:"branch"`
	CommitSHA  string    `json:"commit_sha"`
	CapturedAt time.Time `json:"captured_at"`
}

// StuckInfo is what the Stuck phase preserves about the failed attempt. It
// is kept after the thread leaves Stuck, until the next time it gets stuck.
type StuckInfo struct {
	SpecVersion    int      `json:"spec_version"`
	Iterations     int      `json:"iterations"`
	CriteriaPassed []string `json:"criteria_passed,omitempty"`
	CriteriaFailed []string `json:"criteria_failed,omitempty"`
	// ClosestOutput is the path of the output that came closest to success.
	ClosestOutput string `json:"closest_output,omitempty"`
	// DiffPath is the path of the diff from the baseline.
	DiffPath string `json:"diff_path,omitempty"`
}

func (s StuckInfo) clone() StuckInfo {
	s.CriteriaPassed = slices.Clone(s.CriteriaPassed)
	s.CriteriaFailed = slices.Clone(s.CriteriaFailed)
	return s
}

// PhaseState is a phase with its data. On disk it is a tagged object, as
// serde's #[serde(tag = "type", content = "data")] writes it:
//
//	{"type":"Drafting"}
//	{"type":"Running","data":{"iteration":3}}
//	{"type":"PreflightFailed","data":{"failures":["git: working tree not clean"]}}
//
// Running, Paused and Verifying carry the iteration; PreflightFailed carries
// the failed checks; the other phases are unit variants.
type PhaseState struct {
	Type      Phase
	Iteration int
	Failures  []string
}

type iterationData struct {
	Iteration int `json:"iteration"`
}

type failuresData struct {
	Failures []string `json:"failures"`
}

// MarshalJSON writes the tagged form.
func (p PhaseState) MarshalJSON() ([]byte, error) {
	if !p.Type.Valid() {
		return nil, fmt.Errorf("unknown phase %q", p.Type)
	}
	type tagged struct {
		Type Phase `json:"type"`
		Data any   `json:"data,omitempty"`
	}
	v := tagged{Type: p.Type}
	switch {
	case p.Type.hasIteration():
		v.Data = iterationData{p.Iteration}
	case p.Type == PhasePreflightFailed:
		f := p.Failures
		if f == nil {
			f = []string{}
		}
		v.Data = failuresData{f}
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads the tagged form. The data of a unit variant is
// ignored; an unknown type is an error that lists the known ones.
func (p *PhaseState) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '"' {
		return fmt.Errorf(`phase must be an object like {"type":"Drafting"}, not the string %s`, t)
	}
	var w struct {
		Type *Phase          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Type == nil {
		return errors.New(`phase has no "type"`)
	}
	if !w.Type.Valid() {
		return fmt.Errorf("unknown phase %q (known: %v)", *w.Type, Phases)
	}
	out := PhaseState{Type: *w.Type}
	hasData := len(w.Data) > 0 && !bytes.Equal(bytes.TrimSpace(w.Data), []byte("null"))
	switch {
	case out.Type.hasIteration() && hasData:
		var d iterationData
		if err := json.Unmarshal(w.Data, &d); err != nil {
			return fmt.Errorf("phase %s data: %w", out.Type, err)
		}
		out.Iteration = d.Iteration
	case out.Type == PhasePreflightFailed && hasData:
		var d failuresData
		if err := json.Unmarshal(w.Data, &d); err != nil {
			return fmt.Errorf("phase %s data: %w", out.Type, err)
		}
		out.Failures = d.Failures
	}
	*p = out
	return nil
}

// New returns a thread in Drafting, not yet saved.
func New(id, title string, mode Mode, now time.Time) (Thread, error) {
	if err := ValidateID(id); err != nil {
		return Thread{}, err
	}
	if !mode.Valid() {
		return Thread{}, fmt.Errorf("unknown mode %q: use %q or %q", mode, ModeMethodical, ModeQuick)
	}
	now = now.UTC()
	return Thread{SchemaVersion: SchemaVersion, ID: id, Title: title, Mode: mode,
		Phase: PhaseState{Type: PhaseDrafting}, CreatedAt: now, UpdatedAt: now}, nil
}

// Create makes a new thread with a fresh id in ralphDir (the .ralph folder)
// and saves it. The thread's folder is created exclusively, so two
// concurrent creations never share an id.
func Create(ralphDir, title string, mode Mode) (Thread, error) {
	if err := os.MkdirAll(filepath.Join(ralphDir, "threads"), 0o755); err != nil {
		return Thread{}, err
	}
	for range 10 {
		id := NewID()
		err := os.Mkdir(Dir(ralphDir, id), 0o755)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return Thread{}, err
		}
		t, err := New(id, title, mode, time.Now())
		if err != nil {
			return Thread{}, err
		}
		return t, Save(ralphDir, &t)
	}
	return Thread{}, errors.New("could not find a free thread id; try again")
}

func (t *Thread) validate() error {
	if err := ValidateID(t.ID); err != nil {
		return err
	}
	if !t.Mode.Valid() {
		return fmt.Errorf("thread %s: unknown mode %q (use %q or %q)", t.ID, t.Mode, ModeMethodical, ModeQuick)
	}
	if !t.Phase.Type.Valid() {
		return fmt.Errorf("thread %s: unknown phase %q", t.ID, t.Phase.Type)
	}
	return nil
}

// Save writes t atomically to threads/<id>/thread.json under ralphDir. It
// stamps the current schema version and updated_at (and created_at when
// unset).
func Save(ralphDir string, t *Thread) error {
	if err := t.validate(); err != nil {
		return err
	}
	now := time.Now().UTC()
	t.SchemaVersion = SchemaVersion
	t.UpdatedAt = now
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	if err := os.MkdirAll(Dir(ralphDir, t.ID), 0o755); err != nil {
		return err
	}
	return store.WriteJSON(Path(ralphDir, t.ID), t)
}

// Load reads thread id from ralphDir. An older document is migrated in
// memory (the file is rewritten by the next Save); a newer one is refused
// with a *store.SchemaError.
func Load(ralphDir, id string) (Thread, error) {
	if err := ValidateID(id); err != nil {
		return Thread{}, err
	}
	path := Path(ralphDir, id)
	t, err := LoadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Thread{}, fmt.Errorf("no thread %q: %w", id, err)
	}
	if err != nil {
		return Thread{}, err
	}
	if t.ID != id {
		return Thread{}, fmt.Errorf("%s: id is %q, but the folder says %q: fix the id or move the folder", path, t.ID, id)
	}
	return t, nil
}

// LoadFile reads one thread.json, migrating an older schema.
func LoadFile(path string) (Thread, error) {
	var doc map[string]json.RawMessage
	version, err := store.ReadJSON(path, SchemaVersion, &doc)
	if err != nil {
		return Thread{}, err
	}
	if doc == nil {
		return Thread{}, fmt.Errorf("%s: not a JSON object", path)
	}
	if err := migrate(version, doc); err != nil {
		return Thread{}, fmt.Errorf("%s: %w", path, err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return Thread{}, err
	}
	var t Thread
	if err := json.Unmarshal(b, &t); err != nil {
		return Thread{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := t.validate(); err != nil {
		return Thread{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// migrations[v] turns a version-v document into a version v+1 one.
var migrations = map[int]func(doc map[string]json.RawMessage) error{
	0: migrateV0,
}

func migrate(from int, doc map[string]json.RawMessage) error {
	if from == SchemaVersion {
		return nil
	}
	for v := from; v < SchemaVersion; v++ {
		m, ok := migrations[v]
		if !ok {
			return fmt.Errorf("schema_version %d cannot be migrated by this ralph", from)
		}
		if err := m(doc); err != nil {
			return fmt.Errorf("migrating schema_version %d to %d: %w", v, v+1, err)
		}
	}
	doc["schema_version"] = json.RawMessage(strconv.Itoa(SchemaVersion))
	return nil
}

// migrateV0 upgrades a version-0 document: no schema_version, the phase a
// plain string ("Running") rather than a tagged object, and possibly no mode.
func migrateV0(doc map[string]json.RawMessage) error {
	raw, ok := doc["phase"]
	if !ok {
		return errors.New(`no "phase"`)
	}
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		p, ok := ParsePhase(name)
		if !ok {
			return fmt.Errorf("unknown phase %q (known: %v)", name, Phases)
		}
		b, err := json.Marshal(PhaseState{Type: p})
		if err != nil {
			return err
		}
		doc["phase"] = b
	} // otherwise it is already an object; decoding checks it
	var mode string
	if m, ok := doc["mode"]; ok {
		_ = json.Unmarshal(m, &mode)
	}
	if mode == "" {
		doc["mode"] = json.RawMessage(strconv.Quote(string(ModeMethodical)))
	}
	return nil
}

// List loads every thread under ralphDir, sorted by id (which is creation
// order for generated ids). Threads that fail to load are left out and
// reported together in the error.
func List(ralphDir string) ([]Thread, error) {
	entries, err := os.ReadDir(filepath.Join(ralphDir, "threads"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Thread
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		t, err := Load(ralphDir, e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, errors.Join(errs...)
}
