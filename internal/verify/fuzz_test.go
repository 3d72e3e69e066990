package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The makefiles, package.json scripts and command lines FindDefining reads
// are the agent's and the user's to write: whatever they hold, it must
// not panic, must name only files inside the tree, and must name each at
// most once.
func FuzzFindDefining(f *testing.F) {
	f.Add("make test", "test:\n\tsh tests/run.sh && ./check\n", `{"scripts": {"test": "node t.js"}}`)
	f.Add("npm test -- --x=y", "", `{"scripts": {"test": "make -C .. test", "pre": "'unterminated"}}`)
	f.Add("sh ../outside.sh; cat /etc/passwd | env X=1 pytest", "test:\n\t@-+ \"q\"'u' ; |& ((\n", `{"scripts": 7}`)
	f.Fuzz(func(t *testing.T, cmd, makefile, pkg string) {
		if len(cmd)+len(makefile)+len(pkg) > 4<<10 {
			return
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "Makefile"), []byte(makefile), 0o644)
		os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644)
		os.MkdirAll(filepath.Join(dir, "tests"), 0o755)
		os.WriteFile(filepath.Join(dir, "tests", "run.sh"), nil, 0o644)
		got := FindDefining(dir, []string{cmd})
		seen := map[string]bool{}
		for _, p := range got {
			if seen[p] || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "../") || p == ".." {
				t.Fatalf("FindDefining(%q) = %q: %q is repeated or outside the tree", cmd, got, p)
			}
			seen[p] = true
			if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("FindDefining named %q, which is no file of the tree", p)
			}
		}
		for _, w := range shellWords(cmd) {
			if w == "" && !strings.ContainsAny(cmd, `'"`) {
				t.Fatalf("shellWords(%q) has an empty word without quotes", cmd)
			}
		}
		_ = MatchGlob(cmd, makefile)
	})
}
