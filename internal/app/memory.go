package app

import (
	"time"

	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Memory opens the memory store [memory] configures (NEO4J_URI and the
// password through getenv), wrapped so that writes made while it is
// unreachable are queued in ws.
func Memory(ws *workspace.Workspace, cfg config.Config, getenv func(string) string, now func() time.Time) (*memory.Queued, error) {
	m := cfg.Memory
	return memory.Open(ws.Dir(), memory.Settings{Store: m.Store, URI: m.URI, User: m.User, PasswordEnv: m.PasswordEnv, Database: m.Database}, getenv, now)
}
