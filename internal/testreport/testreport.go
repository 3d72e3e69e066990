// Package testreport reads the per-test results that test runners write
// (go test -json, JUnit XML, TAP) so that ralph can tell, test by test, what
// passed and what failed: which tests an agent's change broke, which it
// fixed, and what the failing ones printed, to put in the next prompt.
//
// These reports are read as evidence that ralph produced itself: ralph runs
// the check command and reads what that run wrote. The agent still wrote
// the tree the runner ran in, so it can ship a test that prints a forged
// report, a runner configuration that writes one, or a report file left
// from another run. A report is therefore never trusted alone: ralph also
// checks the runner's exit code, and a report saying "all passed" never
// overrides a failing exit. For the same reason every parser here treats its
// input as hostile: it never panics, does work linear in the input, keeps a
// bounded amount of it (64 MiB of input, 200,000 tests, 2 KiB of output per
// test, 1 KiB per identity), and says in Report.Broken when it stopped early,
// so a cut-short report is never mistaken for a clean one.
package testreport

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Status of one test.
type Status string

// The three outcomes. Every runner's richer vocabulary folds into these,
// leaning towards Fail whenever the outcome is unknown, so that a failure is
// never lost: a test that started and never ended is a Fail, not a Skip.
const (
	Pass Status = "pass"
	Fail Status = "fail" // failure, error, panic, timeout, a test that started and never ended
	Skip Status = "skip" // skipped, xfail, TAP # SKIP and # TODO
)

// Formats.
const (
	FormatGoJSON = "go-json" // go test -json (test2json) on stdout
	FormatJUnit  = "junit"   // JUnit XML
	FormatTAP    = "tap"     // TAP 13/14 on stdout
)

// Bounds on what a report may cost. Real reports are far below all of them;
// each exists so that a hostile report costs seconds and megabytes, not
// minutes and gigabytes.
const (
	maxInput  = 64 << 20 // bytes of input parsed; the rest is dropped and said so
	maxLine   = 1 << 20  // longer lines (go-json, TAP) are skipped
	maxOutput = 2 << 10  // bytes of output kept per failing test
	maxTests  = 200000   // tests kept per report
	maxDepth  = 64       // XML elements / TAP subtests nested deeper stop the parse
	maxIDLen  = 1024     // longer identities are shortened with a hash, see capID
	maxBroken = 1000     // broken groups listed; the rest are counted
)

// Test is one test's outcome.
type Test struct {
	ID     string `json:"id"`              // stable identity across runs of the same tree
	Name   string `json:"name"`            // short name for people (TestAdd/case_one, "test_param[2]", TAP description)
	Group  string `json:"group,omitempty"` // package (Go), classname/file (JUnit), file or top subtest (TAP)
	Status Status `json:"status"`
	// Output is what the runner printed for this test when it failed, its
	// last 2 KiB at most (the end of a failure is where the assertion and
	// the panic are); "" otherwise.
	Output string `json:"output,omitempty"`
}

// Report is one run's per-test results.
type Report struct {
	Format string `json:"format"`
	Tests  []Test `json:"tests"` // sorted by ID, IDs unique
	// Broken lists groups that failed without per-test results: a Go package
	// that failed to build or whose test binary crashed/timed out with tests
	// never finished is still listed here (its unfinished tests are also
	// Fail); a pytest collection error; a TAP "Bail out!"; a TAP plan that
	// promised more tests than ran. Each entry is "group: reason" in words.
	// It also lists what a list of tests cannot show: a Go package that
	// failed although none of its tests did (TestMain exiting non-zero) or
	// whose panic kept its later tests from running, a TAP stream with no
	// plan or more points than planned, and the parser's own notes,
	// "report: ...", when the report was cut short, malformed past some
	// point, or too big to keep whole. Entries are sorted so that two runs
	// of the same tree compare equal.
	Broken []string `json:"broken,omitempty"`

	// sorted is set by Parse and Merge, which leave Tests sorted by ID, so
	// Find can search in O(log n) without building anything later: a Report
	// is read from several goroutines, so nothing may be built lazily. A
	// Report made any other way (a literal, json.Unmarshal) is searched
	// linearly, which is slower but right whatever order its Tests are in.
	sorted bool
}

// Find returns the test whose ID is id. On a report from Parse or Merge it
// is a binary search over Tests, so Tests must not be reordered afterwards.
func (r *Report) Find(id string) (Test, bool) {
	if r == nil {
		return Test{}, false
	}
	if r.sorted {
		i, ok := slices.BinarySearchFunc(r.Tests, id, func(t Test, id string) int { return strings.Compare(t.ID, id) })
		if ok {
			return r.Tests[i], true
		}
		return Test{}, false
	}
	for _, t := range r.Tests {
		if t.ID == id {
			return t, true
		}
	}
	return Test{}, false
}

// Count returns how many tests have status s.
func (r *Report) Count(s Status) int {
	if r == nil {
		return 0
	}
	n := 0
	for _, t := range r.Tests {
		if t.Status == s {
			n++
		}
	}
	return n
}

// Failed reports whether the run failed by the report's own account: a test
// failed, or a group failed without per-test results. A false Failed is not
// proof of success; the runner's exit code must agree.
func (r *Report) Failed() bool {
	if r == nil {
		return false
	}
	return len(r.Broken) > 0 || r.Count(Fail) > 0
}

// Parse reads data in format. An error means the data is not a report of
// that format at all (empty, not JSON lines / not XML / no TAP test points);
// a truncated but recognisable report parses what is there and records the
// truncation in Broken (e.g. "report: truncated XML").
func Parse(format string, data []byte) (*Report, error) {
	cut := len(data) > maxInput
	if cut {
		data = data[:maxInput]
	}
	b := &builder{format: format}
	var err error
	switch format {
	case FormatGoJSON:
		err = parseGoJSON(b, data)
	case FormatJUnit:
		err = parseJUnit(b, data)
	case FormatTAP:
		err = parseTAP(b, data)
	default:
		return nil, fmt.Errorf("testreport: unknown format %q (want %q, %q or %q)", format, FormatGoJSON, FormatJUnit, FormatTAP)
	}
	if err != nil {
		return nil, err
	}
	if cut {
		b.broke("report: cut at 64 MiB")
	}
	return b.report(), nil
}

// Merge combines reports of the same format (Surefire writes one XML file
// per class; a glob may name several files). IDs stay unique: an ID seen in
// an earlier report gets the occurrence suffix (" #2", " #3") in the later
// one, so the files must be given in a stable order (a sorted glob) for the
// IDs to stay stable across runs. Format is that of the first report that
// has one. Nil reports are skipped.
func Merge(reports ...*Report) *Report {
	b := &builder{}
	for _, r := range reports {
		if r == nil {
			continue
		}
		if b.format == "" {
			b.format = r.Format
		}
		b.tests = append(b.tests, r.Tests...)
		b.broken = append(b.broken, r.Broken...)
	}
	return b.report()
}

// Sniff tells the format of a runner's stdout: FormatGoJSON when its first
// non-blank line is a JSON object with an "Action" key, FormatTAP when it has
// a "TAP version" line or at least one "ok N"/"not ok N" test point together
// with a plan line "1..N", FormatJUnit when it starts (after an optional
// BOM/whitespace) with "<?xml" or "<testsuites" or "<testsuite"; "" otherwise.
// It lets ralph read a check's stdout without being told its format; plain
// text such as "PASS\nok ex 0.1s" is none of them.
func Sniff(data []byte) string {
	if len(data) > maxInput {
		data = data[:maxInput]
	}
	data = trimBOM(data)
	head := bytes.TrimLeft(data, " \t\r\n")
	if bytes.HasPrefix(head, []byte("<?xml")) || bytes.HasPrefix(head, []byte("<testsuite")) {
		return FormatJUnit
	}
	first := true
	isJSON := false
	version, point, plan := false, false, false
	eachLine(data, func(line []byte) bool {
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			return true
		}
		if first {
			first = false
			if t[0] == '{' {
				var m map[string]json.RawMessage
				if json.Unmarshal(t, &m) == nil {
					_, isJSON = m["Action"]
					if isJSON {
						return false
					}
				}
			}
		}
		s := string(t)
		switch {
		case strings.HasPrefix(s, "TAP version"):
			version = true
			return false
		case isPlan(s):
			plan = true
		default:
			if p, ok := parsePoint(s); ok && p.num != "" {
				point = true
			}
		}
		return !(point && plan)
	})
	switch {
	case isJSON:
		return FormatGoJSON
	case version, point && plan:
		return FormatTAP
	}
	return ""
}

// builder collects a report's tests and broken groups while a parser runs.
type builder struct {
	format     string
	tests      []Test
	broken     []string
	moreBroken int
	tooMany    bool
}

// add records t, or refuses it (false) once maxTests tests are kept, so
// that a report of a billion one-line tests cannot exhaust memory.
func (b *builder) add(t Test) bool {
	if len(b.tests) >= maxTests {
		if !b.tooMany {
			b.tooMany = true
			b.broke(fmt.Sprintf("report: too many tests (only the first %d are read)", maxTests))
		}
		return false
	}
	b.tests = append(b.tests, t)
	return true
}

func (b *builder) full() bool { return b.tooMany }

// broke lists a broken group. Past maxBroken entries they are only
// counted: a thousand broken packages already say what there is to say.
// The parser's own notes ("report: ...", a handful at most) are always
// listed, as they say the report itself is incomplete.
func (b *builder) broke(s string) {
	if len(b.broken) >= maxBroken && !strings.HasPrefix(s, "report: ") {
		b.moreBroken++
		return
	}
	b.broken = append(b.broken, s)
}

// report makes the IDs unique (a repeat gets " #2", " #3" in the order the
// tests were added, which is the report's document order), sorts tests by
// ID and the broken entries by text, and drops repeated broken entries.
func (b *builder) report() *Report {
	r := &Report{Format: b.format, Tests: b.tests, sorted: true}
	if r.Tests == nil {
		r.Tests = []Test{}
	}
	seen := make(map[string]bool, len(r.Tests))
	next := make(map[string]int)
	for i := range r.Tests {
		id := r.Tests[i].ID
		if seen[id] {
			k := next[id]
			if k < 2 {
				k = 2
			}
			for seen[fmt.Sprintf("%s #%d", id, k)] {
				k++
			}
			next[id] = k + 1
			id = fmt.Sprintf("%s #%d", id, k)
			r.Tests[i].ID = id
		}
		seen[id] = true
	}
	slices.SortStableFunc(r.Tests, func(a, b Test) int { return strings.Compare(a.ID, b.ID) })
	if b.moreBroken > 0 {
		b.broken = append(b.broken, fmt.Sprintf("report: %d more broken groups not listed", b.moreBroken))
	}
	if len(b.broken) > 0 {
		r.Broken = slices.Compact(slices.Sorted(slices.Values(b.broken)))
	}
	return r
}

// capID keeps identities and names short. A test named by a megabyte of
// text would otherwise be copied into every child's ID; past maxIDLen the
// text is cut and a hash of the whole is appended, so the result is still
// the same in every run and still tells different long names apart.
func capID(s string) string {
	if len(s) <= maxIDLen {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	keep := maxIDLen - 20
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + "…" + hex.EncodeToString(sum[:8])
}

// tail keeps the last bytes written to it: the end of a failing test's
// output is where the assertion, the panic or the timeout is.
type tail struct{ b []byte }

func (t *tail) add(p string) {
	if len(p) >= maxOutput {
		t.b = append(t.b[:0], p[len(p)-maxOutput:]...)
		return
	}
	t.b = append(t.b, p...)
	if len(t.b) > 2*maxOutput {
		n := copy(t.b, t.b[len(t.b)-maxOutput:])
		t.b = t.b[:n]
	}
}

func (t *tail) String() string { return clipOutput(string(t.b)) }

// clipOutput returns the last maxOutput bytes of s, starting on a UTF-8
// boundary so that the text stays readable.
func clipOutput(s string) string {
	if len(s) <= maxOutput {
		return s
	}
	start := len(s) - maxOutput
	for i := 0; i < utf8.UTFMax-1 && start < len(s) && !utf8.RuneStart(s[start]); i++ {
		start++
	}
	return s[start:]
}

// eachLine calls fn with every line of data, without its line ending, until
// fn returns false. Lines longer than maxLine are skipped: no real event or
// test point is that long, and skipping them keeps each step's cost bounded.
func eachLine(data []byte, fn func(line []byte) bool) {
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if len(line) > maxLine {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if !fn(line) {
			return
		}
	}
}

func trimBOM(data []byte) []byte { return bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
