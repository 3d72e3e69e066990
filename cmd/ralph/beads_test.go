package main

import (
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdNeedBD puts the pinned bd that scripts/install-bd.sh builds into
// .tools/bd/bd on the script's PATH (and in RALPH_BD), and fails, never
// skips, when it is missing: `make test` builds it first.
func cmdNeedBD(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: needbd")
	}
	wd, err := os.Getwd()
	ts.Check(err)
	bin := filepath.Join(wd, "..", "..", ".tools", "bd", "bd")
	if _, err := os.Stat(bin); err != nil {
		ts.Fatalf("the beads integration tests need the pinned bd at .tools/bd/bd: run `bash scripts/install-bd.sh` (or `make bd`) first (%v)", err)
	}
	abs, err := filepath.Abs(bin)
	ts.Check(err)
	ts.Setenv("RALPH_BD", abs)
	ts.Setenv("PATH", filepath.Dir(abs)+string(os.PathListSeparator)+ts.Getenv("PATH"))
	ts.Setenv("BD_NON_INTERACTIVE", "1")
	ts.Setenv("BEADS_ACTOR", "tester")
}
