package testreport

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustParse(t testing.TB, format string, data []byte) *Report {
	t.Helper()
	r, err := Parse(format, data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", format, err)
	}
	checkReport(t, r)
	return r
}

// statuses is a report's tests as ID -> status, for exact comparison.
func statuses(r *Report) map[string]Status {
	m := map[string]Status{}
	for _, t := range r.Tests {
		m[t.ID] = t.Status
	}
	return m
}

func wantStatuses(t *testing.T, r *Report, want map[string]Status) {
	t.Helper()
	got := statuses(r)
	if reflect.DeepEqual(got, want) {
		return
	}
	var diff []string
	for id, s := range want {
		if g, ok := got[id]; !ok {
			diff = append(diff, fmt.Sprintf("missing %q (want %s)", id, s))
		} else if g != s {
			diff = append(diff, fmt.Sprintf("%q is %s, want %s", id, g, s))
		}
	}
	for id, s := range got {
		if _, ok := want[id]; !ok {
			diff = append(diff, fmt.Sprintf("unexpected %q (%s)", id, s))
		}
	}
	slices.Sort(diff)
	t.Errorf("tests differ:\n  %s", strings.Join(diff, "\n  "))
}

func wantBroken(t *testing.T, r *Report, want ...string) {
	t.Helper()
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(r.Broken, want) {
		t.Errorf("Broken = %q, want %q", r.Broken, want)
	}
}

func wantOutput(t *testing.T, r *Report, id string, parts ...string) {
	t.Helper()
	tc, ok := r.Find(id)
	if !ok {
		t.Errorf("no test %q", id)
		return
	}
	for _, p := range parts {
		if !strings.Contains(tc.Output, p) {
			t.Errorf("output of %q lacks %q; it is:\n%s", id, p, tc.Output)
		}
	}
}

// checkReport asserts what every report must satisfy, whatever its input:
// the fuzz targets run it on hostile data.
func checkReport(t testing.TB, r *Report) {
	t.Helper()
	if r == nil {
		t.Fatal("nil report without an error")
	}
	counts := 0
	for i, tc := range r.Tests {
		if i > 0 && r.Tests[i-1].ID >= tc.ID {
			t.Fatalf("IDs not sorted and unique: %q then %q", r.Tests[i-1].ID, tc.ID)
		}
		switch tc.Status {
		case Pass, Fail, Skip:
		default:
			t.Fatalf("test %q has status %q", tc.ID, tc.Status)
		}
		if tc.Status == Fail && !r.Failed() {
			t.Fatalf("test %q failed but Failed() is false", tc.ID)
		}
		if tc.Status != Fail && tc.Output != "" {
			t.Fatalf("test %q is %s but has output %q", tc.ID, tc.Status, tc.Output)
		}
		if len(tc.Output) > maxOutput {
			t.Fatalf("test %q has %d bytes of output", tc.ID, len(tc.Output))
		}
		if got, ok := r.Find(tc.ID); !ok || got.ID != tc.ID {
			t.Fatalf("Find(%q) = %q, %v", tc.ID, got.ID, ok)
		}
	}
	for _, s := range []Status{Pass, Fail, Skip} {
		counts += r.Count(s)
	}
	if counts != len(r.Tests) {
		t.Fatalf("counts add up to %d of %d tests", counts, len(r.Tests))
	}
	if len(r.Tests) > maxTests {
		t.Fatalf("%d tests kept, more than %d", len(r.Tests), maxTests)
	}
	if len(r.Broken) > 0 && !r.Failed() {
		t.Fatal("Broken but not Failed()")
	}
}

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		want string
	}{
		{"go test -json", string(fixture(t, "go_test.jsonl")), FormatGoJSON},
		{"go test -json timeout", string(fixture(t, "go_test_timeout.jsonl")), FormatGoJSON},
		{"pytest", string(fixture(t, "pytest_xunit2.xml")), FormatJUnit},
		{"pytest collection error", string(fixture(t, "pytest_collection_error.xml")), FormatJUnit},
		{"jest-junit", string(fixture(t, "jest_junit.xml")), FormatJUnit},
		{"vitest", string(fixture(t, "vitest_junit.xml")), FormatJUnit},
		{"node:test junit", string(fixture(t, "node_test_junit.xml")), FormatJUnit},
		{"surefire", string(fixture(t, "surefire/TEST-com.example.CalcTest.xml")), FormatJUnit},
		{"node:test tap", string(fixture(t, "node_test.tap")), FormatTAP},
		{"tap13", string(fixture(t, "tap13_yaml.tap")), FormatTAP},
		{"tap bail out", string(fixture(t, "tap_bailout.tap")), FormatTAP},
		{"tap short plan", string(fixture(t, "tap_short_plan.tap")), FormatTAP},
		{"junit with BOM and blank lines", "\xef\xbb\xbf\n  <testsuites><testsuite name=\"a\"/></testsuites>", FormatJUnit},
		{"junit without a declaration", "<testsuite name=\"x\"></testsuite>", FormatJUnit},
		{"tap without version", "# hello\nok 1 - a\nnot ok 2 - b\n1..2\n", FormatTAP},
		{"go json after blank lines", "\n\n{\"Action\":\"start\",\"Package\":\"ex\"}\n", FormatGoJSON},

		{"go test plain text", "PASS\nok ex 0.1s", ""},
		{"go test plain text with tabs", "--- FAIL: TestX (0.00s)\nFAIL\nFAIL\tex\t0.1s\nok  \tex/b\t0.2s\n", ""},
		{"empty", "", ""},
		{"json without Action", "{\"Time\":\"x\"}\n{\"Action\":\"run\"}\n", ""},
		{"test points without a plan", "ok 1 - a\nok 2 - b\n", ""},
		{"a plan without test points", "1..3\n", ""},
		{"html", "<html><body>ok 1</body></html>", ""},
		{"prose mentioning TAP", "we use TAP version 13 here", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sniff([]byte(tc.data)); got != tc.want {
				t.Errorf("Sniff = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseRefusesWhatIsNotAReport(t *testing.T) {
	for _, tc := range []struct {
		format, data string
	}{
		{"xml", "<testsuites/>"},
		{FormatGoJSON, ""},
		{FormatGoJSON, "PASS\nok  \tex\t0.1s\n"},
		{FormatGoJSON, "{\"Time\":\"2026-01-01T00:00:00Z\"}\n"},
		{FormatJUnit, ""},
		{FormatJUnit, "   \n"},
		{FormatJUnit, "PASS\n"},
		{FormatJUnit, "<html><body/></html>"},
		{FormatJUnit, "<?xml version=\"1.0\"?>"},
		{FormatJUnit, "<testsuites><testsuite name=\"a\">"},
		{FormatTAP, ""},
		{FormatTAP, "TAP version 13\n"},
		{FormatTAP, "all good\nokay then\n"},
	} {
		if r, err := Parse(tc.format, []byte(tc.data)); err == nil {
			t.Errorf("Parse(%q, %q) = %+v, want an error", tc.format, tc.data, r)
		}
	}
}

func TestReportLookups(t *testing.T) {
	r := mustParse(t, FormatJUnit, fixture(t, "pytest_xunit2.xml"))
	if got := [3]int{r.Count(Pass), r.Count(Fail), r.Count(Skip)}; got != [3]int{4, 4, 2} {
		t.Errorf("pass/fail/skip = %v, want [4 4 2]", got)
	}
	if !r.Failed() {
		t.Error("Failed() = false for a run with failures")
	}
	if _, ok := r.Find("tests.test_a :: test_param[2]"); !ok {
		t.Error("Find misses a parametrized test")
	}
	if _, ok := r.Find("tests.test_a :: test_param"); ok {
		t.Error("Find matches a prefix")
	}

	// A report read concurrently (ralph's UI and its verifier) is safe:
	// nothing is built lazily. Run with -race.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, tc := range r.Tests {
				if got, ok := r.Find(tc.ID); !ok || got.Status != tc.Status {
					t.Errorf("Find(%q) = %v, %v", tc.ID, got, ok)
				}
			}
			_ = r.Failed()
		})
	}
	wg.Wait()

	// A report built by hand or decoded from JSON need not be sorted.
	hand := &Report{Tests: []Test{{ID: "b", Status: Pass}, {ID: "a", Status: Skip}}}
	if got, ok := hand.Find("a"); !ok || got.Status != Skip {
		t.Errorf("Find on an unsorted report = %v, %v", got, ok)
	}
	if hand.Failed() {
		t.Error("Failed() with no failures")
	}
	var none *Report
	if _, ok := none.Find("a"); ok || none.Failed() || none.Count(Pass) != 0 {
		t.Error("a nil report is not empty")
	}
	if (&Report{Broken: []string{"ex/b: build failed"}}).Failed() != true {
		t.Error("Failed() = false with a broken group")
	}
}

func TestMerge(t *testing.T) {
	calc := mustParse(t, FormatJUnit, fixture(t, "surefire/TEST-com.example.CalcTest.xml"))
	parser := mustParse(t, FormatJUnit, fixture(t, "surefire/TEST-com.example.ParserTest.xml"))
	m := Merge(calc, nil, parser)
	checkReport(t, m)
	if m.Format != FormatJUnit || len(m.Tests) != 6 || m.Count(Fail) != 2 {
		t.Errorf("merged %s report has %d tests, %d failed; want junit, 6, 2", m.Format, len(m.Tests), m.Count(Fail))
	}
	if _, ok := m.Find("com.example.ParserTest :: com.example.ParserTest :: parsesNested"); !ok {
		t.Error("merged report lacks the second file's test")
	}

	// The same collection error in two files keeps both, the later one
	// suffixed; the broken entry is listed once.
	a := mustParse(t, FormatJUnit, fixture(t, "pytest_xunit2.xml"))
	b := mustParse(t, FormatJUnit, fixture(t, "pytest_collection_error.xml"))
	m = Merge(a, b)
	checkReport(t, m)
	if _, ok := m.Find("tests.test_b #2"); !ok || len(m.Tests) != len(a.Tests)+1 {
		t.Errorf("duplicate ID across files not suffixed: %v", statuses(m))
	}
	wantBroken(t, m, "tests.test_b: collection failure")

	if e := Merge(); e == nil || len(e.Tests) != 0 || e.Tests == nil || e.Failed() {
		t.Errorf("Merge() = %+v, want an empty report", e)
	}
}

func TestIDsStableAcrossRuns(t *testing.T) {
	// Parsing the same bytes twice, or a report whose tests ran in another
	// order, gives the same IDs: ralph compares runs by ID.
	for _, f := range []struct{ format, name string }{
		{FormatGoJSON, "go_test.jsonl"},
		{FormatJUnit, "node_test_junit.xml"},
		{FormatTAP, "node_test.tap"},
	} {
		r1 := mustParse(t, f.format, fixture(t, f.name))
		r2 := mustParse(t, f.format, fixture(t, f.name))
		if !reflect.DeepEqual(r1, r2) {
			t.Errorf("%s: two parses differ", f.name)
		}
	}
	lines := strings.SplitAfter(string(fixture(t, "go_test.jsonl")), "\n")
	slices.Reverse(lines[:len(lines)-1])
	r1 := mustParse(t, FormatGoJSON, fixture(t, "go_test.jsonl"))
	r2 := mustParse(t, FormatGoJSON, []byte(strings.Join(lines, "")))
	if !reflect.DeepEqual(ids(r1), ids(r2)) {
		t.Errorf("event order changed the IDs:\n%q\n%q", ids(r1), ids(r2))
	}
}

func ids(r *Report) []string {
	var s []string
	for _, t := range r.Tests {
		s = append(s, t.ID)
	}
	return s
}

func TestInputCutAt64MiB(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString("TAP version 13\n1..1\nok 1 - first\n")
	pad := "# " + strings.Repeat("x", 1000) + "\n"
	for buf.Len() <= maxInput {
		buf.WriteString(pad)
	}
	buf.WriteString("not ok 2 - hidden past the limit\n")
	r := mustParse(t, FormatTAP, buf.Bytes())
	wantStatuses(t, r, map[string]Status{"first": Pass})
	wantBroken(t, r, "report: cut at 64 MiB")
}

func TestLongLinesAreSkipped(t *testing.T) {
	long := "ok 9 - " + strings.Repeat("y", maxLine) + "\n"
	r := mustParse(t, FormatTAP, []byte("1..2\nok 1 - a\n"+long+"ok 2 - b\n"))
	wantStatuses(t, r, map[string]Status{"a": Pass, "b": Pass})
	wantBroken(t, r)
}

func TestOutputKeepsTheEndOnARuneBoundary(t *testing.T) {
	body := strings.Repeat("é", 3000) + "x" + strings.Repeat("日本", 500) + " THE ASSERTION"
	xml := `<testsuite name="s"><testcase classname="c" name="n"><failure message="m">` + body + `</failure></testcase></testsuite>`
	r := mustParse(t, FormatJUnit, []byte(xml))
	out := r.Tests[0].Output
	if len(out) > maxOutput || len(out) < maxOutput-3 {
		t.Errorf("output is %d bytes, want just under %d", len(out), maxOutput)
	}
	if !utf8.ValidString(out) || !strings.HasSuffix(out, " THE ASSERTION") {
		t.Errorf("output lost the end or split a character: ...%q", out[max(0, len(out)-40):])
	}
}

func TestCapIDKeepsLongNamesDistinct(t *testing.T) {
	a := strings.Repeat("a", 5000) + "1"
	b := strings.Repeat("a", 5000) + "2"
	if capID(a) == capID(b) || len(capID(a)) > maxIDLen+20 {
		t.Errorf("capID: %d bytes, distinct=%v", len(capID(a)), capID(a) != capID(b))
	}
	if !utf8.ValidString(capID(strings.Repeat("é", 2000))) {
		t.Error("capID split a character")
	}
}

func TestBrokenListIsCapped(t *testing.T) {
	var sb strings.Builder
	for i := range maxBroken + 500 {
		fmt.Fprintf(&sb, `{"Action":"fail","Package":"ex/p%04d"}`+"\n", i)
	}
	r := mustParse(t, FormatGoJSON, []byte(sb.String()))
	if len(r.Broken) != maxBroken+1 {
		t.Fatalf("%d broken entries, want %d", len(r.Broken), maxBroken+1)
	}
	for _, want := range []string{"report: 500 more broken groups not listed", "ex/p0000: failed without test results", "ex/p0999: failed without test results"} {
		if !slices.Contains(r.Broken, want) {
			t.Errorf("Broken lacks %q", want)
		}
	}

	// The parser's own notes say the report is incomplete: always listed.
	b := &builder{}
	for i := range maxBroken + 10 {
		b.broke(fmt.Sprintf("g%d: failed", i))
	}
	b.broke("report: cut at 64 MiB")
	if got := b.report().Broken; !slices.Contains(got, "report: cut at 64 MiB") || !slices.Contains(got, "report: 10 more broken groups not listed") {
		t.Errorf("the parser's notes were dropped: %d entries", len(got))
	}
}

func TestManyTestsAreCapped(t *testing.T) {
	t.Run("go-json", func(t *testing.T) {
		var sb strings.Builder
		for i := range maxTests + 5 {
			fmt.Fprintf(&sb, `{"Action":"run","Package":"ex","Test":"T%d"}`+"\n"+`{"Action":"pass","Package":"ex","Test":"T%d"}`+"\n", i, i)
		}
		sb.WriteString(`{"Action":"pass","Package":"ex"}` + "\n")
		r := mustParse(t, FormatGoJSON, []byte(sb.String()))
		if len(r.Tests) != maxTests {
			t.Errorf("%d tests, want %d", len(r.Tests), maxTests)
		}
		wantBroken(t, r, "report: too many tests (only the first 200000 are read)")
	})
	t.Run("tap jumping deep on every other line", func(t *testing.T) {
		var sb strings.Builder
		deep := strings.Repeat("    ", maxDepth) + "ok 1 - b\n"
		for range 5000 {
			sb.WriteString("ok 1 - a\n" + deep)
		}
		r := mustParse(t, FormatTAP, []byte(sb.String()))
		if !slices.Contains(r.Broken, "report: too many tests (only the first 200000 are read)") {
			t.Errorf("Broken = %q, want the budget reported", r.Broken)
		}
	})
}
