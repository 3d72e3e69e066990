// Package live is a workspace as the front ends see it: its status
// document, its journal as a stream of events, and the control commands
// it takes. `ralph watch`, `ralph serve` and `ralph mcp` work on a Source
// and nothing else, so that the same view works on a workspace of this
// machine (Local) or on one another ralph serves.
package live

import (
	"context"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

// Source is one workspace seen live.
type Source interface {
	// Name is the workspace's directory, as a person would name it.
	Name() string
	// Status is the document `ralph status --json` prints.
	Status(ctx context.Context) (status.Report, error)
	// Events calls fn with every journal event whose seq is greater than
	// after, then with each new one, until ctx ends (nil) or fn fails.
	Events(ctx context.Context, after int64, fn func(report.Event) error) error
	// Steer gives a control command.
	Steer(ctx context.Context, cmd control.Command) (control.Result, error)
}

// Poll is how often a Local source looks for new journal lines.
var Poll = 150 * time.Millisecond

// Local is a workspace on this machine. cli fills it in: building the
// status document and applying commands are cli's wiring.
type Local struct {
	Dir string
	// Journal is the path of .ralph/events.jsonl.
	Journal  string
	StatusOf func(ctx context.Context) (status.Report, error)
	Steerer  control.Steerer
}

// Name implements Source.
func (l *Local) Name() string { return l.Dir }

// Status implements Source.
func (l *Local) Status(ctx context.Context) (status.Report, error) { return l.StatusOf(ctx) }

// Events implements Source.
func (l *Local) Events(ctx context.Context, after int64, fn func(report.Event) error) error {
	return report.Follow(ctx, l.Journal, after, Poll, fn)
}

// Steer implements Source.
func (l *Local) Steer(ctx context.Context, cmd control.Command) (control.Result, error) {
	return l.Steerer.Do(ctx, cmd)
}
