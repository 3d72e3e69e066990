package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ralphloop/ralph/internal/sandbox"
)

// newSandboxNetCmd is the forwarder a sandbox with network "proxy" runs
// first (sandbox.Wrap puts it there): ralph's own binary, so that no
// second program has to be installed or found inside.
func newSandboxNetCmd() *cobra.Command {
	return &cobra.Command{
		Use:                sandbox.ForwardCommand + " -socket PATH -port N [-listen HOST:PORT]... -- ARGV...",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := sandbox.ForwardMain(args); code != 0 {
				return &ExitError{Code: code, Msg: fmt.Sprintf("exit %d", code), Silent: true}
			}
			return nil
		},
	}
}
