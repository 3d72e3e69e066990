package proc

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// withheld names the variables of ralph's environment that no program it
// starts for a project (agents, checks, hooks) gets: the notification
// secret, with which a program could sign notifications ralph never sent.
// Withhold adds the names config gives ([notify] secret_env).
var (
	withheldMu sync.Mutex
	withheld   = []string{"RALPH_NOTIFY_SECRET"}
)

// Withhold keeps the variables named out of Environ.
func Withhold(names ...string) {
	withheldMu.Lock()
	defer withheldMu.Unlock()
	for _, n := range names {
		if n != "" && !slices.Contains(withheld, n) {
			withheld = append(withheld, n)
		}
	}
}

// Environ is ralph's environment without the withheld variables and
// without the extra names given.
func Environ(without ...string) []string {
	withheldMu.Lock()
	drop := append(slices.Clone(withheld), without...)
	withheldMu.Unlock()
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, name) {
			out = append(out, kv)
		}
	}
	return out
}
