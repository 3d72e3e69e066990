package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/spf13/cobra"
)

// controlBy is who gives a command from this process: a person at the
// CLI, or the front end that started this ralph for a checkpoint.
func controlBy(env *Env) string {
	if by := env.Getenv("RALPH_CONTROL_BY"); by != "" {
		return by
	}
	return control.ByCLI
}

// steerFromCLI gives a command from a CLI command and prints its result.
func steerFromCLI(cmd *cobra.Command, env *Env, kind control.Kind, fill func(*control.Command)) error {
	_, a, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return err
	}
	c := control.New(kind, controlBy(env), env.Now())
	fill(&c)
	res, err := newSteerer(env, a).Do(cmd.Context(), c)
	var ie *control.InputError
	if errors.As(err, &ie) {
		return &UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	if wantJSON(cmd) {
		return writeJSON(env, res)
	}
	fmt.Fprintln(env.IO.Out, res.Message)
	return nil
}

// openLive opens the workspace of the working directory as a live
// source for the front ends.
func openLive(ctx context.Context, env *Env, dir string) (*live.Local, error) {
	e := *env
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		e.WorkDir = func() (string, error) { return abs, nil }
	}
	ws, a, err := openWorkspace(ctx, &e)
	if err != nil {
		return nil, err
	}
	st := newSteerer(&e, a)
	statusOf := func(ctx context.Context) (status.Report, error) {
		rep, _, _, err := a.Status("")
		return rep, err
	}
	if onTemporal, _ := a.OnTemporal(""); onTemporal {
		// The run's truth is the workflow's: its Query is laid over the
		// local document, and this host's journal carries the events.
		statusOf = fleetStatusOf(a, &e, statusOf)
	}
	return &live.Local{
		Dir:      ws.Root,
		Journal:  loop.EventsPath(ws),
		StatusOf: statusOf,
		Steerer:  st,
	}, nil
}

// newSteerer is the workspace's steerer (app.Steerer) with what it takes
// from this process: the Temporal client, the ralph binary, stderr.
func newSteerer(env *Env, a *app.App) *app.Steerer {
	s := a.Steerer()
	s.Remote = func(ctx context.Context, cmd control.Command) (control.Result, error) { return fleetSteer(ctx, a, cmd) }
	s.Executable, s.Warn = env.Executable, env.IO.Err
	return s
}
