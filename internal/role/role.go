// Package role holds what ralph needs to run an agent in the reviewer role:
// the variables of the review prompt, the parser of the reviewer's verdict,
// and the merge of that verdict with the acceptance commands of a story.
//
// The reviewer takes part in VALIDATE, the state after ralph's own checks
// passed: each acceptance criterion (AC) of the story is judged, by a
// reviewer agent, by the criterion's verify command, or by both, and the
// outcome is reported one line per criterion in the form
//
//	AC-1: requirement text - ✓ implementation evidence
//	AC-3: requirement text - ✗ reason for failure
//
// Ralph, not the agent, decides what passed: the reviewer's answer is only
// accepted in a strict, machine-checked form (see ParseVerdict), and a
// criterion counts as met only when every source that judged it says so (see
// Combine). Nothing beyond the explicit criteria is judged.
//
// Every criterion has an id. A Criterion whose ID is empty (after trimming
// white space) is called "AC-n" everywhere in this package, n being its
// 1-based position in the slice, so that the prompt, the parser and the
// report always agree on the names. Ids are compared without regard to case
// or surrounding white space.
package role

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/text"
)

// Criterion is one acceptance criterion to judge.
type Criterion struct {
	// ID names the criterion, such as "AC-1"; empty means "AC-n" by
	// position (see the package documentation).
	ID string
	// Text is the requirement as the story states it.
	Text string
	// Verify is a shell command whose exit status 0 means the criterion is
	// met; "" when the criterion has none.
	Verify string
}

// The sources of a Finding.
const (
	SourceReviewer = "reviewer" // the reviewer agent's verdict
	SourceCommand  = "command"  // the criterion's verify command
)

// Finding is the judgement of one criterion.
type Finding struct {
	ID   string // the criterion's id, never empty in findings built by this package
	Text string // the criterion's text
	// Met reports whether the criterion holds. It is true only when at
	// least one source judged the criterion and every source that judged it
	// said it holds.
	Met bool
	// Evidence says why the criterion is met, or why not.
	Evidence string
	// Source is SourceReviewer or SourceCommand: the source whose
	// judgement decided the finding (the first failing one, commands before
	// the reviewer; or, when all agree that it is met, the command if one
	// ran). It is "" for a criterion that no source judged.
	Source string
}

// Verdict is the outcome of VALIDATE.
//
// The verdicts built by this package list their Findings in the order of the
// criteria they were given, which is the AC order, one finding per criterion.
type Verdict struct {
	// Qualified reports that the story passed validation.
	Qualified bool
	// Findings is the judgement of each criterion, in AC order.
	Findings []Finding
	// Reasons are the reviewer's reasons, or ralph's own remarks such as
	// ReasonNoVerdict and ReasonNotConfigured.
	Reasons []string
}

// Reasons that ralph itself gives.
const (
	// ReasonNoVerdict is the reason of a failed validation whose reviewer
	// did not produce a valid verdict even when asked a second time.
	ReasonNoVerdict = "reviewer gave no verdict"
	// ReasonNotConfigured is the reason of the Qualified verdict that
	// Combine returns when nothing was set up to check the criteria; the
	// caller should show it as a warning.
	ReasonNotConfigured = "no validation configured: acceptance criteria were not checked"
)

// Marks used in a report line.
const (
	markMet    = "✓"
	markNotMet = "✗"
)

// maxEvidenceRunes bounds the evidence shown on one report line, so that a
// verbose reviewer or command cannot turn the report into a wall of text.
const maxEvidenceRunes = 600

// Report renders the findings in the seed's validation template, one line
// each, in the order of v.Findings (the AC order for verdicts built by this
// package):
//
//	AC-1: requirement text - ✓ implementation evidence
//	AC-2: requirement text - ✗ reason for failure
//
// Every line ends with a newline; white space runs inside the id, the text
// and the evidence, newlines included, are collapsed to single spaces, so one
// finding is always exactly one line, and no line can be a bare promise tag
// since every line starts with the criterion's id. Evidence longer than a few
// hundred characters is cut with an ellipsis. A finding without evidence ends
// with its mark. Report returns "" when there are no findings.
func (v Verdict) Report() string {
	var b strings.Builder
	for _, f := range v.Findings {
		mark := markNotMet
		if f.Met {
			mark = markMet
		}
		fmt.Fprintf(&b, "%s: %s - %s", text.OneLine(f.ID), text.OneLine(f.Text), mark)
		if ev := clipRunes(text.OneLine(f.Evidence), maxEvidenceRunes); ev != "" {
			b.WriteString(" ")
			b.WriteString(ev)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Feedback is the text put into the executor's next prompt after a failed
// validation: a first line saying whether validation passed or failed, the
// report, the reasons as a list, and, when it failed, what the executor has
// to do. Like Report, no line of it is a bare promise tag: reasons are
// collapsed to one line each and listed after "- ".
func (v Verdict) Feedback() string {
	var b strings.Builder
	if v.Qualified {
		b.WriteString("Validation of the acceptance criteria passed.\n")
	} else {
		b.WriteString("Validation of the acceptance criteria failed, so ralph sent the story back.\n")
	}
	if r := v.Report(); r != "" {
		b.WriteString("\n")
		b.WriteString(r)
	}
	var reasons []string
	for _, r := range v.Reasons {
		if r = text.OneLine(r); r != "" {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) > 0 {
		b.WriteString("\nReasons:\n")
		for _, r := range reasons {
			b.WriteString("- ")
			b.WriteString(r)
			b.WriteString("\n")
		}
	}
	if !v.Qualified {
		b.WriteString("\nMake every criterion marked " + markNotMet + " hold without breaking the ones marked " + markMet + ", and verify your work before you finish.\n")
	}
	return b.String()
}

// idOf returns the id of criteria[i]: its ID without surrounding white
// space, or "AC-(i+1)" when that is empty.
func idOf(c Criterion, i int) string {
	if id := strings.TrimSpace(c.ID); id != "" {
		return id
	}
	return fmt.Sprintf("AC-%d", i+1)
}

// ids returns the id of every criterion, in order.
func ids(criteria []Criterion) []string {
	out := make([]string, len(criteria))
	for i, c := range criteria {
		out[i] = idOf(c, i)
	}
	return out
}

// idKey is the form in which ids are compared: trimmed and case-folded.
func idKey(id string) string {
	return strings.ToLower(strings.TrimSpace(id))
}

// clipRunes cuts s to at most n runes, the last of them an ellipsis.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// tailRunes keeps the last n runes of s, the first of them an ellipsis.
func tailRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return "…" + string(r[len(r)-n+1:])
}
