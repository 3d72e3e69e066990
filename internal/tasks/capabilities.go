package tasks

import (
	"context"
	"time"
)

// Optional capabilities of a Source. Formats differ in what they can hold
// and who may write what; a caller asks for the one it needs with a type
// assertion (`if c, ok := src.(tasks.AgentTicked); ok`) instead of
// switching on Kind, so a new format only has to implement what it has.
// Kind is for display and records only.

// AgentTicked is implemented by formats whose checkboxes the agent ticks
// itself (the PRD markdown, seed 001): the agent is told to check each
// criterion it verified, its ticks are its claim when no check or reviewer
// judges a criterion, and ralph unticks a story it did not accept. In the
// other formats ralph alone writes status and restores any edit of it.
type AgentTicked interface {
	Source
	AgentTicksCriteria()
}

// SetupTemplater is implemented by formats whose missing file is answered
// with a template to fill in rather than a command to run (BMAD's
// progress.txt, seed 000's setup_required exit).
type SetupTemplater interface {
	Source
	SetupTemplate() string
}

// MetricsRecorder is implemented by formats with a metrics block
// (progress.txt): the loop writes the run's final metrics there and
// commits them as the last act of a finished run.
type MetricsRecorder interface {
	Source
	// SetMetrics writes the given keys (stories_completed,
	// total_iterations, final_commit, time_elapsed, ...) into the block.
	SetMetrics(m map[string]string, now time.Time) error
}

// Creatable is implemented by formats that a known command creates, so
// that a missing file can be answered with what to run.
type Creatable interface {
	Source
	// Noun names the file for the user: "PRD", "beads database".
	Noun() string
	// CreateCommand is the command line that makes one.
	CreateCommand() string
}

// Planned is implemented by formats that `ralph plan` turns into
// IMPLEMENTATION_PLAN.md before a build (the PRD markdown); [build]
// require_plan applies only to them.
type Planned interface {
	Source
	PlannedBeforeBuild()
}

// Primer is implemented by formats that have workflow context to put in
// front of every iteration's memory (beads: `bd prime`).
type Primer interface {
	Prime(ctx context.Context) (string, error)
}

// Claimer is implemented by formats that record who works on a task
// (beads: `bd update ID --claim`).
type Claimer interface {
	Claim(ctx context.Context, taskID string) error
}

// Forgetter is implemented by formats that keep what they read between
// Loads (beads: bd's answers, a process each): Forget drops it, for a
// caller that knows someone else, such as the agent, may have changed
// the tasks since.
type Forgetter interface {
	Forget()
}

// Resetter is implemented by formats that keep what they read between
// Loads: Reset drops all of it, for a caller that cannot say what
// changed since (the parallel scheduler).
type Resetter interface {
	Reset()
}

// Picker is implemented by formats that choose the next task themselves
// (beads: `bd ready --json --limit 1`).
type Picker interface {
	Pick(ctx context.Context) (string, error)
}

func (s *markdownSource) AgentTicksCriteria() {}
func (s *markdownSource) PlannedBeforeBuild() {}
func (s *markdownSource) Noun() string        { return "PRD" }
func (s *markdownSource) CreateCommand() string {
	return `ralph prd "what you want built"`
}

func (s *progressSource) Noun() string          { return "progress file" }
func (s *progressSource) CreateCommand() string { return "ralph init --bmad" }
func (s *progressSource) SetupTemplate() string { return ProgressTemplate() }

func (s *BeadsSource) Noun() string          { return "beads database" }
func (s *BeadsSource) CreateCommand() string { return "bd init" }
