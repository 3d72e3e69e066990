package loop

import (
	"maps"
	"testing"

	"github.com/ralphloop/ralph/internal/check"
)

const verifiedStories = `# PRD: two stories with verify commands

### [ ] US-001: First story
- [ ] a.txt exists (verify: ` + "`test -f a.txt`" + `)

### [ ] US-002: Second story
- [ ] b.txt exists (verify: ` + "`test -f b.txt`" + `)
`

// What verification costs in check runs, the budget: on the
// honest path (no protected file changed) one extra run of the stories'
// verify commands per run, on the starting tree, and no extra check run
// per attempt; an attempt that changed a protected file costs one more
// run of the checks and of its story's verify commands, with the start's
// versions put back.
func TestVerificationCostsAtMostTheStartingRunAndOneRunPerProtectedChange(t *testing.T) {
	checks := []check.Check{{Name: "lint", Run: "lint"}, {Name: "unit", Run: "unit"}}

	r := newRig(t, verifiedStories, step{write: "a.txt", tick: "US-001"}, step{write: "b.txt", tick: "US-002"})
	r.opts.Checks = checks
	r.git.allowed["FilesAt"] = true
	if rep, err := r.build(); err != nil || rep.StoriesDone != 2 {
		t.Fatalf("Build = %+v, %v", rep, err)
	}
	want := map[string]int{
		"lint": 3, "unit": 3, // the starting tree, then once per attempt
		"US-001 AC-1": 1, "US-002 AC-1": 1, // each verify command on the starting tree
		"AC-1": 2, // each story's verify command in its VALIDATE
	}
	if !maps.Equal(r.checks.runs, want) {
		t.Errorf("honest path: check runs %v, want %v", r.checks.runs, want)
	}

	// US-001's attempt adds a conftest.py, which configures the tests:
	// the checks and its verify command run once more, with the start's
	// versions (no conftest.py) in place.
	r = newRig(t, verifiedStories, step{write: "conftest.py", tick: "US-001"}, step{write: "b.txt", tick: "US-002"})
	r.opts.Checks = checks
	r.git.allowed["FilesAt"] = true
	r.build()
	want = map[string]int{"lint": 4, "unit": 4, "US-001 AC-1": 1, "US-002 AC-1": 1, "verify": 1, "AC-1": 1}
	for name, n := range want {
		if got := r.checks.runs[name]; got < n || (name != "AC-1" && got != n) {
			t.Errorf("protected file changed: %s ran %d times, want %d (all runs: %v)", name, got, n, r.checks.runs)
		}
	}
}
