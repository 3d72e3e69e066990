package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

func countHints(ws *workspace.Workspace) (int, error) {
	p := ws.Path("context.md")
	b, err := inputlimit.ReadFile(p)
	if inputlimit.IsRefusal(err) {
		// A named pipe there would have hung the read: say so.
		return 0, errors.New(strings.Replace(err.Error(), p, ws.Rel(p), 1))
	}
	if err != nil {
		return 0, nil
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "- ") {
			n++
		}
	}
	return n, nil
}

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
