package check

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/testreport"
)

// numbered is n lines "line 1" … "line n", each ending in \n.
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// A long test run's failure summary is at its end: the feedback keeps the
// end, in whole lines, and says how many lines above it left out.
func TestFeedbackKeepsTheEndInWholeLines(t *testing.T) {
	out := numbered(5000) + "FAIL\texample.com/m/calc\t0.01s\n"
	fb := Feedback(Result{Check: Check{Name: "tests", Run: "make test"}, ExitCode: 2, Output: out})
	if !strings.HasPrefix(fb, "Check \"tests\" (`make test`) exited with code 2.\n") {
		t.Fatalf("first line names the check, command and exit code:\n%s", fb[:min(len(fb), 200)])
	}
	if !strings.Contains(fb, "FAIL\texample.com/m/calc\t0.01s\n```\n") {
		t.Errorf("the end of the output, where the summary is, is kept:\n%s", fb[len(fb)-200:])
	}
	if strings.Contains(fb, "line 1\n") {
		t.Errorf("the start of a long output is left out")
	}
	kept, left, part := TailLines(out, FeedbackLimit)
	if part != 0 || left == 0 {
		t.Fatalf("TailLines cut whole lines only: left %d lines, %d bytes of one", left, part)
	}
	if !strings.Contains(fb, fmt.Sprintf("… %s lines above left out\n", commas(left))) {
		t.Errorf("says how many lines were left out (%d):\n%s", left, fb[:400])
	}
	first := strings.SplitN(kept, "\n", 2)[0]
	if !strings.HasPrefix(first, "line ") || !strings.HasSuffix(out, "\n"+kept+"\n") {
		t.Errorf("the kept part starts at a line's start: %q", first)
	}
	if len(fb) > FeedbackLimit+200 {
		t.Errorf("feedback is %d bytes, more than FeedbackLimit and its frame", len(fb))
	}
}

func commas(n int) string { return strings.TrimSuffix(countOf(n, "", ""), " ") }

// The failing tests' names come first: they are what the agent must fix.
func TestFeedbackListsFailingTestsFirst(t *testing.T) {
	rep := &testreport.Report{Format: testreport.FormatGoJSON, Tests: []testreport.Test{
		{ID: "m/calc.TestAdd", Name: "TestAdd", Group: "m/calc", Status: testreport.Fail, Output: "calc_test.go:9: got 5, want 4\n"},
		{ID: "m/calc.TestMul", Name: "TestMul", Group: "m/calc", Status: testreport.Pass},
		{ID: "m/calc.TestSub", Name: "TestSub", Group: "m/calc", Status: testreport.Fail, Output: "calc_test.go:19: got -1, want 1\n"},
	}, Broken: []string{"m/web (build failed)"}}
	fb := Feedback(Result{Check: Check{Name: "go test", Run: "go test -json ./..."}, ExitCode: 1, Tests: rep, Output: numbered(3) + "FAIL\n"})
	want := "Check \"go test\" (`go test -json ./...`) exited with code 1.\n" +
		"Failing tests (2): TestAdd (m/calc), TestSub (m/calc)\n" +
		"Failed without per-test results: m/web (build failed)\n" +
		"\nOutput of TestAdd (m/calc):\n```\ncalc_test.go:9: got 5, want 4\n```\n" +
		"\nOutput of TestSub (m/calc):\n```\ncalc_test.go:19: got -1, want 1\n```\n" +
		"\nIts output:\n```\nline 1\nline 2\nline 3\nFAIL\n```\n"
	if fb != want {
		t.Errorf("feedback:\n%s\nwant:\n%s", fb, want)
	}
}

func TestFeedbackNamesTimeoutsAndMissingPrograms(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want string
	}{
		{Result{Check: Check{Name: "e2e", Run: "npm run e2e"}, ExitCode: -1, TimedOut: true, Duration: 600 * time.Second}, "Check \"e2e\" (`npm run e2e`) timed out after 10m0s and was stopped.\n"},
		{Result{Check: Check{Name: "lint", Run: "golangci-lint run"}, ExitCode: 127, Missing: true, Output: "sh: golangci-lint: not found"}, "Check \"lint\" (`golangci-lint run`) could not run: its program is not installed.\n"},
		{Result{Check: Check{Name: "./verify.sh", Run: "./verify.sh"}, ExitCode: 3}, "Check `./verify.sh` exited with code 3.\n"},
		{Result{Check: Check{Name: "t", Run: "t"}, ExitCode: 0, ReportFailed: true, ReportNote: "it exited 0, but its report shows failing tests: failed"}, "Check `t` exited with code 0, but its test report shows failing tests.\nIts test report: it exited 0, but its report shows failing tests: failed.\n"},
	} {
		if fb := Feedback(c.r); !strings.HasPrefix(fb, c.want) {
			t.Errorf("feedback:\n%s\nwant it to start with:\n%s", fb, c.want)
		}
	}
	if fb := Feedback(Result{Check: Check{Name: "t", Run: "t"}, ExitCode: 1}); !strings.HasSuffix(fb, "\nIt printed nothing.\n") {
		t.Errorf("a silent failure says so:\n%s", fb)
	}
}

// Many failing tests with long names keep the list of names short: the
// first 20, each at most 200 bytes, and how many more.
func TestFeedbackBoundsTheNames(t *testing.T) {
	rep := &testreport.Report{}
	for i := range 50 {
		rep.Tests = append(rep.Tests, testreport.Test{Name: fmt.Sprintf("Test%02d_%s", i, strings.Repeat("x", 1000)), Status: testreport.Fail})
	}
	fb := Feedback(Result{Check: Check{Run: "t"}, ExitCode: 1, Tests: rep})
	line := strings.Split(fb, "\n")[1]
	if !strings.HasPrefix(line, "Failing tests (50): Test00_x") || !strings.HasSuffix(line, ", and 30 more") || len(line) > 20*(maxNameBytes+5)+50 {
		t.Errorf("names line (%d bytes): %.300s…", len(line), line)
	}
}

// Output holding a code fence cannot close the block it is shown in.
func TestFeedbackFenceOutlastsTheOutput(t *testing.T) {
	fb := Feedback(Result{Check: Check{Run: "t"}, ExitCode: 1, Output: "```\nnot the end\n````\n"})
	if !strings.Contains(fb, "\n`````\n```\nnot the end\n````\n`````\n") {
		t.Errorf("fence:\n%s", fb)
	}
}

func TestTailLines(t *testing.T) {
	for _, c := range []struct {
		name, in   string
		limit      int
		kept       string
		lines, cut int
	}{
		{"fits", "a\nb\n", 10, "a\nb", 0, 0},
		{"whole lines", "aaaa\nbbbb\ncccc\n", 10, "bbbb\ncccc", 1, 0},
		{"no room for a second line", "aaaa\nbbbb\ncccc", 5, "cccc", 2, 0},
		{"one huge line", strings.Repeat("x", 100), 10, strings.Repeat("x", 10), 0, 90},
		{"huge last line", "a\nb\n" + strings.Repeat("y", 50), 8, strings.Repeat("y", 8), 2, 42},
		{"CRLF", "one\r\ntwo\r\nthree\r\n", 9, "two\nthree", 1, 0},
		{"progress bar", "10%\r50%\r100%\ndone\n", 100, "100%\ndone", 0, 0},
		{"blank end", "x\n\n\n  \n", 100, "x", 0, 0},
		{"invalid UTF-8", "ok\n\xff\xfe bad\n", 100, "ok\n\uFFFD bad", 0, 0},
		{"no split character", "a\n" + strings.Repeat("é", 10), 5, "éé", 1, 16},
	} {
		kept, lines, cut := TailLines(c.in, c.limit)
		if kept != c.kept || lines != c.lines || cut != c.cut {
			t.Errorf("%s: TailLines = %q, %d lines, %d bytes; want %q, %d, %d", c.name, kept, lines, cut, c.kept, c.lines, c.cut)
		}
	}
}

func TestGates(t *testing.T) {
	if got := Gates(nil); got != "none configured; run the project's own tests and linters" {
		t.Errorf("no checks: %q", got)
	}
	if got := Gates([]Check{{Run: "go vet ./..."}, {Run: "go test ./..."}}); got != "`go vet ./...`, `go test ./...`" {
		t.Errorf("checks: %q", got)
	}
}

// FuzzFeedback holds the format to its promises for any output: valid
// UTF-8 with \n line ends, within the limit, the kept part a tail of the
// cleaned output made of whole lines unless one line alone was too long,
// and the counts of what was left out adding up.
func FuzzFeedback(f *testing.F) {
	f.Add("no newline at all", 16)
	f.Add(strings.Repeat("z", 20000), 100)
	f.Add("a\r\nb\r\n\r\nc", 3)
	f.Add("\xff\xfe\xfd\n\xc3", 2)
	f.Add("é\né\né", 3)
	f.Add(numbered(100), 50)
	f.Add("\n\n\n", 1)
	f.Fuzz(func(t *testing.T, out string, limit int) {
		if limit < 1 || limit > 1<<20 {
			return
		}
		kept, lines, cut := TailLines(out, limit)
		if !utf8.ValidString(kept) || strings.Contains(kept, "\r") {
			t.Fatalf("kept %q is not clean text", kept)
		}
		if len(kept) > limit {
			t.Fatalf("kept %d bytes, limit %d", len(kept), limit)
		}
		all := clean(out)
		if !strings.HasSuffix(all, kept) {
			t.Fatalf("kept %q is not the end of %q", kept, all)
		}
		above := all[:len(all)-len(kept)]
		if cut == 0 && above != "" && !strings.HasSuffix(above, "\n") {
			t.Fatalf("cut mid-line without saying so: above %q, kept %q", above, kept)
		}
		if cut > 0 && strings.Contains(kept, "\n") {
			t.Fatalf("a cut line must be the only one kept: %q", kept)
		}
		if got := strings.Count(above, "\n"); got != lines {
			t.Fatalf("said %d lines left out, %d were", lines, got)
		}
		if cut > 0 && len(above)-strings.LastIndexByte(above, '\n')-1 != cut {
			t.Fatalf("said %d bytes of the line left out; above is %q", cut, above)
		}
		fb := Feedback(Result{Check: Check{Name: out, Run: out}, ExitCode: 1, Output: out,
			Tests: &testreport.Report{Tests: []testreport.Test{{Name: out, Status: testreport.Fail, Output: out}}}})
		if !utf8.ValidString(fb) || strings.Contains(fb, "\r") {
			t.Fatalf("feedback is not clean text: %q", fb)
		}
		if frame := 3*len(out) + 400; len(fb) > FeedbackLimit+frame {
			t.Fatalf("feedback is %d bytes", len(fb))
		}
	})
}
