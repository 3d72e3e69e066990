package cli

import (
	"errors"
	"io/fs"
	"os"

	"github.com/ralphloop/ralph/internal/tasks"
)

// namedPRDMissing is the usage error (exit 2) of a PRD named with --prd on
// the command line that is not there, like a --tasks that names nothing;
// a workspace without its default PRD is told how to write one (exit 1).
// Only the flag a person typed is held to it: a thread's loop names a PRD
// that its worktree makes.
func namedPRDMissing(src tasks.Source, prdFlag string) error {
	if _, templated := src.(tasks.SetupTemplater); templated {
		return nil
	}
	if _, err := os.Stat(src.Path()); errors.Is(err, fs.ErrNotExist) {
		return usageErrorf("--prd %s: no such file: name an existing PRD, or write one with `ralph prd \"what you want built\"`", prdFlag)
	}
	return nil
}
