package session

import (
	"context"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/runkit"
)

// The ports are what the session's runner does to the world outside its
// own folder: run a role's agent (Invoker), ask git, run ralph's checks,
// read the time and wait. The Runner leaves each nil for the real thing,
// so that the CLI keeps working unchanged; tests give scripted ones and
// drive the runner over the machine's edges without starting a process.

// GitPort is the part of git the session uses; *gitx.Repo is the real one.
// Besides every runner's git it reads the diff the reviewer judges.
type GitPort interface {
	runkit.Git
	Diff(ctx context.Context, from string, stat bool, limit int) (string, error)
}

// CheckPort runs ralph's checks in dir in order, up to the first that
// fails, and says whether all passed (check.RunAll is the real one).
type CheckPort interface {
	RunAll(ctx context.Context, dir string, checks []check.Check) ([]check.Result, bool)
}

// Clock is the runner's time.
type Clock interface {
	Now() time.Time
	// Wait returns once d has passed, or with an error as soon as ctx is
	// cancelled. show, when not nil, is told the time left at the start
	// and then every so often, so that a long wait shows it is alive.
	Wait(ctx context.Context, d time.Duration, show func(left time.Duration)) error
}

type execChecks struct{}

func (execChecks) RunAll(ctx context.Context, dir string, checks []check.Check) ([]check.Result, bool) {
	return check.RunAll(ctx, dir, checks)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Wait(ctx context.Context, d time.Duration, show func(time.Duration)) error {
	return runkit.Wait(ctx, time.Now().Add(d), 0, show)
}

func (r *Runner) git() GitPort {
	if r.Git != nil {
		return r.Git
	}
	return r.WS.Repo
}

func (r *Runner) checker() CheckPort {
	if r.Checker != nil {
		return r.Checker
	}
	return execChecks{}
}

func (r *Runner) clock() Clock {
	if r.Clock != nil {
		return r.Clock
	}
	return systemClock{}
}
