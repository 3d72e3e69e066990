package cli

import "github.com/spf13/cobra"

// newServeCmd is `ralph serve` (being built: issue 16).
func newServeCmd(env *Env) *cobra.Command {
	return &cobra.Command{Use: "serve", Short: "Serve a web dashboard and JSON API of this workspace's runs", Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error { return usageErrorf("ralph serve is not built yet") }}
}
