package testreport

import (
	"fmt"
	"strings"
	"testing"
)

func TestJUnitFixtures(t *testing.T) {
	for _, tc := range []struct {
		file   string
		want   map[string]Status
		broken []string
		output map[string][]string // ID -> parts its output must contain
	}{
		{
			// pytest 7.2.1 --junitxml --continue-on-collection-errors
			// (xunit2): the top-level "pytest" suite is left out of IDs.
			file: "pytest_xunit2.xml",
			want: map[string]Status{
				"tests.test_b":                      Fail, // collection error: classname=""
				"tests.test_a :: test_ok":           Pass,
				"tests.test_a :: test_param[1]":     Pass,
				"tests.test_a :: test_param[2]":     Fail,
				"tests.test_a :: test_param[3]":     Pass,
				"tests.test_a :: test_fail":         Fail,
				"tests.test_a :: test_skip":         Skip,
				"tests.test_a :: test_xfail":        Skip,
				"tests.test_a :: test_uses_fixture": Fail, // fixture error
				"tests.test_a.TestK :: test_method": Pass,
			},
			broken: []string{"tests.test_b: collection failure"},
			output: map[string][]string{
				"tests.test_a :: test_param[2]":     {"assert 2 != 2", "tests/test_a.py:8: AssertionError"},
				"tests.test_a :: test_uses_fixture": {`failed on setup with "RuntimeError: boom"`, "E       RuntimeError: boom"},
				"tests.test_b":                      {"collection failure", "No module named 'does_not_exist'"},
			},
		},
		{
			// Without --continue-on-collection-errors pytest stops: the
			// only testcase is the error, every other test is missing.
			file:   "pytest_collection_error.xml",
			want:   map[string]Status{"tests.test_b": Fail},
			broken: []string{"tests.test_b: collection failure"},
		},
		{
			// jest-junit defaults: classname == name == "{classname} {title}".
			file: "jest_junit.xml",
			want: map[string]Status{
				"Calculator :: Calculator adds two numbers :: Calculator adds two numbers":                                      Pass,
				"Calculator :: Calculator divides by zero :: Calculator divides by zero":                                        Fail,
				"Calculator :: Calculator rounds to cents :: Calculator rounds to cents":                                        Skip,
				"formatMoney :: formatMoney formats euros :: formatMoney formats euros":                                         Pass,
				`formatMoney :: formatMoney formats "negative" amounts & zero :: formatMoney formats "negative" amounts & zero`: Pass,
			},
			output: map[string][]string{
				"Calculator :: Calculator divides by zero :: Calculator divides by zero": {"Received function did not throw", "calculator.test.js:14:31"},
			},
		},
		{
			// vitest: classname is the file, name the title path.
			file: "vitest_junit.xml",
			want: map[string]Status{
				"src/math.test.ts :: src/math.test.ts :: math > adds":               Pass,
				"src/math.test.ts :: src/math.test.ts :: math > divides":            Fail,
				"src/math.test.ts :: src/math.test.ts :: math > rounding > half up": Pass,
				"src/math.test.ts :: src/math.test.ts :: math > later":              Skip,
				"src/util.test.ts :: src/util.test.ts :: slugify":                   Pass,
			},
			output: map[string][]string{
				// message, then the failure text, then system-out.
				"src/math.test.ts :: src/math.test.ts :: math > divides": {"expected Infinity to be +0 // Object.is equality\n", "src/math.test.ts:9:23", "dividing 1 by 0"},
			},
		},
		{
			// node:test 20 (real output): classname is always "test",
			// describe nests testsuites, duplicate names are kept, and a
			// file with a syntax error is a testcase named by its path.
			file: "node_test_junit.xml",
			want: map[string]Status{
				"test :: /home/ci/proj/test/broken.test.js":     Fail,
				"math :: test :: adds":                          Pass,
				"math :: test :: fails":                         Fail,
				"math :: test :: same name":                     Pass,
				"math :: test :: same name #2":                  Pass,
				"math > inner :: test :: deep # hash":           Pass,
				"math > inner :: test :: skipped one":           Skip,
				"math > inner :: test :: todo one":              Skip,
				"test :: top level":                             Pass,
				"parent ok children fail :: test :: child bad":  Fail,
				"parent ok children fail :: test :: child good": Pass,
			},
			output: map[string][]string{
				"math :: test :: fails":                     {"2 !== 3", "math.test.js:6:30"},
				"test :: /home/ci/proj/test/broken.test.js": {"test failed"},
			},
		},
		{
			// Surefire with rerunFailingTestsCount: flakyFailure alone
			// passed on a rerun; failure + rerunFailure failed every time.
			file: "surefire/TEST-com.example.CalcTest.xml",
			want: map[string]Status{
				"com.example.CalcTest :: com.example.CalcTest :: adds":         Pass,
				"com.example.CalcTest :: com.example.CalcTest :: flakyNetwork": Pass,
				"com.example.CalcTest :: com.example.CalcTest :: divides":      Fail,
				"com.example.CalcTest :: com.example.CalcTest :: later":        Skip,
			},
			output: map[string][]string{
				"com.example.CalcTest :: com.example.CalcTest :: divides": {"expected: <2> but was: <3>", "CalcTest.java:27) on the second rerun", "dividing 6 by 2"},
			},
		},
		{
			file: "surefire/TEST-com.example.ParserTest.xml",
			want: map[string]Status{
				"com.example.ParserTest :: com.example.ParserTest :: parsesEmpty":  Pass,
				"com.example.ParserTest :: com.example.ParserTest :: parsesNested": Fail,
			},
			output: map[string][]string{
				"com.example.ParserTest :: com.example.ParserTest :: parsesNested": {"Index 3 out of bounds", "Parser.java:88"},
			},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := mustParse(t, FormatJUnit, fixture(t, tc.file))
			if r.Format != FormatJUnit {
				t.Errorf("Format = %q", r.Format)
			}
			wantStatuses(t, r, tc.want)
			wantBroken(t, r, tc.broken...)
			for id, parts := range tc.output {
				wantOutput(t, r, id, parts...)
			}
			for _, x := range r.Tests {
				if x.Status == Fail && x.Output == "" {
					t.Errorf("failing %q has no output", x.ID)
				}
			}
		})
	}
}

func TestJUnitShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		want   map[string]Status
		broken []string
	}{
		{
			name: "suite path: nested, unnamed and a nested pytest suite",
			in: `<testsuites name="all"><testsuite name=""><testsuite name="A"><testsuite name="B">
<testcase classname="c" name="n"/></testsuite></testsuite></testsuite>
<testsuite name="outer"><testsuite name="pytest"><testcase classname="c" name="n"/></testsuite></testsuite></testsuites>`,
			want: map[string]Status{"A > B :: c :: n": Pass, "outer > pytest :: c :: n": Pass},
		},
		{
			name: "duplicates get occurrence suffixes in document order",
			in: `<testsuite name="s"><testcase classname="c" name="n"/><testcase classname="c" name="n"><failure/></testcase>
<testcase classname="c" name="n"><skipped/></testcase></testsuite>`,
			want: map[string]Status{"s :: c :: n": Pass, "s :: c :: n #2": Fail, "s :: c :: n #3": Skip},
		},
		{
			name: "file attribute (pytest xunit1, vitest addFileAttribute)",
			in:   `<testsuite name="pytest"><testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" line="2"/></testsuite>`,
			want: map[string]Status{"tests.test_a :: tests/test_a.py :: test_ok": Pass},
		},
		{
			name: "error, rerunError and flakyError",
			in: `<testsuite name="s"><testcase classname="c" name="err"><error message="x"/></testcase>
<testcase classname="c" name="rerun"><rerunError/></testcase>
<testcase classname="c" name="flaky"><flakyError/><flakyFailure/></testcase>
<testcase classname="c" name="failed and skipped"><skipped/><failure/></testcase></testsuite>`,
			want: map[string]Status{"s :: c :: err": Fail, "s :: c :: rerun": Fail, "s :: c :: flaky": Pass, "s :: c :: failed and skipped": Fail},
		},
		{
			name: "an empty report is a report",
			in:   `<?xml version="1.0"?><testsuites name="jest tests" tests="0"></testsuites>`,
			want: map[string]Status{},
		},
		{
			name: "a testcase inside a testcase is not a second test",
			in:   `<testsuite name="s"><testcase classname="c" name="outer"><testcase classname="c" name="inner"><failure/></testcase></testcase></testsuite>`,
			want: map[string]Status{"s :: c :: outer": Pass},
		},
		{
			name: "Latin-1 declared",
			in:   "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><testsuite name=\"s\"><testcase classname=\"c\" name=\"caf\xe9\"/></testsuite>",
			want: map[string]Status{"s :: c :: café": Pass},
		},
		{
			name: "truncated inside a failure",
			in: `<testsuites><testsuite name="s"><testcase classname="c" name="ok"/>
<testcase classname="c" name="cut"><failure message="boom">trace li`,
			want:   map[string]Status{"s :: c :: ok": Pass, "s :: c :: cut": Fail},
			broken: []string{"report: truncated XML"},
		},
		{
			name:   "truncated between testcases",
			in:     `<testsuites><testsuite name="s"><testcase classname="c" name="ok"/><testcase classname="c" name="ok2"></testcase>`,
			want:   map[string]Status{"s :: c :: ok": Pass, "s :: c :: ok2": Pass},
			broken: []string{"report: truncated XML"},
		},
		{
			name:   "garbage after a testcase",
			in:     `<testsuite name="s"><testcase classname="c" name="ok"/><<<</testsuite>`,
			want:   map[string]Status{"s :: c :: ok": Pass},
			broken: []string{"report: invalid XML, read up to the error (XML syntax error on line 1: expected element name after <)"},
		},
		{
			name:   "an unknown entity after a testcase",
			in:     `<testsuite name="s"><testcase classname="c" name="ok"/><testcase classname="c" name="&bogus;"/></testsuite>`,
			want:   map[string]Status{"s :: c :: ok": Pass},
			broken: []string{"report: invalid XML, read up to the error (XML syntax error on line 1: invalid character entity &bogus;)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, FormatJUnit, []byte(tc.in))
			wantStatuses(t, r, tc.want)
			wantBroken(t, r, tc.broken...)
		})
	}
}

func TestJUnitRefusesHostileXML(t *testing.T) {
	deep := strings.Repeat("<testsuite name=\"d\">", 10000)
	for _, tc := range []struct{ name, in string }{
		{"billion laughs", `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><testsuites><testcase name="&lol2;"/></testsuites>`},
		{"external entity", `<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&x;"/></testsuite>`},
		{"deep nesting before any test", "<testsuites>" + deep},
		{"unknown charset", `<?xml version="1.0" encoding="EBCDIC"?><testsuite/>`},
		{"root element of another kind", `<?xml version="1.0"?><project><testcase name="x"/></project>`},
		{"unknown entity before any test", `<testsuite name="&bogus;"><testcase name="x"/></testsuite>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := Parse(FormatJUnit, []byte(tc.in)); err == nil {
				t.Errorf("Parse accepted it: %+v", r)
			}
		})
	}

	t.Run("deep nesting after a test", func(t *testing.T) {
		r := mustParse(t, FormatJUnit, []byte(`<testsuites><testsuite name="s"><testcase classname="c" name="ok"><failure>x</failure></testcase>`+deep))
		wantStatuses(t, r, map[string]Status{"s :: c :: ok": Fail})
		wantBroken(t, r, "report: XML nested deeper than 64 levels, read up to there")
	})
	t.Run("nesting at the limit is fine", func(t *testing.T) {
		in := strings.Repeat(`<testsuite name="d">`, maxDepth-1) + `<testcase name="x"/>` + strings.Repeat("</testsuite>", maxDepth-1)
		r := mustParse(t, FormatJUnit, []byte(in))
		if len(r.Tests) != 1 || len(r.Broken) != 0 {
			t.Errorf("got %v, broken %q", statuses(r), r.Broken)
		}
	})
	t.Run("too many tests", func(t *testing.T) {
		var sb strings.Builder
		sb.WriteString(`<testsuite name="s">`)
		for i := range maxTests + 10 {
			fmt.Fprintf(&sb, `<testcase classname="c" name="t%d"/>`, i)
		}
		sb.WriteString(`<testcase classname="c" name="late"><failure/></testcase></testsuite>`)
		r := mustParse(t, FormatJUnit, []byte(sb.String()))
		if len(r.Tests) != maxTests {
			t.Errorf("%d tests kept, want %d", len(r.Tests), maxTests)
		}
		wantBroken(t, r, "report: too many tests (only the first 200000 are read)")
	})
	t.Run("a huge suite name is shortened in every ID", func(t *testing.T) {
		name := strings.Repeat("n", 1<<20)
		var sb strings.Builder
		sb.WriteString(`<testsuite name="` + name + `">`)
		for i := range 1000 {
			fmt.Fprintf(&sb, `<testcase classname="c" name="t%d"/>`, i)
		}
		sb.WriteString(`</testsuite>`)
		r := mustParse(t, FormatJUnit, []byte(sb.String()))
		for _, x := range r.Tests {
			if len(x.ID) > maxIDLen+20 {
				t.Fatalf("ID of %d bytes", len(x.ID))
			}
		}
		if len(r.Tests) != 1000 {
			t.Errorf("%d tests, want 1000 distinct", len(r.Tests))
		}
	})
}
