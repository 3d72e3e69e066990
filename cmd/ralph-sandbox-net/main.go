// Command ralph-sandbox-net is the forwarder ralph starts first inside a
// sandbox whose network is "proxy" (see internal/sandbox): the same code
// as `ralph __sandbox-net`, in a program small enough to start in a few
// milliseconds. ralph uses it when it is installed next to ralph, and
// its own hidden command otherwise.
package main

import (
	"os"

	"github.com/ralphloop/ralph/internal/sandbox"
)

func main() { os.Exit(sandbox.ForwardMain(os.Args[1:])) }
