package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/harness"
)

// scenarioDeadline bounds one scenario on one executor: seconds on an
// idle machine, several times that on a loaded 2-core one under -race.
const scenarioDeadline = 4 * time.Minute

// world is one scenario's repository and every process it started, under
// one temporary folder: repo is the person's checkout (for Temporal also
// the worker's host and the integration host), scenario the fake agent's
// script.
type world struct {
	*harness.World
	repo     string
	scenario string
}

type proc = harness.Proc

func newWorld(t *testing.T) *world {
	t.Helper()
	h := harness.New(t, scenarioDeadline)
	w := &world{World: h, repo: filepath.Join(h.Dir, "a"), scenario: filepath.Join(h.Dir, "scenario.json")}
	if err := os.MkdirAll(w.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// landed lists the tasks of the target's commits (their Ralph-Task
// trailers), oldest first, one entry per commit.
func (w *world) landed() []string {
	w.T.Helper()
	var ids []string
	for _, line := range strings.Split(w.Git(w.repo, "log", "--reverse", "--format=%(trailers:key=Ralph-Task,valueonly)", "main"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			ids = append(ids, line)
		}
	}
	return ids
}

// board is the task file's stories by id, as `ralph status --json` says
// where each is.
func (w *world) board() (map[string]status.Story, error) {
	out, code := w.Run(w.repo, w.Ralph, "status", "--json")
	if code != 0 {
		return nil, fmt.Errorf("ralph status --json: exit %d: %s", code, harness.Clip(out, 2000))
	}
	var doc status.Report
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("ralph status --json printed no status document (%v):\n%s", err, harness.Clip(out, 2000))
	}
	board := map[string]status.Story{}
	for _, s := range doc.Board {
		board[s.ID] = s
	}
	return board, nil
}

// journal reads the repository's journal (.ralph/events.jsonl).
func (w *world) journal() []harness.Event { return harness.Journal(w.repo) }
