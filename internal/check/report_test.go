package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testreport"
)

const junitPass = `<?xml version="1.0"?><testsuite name="pytest"><testcase classname="t" name="test_a"/></testsuite>`
const junitFail = `<?xml version="1.0"?><testsuite name="pytest"><testcase classname="t" name="test_a"><failure message="boom"/></testcase></testsuite>`

func runIn(t *testing.T, dir string, c Check) Result {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	return Run(context.Background(), dir, c)
}

func write(t *testing.T, dir, rel, body string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// A report is evidence only as far as the runner's exit code agrees with
// it, and only when this run wrote it.
func TestRunReadsAJUnitReportAndHoldsItAgainstTheExitCode(t *testing.T) {
	for _, c := range []struct {
		name, script string
		passed       bool
		tests        bool
		note         string
	}{
		{"report and exit code agree", "cp pass.xml out/junit.xml", true, true, ""},
		{"failing report, failing runner", "cp fail.xml out/junit.xml; exit 1", false, true, ""},
		{"report says passed, runner exited 2", "cp pass.xml out/junit.xml; exit 2", false, false, "its report shows no failing test, but it exited with code 2"},
		{"report says failed, runner exited 0", "cp fail.xml out/junit.xml", false, true, "it exited 0, but its report shows failing tests: failed"},
		{"report missing", "true", true, false, "its report out/junit.xml was not written: judged by its exit code"},
		{"report malformed", "echo 'not xml at all' > out/junit.xml", true, false, "is not valid junit"},
		{"report truncated", "head -c 60 fail.xml > out/junit.xml; exit 1", false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "pass.xml", junitPass)
			write(t, dir, "fail.xml", junitFail)
			// A report an agent left before the run must not count.
			write(t, dir, "out/junit.xml", junitPass)
			res := runIn(t, dir, Check{Name: "pytest", Run: c.script, Format: FormatJUnit, Report: "out/junit.xml"})
			if res.Passed() != c.passed {
				t.Errorf("Passed = %v, want %v (exit %d, note %q)", res.Passed(), c.passed, res.ExitCode, res.ReportNote)
			}
			if c.name != "report truncated" && (res.Tests != nil) != c.tests {
				t.Errorf("per-test results used = %v, want %v (note %q)", res.Tests != nil, c.tests, res.ReportNote)
			}
			if c.note != "" && !strings.Contains(res.ReportNote, c.note) {
				t.Errorf("note %q, want it to say %q", res.ReportNote, c.note)
			}
		})
	}
}

func TestRunSniffsTAPAndGoJSONOnItsOutput(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "tap.sh", "#!/bin/sh\necho 'TAP version 13'\necho 'ok 1 - adds'\necho 'not ok 2 - subtracts'\necho '1..2'\nexit 1\n")
	res := runIn(t, dir, Check{Name: "tap", Run: "sh tap.sh"})
	if res.Tests == nil || res.Tests.Format != testreport.FormatTAP || res.Tests.Count(testreport.Fail) != 1 || res.Tests.Count(testreport.Pass) != 1 {
		t.Fatalf("TAP output: tests %+v, note %q", res.Tests, res.ReportNote)
	}
	// format = "none" reads nothing, whatever the output looks like.
	if res := runIn(t, dir, Check{Name: "tap", Run: "sh tap.sh", Format: FormatNone}); res.Tests != nil {
		t.Errorf("format none read tests: %+v", res.Tests)
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("this test runs go test -json: install Go and put it on PATH")
	}
	write(t, dir, "go.mod", "module ex\n\ngo 1.22\n")
	write(t, dir, "a/a.go", "package a\n\nfunc Add(a, b int) int { return a - b }\n")
	write(t, dir, "a/a_test.go", "package a\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2,3) is not 5\")\n\t}\n}\n\nfunc TestZero(t *testing.T) {}\n")
	res = runIn(t, dir, Check{Name: "go test", Run: "go test -json ./...", Format: FormatGoJSON})
	if res.Passed() || res.Tests == nil {
		t.Fatalf("go test -json: passed %v, tests %+v, note %q", res.Passed(), res.Tests, res.ReportNote)
	}
	if got, ok := res.Tests.Find("ex/a TestAdd"); !ok || got.Status != testreport.Fail {
		t.Errorf("TestAdd = %+v, want failed", got)
	}
	// People and agents read go test's own text, not its JSON.
	if !strings.Contains(res.Output, "--- FAIL: TestAdd") || strings.Contains(res.Output, `"Action"`) {
		t.Errorf("output is not go test's text:\n%s", res.Output)
	}
}
