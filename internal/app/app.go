// Package app is the layer between the commands and the engines: it opens
// a workspace, reads its configuration, and turns it into the values the
// packages below take (sources, agents, roles, memory, the loop's, the
// session's and the thread runner's settings, the parallel engine's and
// the Temporal engine's options, the notification sinks), and it builds
// the status document every front end shows from the workspace's records
// (Status). It is the one
// package that reads config.toml: nothing below app imports
// internal/config, so each of those packages says in its own types what
// it needs, and the commands above it hold an *App, never a
// configuration. Commands parse flags, call app, render and map exit
// codes.
package app

import (
	"context"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/workspace"
)

// App is one workspace with its configuration read: what a command works
// on. The configuration stays inside: a command asks App for the values
// the engines take.
type App struct {
	WS     *workspace.Workspace // nil outside a repository
	cfg    config.Config
	getenv func(string) string
	now    func() time.Time
}

// Open finds the repository around dir and reads its configuration;
// getenv and now are the process's (tests give their own). It also makes
// the configuration's secrets process-wide facts: every log, record and
// prompt masks the variables [security] redact names, and no agent sees
// the notification secret (with it an agent could sign notifications
// ralph never sent). On an error the App still comes back, with the
// workspace when there is one: outside a repository, `ralph doctor` goes
// on with the default configuration.
func Open(ctx context.Context, dir string, getenv func(string) string, now func() time.Time) (*App, error) {
	a := &App{cfg: config.Default(), getenv: getenv, now: now}
	ws, err := workspace.Open(ctx, dir)
	if err != nil {
		return a, err
	}
	a.WS = ws
	a.cfg, err = config.Load(ws.ConfigPath())
	redact.AddNames(a.cfg.Security.Redact...)
	agent.StripEnv(a.cfg.Notify.SecretEnv)
	return a, err
}
