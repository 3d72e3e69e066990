package app

import (
	"errors"
	"os"
	"time"

	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/workspace"
)

// BeadsRecord is .ralph/beads.json: the proto `ralph plan` wrote and the
// molecule `ralph build` poured from it, so that later builds stay inside
// that molecule and `ralph status` shows it without being told its id.
type BeadsRecord struct {
	SchemaVersion int        `json:"schema_version"`
	Proto         string     `json:"proto,omitempty"`
	ProtoSteps    int        `json:"proto_steps,omitempty"`
	PlannedAt     *time.Time `json:"planned_at,omitempty"`
	Molecule      string     `json:"molecule,omitempty"`
	PouredFrom    string     `json:"poured_from,omitempty"`
	PouredAt      *time.Time `json:"poured_at,omitempty"`
	// Acceptance holds each step's acceptance criteria, by step id: bd's
	// formulas have no place for them, so ralph sets them on the poured
	// issues (bd update --acceptance), where the build's VALIDATE reads
	// them, verify commands included.
	Acceptance map[string]string `json:"acceptance,omitempty"`
}

const beadsRecordVersion = 1

// ProtoPending reports whether the recorded proto was planned after the
// last pour of it (or never poured): the next build pours it.
func (r BeadsRecord) ProtoPending() bool {
	if r.Proto == "" {
		return false
	}
	poured := r.PouredFrom == r.Proto && r.PouredAt != nil && r.PlannedAt != nil && !r.PouredAt.Before(*r.PlannedAt)
	return !poured
}

func beadsRecordPath(ws *workspace.Workspace) string { return ws.Path("beads.json") }

func LoadBeadsRecord(ws *workspace.Workspace) (BeadsRecord, error) {
	var r BeadsRecord
	_, err := store.ReadJSON(beadsRecordPath(ws), beadsRecordVersion, &r)
	if errors.Is(err, os.ErrNotExist) {
		return BeadsRecord{}, nil
	}
	return r, err
}

func SaveBeadsRecord(ws *workspace.Workspace, r BeadsRecord, now time.Time) error {
	r.SchemaVersion = beadsRecordVersion
	// The .gitignore template first: appending to a missing one would
	// leave the rest of ralph's machine state unignored.
	if _, err := ws.EnsureStateFiles(now); err != nil {
		return err
	}
	if err := ws.Ignore("beads.json"); err != nil {
		return err
	}
	return store.WriteJSON(beadsRecordPath(ws), r)
}
