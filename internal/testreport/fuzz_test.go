package testreport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seed adds every fixture whose name ends in one of exts, plus extra.
func seed(f *testing.F, exts []string, extra ...string) {
	for _, dir := range []string{"testdata", "testdata/surefire"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			for _, ext := range exts {
				if !e.IsDir() && strings.HasSuffix(e.Name(), ext) {
					data, err := os.ReadFile(filepath.Join(dir, e.Name()))
					if err != nil {
						f.Fatal(err)
					}
					f.Add(data)
				}
			}
		}
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// fuzzParse checks what must hold for any input: no panic, and a report
// (when there is one) with unique sorted IDs, known statuses and Failed()
// true whenever a test failed. Sniff and GoJSONText must not panic either.
func fuzzParse(t *testing.T, format string, data []byte) {
	_ = Sniff(data)
	r, err := Parse(format, data)
	if err != nil {
		if r != nil {
			t.Fatalf("Parse returned both a report and %v", err)
		}
		return
	}
	checkReport(t, r)
	m := Merge(r, r)
	checkReport(t, m)
	if len(m.Tests) != 2*len(r.Tests) {
		t.Fatalf("Merge of a report with itself kept %d of %d tests", len(m.Tests), 2*len(r.Tests))
	}
}

func FuzzParseGoJSON(f *testing.F) {
	seed(f, []string{".jsonl"},
		`{"Action":"run","Package":"p","Test":"T"}`,
		"{\"Action\":\"fail\",\"Package\":\"p\",\"FailedBuild\":\"p [p.test]\"}\nnot json\n",
		`{"ImportPath":"x","Action":"build-fail"}`+"\n"+`{"Action":"fail","Package":"y","FailedBuild":"x"}`,
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParse(t, FormatGoJSON, data)
		_ = GoJSONText(data)
	})
}

func FuzzParseJUnit(f *testing.F) {
	seed(f, []string{".xml"},
		`<testsuite name="s"><testcase classname="c" name="n"><failure message="m">x</failure></testcase></testsuite>`,
		`<testsuites><testsuite name="a"><testsuite name="b"><testcase name="n"/><testcase name="n"/></testsuite></testsuite></testsuites>`,
		`<testsuite><testcase classname="" name="m"><error message="collection failure"/></testcase>`,
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParse(t, FormatJUnit, data)
	})
}

func FuzzParseTAP(f *testing.F) {
	seed(f, []string{".tap"},
		"1..2\nok 1 - a\n    ok 1 - b\nnot ok 2 - c # TODO\n",
		"# Subtest: x\n    # Subtest: y\n        not ok 1 - z\n    ok 1 - y\nBail out! no\n",
		"1..0 # skip\n",
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParse(t, FormatTAP, data)
	})
}
