// Command ralph runs an AI coding agent CLI in a loop until the work in a
// PRD is done, verified and committed. See the README.
package main

import (
	"os"

	"github.com/ralphloop/ralph/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
