package testreport

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goTestJSON writes files (path -> content) as module "ex" in a temporary
// directory and runs go test -json there with args, returning its stdout.
// The go command is the real one, so these tests notice when a new Go
// release changes what test2json prints.
func goTestJSON(t *testing.T, files map[string]string, args ...string) []byte {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("these tests run the real go command, but it is not on PATH: %v", err)
	}
	dir := t.TempDir()
	files["go.mod"] = "module ex\n\ngo 1.22\n"
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(gobin, append([]string{"test", "-json", "-count=1"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local", "GOPROXY=off", "GO111MODULE=on")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("go test: %v\n%s", err, stderr.Bytes())
	}
	if len(out) == 0 {
		t.Fatalf("go test -json printed nothing; stderr:\n%s", stderr.Bytes())
	}
	return out
}

func TestGoJSONRealRun(t *testing.T) {
	t.Parallel()
	out := goTestJSON(t, map[string]string{
		"a/a.go": "package a\n\nfunc Add(x, y int) int { return x + y }\n",
		"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("bad")
	}
}

func TestFail(t *testing.T) {
	t.Log("about to fail")
	t.Errorf("Add(2,2) = %d, want 5", Add(2, 2))
}

func TestSkip(t *testing.T) { t.Skip("not today") }

func TestSub(t *testing.T) {
	t.Run("case one", func(t *testing.T) {})
	t.Run("case/two", func(t *testing.T) { t.Error("case two broke") })
	t.Run("par", func(t *testing.T) { t.Parallel() })
}
`,
		"p/p_test.go": `package p

import "testing"

func TestBefore(t *testing.T) {}

func TestPanic(t *testing.T) {
	var m map[string]int
	m["x"] = 1
}

func TestAfter(t *testing.T) {}
`,
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) { var x int = \"s\"; _ = x }\n",
		"d/d.go":      "package d\n\nfunc D() {}\n",
	}, "./...")

	if got := Sniff(out); got != FormatGoJSON {
		t.Errorf("Sniff = %q", got)
	}
	r := mustParse(t, FormatGoJSON, out)
	if r.Format != FormatGoJSON {
		t.Errorf("Format = %q", r.Format)
	}
	wantStatuses(t, r, map[string]Status{
		"ex/a TestPass":         Pass,
		"ex/a TestFail":         Fail,
		"ex/a TestSkip":         Skip,
		"ex/a TestSub":          Fail, // a failing subtest fails its parent
		"ex/a TestSub/case_one": Pass,
		"ex/a TestSub/case/two": Fail,
		"ex/a TestSub/par":      Pass,
		"ex/p TestBefore":       Pass,
		"ex/p TestPanic":        Fail,
		// ex/p TestAfter never ran: absent, not passed. ex/b has no
		// tests (it did not build), ex/d has no test files.
	})
	wantBroken(t, r,
		"ex/b: build failed",
		"ex/p: test binary panicked in TestPanic, later tests did not run",
	)
	wantOutput(t, r, "ex/a TestFail", "about to fail", "Add(2,2) = 4, want 5", "--- FAIL: TestFail")
	wantOutput(t, r, "ex/a TestSub/case/two", "case two broke")
	wantOutput(t, r, "ex/p TestPanic", "panic: assignment to entry in nil map")
	if tc, _ := r.Find("ex/a TestPass"); tc.Output != "" || tc.Group != "ex/a" || tc.Name != "TestPass" {
		t.Errorf("passing test = %+v, want group ex/a, name TestPass and no output", tc)
	}
	if !r.Failed() {
		t.Error("Failed() = false")
	}

	text := GoJSONText(out)
	lines := strings.Split(text, "\n")
	for _, want := range []string{"--- FAIL: TestFail (0.00s)", "FAIL", "FAIL\tex/b [build failed]", "=== RUN   TestSub/case/two"} {
		if !slices.Contains(lines, want) {
			t.Errorf("GoJSONText lacks the line %q:\n%s", want, text)
		}
	}
	for _, want := range []string{"cannot use \"s\"", "panic: assignment to entry in nil map", "?   \tex/d\t[no test files]"} {
		if !strings.Contains(text, want) {
			t.Errorf("GoJSONText lacks %q", want)
		}
	}
	if strings.Contains(text, `"Action"`) {
		t.Error("GoJSONText kept JSON")
	}
}

func TestGoJSONTimeout(t *testing.T) {
	t.Parallel()
	out := goTestJSON(t, map[string]string{
		"s/s_test.go": `package s

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) {}

func TestSleep(t *testing.T) { time.Sleep(5 * time.Second) }
`,
	}, "-timeout", "1s", "./...")
	r := mustParse(t, FormatGoJSON, out)
	wantStatuses(t, r, map[string]Status{"ex/s TestQuick": Pass, "ex/s TestSleep": Fail})
	wantBroken(t, r, "ex/s: test timed out after 1s, 1 test unfinished")
	wantOutput(t, r, "ex/s TestSleep", "panic: test timed out after 1s", "FAIL\tex/s")
}

func TestGoJSONEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		want   map[string]Status
		broken []string
	}{
		{
			name: "a dependency that does not build",
			in: `{"ImportPath":"ex/lib","Action":"build-output","Output":"# ex/lib\n"}
{"ImportPath":"ex/lib","Action":"build-fail"}
{"Action":"start","Package":"ex/c"}
{"Action":"output","Package":"ex/c","Output":"FAIL\tex/c [build failed]\n"}
{"Action":"fail","Package":"ex/c","Elapsed":0,"FailedBuild":"ex/lib"}
`,
			want:   map[string]Status{},
			broken: []string{"ex/c: build failed", "ex/lib: build failed"},
		},
		{
			name: "external test package does not build",
			in: `{"ImportPath":"ex/x_test [ex/x.test]","Action":"build-output","Output":"# ex/x_test [ex/x.test]\n"}
{"ImportPath":"ex/x_test [ex/x.test]","Action":"build-fail"}
{"Action":"start","Package":"ex/x"}
{"Action":"output","Package":"ex/x","Output":"FAIL\tex/x [build failed]\n"}
{"Action":"fail","Package":"ex/x","Elapsed":0,"FailedBuild":"ex/x_test [ex/x.test]"}
`,
			want:   map[string]Status{},
			broken: []string{"ex/x: build failed"},
		},
		{
			name: "a build failure no package fail follows",
			in: `{"ImportPath":"ex/x [ex/x.test]","Action":"build-fail"}
{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"pass","Package":"ex/a","Test":"TestA"}
{"Action":"pass","Package":"ex/a"}
`,
			want: map[string]Status{"ex/a TestA": Pass},
		},
		{
			name: "an older go: build failure without FailedBuild",
			in: `{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b [build failed]\n"}
{"Action":"fail","Package":"ex/b","Elapsed":0}
`,
			want:   map[string]Status{},
			broken: []string{"ex/b: build failed"},
		},
		{
			name: "setup failed",
			in: `{"Action":"output","Package":"ex/m","Output":"FAIL\tex/m [setup failed]\n"}
{"Action":"fail","Package":"ex/m","Elapsed":0}
`,
			want:   map[string]Status{},
			broken: []string{"ex/m: failed without test results"},
		},
		{
			name: "the stream ends mid-test",
			in: `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"output","Package":"ex/a","Test":"TestA","Output":"=== RUN   TestA\n"}
`,
			want:   map[string]Status{"ex/a TestA": Fail},
			broken: []string{"ex/a: no final result (the output was cut short)"},
		},
		{
			name: "TestMain exits 1 after every test passed",
			in: `{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"pass","Package":"ex/a","Test":"TestA"}
{"Action":"output","Package":"ex/a","Output":"FAIL\tex/a\t0.01s\n"}
{"Action":"fail","Package":"ex/a"}
`,
			want:   map[string]Status{"ex/a TestA": Pass},
			broken: []string{"ex/a: failed although no test failed"},
		},
		{
			name: "a crash with no timeout message",
			in: `{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"run","Package":"ex/a","Test":"TestA/sub"}
{"Action":"output","Package":"ex/a","Test":"TestA/sub","Output":"fatal error: concurrent map writes\n"}
{"Action":"fail","Package":"ex/a"}
`,
			want:   map[string]Status{"ex/a TestA": Fail, "ex/a TestA/sub": Fail},
			broken: []string{"ex/a: test binary crashed, 2 tests unfinished"},
		},
		{
			name: "-count=2, the second run fails",
			in: `{"Action":"run","Package":"ex/a","Test":"TestFlaky"}
{"Action":"pass","Package":"ex/a","Test":"TestFlaky"}
{"Action":"run","Package":"ex/a","Test":"TestFlaky"}
{"Action":"fail","Package":"ex/a","Test":"TestFlaky"}
{"Action":"fail","Package":"ex/a"}
`,
			want: map[string]Status{"ex/a TestFlaky": Fail},
		},
		{
			name: "cached results, non-JSON lines, ignored actions",
			in: `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestA"}
{"Action":"pause","Package":"ex/a","Test":"TestA"}
{"Action":"cont","Package":"ex/a","Test":"TestA"}
{"Action":"attr","Package":"ex/a","Test":"TestA","Key":"k","Value":"v"}
{"Action":"output","Package":"ex/a","Test":"TestA","Output":"--- PASS: TestA (cached)\n"}
not json {"Action":"fail","Package":"ex/a","Test":"TestA"}
{"Action":"pass","Package":"ex/a","Test":"TestA"}
{"Action":"bench","Package":"ex/a","Test":"BenchmarkA"}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t(cached)\n"}
{"Action":"pass","Package":"ex/a"}
{"Action":"skip","Package":"ex/d","Output":""}
`,
			want: map[string]Status{"ex/a TestA": Pass},
		},
		{
			name: "a bare test binary under test2json has no Package",
			in: `{"Action":"run","Test":"TestA"}
{"Action":"fail","Test":"TestA"}
{"Action":"fail"}
`,
			want: map[string]Status{"TestA": Fail},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, FormatGoJSON, []byte(tc.in))
			wantStatuses(t, r, tc.want)
			wantBroken(t, r, tc.broken...)
		})
	}
}

func TestGoJSONTextKeepsNonJSONLines(t *testing.T) {
	in := "go: downloading example.com/x v1.0.0\n" +
		`{"Action":"output","Package":"ex/a","Test":"TestA","Output":"=== RUN   TestA\n"}` + "\n" +
		`{"Action":"run","Package":"ex/a","Test":"TestB"}` + "\n" +
		"# a line of its own\r\n" +
		`{"ImportPath":"ex/b","Action":"build-output","Output":"b.go:1: oops\n"}` + "\n" +
		`{"Action":"output","Package":"ex/a","Output":"FAIL\n"}`
	want := "go: downloading example.com/x v1.0.0\n=== RUN   TestA\n# a line of its own\nb.go:1: oops\nFAIL\n"
	if got := GoJSONText([]byte(in)); got != want {
		t.Errorf("GoJSONText =\n%q\nwant\n%q", got, want)
	}
}

func TestGoJSONFixtures(t *testing.T) {
	// The committed samples are real runs (Go 1.26), kept so that the fuzz
	// targets start from them; they must keep parsing the same way.
	r := mustParse(t, FormatGoJSON, fixture(t, "go_test.jsonl"))
	wantBroken(t, r, "ex/b: build failed", "ex/c: build failed", "ex/lib: build failed",
		"ex/p: test binary panicked in TestPanic, later tests did not run")
	if r.Count(Fail) != 4 || r.Count(Pass) != 4 || r.Count(Skip) != 1 {
		t.Errorf("pass/fail/skip = %d/%d/%d, want 4/4/1", r.Count(Pass), r.Count(Fail), r.Count(Skip))
	}
	r = mustParse(t, FormatGoJSON, fixture(t, "go_test_timeout.jsonl"))
	wantStatuses(t, r, map[string]Status{"ex/s TestQuick": Pass, "ex/s TestSleep": Fail})
	wantBroken(t, r, "ex/s: test timed out after 1s, 1 test unfinished")
}
