package cli

import (
	"strings"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/spf13/cobra"
)

// The steering commands give control commands (package control) to the
// run going in this workspace, from any terminal: it takes them at its
// next step boundary.

func newPauseCmd(env *Env) *cobra.Command {
	return steerCmd(env, control.Pause, "pause", "Pause the run going in this workspace after its current step (ralph resume goes on)", nil)
}

func newResumeCmd(env *Env) *cobra.Command {
	return steerCmd(env, control.Resume, "resume", "Resume a run paused with ralph pause", nil)
}

func newStopCmd(env *Env) *cobra.Command {
	return steerCmd(env, control.Stop, "stop", "Stop the run going in this workspace as Ctrl+C would; ralph build resumes it", nil)
}

func newSkipCmd(env *Env) *cobra.Command {
	var reason string
	cmd := steerCmd(env, control.Skip, "skip TASK-ID", "Set a task aside in the running build: others go first, it is retried when nothing else is left", func(c *control.Command, args []string) {
		c.Task, c.Text = args[0], reason
	})
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the journal")
	return cmd
}

func newBlockCmd(env *Env) *cobra.Command {
	var reason string
	cmd := steerCmd(env, control.Block, "block TASK-ID", "Block a task until a person unblocks it: builds leave it (ralph unblock clears it)", func(c *control.Command, args []string) {
		c.Task, c.Text = args[0], reason
	})
	cmd.Flags().StringVar(&reason, "reason", "", "why it is blocked (shown by ralph status)")
	return cmd
}

// steerCmd is a command that gives one control command; fill takes its
// arguments (nil: it takes none).
func steerCmd(env *Env, kind control.Kind, use, short string, fill func(*control.Command, []string)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case fill == nil && len(args) > 0:
				return usageErrorf("%s takes no arguments", kind)
			case fill != nil && (len(args) != 1 || strings.TrimSpace(args[0]) == ""):
				return usageErrorf("%s takes one task id, for example: ralph %s US-002", kind, kind)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return steerFromCLI(cmd, env, kind, func(c *control.Command) {
				if fill != nil {
					fill(c, args)
				}
			})
		},
	}
	addSteerJSON(cmd)
	return cmd
}

// addSteerJSON gives a steering command its --json flag: every one of
// them prints {"id", "status", "message"} with it (steerFromCLI reads it).
func addSteerJSON(cmd *cobra.Command) {
	cmd.Flags().Bool("json", false, `print the result as JSON: {"id", "status", "message"}`)
}

// wantJSON reports whether cmd was given --json.
func wantJSON(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}
