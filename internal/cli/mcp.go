package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/ralphloop/ralph/internal/mcpserver"
	"github.com/spf13/cobra"
)

// newMCPCmd is `ralph mcp`: the workspace's status and control commands
// as MCP tools over stdio, for an agent or an IDE.
func newMCPCmd(env *Env) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve status and control of this workspace as MCP tools over stdio",
		Long: `ralph mcp is an MCP server (Model Context Protocol) on stdin and stdout, for
an agent or an IDE to watch and steer the runs of one workspace. Add it to
an MCP client's configuration, for example:

  {"mcpServers": {"ralph": {"command": "ralph", "args": ["mcp", "--dir", "/path/to/repo"]}}}

Tools: ralph_status, ralph_board, ralph_journal_tail (read); ralph_hint,
ralph_pause, ralph_resume, ralph_stop, ralph_skip, ralph_block,
ralph_unblock, ralph_answer (steer, journaled with "by": "mcp"). Thread
checkpoints are not served: they are taken only from a person's action.

stdout carries only the protocol; logs go to stderr. The server ends when
its input closes.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("mcp takes no arguments: ralph mcp --dir DIR serves the workspace in DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir != "" {
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					return usageErrorf("--dir %s is not a directory: give the workspace's folder, the repository ralph builds in", dir)
				}
			}
			// stdout is the protocol's: anything the workspace's code
			// would print goes to stderr instead.
			quiet := *env
			quiet.IO.Out = env.IO.Err
			quiet.IO.OutTerminal = false
			src, err := openLive(cmd.Context(), &quiet, dir)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(env.IO.Err, &slog.HandlerOptions{Level: slog.LevelInfo}))
			log.Info("ralph mcp: serving over stdio", "workspace", src.Name())
			if err := mcpserver.Serve(cmd.Context(), src, env.IO.In, env.IO.Out, mcpserver.Options{Version: readVersion().line(), Log: log}); err != nil {
				return fmt.Errorf("mcp server: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the workspace to serve (default: the working directory)")
	return cmd
}
