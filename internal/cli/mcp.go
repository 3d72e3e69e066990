package cli

import "github.com/spf13/cobra"

// newMCPCmd is `ralph mcp` (being built: issue 16).
func newMCPCmd(env *Env) *cobra.Command {
	return &cobra.Command{Use: "mcp", Short: "Serve status and control of this workspace as MCP tools over stdio", Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error { return usageErrorf("ralph mcp is not built yet") }}
}
