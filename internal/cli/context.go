package cli

import (
	"fmt"

	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/spf13/cobra"
)

func newDiagramCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:       "diagram loop|thread|session|fleet",
		Short:     "Print a state machine as a mermaid diagram generated from its table",
		ValidArgs: []string{"loop", "thread", "session", "fleet"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || (args[0] != "loop" && args[0] != "thread" && args[0] != "session" && args[0] != "fleet") {
				return usageErrorf("diagram takes the machine's name: ralph diagram loop, ralph diagram thread, ralph diagram session or ralph diagram fleet (a task of a build on Temporal)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "thread":
				fmt.Fprint(env.IO.Out, thread.Mermaid())
				return nil
			case "session":
				fmt.Fprint(env.IO.Out, session.Mermaid())
				return nil
			case "fleet":
				fmt.Fprint(env.IO.Out, fleet.Mermaid())
				return nil
			}
			fmt.Fprint(env.IO.Out, loop.Mermaid())
			return nil
		},
	}
}
