// Package check detects and runs the verification commands (type checks,
// linters, tests) that ralph runs itself after an agent claims to be done.
//
// ralph never trusts an agent's report that tests pass; the results here are
// the evidence. A check whose program is not installed is reported as
// Missing and never counts as passed.
package check

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/redact"
)

// Kinds of checks, in the order ralph runs them: cheap and broad first, so
// the slowest checks run only once the fast ones pass.
const (
	KindTypecheck = "typecheck"
	KindLint      = "lint"
	KindTest      = "test"
	KindE2E       = "e2e"
)

// kindOrder ranks kinds for sorting; unknown kinds sort last.
var kindOrder = []string{KindTypecheck, KindLint, KindTest, KindE2E}

// DefaultTimeout bounds a check whose Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// OutputLimit is how many trailing bytes of a check's output Result keeps.
const OutputLimit = 64 << 10

// Check is one verification command.
type Check struct {
	// Name labels the check in reports.
	Name string `toml:"name" json:"name"`
	// Kind is one of the Kind constants; it decides the running order.
	Kind string `toml:"kind" json:"kind"`
	// Run is a shell command line from the user's config or from Detect,
	// run with sh -c in the project directory. It never comes from task
	// text.
	Run string `toml:"run" json:"run"`
	// Timeout bounds the run; 0 means DefaultTimeout.
	Timeout time.Duration `toml:"timeout" json:"timeout"`
}

// Detect returns the checks a project in dir evidently uses, judged from its
// files, ordered typecheck, lint, test, e2e. The result depends only on the
// files, so it is the same on every call; nil means nothing was recognised.
func Detect(dir string) []Check {
	var checks []Check
	if exists(dir, "go.mod") {
		checks = append(checks,
			Check{Name: "go vet", Kind: KindLint, Run: "go vet ./..."},
			Check{Name: "go test", Kind: KindTest, Run: "go test ./..."})
	}
	checks = append(checks, detectNode(dir)...)
	if exists(dir, "Cargo.toml") {
		checks = append(checks, Check{Name: "cargo test", Kind: KindTest, Run: "cargo test"})
	}
	if usesPytest(dir) {
		checks = append(checks, Check{Name: "pytest", Kind: KindTest, Run: "pytest"})
	}
	// make test often wraps the tests found above; running both would run
	// the suite twice.
	if !slices.ContainsFunc(checks, func(c Check) bool { return c.Kind == KindTest }) && makeHasTest(dir) {
		checks = append(checks, Check{Name: "make test", Kind: KindTest, Run: "make test"})
	}
	Sort(checks)
	return checks
}

// Sort orders checks by kind (typecheck, lint, test, e2e, then unknown
// kinds), keeping the given order within a kind.
func Sort(checks []Check) {
	slices.SortStableFunc(checks, func(a, b Check) int { return rank(a.Kind) - rank(b.Kind) })
}

func rank(kind string) int {
	if i := slices.Index(kindOrder, kind); i >= 0 {
		return i
	}
	return len(kindOrder)
}

// nodeScripts maps package.json script names to kinds; for a kind with
// several candidate scripts only the first present one is used, as the
// others are aliases.
var nodeScripts = []struct{ kind, script string }{
	{KindTypecheck, "typecheck"}, {KindTypecheck, "type-check"}, {KindTypecheck, "tsc"},
	{KindLint, "lint"},
	{KindTest, "test"},
	{KindE2E, "e2e"}, {KindE2E, "test:e2e"},
}

// npmPlaceholderTest is what `npm init` puts in scripts.test; it always fails
// and tests nothing.
const npmPlaceholderTest = "Error: no test specified"

func detectNode(dir string) []Check {
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return nil
	}
	var pkg struct {
		Scripts        map[string]string `json:"scripts"`
		PackageManager string            `json:"packageManager"`
	}
	if json.Unmarshal(data, &pkg) != nil {
		return nil
	}
	pm := nodePackageManager(dir, pkg.PackageManager)
	var checks []Check
	done := map[string]bool{}
	for _, s := range nodeScripts {
		body, ok := pkg.Scripts[s.script]
		if !ok || done[s.kind] || strings.TrimSpace(body) == "" {
			continue
		}
		if s.script == "test" && strings.Contains(body, npmPlaceholderTest) {
			continue
		}
		done[s.kind] = true
		run := pm + " run " + s.script
		checks = append(checks, Check{Name: run, Kind: s.kind, Run: run})
	}
	return checks
}

// nodePackageManager picks the package manager whose lockfile is present,
// then the one named by package.json's packageManager field, then npm.
func nodePackageManager(dir, field string) string {
	switch {
	case exists(dir, "pnpm-lock.yaml"):
		return "pnpm"
	case exists(dir, "yarn.lock"):
		return "yarn"
	case exists(dir, "bun.lockb"), exists(dir, "bun.lock"):
		return "bun"
	}
	name, _, _ := strings.Cut(field, "@")
	switch name {
	case "pnpm", "yarn", "bun":
		return name
	}
	return "npm"
}

func usesPytest(dir string) bool {
	if exists(dir, "pytest.ini") ||
		fileContains(dir, "pyproject.toml", "[tool.pytest") ||
		fileContains(dir, "setup.cfg", "[tool:pytest]") {
		return true
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "tests", "test_*.py"))
	return len(matches) > 0
}

// makeHasTest reports whether the project's makefile defines a test target.
func makeHasTest(dir string) bool {
	for _, name := range []string{"GNUmakefile", "makefile", "Makefile"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if isTestTarget(sc.Text()) {
				return true
			}
		}
		// make reads only the first makefile it finds.
		return false
	}
	return false
}

// isTestTarget reports whether a makefile line starts a rule for "test",
// alone or among other targets, as opposed to a variable assignment.
func isTestTarget(line string) bool {
	if line == "" || line[0] == '\t' || line[0] == '#' {
		return false
	}
	targets, rest, ok := strings.Cut(line, ":")
	if !ok || strings.HasPrefix(rest, "=") || strings.ContainsAny(targets, "=$") {
		return false
	}
	return slices.Contains(strings.Fields(targets), "test")
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

func fileContains(dir, name, substr string) bool {
	data, err := os.ReadFile(filepath.Join(dir, name))
	return err == nil && strings.Contains(string(data), substr)
}

// Result is the outcome of running one check.
type Result struct {
	// Check is the check that ran.
	Check Check
	// ExitCode is the shell's exit status, -1 when the check was killed or
	// could not start.
	ExitCode int
	// Output is the combined stdout and stderr, in the order written, cut
	// to its last OutputLimit bytes.
	Output string
	// Duration is the wall-clock time the check took.
	Duration time.Duration
	// TimedOut reports that the check exceeded its timeout and was killed.
	TimedOut bool
	// Missing reports that the check's program is not installed: the shell
	// exited 127 saying "not found". A missing test runner proves nothing,
	// so it is never a pass.
	Missing bool
}

// Passed reports whether the check ran to completion and exited 0.
func (r Result) Passed() bool {
	return r.ExitCode == 0 && !r.TimedOut && !r.Missing
}

// Run runs c in dir with sh -c (or, for a plain command line, the program
// itself: see directArgv), in its own process group, killed after
// c.Timeout (DefaultTimeout when zero) or when ctx is cancelled. Stdin is
// empty. Run never fails: problems starting the shell show in Output with
// ExitCode -1.
func Run(ctx context.Context, dir string, c Check) Result {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	out := proc.NewTailBuffer(OutputLimit)
	args := directArgv(dir, c.Run)
	if args == nil {
		args = []string{"sh", "-c", c.Run}
	}
	o, err := proc.Run(ctx, proc.Spec{
		Args:    args,
		Dir:     dir,
		Stdout:  out,
		Stderr:  out,
		Timeout: timeout,
	})
	if err != nil {
		fmt.Fprintf(out, "\nralph: running check %q: %v\n", c.Name, err)
	}
	res := Result{
		Check:    c,
		ExitCode: o.ExitCode,
		// A check that prints the environment or a credentialed remote
		// URL must not carry the secret into logs and the next prompt.
		Output:   redact.Default().Redact(string(out.Bytes())),
		Duration: o.Duration,
		TimedOut: o.TimedOut,
	}
	// 127 is the shell's "command not found"; the message check keeps a
	// program that merely exits 127 itself from being called missing.
	res.Missing = o.ExitCode == 127 && strings.Contains(res.Output, "not found")
	return res
}

// Tail returns the end of a check's output, at most max bytes, for records
// and logs that cannot hold all of it: the end is where test runners
// summarise a failure. A cut starts at the next line so that no partial line
// leads, unless that would leave nothing.
func Tail(output string, max int) string {
	output = strings.TrimRight(output, "\n")
	if len(output) <= max {
		return output
	}
	tail := output[len(output)-max:]
	if output[len(output)-max-1] == '\n' {
		return tail
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		return tail[i+1:]
	}
	// One long line: drop the bytes of a character the cut split.
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return tail
}

// LastLines returns the last n lines of output that are not blank, as a
// terminal shows them under a failed check.
func LastLines(output string, n int) []string {
	var lines []string
	for _, l := range strings.Split(output, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, "\r"))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// RunAll runs checks in order and stops at the first that does not pass.
// It returns the results of the checks that ran, the failing one last, and
// whether all checks passed; an empty list passes.
func RunAll(ctx context.Context, dir string, checks []Check) ([]Result, bool) {
	var results []Result
	for _, c := range checks {
		r := Run(ctx, dir, c)
		results = append(results, r)
		if !r.Passed() {
			return results, false
		}
	}
	return results, true
}

// directArgv returns the argv of a check command line that needs no shell:
// plain words (letters, digits and - _ . / : , + @ %) naming an installed
// program that is a binary or a script with a #! line. sh -c would run it
// the same way, one fork and exec later, on every check of every
// iteration. Anything else (quotes, variables, globs, redirections,
// builtins, assignments, a program not found) returns nil and goes to sh,
// which also reports a missing program as "not found".
func directArgv(dir, run string) []string {
	words := strings.Fields(run)
	if len(words) == 0 {
		return nil
	}
	for _, w := range words {
		for _, r := range w {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			case strings.ContainsRune("-_./:,+@%", r):
			default:
				return nil
			}
		}
	}
	path := words[0]
	switch {
	case !strings.Contains(path, "/"):
		p, err := exec.LookPath(path)
		if err != nil {
			return nil
		}
		path = p
	case !filepath.IsAbs(path):
		// Relative to the check's folder, as the child resolves it.
		path = filepath.Join(dir, path)
	}
	if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 4)
	if n, _ := io.ReadFull(f, head); n < 2 || (string(head[:2]) != "#!" && string(head) != "\x7fELF") {
		return nil // a script without #!: only a shell runs it
	}
	return words
}
