package check

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A plain command line runs without a shell (one fork and exec less on
// every check of every iteration) and behaves as under sh -c; anything a
// shell must read, and scripts only a shell runs, still go through sh.
func TestPlainChecksRunWithoutAShell(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	marker := filepath.Join(t.TempDir(), "sh-ran")
	realSh := "/bin/sh"
	// An sh on PATH that notes each run, then is the real one.
	wrapper := "#!" + realSh + "\necho x >> " + marker + "\nexec " + realSh + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "sh"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := os.WriteFile(filepath.Join(dir, "with-shebang"), []byte("#!/bin/sh\necho from-shebang \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "no-shebang"), []byte("echo from-plain-script\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		run     string
		shell   bool
		exit    int
		out     string
		missing bool
	}{
		{run: "printf hi", out: "hi"},
		{run: "./with-shebang arg-1", out: "from-shebang arg-1"},
		{run: "printf %s $HOME", shell: true, out: os.Getenv("HOME")},
		{run: "./no-shebang", shell: true, out: "from-plain-script"},
		{run: "exit 3", shell: true, exit: 3},
		{run: "printf a; printf b", shell: true, out: "ab"},
		{run: "no-such-program-ralph-test --flag", shell: true, exit: 127, missing: true},
	} {
		os.Remove(marker)
		res := Run(context.Background(), dir, Check{Name: "c", Run: tc.run, Timeout: time.Minute})
		_, err := os.Stat(marker)
		if ranShell := err == nil; ranShell != tc.shell {
			t.Errorf("%q: through sh %v, want %v", tc.run, ranShell, tc.shell)
		}
		if res.ExitCode != tc.exit || res.Missing != tc.missing || !strings.Contains(res.Output, tc.out) {
			t.Errorf("%q: exit %d missing %v output %q; want exit %d missing %v output with %q", tc.run, res.ExitCode, res.Missing, res.Output, tc.exit, tc.missing, tc.out)
		}
	}
}
