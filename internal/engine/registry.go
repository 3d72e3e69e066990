package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/store"
)

// RegistryFile is the parallel run's record in the state home (.ralph):
// every task it took, where its work is and how far it got. It is the
// scheduler's and the merge queue's memory across a crash, and what
// `ralph status` shows.
const RegistryFile = "parallel.json"

// RegistrySchemaVersion is the version of RegistryFile this ralph writes.
const RegistrySchemaVersion = 1

// TaskRecord is one task of a parallel run.
type TaskRecord struct {
	ID    string            `json:"id"`
	Title string            `json:"title,omitempty"`
	State landing.TaskState `json:"state"`
	// Worker is the worker slot ("w1") that last ran it.
	Worker string `json:"worker,omitempty"`
	// Branch and Worktree hold the task's work; Base is the target's
	// commit the branch was cut from for the current attempt.
	Branch   string `json:"branch"`
	Worktree string `json:"worktree,omitempty"`
	Base     string `json:"base,omitempty"`
	// Attempt counts the tries: 1 for the first, one more for each time
	// the merge queue sent it back.
	Attempt int `json:"attempt"`
	// Home is the state home of the current attempt's loop run.
	Home string `json:"home,omitempty"`
	// Reason says why it was sent back, blocked or needs review;
	// Conflicts names the files of a conflict.
	Reason    string   `json:"reason,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	// Feedback is what the next attempt is told of the check that sent
	// its landing back, in check.Feedback's format; "" when Reason says
	// all (a conflict, a deleted branch).
	Feedback string `json:"feedback,omitempty"`
	// Token is the Ralph-Commit token of the landing commit, saved
	// before it is made; Commit is the landed commit.
	Token string `json:"token,omitempty"`
	// Batch is the merge queue's batch (b1, b2, ...) it is landing in
	// with other tasks, while it lands; status shows it.
	Batch  string    `json:"batch,omitempty"`
	Commit string    `json:"commit,omitempty"`
	Since  time.Time `json:"since"`
	// Iterations and Tokens are what its loop runs used.
	Iterations int   `json:"iterations,omitempty"`
	Tokens     int64 `json:"tokens,omitempty"`
}

// Registry is the record of one parallel run.
type Registry struct {
	SchemaVersion int    `json:"schema_version"`
	RunID         string `json:"run_id"`
	// Target is the branch tasks land on; Start its commit when the run
	// began; Checkout the commit the person's checkout of it was last
	// brought to.
	Target   string `json:"target"`
	Start    string `json:"start"`
	Checkout string `json:"checkout,omitempty"`
	Workers  int    `json:"workers"`
	// WorktreeRoot holds the run's worktrees: <root>/<task>, and the
	// merge queue's <root>/integration.
	WorktreeRoot string                 `json:"worktree_root"`
	Tasks        map[string]*TaskRecord `json:"tasks"`
	StartedAt    time.Time              `json:"started_at"`
	Finished     bool                   `json:"finished"`
	// Batches counts the merge queue's batches of several tasks, which
	// name themselves b1, b2, ... in the landing events.
	Batches int    `json:"batches,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// RegistryPath is the registry's file in home.
func RegistryPath(home string) string { return filepath.Join(home, RegistryFile) }

// LoadRegistry reads the registry in home; ok is false when there is none.
func LoadRegistry(home string) (reg *Registry, ok bool, err error) {
	reg = &Registry{}
	if _, err := store.ReadJSON(RegistryPath(home), RegistrySchemaVersion, reg); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if reg.Tasks == nil {
		reg.Tasks = map[string]*TaskRecord{}
	}
	if err := reg.checkIDs(); err != nil {
		return nil, false, fmt.Errorf("%s: %w; ralph writes this file and cannot go on from it: undo the change, or move it aside once the run's worktrees are removed", RegistryPath(home), err)
	}
	return reg, true, nil
}

// checkIDs refuses ids that name folders (the run's, each worker's) but
// could not be one name: an edited registry would put run records and
// worktrees outside the repository.
func (r *Registry) checkIDs() error {
	if r.RunID != "" {
		if err := store.CheckID("run_id", r.RunID); err != nil {
			return err
		}
	}
	for id, t := range r.Tasks {
		if err := store.CheckID("task id", id); err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		if t != nil && t.ID != id {
			return fmt.Errorf("tasks.%s: id is %q", id, t.ID)
		}
	}
	return nil
}

func (r *Registry) save(home string) error {
	r.SchemaVersion = RegistrySchemaVersion
	return store.WriteJSON(RegistryPath(home), r)
}

// Sorted returns the tasks in id order, for status.
func (r *Registry) Sorted() []*TaskRecord {
	out := make([]*TaskRecord, 0, len(r.Tasks))
	for _, t := range r.Tasks {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Count returns how many tasks are in state s.
func (r *Registry) Count(s landing.TaskState) int {
	n := 0
	for _, t := range r.Tasks {
		if t.State == s {
			n++
		}
	}
	return n
}
