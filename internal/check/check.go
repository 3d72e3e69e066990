// Package check detects and runs the verification commands (type checks,
// linters, tests) that ralph runs itself after an agent claims to be done.
//
// ralph never trusts an agent's report that tests pass; the results here are
// the evidence. A check whose program is not installed is reported as
// Missing and never counts as passed.
package check

import (
	"bufio"
	"bytes"
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
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/testreport"
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
	// Format is how the runner reports tests one by one: FormatGoJSON or
	// FormatTAP on its standard output, FormatJUnit in Report; "" reads a
	// go test -json or TAP stream when the output is one, and FormatNone
	// judges the check by its exit code alone.
	Format string `toml:"format" json:"format,omitempty"`
	// Report is the file (a glob, relative to the work tree) the runner
	// writes its per-test results to, "" when they come on its standard
	// output. ralph removes it before each run, so that only what this
	// run wrote is read.
	Report string `toml:"report" json:"report,omitempty"`
}

// Formats of per-test results, as Check.Format names them.
const (
	FormatGoJSON = testreport.FormatGoJSON
	FormatJUnit  = testreport.FormatJUnit
	FormatTAP    = testreport.FormatTAP
	FormatNone   = "none"
)

// Formats lists the values Check.Format may take besides "".
var Formats = []string{FormatGoJSON, FormatJUnit, FormatTAP, FormatNone}

// Detect returns the checks a project in dir evidently uses, judged from its
// files, ordered typecheck, lint, test, e2e. The result depends only on the
// files, so it is the same on every call; nil means nothing was recognised.
func Detect(dir string) []Check {
	var checks []Check
	if exists(dir, "go.mod") {
		checks = append(checks,
			Check{Name: "go vet", Kind: KindLint, Run: "go vet ./..."},
			Check{Name: "go test", Kind: KindTest, Run: "go test -json ./...", Format: FormatGoJSON})
	}
	checks = append(checks, detectNode(dir)...)
	if exists(dir, "Cargo.toml") {
		checks = append(checks, Check{Name: "cargo test", Kind: KindTest, Run: "cargo test"})
	}
	if usesPytest(dir) {
		checks = append(checks, Check{Name: "pytest", Kind: KindTest, Run: "pytest --junitxml=" + PytestReport, Format: FormatJUnit, Report: PytestReport})
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

// Where the detected checks write their JUnit reports: a folder of ralph's
// that git ignores (.ralph/.gitignore lists reports/).
const (
	PytestReport = ".ralph/reports/pytest.xml"
	VitestReport = ".ralph/reports/vitest.xml"
	JestReport   = ".ralph/reports/jest.xml"
)

// npmPlaceholderTest is what `npm init` puts in scripts.test; it always fails
// and tests nothing.
const npmPlaceholderTest = "Error: no test specified"

func detectNode(dir string) []Check {
	data, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return nil
	}
	var pkg struct {
		Scripts         map[string]string `json:"scripts"`
		PackageManager  string            `json:"packageManager"`
		Dependencies    map[string]string `json:"dependencies"`
		DevDependencies map[string]string `json:"devDependencies"`
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
		c := Check{Name: run, Kind: s.kind, Run: run}
		if s.kind == KindTest {
			c = nodeTestReport(c, body, pkg.DevDependencies, pkg.Dependencies)
		}
		checks = append(checks, c)
	}
	return checks
}

// nodeTestReport makes a node test script report its tests one by one
// where its runner can without anything installed: node's own test runner
// prints TAP, vitest writes JUnit, and jest does with jest-junit. The
// arguments after "--" go to the script's runner.
func nodeTestReport(c Check, script string, deps ...map[string]string) Check {
	has := func(name string) bool {
		for _, d := range deps {
			if _, ok := d[name]; ok {
				return true
			}
		}
		return false
	}
	switch {
	case strings.Contains(script, "node --test"):
		c.Run += " -- --test-reporter=tap"
		c.Format = FormatTAP
	case strings.Contains(script, "vitest"):
		c.Run += " -- --reporter=default --reporter=junit --outputFile.junit=" + VitestReport
		c.Format, c.Report = FormatJUnit, VitestReport
	case strings.Contains(script, "jest") && has("jest-junit"):
		c.Run = "JEST_JUNIT_OUTPUT_FILE=" + JestReport + " " + c.Run + " -- --ci --reporters=default --reporters=jest-junit"
		c.Format, c.Report = FormatJUnit, JestReport
	}
	return c
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
	// to its last OutputLimit bytes. For go test -json it is the text go
	// test prints without -json, which people and agents read.
	Output string
	// Duration is the wall-clock time the check took.
	Duration time.Duration
	// TimedOut reports that the check exceeded its timeout and was killed.
	TimedOut bool
	// Missing reports that the check's program is not installed: the shell
	// exited 127 saying "not found". A missing test runner proves nothing,
	// so it is never a pass.
	Missing bool
	// Tests are the runner's per-test results, nil when it gave none that
	// agree with its exit code (ReportNote says why).
	Tests *testreport.Report
	// ReportFailed says the runner exited 0 while its report shows a
	// failing test: the check failed.
	ReportFailed bool
	// ReportNote says what was wrong with the per-test report, "" when
	// nothing was or none was expected.
	ReportNote string
}

// Passed reports whether the check ran to completion, exited 0, and its
// report (when it has one) shows no failing test.
func (r Result) Passed() bool {
	return r.ExitCode == 0 && !r.TimedOut && !r.Missing && !r.ReportFailed
}

// reportLimit bounds what is read of a report, and of the standard output
// kept for its per-test results.
const reportLimit = 64 << 20

// Run runs c in dir with sh -c (or, for a plain command line, the program
// itself: see directArgv), in its own process group, killed after
// c.Timeout (DefaultTimeout when zero) or when ctx is cancelled. Stdin is
// empty. Run never fails: problems starting the shell show in Output with
// ExitCode -1. The runner's per-test results are read as c.Format and
// c.Report say (see readTests).
func Run(ctx context.Context, dir string, c Check) Result {
	return RunIn(ctx, dir, c, nil)
}

// RunIn is Run confined by box when box is not nil: the check runs in
// the agents' sandbox with dir as its work tree (see confined), so that a
// test suite the agent wrote reaches no more than the agent could.
func RunIn(ctx context.Context, dir string, c Check, box *sandbox.Policy) Result {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	out := proc.NewTailBuffer(OutputLimit)
	var args []string
	if box == nil {
		// A program found outside may be hidden in the sandbox, where sh
		// says "not found" for it; so a sandboxed check always has sh.
		args = directArgv(dir, c.Run)
	}
	if args == nil {
		args = []string{"sh", "-c", c.Run}
	}
	// A report left by an earlier run, or written by an agent, must not
	// be read as this run's.
	reportNote := clearReports(dir, c.Report)
	// One writer for both streams keeps them in one pipe, in the order
	// written; the per-test parsers skip what is not theirs.
	var output io.Writer = out
	var streamed *cappedBuffer
	if c.Format != FormatNone && c.Report == "" {
		streamed = &cappedBuffer{max: reportLimit}
		output = io.MultiWriter(out, streamed)
	}
	spec := proc.Spec{
		Args: args,
		Dir:  dir,
		// A check is code the agent could write: it gets no more of
		// ralph's secrets than the agent (the notification secret).
		Env:     proc.Environ(),
		Stdout:  output,
		Stderr:  output,
		Timeout: timeout,
	}
	var o proc.Outcome
	var err error
	if box != nil {
		spec.Args, spec.Env, err = confined(*box, dir, spec.Args, spec.Env)
	}
	if err == nil {
		o, err = proc.Run(ctx, spec)
	} else {
		o.ExitCode = -1
	}
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
	var stream []byte
	if streamed != nil {
		stream = streamed.buf.Bytes()
	}
	res.readTests(dir, stream, reportNote)
	if res.Missing && box != nil {
		res.Output += "\n" + hiddenNote + "\n"
	}
	return res
}

// readTests reads the run's per-test results and holds them against its
// exit code. A report is something a test (and so an agent) can write, so
// it never overrides the exit code: a report without failures from a
// runner that exited non-zero is set aside, and a report with failures
// from one that exited 0 fails the check. A missing, truncated or
// malformed report leaves the check judged by its exit code, and says so.
func (r *Result) readTests(dir string, stream []byte, note string) {
	c := r.Check
	if c.Format == FormatNone {
		return
	}
	var rep *testreport.Report
	if c.Report != "" {
		rep, note = readReports(dir, c, note)
	} else {
		format := c.Format
		if format == "" {
			format = testreport.Sniff(stream)
		}
		if format == "" {
			return
		}
		if format == FormatGoJSON {
			// People and agents read what go test prints without -json.
			r.Output = redact.Default().Redact(Tail(testreport.GoJSONText(stream), OutputLimit))
		}
		p, err := testreport.Parse(format, stream)
		if err != nil {
			note = fmt.Sprintf("its output is not %s (%v): judged by its exit code", format, err)
		} else {
			rep = p
		}
	}
	switch {
	case rep == nil:
	case r.TimedOut || r.Missing:
		rep, note = nil, ""
	case r.ExitCode != 0 && !rep.Failed():
		rep, note = nil, fmt.Sprintf("its report shows no failing test, but it exited with code %d: judged by its exit code", r.ExitCode)
	case r.ExitCode == 0 && rep.Failed():
		r.ReportFailed = true
		note = "it exited 0, but its report shows failing tests: failed"
	}
	r.Tests, r.ReportNote = rep, note
}

// readReports reads and merges the report files c.Report names.
func readReports(dir string, c Check, note string) (*testreport.Report, string) {
	if note != "" {
		return nil, note
	}
	paths, err := reportPaths(dir, c.Report)
	if err != nil {
		return nil, err.Error()
	}
	if len(paths) == 0 {
		return nil, fmt.Sprintf("its report %s was not written: judged by its exit code", c.Report)
	}
	var reps []*testreport.Report
	for _, p := range paths {
		rel, _ := filepath.Rel(dir, p)
		data, err := readCapped(p)
		if err != nil {
			return nil, fmt.Sprintf("its report %s could not be read (%v): judged by its exit code", rel, err)
		}
		format := c.Format
		if format == "" {
			format = testreport.Sniff(data)
		}
		if format == "" {
			return nil, fmt.Sprintf("its report %s is in no format ralph reads (go-json, junit, tap): judged by its exit code", rel)
		}
		rep, err := testreport.Parse(format, data)
		if err != nil {
			return nil, fmt.Sprintf("its report %s is not valid %s (%v): judged by its exit code", rel, format, err)
		}
		reps = append(reps, rep)
	}
	return testreport.Merge(reps...), ""
}

// reportPaths resolves a report glob inside dir.
func reportPaths(dir, glob string) ([]string, error) {
	clean := filepath.Clean(filepath.FromSlash(glob))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("its report %s is outside the work tree: judged by its exit code", glob)
	}
	matches, err := filepath.Glob(filepath.Join(dir, clean))
	if err != nil {
		return nil, fmt.Errorf("its report pattern %s is malformed (%v): judged by its exit code", glob, err)
	}
	var files []string
	for _, m := range matches {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
			files = append(files, m)
		}
	}
	return files, nil
}

// clearReports removes the report files of an earlier run before the
// check runs, and makes the report's folder. It returns a note when the
// report could not be cleared, and so cannot be trusted to be this run's.
func clearReports(dir, glob string) string {
	if glob == "" {
		return ""
	}
	paths, err := reportPaths(dir, glob)
	if err != nil {
		return err.Error()
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			return fmt.Sprintf("its old report %s could not be removed (%v): judged by its exit code", p, err)
		}
	}
	if !strings.ContainsAny(glob, "*?[") {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, filepath.FromSlash(glob))), 0o755)
	}
	return ""
}

func readCapped(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, reportLimit))
}

// cappedBuffer keeps the first max bytes written to it and drops the rest.
type cappedBuffer struct {
	buf bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
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
