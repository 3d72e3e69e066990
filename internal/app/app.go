// Package app is the layer between the commands and the engines: it opens
// a workspace, reads its configuration, and turns it into the values the
// packages below take (agents, checks, the thread runner's settings, the
// notification channels, the Temporal server to dial). It is the one
// package, with internal/cli above it, that reads config.toml: nothing
// below app imports internal/config, so each of those packages says in
// its own types what it needs. Commands parse flags, call app, render
// and map exit codes.
package app

import (
	"context"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Open finds the repository around dir and reads its configuration. It
// also makes the configuration's secrets process-wide facts: every log,
// record and prompt masks the variables [security] redact names, and no
// agent sees the notification secret (with it an agent could sign
// notifications ralph never sent). A configuration that does not load is
// returned as an error with the workspace: some commands go on without it.
func Open(ctx context.Context, dir string) (*workspace.Workspace, config.Config, error) {
	ws, err := workspace.Open(ctx, dir)
	if err != nil {
		return nil, config.Config{}, err
	}
	cfg, err := LoadConfig(ws)
	redact.AddNames(cfg.Security.Redact...)
	agent.StripEnv(cfg.Notify.SecretEnv)
	return ws, cfg, err
}

// LoadConfig reads ws's config.toml (the defaults when it is absent).
func LoadConfig(ws *workspace.Workspace) (config.Config, error) {
	return config.Load(ws.ConfigPath())
}
