package cli

import (
	"errors"

	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/tui"
	"github.com/spf13/cobra"
)

// newWatchCmd is `ralph watch`: the terminal UI over the workspace's
// status and journal, with a key for every control command.
func newWatchCmd(env *Env) *cobra.Command {
	var dir, remoteURL, tokenFile string
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Watch and steer the run in this workspace in a terminal UI",
		Long: `Show the run of this workspace in a terminal UI: its state, iteration,
time, tokens and cost, the board of stories, the workers of a parallel
build, the selected agent's output, the journal and what waits for you.
It attaches whether or not a run is going (with none, it shows the last
one) and steers it with keys: p pause/resume, x stop, h hint, s skip,
b block, u unblock, a answer, c a thread's checkpoint, ? help. q leaves
the viewer and the run goes on.

With --url it watches a workspace another machine serves (` + "`ralph serve`" + `):
give the address ralph serve printed; its #token= part (or --token-file)
lets the keys steer, and without it the view is read-only.

It needs a terminal; scripts read ` + "`ralph status --json`" + ` or ` + "`ralph serve`" + `.`,
		Example: `  ralph watch
  ralph watch --dir ../app
  ralph watch --url 'http://10.0.0.5:7777/#token=...'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if remoteURL != "" && dir != "" {
				return usageErrorf("--dir and --url name two workspaces: give one")
			}
			if tokenFile != "" && remoteURL == "" {
				return usageErrorf("--token-file is the token of a ralph serve: give its address with --url")
			}
			var src live.Source
			if remoteURL != "" {
				r, err := live.ParseRemote(remoteURL)
				if err != nil {
					return &UsageError{Err: err}
				}
				if tokenFile != "" {
					if r.Token, err = serveToken(tokenFile); err != nil {
						return err
					}
				}
				src = r
			}
			if !env.IO.OutTerminal || !env.IO.InTerminal {
				return &ExitError{Code: 1, Msg: "ralph watch needs a terminal: use `ralph status --json` or `ralph serve`"}
			}
			if src == nil {
				l, err := openLive(cmd.Context(), env, dir)
				if err != nil {
					return err
				}
				src = l
			}
			err := tui.Run(cmd.Context(), src, env.IO.In, env.IO.Out, tui.Options{
				Now:   env.Now,
				Plain: env.Getenv("NO_COLOR") != "",
			})
			if err != nil && !errors.Is(err, cmd.Context().Err()) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the workspace to watch (default: the working directory)")
	cmd.Flags().StringVar(&remoteURL, "url", "", "watch a workspace another machine serves: the address ralph serve printed")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "with --url: the file holding the server's control token")
	return cmd
}
