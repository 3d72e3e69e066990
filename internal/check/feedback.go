package check

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/testreport"
	"github.com/ralphloop/ralph/internal/text"
)

// What an agent is told about the checks lives here, in the package that
// owns Result, rather than in each runner: the loop, a session, a thread
// and both engines' merge queues all hand a failed check on to the next
// prompt, and an agent must read the same thing whichever sent it back.
// It sits below verify (which judges runs against each other) because it
// needs nothing but one Result and its per-test report.

// FeedbackLimit bounds the bytes of output a failed check puts into an
// agent's prompt: the failing tests' own output and the end of the
// check's. 8 KiB is about 2,000 tokens: the failure summary of a test
// run, a few stack traces, and room left for the task.
const FeedbackLimit = 8 << 10

// Parts of FeedbackLimit: the failing tests' output takes at most half,
// so the end of the check's output, where the runner's summary is,
// always has room; one test takes at most testOutputLimit.
const (
	testsOutputLimit = FeedbackLimit / 2
	testOutputLimit  = 2 << 10
	maxFailingNames  = 20
	maxNameBytes     = 200
)

// Feedback is what an agent is told of a failed check, the one format
// every runner and engine hands on: a line naming the check, its command
// and how it failed (exit code, timeout, missing program); the failing
// tests' names first where the runner reported tests (they are what the
// agent must fix), then their output, then the end of the check's output
// in whole lines, saying how much above was left out. The output parts
// together stay within FeedbackLimit. The result is valid UTF-8 with \n
// line ends, whatever the check printed.
func Feedback(r Result) string {
	var b strings.Builder
	b.WriteString(Describe(r) + ".\n")
	if r.ReportNote != "" {
		b.WriteString("Its test report: " + clean(r.ReportNote) + ".\n")
	}
	used := 0
	if rep := r.Tests; rep != nil {
		var failing []testreport.Test
		for _, t := range rep.Tests {
			if t.Status == testreport.Fail {
				failing = append(failing, t)
			}
		}
		if len(failing) > 0 {
			names := make([]string, 0, min(len(failing), maxFailingNames)+1)
			for _, t := range failing[:min(len(failing), maxFailingNames)] {
				names = append(names, testName(t))
			}
			if len(failing) > maxFailingNames {
				names = append(names, fmt.Sprintf("and %d more", len(failing)-maxFailingNames))
			}
			fmt.Fprintf(&b, "Failing tests (%d): %s\n", len(failing), strings.Join(names, ", "))
		}
		if len(rep.Broken) > 0 {
			groups := rep.Broken[:min(len(rep.Broken), maxFailingNames)]
			more := ""
			if n := len(rep.Broken) - len(groups); n > 0 {
				more = fmt.Sprintf(", and %d more", n)
			}
			fmt.Fprintf(&b, "Failed without per-test results: %s%s\n", text.Clip(text.OneLine(clean(strings.Join(groups, ", "))), maxFailingNames*maxNameBytes), more)
		}
		for _, t := range failing {
			room := min(testOutputLimit, testsOutputLimit-used)
			if strings.TrimSpace(t.Output) == "" || room <= 0 {
				continue
			}
			ex, n := excerpt(t.Output, room)
			fmt.Fprintf(&b, "\nOutput of %s:\n%s", testName(t), ex)
			used += n
		}
	}
	if strings.TrimSpace(r.Output) == "" {
		b.WriteString("\nIt printed nothing.\n")
		return b.String()
	}
	ex, _ := excerpt(r.Output, FeedbackLimit-used)
	b.WriteString("\nIts output:\n" + ex)
	return b.String()
}

// Describe says in one line which check failed and how: its name, its
// command and its exit code, timeout or missing program.
func Describe(r Result) string {
	what := fmt.Sprintf("Check %q (`%s`)", clean(r.Check.Name), clean(r.Check.Run))
	if r.Check.Name == r.Check.Run || r.Check.Name == "" {
		what = fmt.Sprintf("Check `%s`", clean(r.Check.Run))
	}
	switch {
	case r.Missing:
		return what + " could not run: its program is not installed"
	case r.TimedOut:
		return what + " timed out after " + r.Duration.Round(time.Second).String() + " and was stopped"
	case r.ReportFailed:
		return what + " exited with code 0, but its test report shows failing tests"
	case r.ExitCode == 0:
		return what + " passed"
	default:
		return fmt.Sprintf("%s exited with code %d", what, r.ExitCode)
	}
}

// Excerpt is the end of a long output in the feedback format, for the
// failures that are no check's (an agent's own output): whole lines
// within FeedbackLimit, fenced, saying how much above was left out.
func Excerpt(output string) string {
	ex, _ := excerpt(output, FeedbackLimit)
	return ex
}

// excerpt fences the last lines of output that fit in limit bytes and
// returns it with the bytes of output it kept.
func excerpt(output string, limit int) (string, int) {
	kept, lines, bytes := TailLines(output, limit)
	var b strings.Builder
	fence := fenceFor(kept)
	b.WriteString(fence + "\n")
	switch {
	case lines > 0 && bytes > 0:
		fmt.Fprintf(&b, "… %s above and the first %s of the line below left out\n", countOf(lines, "line", "lines"), countOf(bytes, "byte", "bytes"))
	case lines > 0:
		fmt.Fprintf(&b, "… %s above left out\n", countOf(lines, "line", "lines"))
	case bytes > 0:
		fmt.Fprintf(&b, "… the first %s of the line below left out\n", countOf(bytes, "byte", "bytes"))
	}
	b.WriteString(kept + "\n" + fence + "\n")
	return b.String(), len(kept)
}

// TailLines keeps the last whole lines of output that fit in limit bytes:
// the end of a test run is where its failure summary is, and a line cut
// in the middle misleads. It returns them with the number of lines above
// that were left out. Only when the last line alone is longer than limit
// is it cut, at its start and on a character boundary, and partBytes
// says how many of its bytes were left out. Output is made valid UTF-8
// first, with \n line ends (a \r within a line keeps what follows it, as
// a terminal shows a progress bar), and its blank end is dropped.
func TailLines(output string, limit int) (kept string, linesLeft, partBytes int) {
	s := clean(output)
	if len(s) <= limit {
		return s, 0, 0
	}
	start := strings.LastIndexByte(s, '\n') + 1
	if len(s)-start > limit {
		// The last line alone is too long: keep its end.
		cut := len(s) - max(limit, 0)
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		return s[cut:], strings.Count(s[:start], "\n"), cut - start
	}
	for start > 0 {
		prev := strings.LastIndexByte(s[:start-1], '\n') + 1
		if len(s)-prev > limit {
			break
		}
		start = prev
	}
	return s[start:], strings.Count(s[:start], "\n"), 0
}

// clean makes output valid UTF-8 with \n line ends and no blank end.
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, '\r') >= 0 {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			l = strings.TrimRight(l, "\r")
			if j := strings.LastIndexByte(l, '\r'); j >= 0 {
				l = l[j+1:]
			}
			lines[i] = l
		}
		s = strings.Join(lines, "\n")
	}
	s = strings.TrimRight(s, " \t\n")
	// Leading blank lines say nothing either.
	for strings.HasPrefix(s, "\n") {
		s = s[1:]
	}
	return s
}

// fenceFor returns a Markdown code fence longer than any run of
// backticks in s, so that output holding a fence cannot end the block.
func fenceFor(s string) string {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// testName names a test for the agent, with its group (a Go package, a
// JUnit class) where the runner gave one.
func testName(t testreport.Test) string {
	name := clean(t.Name)
	if name == "" {
		name = clean(t.ID)
	}
	if g := clean(t.Group); g != "" && !strings.Contains(name, g) {
		name += " (" + g + ")"
	}
	// A runner's identities may be up to a KiB long: the list of names
	// stays a list.
	return text.Clip(text.OneLine(name), maxNameBytes)
}

// countOf writes n with thousands separators and the word that fits it:
// "1 line", "1,234 lines".
func countOf(n int, one, many string) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if n == 1 {
		return s + " " + one
	}
	return s + " " + many
}

// Gates lists the checks' commands for a prompt ("The quality gates are:
// …"), the same in every prompt that names them.
func Gates(checks []Check) string {
	if len(checks) == 0 {
		return "none configured; run the project's own tests and linters"
	}
	parts := make([]string, len(checks))
	for i, c := range checks {
		parts[i] = "`" + c.Run + "`"
	}
	return strings.Join(parts, ", ")
}
