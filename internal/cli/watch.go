package cli

import "github.com/spf13/cobra"

// newWatchCmd is `ralph watch` (being built: issue 16).
func newWatchCmd(env *Env) *cobra.Command {
	return &cobra.Command{Use: "watch", Short: "Watch and steer the run in this workspace in a terminal UI", Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error { return usageErrorf("ralph watch is not built yet") }}
}
