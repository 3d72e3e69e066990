package clitest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ciLimit is how long CI gives a whole run (.ci/run) on 2 cores.
const ciLimit = 90 * time.Minute

// TestMakeTestHasTimeout holds the suite's test command to a timeout of its
// own: without -timeout go test ends a package after 10 minutes, which the
// end-to-end tests reached under load. The timeout must leave a wide margin
// over the slowest package (a few minutes) and stay under CI's limit, so
// that go test, not CI, ends a hung package and prints its goroutines. CI
// runs `make test`, so the Makefile is the one place the command lives.
func TestMakeTestHasTimeout(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*make test\s*$`).Match(ci) {
		t.Errorf(".ci/run does not run `make test`, so the Makefile's test command is not the one CI runs:\n%s", ci)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	lines := goTestLines(string(mk), "test")
	if len(lines) == 0 {
		t.Fatalf("the Makefile's test target runs no go test:\n%s", mk)
	}
	timeoutRE := regexp.MustCompile(`\s-{1,2}timeout[= ](\S+)`)
	for _, l := range lines {
		m := timeoutRE.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("the Makefile's %q has no -timeout: go test would end a package after its default 10 minutes; give it one such as -timeout 30m", l)
			continue
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Errorf("the Makefile's %q: -timeout %s is not a duration: %v", l, m[1], err)
			continue
		}
		if d < 20*time.Minute || d >= ciLimit {
			t.Errorf("the Makefile's %q: -timeout %s, want at least 20m (a wide margin over the slowest package) and under CI's %s", l, d, ciLimit)
		}
	}
}

var goTestRE = regexp.MustCompile(`(\$\(GO\)|\bgo) test\b`)

// goTestLines returns the go test command lines of a Makefile target's
// recipe.
func goTestLines(makefile, target string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(makefile, "\n") {
		switch {
		case strings.HasPrefix(l, target+":"):
			in = true
		case in && strings.HasPrefix(l, "\t"):
			if goTestRE.MatchString(l) {
				out = append(out, strings.TrimSpace(l))
			}
		case in && strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#"):
			in = false
		}
	}
	return out
}
