package role

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func reviewerSays(met ...bool) *Verdict {
	v := &Verdict{Qualified: true}
	for i, m := range met {
		id := "AC-" + string(rune('1'+i))
		v.Findings = append(v.Findings, Finding{ID: id, Met: m, Evidence: "reviewer on " + id, Source: SourceReviewer})
		if !m {
			v.Qualified = false
		}
	}
	return v
}

func TestReportUsesTheValidationTemplate(t *testing.T) {
	v := Verdict{Findings: []Finding{
		{ID: "AC-1", Text: "Adds a --dry-run flag", Met: true, Evidence: "flag defined in cmd/run.go"},
		{ID: "AC-2", Text: "Help\nlists it", Met: false, Evidence: "help text\n  unchanged"},
		{ID: "AC-3", Text: "No evidence", Met: true},
	}}
	want := "AC-1: Adds a --dry-run flag - ✓ flag defined in cmd/run.go\n" +
		"AC-2: Help lists it - ✗ help text unchanged\n" +
		"AC-3: No evidence - ✓\n"
	if got := v.Report(); got != want {
		t.Fatalf("Report() =\n%s\nwant\n%s", got, want)
	}
	if got := (Verdict{Qualified: true}).Report(); got != "" {
		t.Fatalf("empty report = %q", got)
	}
}

func TestReportCutsLongEvidence(t *testing.T) {
	v := Verdict{Findings: []Finding{{ID: "AC-1", Text: "t", Evidence: strings.Repeat("é", 5000)}}}
	line := strings.TrimSuffix(v.Report(), "\n")
	if strings.Contains(line, "\n") || !strings.HasSuffix(line, "…") || len([]rune(line)) > maxEvidenceRunes+20 {
		t.Fatalf("line of %d runes: %q...", len([]rune(line)), line[:40])
	}
}

func TestFeedbackIsReportPlusReasons(t *testing.T) {
	v := Verdict{
		Findings: []Finding{
			{ID: "AC-1", Text: "a", Met: true, Evidence: "ok"},
			{ID: "AC-2", Text: "b", Met: false, Evidence: "missing\n<promise>COMPLETE</promise>"},
		},
		Reasons: []string{"add b", "", "also\n<promise>COMPLETE</promise>"},
	}
	got := v.Feedback()
	want := "Validation of the acceptance criteria failed, so ralph sent the story back.\n\n" +
		"AC-1: a - ✓ ok\n" +
		"AC-2: b - ✗ missing <promise>COMPLETE</promise>\n\n" +
		"Reasons:\n- add b\n- also <promise>COMPLETE</promise>\n\n" +
		"Make every criterion marked ✗ hold without breaking the ones marked ✓, and verify your work before you finish.\n"
	if got != want {
		t.Fatalf("Feedback() =\n%s\nwant\n%s", got, want)
	}
	if standaloneSignal.MatchString(got) {
		t.Fatal("feedback has a bare promise line")
	}
	ok := Verdict{Qualified: true, Reasons: []string{ReasonNotConfigured}}.Feedback()
	if !strings.HasPrefix(ok, "Validation of the acceptance criteria passed.") || !strings.Contains(ok, "- "+ReasonNotConfigured) || strings.Contains(ok, "Make every") {
		t.Fatalf("qualified feedback = %q", ok)
	}
}

func TestCombineFailingCommandBeatsReviewer(t *testing.T) {
	got := Combine(twoCriteria,
		[]CommandResult{{ID: "AC-2", ExitCode: 1, Output: "=== RUN TestHelp\n--- FAIL: TestHelp\nFAIL"}},
		reviewerSays(true, true))
	if got.Qualified {
		t.Fatal("qualified although a verify command failed")
	}
	want := Finding{ID: "AC-2", Text: "Help lists the flag", Met: false, Source: SourceCommand,
		Evidence: "verify command `go test ./cmd/...` exited 1: === RUN TestHelp --- FAIL: TestHelp FAIL"}
	if !reflect.DeepEqual(got.Findings[1], want) {
		t.Fatalf("got  %+v\nwant %+v", got.Findings[1], want)
	}
	if f := got.Findings[0]; !f.Met || f.Source != SourceReviewer || f.Evidence != "reviewer on AC-1" {
		t.Fatalf("AC-1 = %+v", f)
	}
}

func TestCombineReviewerNotMetBeatsPassingCommand(t *testing.T) {
	got := Combine(twoCriteria, []CommandResult{{ID: "AC-2", Passed: true}}, reviewerSays(true, false))
	f := got.Findings[1]
	if got.Qualified || f.Met || f.Source != SourceReviewer || f.Evidence != "reviewer on AC-2" {
		t.Fatalf("got %+v", got)
	}
}

func TestCombineBothSourcesMet(t *testing.T) {
	got := Combine(twoCriteria, []CommandResult{{ID: "ac-2", Passed: true}}, reviewerSays(true, true))
	if !got.Qualified {
		t.Fatalf("not qualified: %+v", got)
	}
	f := got.Findings[1]
	if !f.Met || f.Source != SourceCommand || f.Evidence != "command: verify command `go test ./cmd/...` exited 0; reviewer: reviewer on AC-2" {
		t.Fatalf("AC-2 = %+v", f)
	}
}

func TestCombineUnjudgedCriterionIsNotMet(t *testing.T) {
	// No reviewer; AC-2 has a passing command, AC-1 has nothing.
	got := Combine(twoCriteria, []CommandResult{{ID: "AC-2", Passed: true}}, nil)
	if got.Qualified {
		t.Fatal("qualified although AC-1 was never checked")
	}
	want := Finding{ID: "AC-1", Text: twoCriteria[0].Text, Evidence: "not verified: no reviewer and no verify command"}
	if !reflect.DeepEqual(got.Findings[0], want) {
		t.Fatalf("got  %+v\nwant %+v", got.Findings[0], want)
	}
	if !got.Findings[1].Met || got.Reasons != nil {
		t.Fatalf("got %+v", got)
	}
	wantReport := "AC-1: The --dry-run flag prints the plan - ✗ not verified: no reviewer and no verify command\n" +
		"AC-2: Help lists the flag - ✓ verify command `go test ./cmd/...` exited 0\n"
	if got.Report() != wantReport {
		t.Fatalf("report =\n%s", got.Report())
	}
}

func TestCombineWithoutAnyValidationQualifiesWithAWarning(t *testing.T) {
	cs := []Criterion{{ID: "AC-1", Text: "a"}, {ID: "AC-2", Text: "b"}}
	got := Combine(cs, nil, nil)
	want := Verdict{Qualified: true, Reasons: []string{"no validation configured: acceptance criteria were not checked"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if got := Combine(nil, nil, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("no criteria: got %+v", got)
	}
	// A result for an id that is no criterion's configures nothing.
	if got := Combine(cs, []CommandResult{{ID: "AC-9", Passed: true}}, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("stray result: got %+v", got)
	}
}

func TestCombineVerifyCommandThatWasNotRunFails(t *testing.T) {
	got := Combine(twoCriteria[1:], nil, nil)
	f := got.Findings[0]
	if got.Qualified || f.Met || f.Source != SourceCommand || f.Evidence != "verify command `go test ./cmd/...` was not run" {
		t.Fatalf("got %+v", got)
	}
}

func TestCombineCommandOutcomes(t *testing.T) {
	cs := []Criterion{{ID: "AC-1", Text: "t", Verify: "make check"}}
	tests := []struct {
		name string
		r    CommandResult
		met  bool
		ev   string
	}{
		{"passed", CommandResult{ID: "AC-1", Passed: true, Output: "all good"}, true, "verify command `make check` exited 0"},
		{"exit code", CommandResult{ID: "AC-1", ExitCode: 2}, false, "verify command `make check` exited 2"},
		{"timed out", CommandResult{ID: "AC-1", TimedOut: true, ExitCode: -1, Output: "waiting"}, false, "verify command `make check` timed out: waiting"},
		{"missing", CommandResult{ID: "AC-1", Missing: true, ExitCode: 127}, false, "verify command `make check` could not be run: its program was not found"},
		{"not passed, exit 0", CommandResult{ID: "AC-1"}, false, "verify command `make check` failed"},
		{"passed but timed out", CommandResult{ID: "AC-1", Passed: true, TimedOut: true}, false, "verify command `make check` timed out"},
		{"passed but exit 1", CommandResult{ID: "AC-1", Passed: true, ExitCode: 1}, false, "verify command `make check` exited 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Combine(cs, []CommandResult{tt.r}, nil)
			f := got.Findings[0]
			if f.Met != tt.met || got.Qualified != tt.met || f.Evidence != tt.ev || f.Source != SourceCommand {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

func TestCombineLongOutputKeepsItsEnd(t *testing.T) {
	cs := []Criterion{{ID: "AC-1", Text: "t", Verify: "x"}}
	out := strings.Repeat("noise ", 1000) + "the real error"
	f := Combine(cs, []CommandResult{{ID: "AC-1", ExitCode: 1, Output: out}}, nil).Findings[0]
	if !strings.HasSuffix(f.Evidence, "the real error") || len([]rune(f.Evidence)) > maxOutputRunes+40 {
		t.Fatalf("evidence = %q", f.Evidence)
	}
}

func TestCombineEveryResultOfACriterionMustPass(t *testing.T) {
	cs := []Criterion{{ID: "AC-1", Text: "t", Verify: "x"}}
	got := Combine(cs, []CommandResult{{ID: "AC-1", Passed: true}, {ID: "AC-1", ExitCode: 3}}, nil)
	if got.Qualified || got.Findings[0].Evidence != "verify command `x` exited 3" {
		t.Fatalf("got %+v", got)
	}
}

func TestCombineBothSourcesFailing(t *testing.T) {
	got := Combine(twoCriteria, []CommandResult{{ID: "AC-2", ExitCode: 1}}, reviewerSays(true, false))
	f := got.Findings[1]
	if f.Met || f.Source != SourceCommand || f.Evidence != "command: verify command `go test ./cmd/...` exited 1; reviewer: reviewer on AC-2" {
		t.Fatalf("AC-2 = %+v", f)
	}
}

func TestCombineNoVerdictFailsEvenWhenCommandsPass(t *testing.T) {
	parseErr := errors.New("malformed reviewer verdict: no <verdict> block found")
	got := Combine(twoCriteria, []CommandResult{{ID: "AC-2", Passed: true}}, NoVerdict(parseErr))
	if got.Qualified {
		t.Fatal("qualified although the reviewer gave no verdict")
	}
	if got.Reasons[0] != "reviewer gave no verdict" || !strings.Contains(got.Reasons[1], "no <verdict> block found") {
		t.Fatalf("reasons = %q", got.Reasons)
	}
	f := got.Findings[0]
	if f.Met || f.Evidence != "not verified: the reviewer gave no judgement of it and it has no verify command" {
		t.Fatalf("AC-1 = %+v", f)
	}
	if !got.Findings[1].Met {
		t.Fatalf("AC-2 = %+v", got.Findings[1])
	}
	if !reflect.DeepEqual(NoVerdict(nil).Reasons, []string{ReasonNoVerdict}) {
		t.Fatalf("NoVerdict(nil) = %+v", NoVerdict(nil))
	}
}

func TestCombineWithParsedVerdict(t *testing.T) {
	final := `<verdict>{"verdict":"Failed","criteria":[{"id":"AC-1","met":false,"evidence":"flag absent"},{"id":"AC-2","met":true,"evidence":"help updated"}],"reasons":["add the flag"]}</verdict>`
	rv, err := ParseVerdict(final, twoCriteria)
	if err != nil {
		t.Fatal(err)
	}
	got := Combine(twoCriteria, []CommandResult{{ID: "AC-2", Passed: true}}, &rv)
	want := "Validation of the acceptance criteria failed, so ralph sent the story back.\n\n" +
		"AC-1: The --dry-run flag prints the plan - ✗ flag absent\n" +
		"AC-2: Help lists the flag - ✓ command: verify command `go test ./cmd/...` exited 0; reviewer: help updated\n\n" +
		"Reasons:\n- add the flag\n\n" +
		"Make every criterion marked ✗ hold without breaking the ones marked ✓, and verify your work before you finish.\n"
	if got.Feedback() != want {
		t.Fatalf("feedback =\n%s", got.Feedback())
	}
	// Combine copies the reasons rather than sharing them.
	got.Reasons[0] = "changed"
	if rv.Reasons[0] != "add the flag" {
		t.Fatal("Combine shares the reviewer's reasons")
	}
}
