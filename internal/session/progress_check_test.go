package session

import (
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/tasks"
)

// A progress.md ralph cannot have written is refused, like a malformed
// state.json: null, a negative count or a task row without an id.
func TestParseProgressRefusesWhatRalphNeverWrites(t *testing.T) {
	good := Progress{Title: "todo", UpdatedAt: time.Unix(0, 0).UTC(),
		State: OrchestratorState{Current: Executing, SessionID: "s-1", CurrentTaskID: "T-1", CurrentAttemptNumber: 1},
		Tasks: []TaskRecord{{ID: "T-1", Mark: tasks.MarkTodo, Failures: 1}}}
	text := string(good.Render())
	if _, err := ParseProgress("progress.md", []byte(text)); err != nil {
		t.Fatalf("a rendered progress does not parse: %v\n%s", err, text)
	}
	row := "| T-1 | [ ] | 1 | 0 | - |"
	if !strings.Contains(text, row) {
		t.Fatalf("rendered task row is not %q:\n%s", row, text)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"null", "null\n", "no session or state line"},
		{"negative failures", strings.Replace(text, row, "| T-1 | [ ] | -1 | 0 | - |", 1), "task T-1 has a malformed counter"},
		{"negative reworks", strings.Replace(text, row, "| T-1 | [ ] | 1 | -3 | - |", 1), "task T-1 has a malformed counter"},
		{"no task id", strings.Replace(text, row, "|  | [ ] | 1 | 0 | - |", 1), "a task row has no task id"},
	} {
		if _, err := ParseProgress("progress.md", []byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
