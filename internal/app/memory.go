package app

import (
	"github.com/ralphloop/ralph/internal/memory"
)

// Memory opens the memory store [memory] configures (NEO4J_URI and the
// password from the environment), wrapped so that writes made while it
// is unreachable are queued in the workspace.
func (a *App) Memory() (*memory.Queued, error) {
	m := a.cfg.Memory
	return memory.Open(a.WS.Dir(), memory.Settings{Store: m.Store, URI: m.URI, User: m.User, PasswordEnv: m.PasswordEnv, Database: m.Database}, a.getenv, a.now)
}
