package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/spf13/cobra"
)

func newAddContextCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "add-context HINT",
		Short: "Queue a hint for the next iteration's prompt (used exactly once)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || strings.TrimSpace(strings.Join(args, " ")) == "" {
				return usageErrorf("add-context needs the hint text: ralph add-context \"use the existing HTTP client\"")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, _, err := openWorkspace(cmd.Context(), env)
			if err != nil {
				return err
			}
			// A hint is one record of machine state: it needs the
			// .gitignore that keeps it out of git, not a whole workspace.
			if err := ws.EnsureIgnoreFile(); err != nil {
				return err
			}
			hint := strings.TrimSpace(strings.Join(args, " "))
			line := fmt.Sprintf("- (%s) %s\n", env.Now().Format("2006-01-02 15:04"), hint)
			if err := store.AppendFile(ws.Path("context.md"), []byte(line)); err != nil {
				return err
			}
			// The journal gets the hint in the one envelope every event has.
			seq, _ := report.LastSeq(loop.EventsPath(ws))
			journal := &report.Journal{Path: loop.EventsPath(ws)}
			report.NewEmitter("cli", "", seq, env.Now, journal).Emit(report.Event{Kind: report.KindNote,
				Data: map[string]any{"context_added": hint}})
			if err := journal.Err(); err != nil {
				return err
			}
			fmt.Fprintf(env.IO.Out, "queued for the next iteration's prompt (%s waiting)\n", words.Count(countHints(ws.Path("context.md")), "hint", "hints"))
			return nil
		},
	}
}

func countHints(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "- ") {
			n++
		}
	}
	return n
}

func newDiagramCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:       "diagram loop|thread|session",
		Short:     "Print a state machine as a mermaid diagram generated from its table",
		ValidArgs: []string{"loop", "thread", "session"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || (args[0] != "loop" && args[0] != "thread" && args[0] != "session") {
				return usageErrorf("diagram takes the machine's name: ralph diagram loop, ralph diagram thread or ralph diagram session")
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
			}
			fmt.Fprint(env.IO.Out, loop.Mermaid())
			return nil
		},
	}
}
