package app

import (
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/workspace"
)

// defaultCheckTimeout bounds a detected check that names no timeout of
// its own, as written into a new config.toml.
const defaultCheckTimeout = 10 * time.Minute

// Init writes ws's config.toml from config's template, with checks (the
// checks detected in the project) filled in and the agent registry's
// names in its comment, and creates the state files. Nothing that exists
// is overwritten; it returns the files it created.
func Init(ws *workspace.Workspace, now time.Time, checks []check.Check) ([]string, error) {
	cc := make([]config.CheckConfig, len(checks))
	for i, c := range checks {
		t := c.Timeout
		if t == 0 {
			t = defaultCheckTimeout
		}
		cc[i] = config.CheckConfig{Name: c.Name, Kind: c.Kind, Run: c.Run, Timeout: config.Duration{Duration: t}, Format: c.Format, Report: c.Report}
	}
	return ws.Init(now, config.Template(cc, agent.Names(nil)))
}
