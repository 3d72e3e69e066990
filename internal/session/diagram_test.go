package session

import (
	"slices"
	"strings"
	"testing"
)

// The seed's diagram, plus the edges its tables and pseudocode state in
// prose (resume to Executing or Complete, a failed holistic check back to
// Planning), plus ralph's: a task selected within Executing, a resume at
// any live state, the retry limits that fail the session from Executing,
// Reviewing and Complete, a critical error where ralph finds one, the goal
// check re-run after an invalid answer, and every way a run stops before
// the session ends, into Stopped from where roles run and back.
var wantPairs = []string{
	"Initializing -> Planning", "Initializing -> Failed", // seed diagram
	"Planning -> Planning", "Planning -> Executing", "Planning -> Failed",
	"Executing -> Reviewing", "Executing -> Complete", "Executing -> Planning",
	"Reviewing -> Executing",
	"Initializing -> Executing", "Initializing -> Complete", "Complete -> Planning", // seed tables
	"Initializing -> Reviewing", "Executing -> Executing", "Executing -> Failed", // ralph
	"Reviewing -> Failed", "Complete -> Complete", "Complete -> Failed",
	"Planning -> Stopped", "Executing -> Stopped", "Reviewing -> Stopped", "Complete -> Stopped",
	"Stopped -> Planning", "Stopped -> Executing", "Stopped -> Reviewing", "Stopped -> Complete",
}

func TestEdgesAreTheSeedsPlusDocumentedOnes(t *testing.T) {
	var got []string
	for _, e := range Edges() {
		p := string(e.From) + " -> " + string(e.To)
		if !slices.Contains(got, p) {
			got = append(got, p)
		}
	}
	want := slices.Clone(wantPairs)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("edges of Next:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMermaidLabelsTheSeedsTriggers(t *testing.T) {
	m := Mermaid()
	for _, line := range []string{
		"    [*] --> Initializing: ralph run \"request\"\n",
		"    Executing --> Reviewing: executor_completed (completed)\n",
		"Reviewing --> Executing: invalid_response / reviewer_completed (Failed) / reviewer_completed (Qualified)\n",
		"Planning --> Planning: ",
		"planner_completed (needs_qa_cycle)",
		"Complete --> Planning: holistic_check_failed\n",
		"planner_completed (blocked) /",
		"    Failed --> [*]\n",
		"    Executing --> Stopped: agent_cannot_run / budget_exhausted / interrupted / unexpected_error / usage_limit\n",
		"    Planning --> Stopped: agent_cannot_run / budget_exhausted / interrupted / unexpected_error / usage_limit / waiting_for_answers\n",
		"    Stopped --> Reviewing: resumed\n",
		"    Stopped --> [*]: until ralph run --resume\n",
	} {
		if !strings.Contains(m, line) {
			t.Errorf("diagram lacks %q:\n%s", line, m)
		}
	}
}
