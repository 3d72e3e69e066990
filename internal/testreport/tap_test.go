package testreport

import (
	"strings"
	"testing"
)

func TestTAPFixtures(t *testing.T) {
	for _, tc := range []struct {
		file   string
		want   map[string]Status
		broken []string
		output map[string][]string
	}{
		{
			// node --test --test-reporter=tap, Node 20.20.2 (real output):
			// every test, leaf or not, is announced by "# Subtest:", children
			// are indented four spaces, and parents close their block.
			file: "node_test.tap",
			want: map[string]Status{
				"/home/ci/proj/test/broken.test.js":    Fail, // the file with a syntax error
				"math > adds":                          Pass,
				"math > fails":                         Fail,
				"math > same name":                     Pass,
				"math > same name #2":                  Pass,
				"math > inner > deep # hash":           Pass,
				"math > inner > skipped one":           Skip,
				"math > inner > todo one":              Skip,
				"top level":                            Pass,
				"parent ok children fail > child bad":  Fail,
				"parent ok children fail > child good": Pass,
				// "math", "math > inner" and "parent ok children fail" are
				// parents: their points summarise their children.
			},
			output: map[string][]string{
				"math > fails":                        {"failureType: 'testCodeFailure'", "2 !== 3", "expected: 3"},
				"parent ok children fail > child bad": {"error: 'boom'"},
				"/home/ci/proj/test/broken.test.js":   {"error: 'test failed'"},
			},
		},
		{
			file: "tap13_yaml.tap",
			want: map[string]Status{
				"parses an empty file":        Pass,
				"rejects a bad header":        Fail,
				"issue #42 stays fixed":       Pass,
				"network test":                Skip,
				"unicode names":               Skip, // not ok # TODO is not a failure
				"#6":                          Skip, // no description: named by its number
				"no number here":              Pass,
				"a literal # is no directive": Fail,
			},
			output: map[string][]string{
				"rejects a bad header":        {"message: 'expected an error, got nil'", "  got: nil", "line: 42"},
				"a literal # is no directive": {"  the end of the line\n  is not a TODO"},
			},
		},
		{
			file: "tap_bailout.tap",
			want: map[string]Status{
				"connects":            Pass,
				"migrates the schema": Fail,
			},
			broken: []string{"bail out: database is gone"},
			output: map[string][]string{"migrates the schema": {`relation "users" already exists`}},
		},
		{
			file: "tap_short_plan.tap",
			want: map[string]Status{
				"first":  Pass,
				"second": Pass,
				"third":  Fail,
			},
			broken: []string{"planned 5 tests, ran 3"},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := mustParse(t, FormatTAP, fixture(t, tc.file))
			if r.Format != FormatTAP {
				t.Errorf("Format = %q", r.Format)
			}
			wantStatuses(t, r, tc.want)
			wantBroken(t, r, tc.broken...)
			for id, parts := range tc.output {
				wantOutput(t, r, id, parts...)
			}
			for _, x := range r.Tests {
				if x.Status != Fail && x.Output != "" {
					t.Errorf("%s %q has output", x.Status, x.ID)
				}
			}
		})
	}
	r := mustParse(t, FormatTAP, fixture(t, "node_test.tap"))
	if x, _ := r.Find("math > inner > deep # hash"); x.Group != "math" || x.Name != "deep # hash" {
		t.Errorf("nested test: group %q, name %q; want math, deep # hash", x.Group, x.Name)
	}
}

func TestTAPShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		want   map[string]Status
		broken []string
	}{
		{
			name: "skip plan: no tests, no error",
			in:   "TAP version 14\n1..0 # skip no database here\n",
			want: map[string]Status{},
		},
		{
			name: "plan at the start, points without numbers or dashes",
			in:   "1..3\nok first\nnot ok - second\nok\n",
			want: map[string]Status{"first": Pass, "second": Fail, "#3": Pass},
		},
		{
			name:   "more points than planned",
			in:     "1..1\nok 1 - a\nok 2 - b\n",
			want:   map[string]Status{"a": Pass, "b": Pass},
			broken: []string{"planned 1 tests, ran 2"},
		},
		{
			name:   "no plan at all: the output may be cut short",
			in:     "TAP version 13\nok 1 - a\n",
			want:   map[string]Status{"a": Pass},
			broken: []string{"report: no TAP plan (1..N) at the top level, so the output may be cut short"},
		},
		{
			name: "directives are case-insensitive and may follow other hashes",
			in:   "1..4\nok 1 - a # Skip: later\nnot ok 2 - b #todo\nok 3 - c #1 # SKIPPED\nnot ok 4 - d # because\n",
			want: map[string]Status{"a": Skip, "b": Skip, "c #1": Skip, "d # because": Fail},
		},
		{
			name: "repeated names at one level get suffixes",
			in:   "1..3\nok 1 - same\nnot ok 2 - same\nok 3 - same\n",
			want: map[string]Status{"same": Pass, "same #2": Fail, "same #3": Pass},
		},
		{
			name: "TAP14 subtests without # Subtest are named by the closing point",
			in: `TAP version 14
1..2
    1..2
    ok 1 - inner a
    not ok 2 - inner b
not ok 1 - outer
    1..1
    ok 1 - inner a
ok 2 - outer
`,
			want: map[string]Status{"outer > inner a": Pass, "outer > inner b": Fail, "outer #2 > inner a": Pass},
		},
		{
			name: "a parent that fails while no child did is kept as a failure",
			in: `TAP version 13
# Subtest: suite
    # Subtest: child
    ok 1 - child
    1..1
not ok 1 - suite
  ---
  error: 'after hook failed'
  ...
1..1
`,
			want: map[string]Status{"suite > child": Pass, "suite": Fail},
		},
		{
			name: "failures inside a TODO subtest are not failures",
			in: `# Subtest: wip
    not ok 1 - half done
    ok 2 - done
    1..2
not ok 1 - wip # TODO not finished
1..1
`,
			want: map[string]Status{"wip > half done": Skip, "wip > done": Pass},
		},
		{
			name: "a subtest that never closes is a failure",
			in: `TAP version 14
1..2
ok 1 - first
# Subtest: second
    ok 1 - part one
`,
			want:   map[string]Status{"first": Pass, "second > part one": Pass, "second": Fail},
			broken: []string{"planned 2 tests, ran 1"},
		},
		{
			name: "a test announced and never reported is a failure",
			in:   "# Subtest: hangs\n# Subtest: next\nok 1 - next\n1..1\n",
			want: map[string]Status{"hangs": Fail, "next": Pass},
		},
		{
			name: "bail out inside a subtest",
			in: `TAP version 14
# Subtest: db
    ok 1 - connect
    Bail out! disk full
`,
			want:   map[string]Status{"db > connect": Pass, "db": Fail},
			broken: []string{"bail out: disk full"},
		},
		{
			name:   "bail out without a reason",
			in:     "1..2\nok 1 - a\nBail out!\n",
			want:   map[string]Status{"a": Pass},
			broken: []string{"bail out: no reason given"},
		},
		{
			name: "non-TAP lines, at any indentation, change nothing",
			in: `TAP version 13
# Subtest: suite
npm WARN something
    # Subtest: a
  stray stderr at two spaces
    ok 1 - a
        deeply indented noise
    1..1
okay this is prose
ok 1 - suite
1..1
# tests 1
`,
			want: map[string]Status{"suite > a": Pass},
		},
		{
			name: "an unterminated YAML block ends at a less indented line",
			in:   "1..2\nnot ok 1 - a\n  ---\n  message: x\nok 2 - b\n",
			want: map[string]Status{"a": Fail, "b": Pass},
		},
		{
			name: "YAML of a passing test is not output; its lines are not points",
			in:   "1..1\nok 1 - a\n  ---\n  not ok 7 - inside yaml\n  ...\n",
			want: map[string]Status{"a": Pass},
		},
		{
			name: "CRLF line endings",
			in:   "TAP version 13\r\n1..2\r\nok 1 - a\r\nnot ok 2 - b # TODO later\r\n",
			want: map[string]Status{"a": Pass, "b": Skip},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, FormatTAP, []byte(tc.in))
			wantStatuses(t, r, tc.want)
			wantBroken(t, r, tc.broken...)
		})
	}
}

func TestTAPParentFailureKeepsItsYAML(t *testing.T) {
	r := mustParse(t, FormatTAP, []byte("# Subtest: suite\n    ok 1 - child\n    1..1\nnot ok 1 - suite\n  ---\n  error: 'after hook failed'\n  ...\n1..1\n"))
	wantOutput(t, r, "suite", "error: 'after hook failed'")
}

func TestTAPDeepNesting(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("1..1\n")
	for i := range 200 {
		sb.WriteString(strings.Repeat("    ", i) + "# Subtest: s\n")
	}
	sb.WriteString(strings.Repeat("    ", 200) + "not ok 1 - deep failure\n")
	sb.WriteString("ok 1 - s\n")
	r := mustParse(t, FormatTAP, []byte(sb.String()))
	found := false
	for _, b := range r.Broken {
		found = found || b == "report: subtests nested deeper than 64 levels were skipped"
	}
	if !found || !r.Failed() {
		t.Errorf("Broken = %q, Failed = %v; want the nesting reported", r.Broken, r.Failed())
	}
}
