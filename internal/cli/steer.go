package cli

import (
	"strings"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/spf13/cobra"
)

// The steering commands give control commands (package control) to the
// run going in this workspace, from any terminal: it takes them at its
// next step boundary.

// steerArgs is what a steering command takes on its command line.
type steerArgs int

const (
	noSteerArgs steerArgs = iota
	taskArg               // one task id
	hintArgs              // the words of a hint
)

// steering lists the steering commands; each is built by steerCmd.
var steering = []struct {
	kind             control.Kind
	use, short, long string
	args             steerArgs
	// example is the task id the usage error shows; reason, when set, is
	// the help of the command's --reason flag.
	example, reason string
}{
	{kind: control.Pause, use: "pause", short: "Pause the run going in this workspace after its current step (ralph resume goes on)"},
	{kind: control.Resume, use: "resume", short: "Resume a run paused with ralph pause"},
	{kind: control.Stop, use: "stop", short: "Stop the run going in this workspace as Ctrl+C would; ralph build resumes it"},
	{kind: control.Skip, use: "skip TASK-ID", short: "Set a task aside in the running build: others go first, it is retried when nothing else is left",
		args: taskArg, example: "US-002", reason: "why, for the journal"},
	{kind: control.Block, use: "block TASK-ID", short: "Block a task until a person unblocks it: builds leave it (ralph unblock clears it)",
		args: taskArg, example: "US-002", reason: "why it is blocked (shown by ralph status)"},
	{kind: control.Unblock, use: "unblock TASK-ID", short: "Clear a blocked task so the loop picks it up again", args: taskArg, example: "US-002",
		long: `Clear a task's blocker: its status goes back to not started, its retry count
to 0, and the blocker fields are removed from the task file and from ralph's
state. In BMAD mode, editing the task's status in progress.txt by hand
works too.`},
	{kind: control.Approve, use: "approve TASK-ID", short: "Accept a task's reviewed test change", args: taskArg, example: "US-004",
		long: `Accept the work of a task that waits for your review: its story says its
tests change (a behaviour change), its attempt changed them, and the start's
tests fail against the new code, so ralph neither waived it nor retried it.
Read the test change first (ralph status names the ref; git diff shows it).
approve brings the work back from its attempt's ref, marks the task done and
commits it, saying who approved what. A build that is going takes it at its
next step. To have the task done again instead: ralph unblock TASK-ID.`},
	{kind: control.Hint, use: "add-context HINT", short: "Queue a hint for the next iteration's prompt (used exactly once)", args: hintArgs},
}

// steerCmds builds the steering commands of the table above.
func steerCmds(env *Env) []*cobra.Command {
	cmds := make([]*cobra.Command, len(steering))
	for i, s := range steering {
		var reason string
		cmd := &cobra.Command{
			Use:   s.use,
			Short: s.short,
			Long:  s.long,
			Args: func(cmd *cobra.Command, args []string) error {
				switch {
				case s.args == noSteerArgs && len(args) > 0:
					return usageErrorf("%s takes no arguments", s.kind)
				case s.args == taskArg && (len(args) != 1 || strings.TrimSpace(args[0]) == ""):
					return usageErrorf("%s takes one task id, for example: ralph %s %s", s.kind, s.kind, s.example)
				case s.args == hintArgs && strings.TrimSpace(strings.Join(args, " ")) == "":
					return usageErrorf("add-context needs the hint text: ralph add-context \"use the existing HTTP client\"")
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				return steerFromCLI(cmd, env, s.kind, func(c *control.Command) {
					switch s.args {
					case taskArg:
						c.Task, c.Text = args[0], reason
					case hintArgs:
						c.Text = strings.Join(args, " ")
					}
				})
			},
		}
		if s.args == taskArg {
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeTaskIDs(cmd.Context(), env, s.kind == control.Unblock, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
		if s.reason != "" {
			cmd.Flags().StringVar(&reason, "reason", "", s.reason)
		}
		addSteerJSON(cmd)
		cmds[i] = cmd
	}
	return cmds
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
