package cli

import (
	"errors"

	"github.com/ralphloop/ralph/internal/tui"
	"github.com/spf13/cobra"
)

// newWatchCmd is `ralph watch`: the terminal UI over the workspace's
// status and journal, with a key for every control command.
func newWatchCmd(env *Env) *cobra.Command {
	var dir string
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

It needs a terminal; scripts read ` + "`ralph status --json`" + ` or ` + "`ralph serve`" + `.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !env.IO.OutTerminal || !env.IO.InTerminal {
				return &ExitError{Code: 1, Msg: "ralph watch needs a terminal: use `ralph status --json` or `ralph serve`"}
			}
			src, err := openLive(cmd.Context(), env, dir)
			if err != nil {
				return err
			}
			err = tui.Run(cmd.Context(), src, env.IO.In, env.IO.Out, tui.Options{
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
	return cmd
}
