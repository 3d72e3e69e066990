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

// Clock is the runner's time.
type Clock interface {
	Now() time.Time
	// Wait returns once d has passed, or with an error as soon as ctx is
	// cancelled. show, when not nil, is told the time left at the start
	// and then every so often, so that a long wait shows it is alive.
	Wait(ctx context.Context, d time.Duration, show func(left time.Duration)) error
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

// runChecks runs ralph's checks in the work tree up to the first that
// fails, and says whether all passed.
func (r *Runner) runChecks(ctx context.Context) ([]check.Result, bool) {
	var p runkit.CheckPort = runkit.ExecChecks{}
	if r.Checker != nil {
		p = r.Checker
	}
	return runkit.RunAll(ctx, p, r.WS.Root, r.Checks)
}

func (r *Runner) clock() Clock {
	if r.Clock != nil {
		return r.Clock
	}
	return systemClock{}
}
