package cli

import (
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// newNotifyCmd is `ralph notify` (being built: issue 16).
func newNotifyCmd(env *Env) *cobra.Command {
	return &cobra.Command{Use: "notify", Short: "Send a sample notification to each configured channel", Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error { return usageErrorf("ralph notify is not built yet") }}
}

// notifySinks returns the sinks that send the [notify] notifications of a
// run's events; every run's emitter gets them.
func notifySinks(env *Env, ws *workspace.Workspace, cfg config.Config) []report.Sink { return nil }
