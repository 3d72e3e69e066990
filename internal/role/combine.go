package role

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/text"
)

// CommandResult is the outcome of one criterion's verify command; the
// caller runs the command.
type CommandResult struct {
	ID     string // the criterion's id
	Passed bool   // the command ran to its end and exited 0
	Output string // the tail of its combined output
	// ExitCode is the command's exit status.
	ExitCode int
	// TimedOut reports that the command was stopped for taking too long.
	TimedOut bool
	// Missing reports that the command could not be started, for example
	// because its program does not exist.
	Missing bool
}

// met reports whether r says the criterion holds. It fails closed: a result
// that contradicts itself (passed but timed out, missing or with a non-zero
// exit code) does not count as met.
func (r CommandResult) met() bool {
	return r.Passed && !r.TimedOut && !r.Missing && r.ExitCode == 0
}

// maxOutputRunes bounds the command output quoted as evidence; the end of the
// output is kept because that is where failures are usually summarised.
const maxOutputRunes = 300

// Evidence of criteria that nothing judged.
const (
	evidenceUnjudged       = "not verified: no reviewer and no verify command"
	evidenceReviewerSilent = "not verified: the reviewer gave no judgement of it and it has no verify command"
)

// judgement is one source's opinion of one criterion.
type judgement struct {
	source   string
	met      bool
	evidence string
}

// Combine merges command results and an optional reviewer verdict (nil when
// no reviewer is configured) into one Verdict with one finding per
// criterion, in the order of criteria.
//
// The rules, all of them failing closed:
//
//   - A criterion is met only if at least one source judged it and every
//     source that judged it says it is met. A failing command therefore beats
//     a reviewer who found the criterion met, and the other way round.
//   - The command results of a criterion are those whose ID matches its id;
//     results for ids that are no criterion's are ignored. A criterion with a
//     Verify command but no result counts as not met ("was not run"), so a
//     caller that forgets to run a command cannot pass a story by it.
//   - The reviewer's judgement of a criterion is the first of its findings
//     with the criterion's id.
//   - A criterion no source judged is not met, with evidence "not verified:
//     no reviewer and no verify command" (or, when a reviewer is configured
//     but gave no finding for it, a note saying so) and Source "".
//   - The verdict is Qualified only when every criterion is met and, if a
//     reviewer is configured, the reviewer's verdict is Qualified too; so
//     NoVerdict fails the validation even when every command passed.
//   - Reasons are a copy of the reviewer's reasons.
//
// The one exception: when no reviewer is configured and no criterion has a
// verify command or a command result, nothing was set up to check the
// criteria. Combine then returns a Qualified verdict without findings and
// with Reasons [ReasonNotConfigured], so that a project without validation
// keeps working as before VALIDATE existed, while the caller can tell this
// case apart and warn that the criteria were not checked. It has no
// findings, so that no report line claims that a criterion was checked.
func Combine(criteria []Criterion, commands []CommandResult, reviewer *Verdict) Verdict {
	all := ids(criteria)
	results := make(map[string][]CommandResult, len(commands))
	for _, r := range commands {
		k := idKey(r.ID)
		results[k] = append(results[k], r)
	}

	configured := reviewer != nil
	for i, c := range criteria {
		if strings.TrimSpace(c.Verify) != "" || len(results[idKey(all[i])]) > 0 {
			configured = true
		}
	}
	if !configured {
		return Verdict{Qualified: true, Reasons: []string{ReasonNotConfigured}}
	}

	reviewed := map[string]Finding{}
	if reviewer != nil {
		for _, f := range reviewer.Findings {
			if _, dup := reviewed[idKey(f.ID)]; !dup {
				reviewed[idKey(f.ID)] = f
			}
		}
	}

	out := Verdict{
		Qualified: reviewer == nil || reviewer.Qualified,
		Findings:  make([]Finding, 0, len(criteria)),
	}
	for i, c := range criteria {
		k := idKey(all[i])
		var js []judgement
		verify := text.OneLine(c.Verify)
		if verify != "" && len(results[k]) == 0 {
			js = append(js, judgement{SourceCommand, false, commandName(verify) + " was not run"})
		}
		for _, r := range results[k] {
			js = append(js, commandJudgement(verify, r))
		}
		if f, ok := reviewed[k]; ok {
			js = append(js, judgement{SourceReviewer, f.Met, strings.TrimSpace(f.Evidence)})
		}
		f := decide(js)
		f.ID, f.Text = all[i], c.Text
		if len(js) == 0 {
			f.Evidence = evidenceUnjudged
			if reviewer != nil {
				f.Evidence = evidenceReviewerSilent
			}
		}
		if !f.Met {
			out.Qualified = false
		}
		out.Findings = append(out.Findings, f)
	}
	if reviewer != nil {
		out.Reasons = slices.Clone(reviewer.Reasons)
	}
	return out
}

// decide turns the judgements of one criterion into a finding without id and
// text. With failing judgements, it reports them; otherwise all of them. When
// more than one judgement is reported, each is labelled with its source.
func decide(js []judgement) Finding {
	if len(js) == 0 {
		return Finding{}
	}
	var failing []judgement
	for _, j := range js {
		if !j.met {
			failing = append(failing, j)
		}
	}
	shown, met := js, true
	if len(failing) > 0 {
		shown, met = failing, false
	}
	f := Finding{Met: met, Source: shown[0].source}
	if len(shown) == 1 {
		f.Evidence = shown[0].evidence
		return f
	}
	parts := make([]string, 0, len(shown))
	for _, j := range shown {
		parts = append(parts, j.source+": "+orNote(j.evidence, "no evidence given"))
	}
	f.Evidence = strings.Join(parts, "; ")
	return f
}

// commandJudgement turns one command result into a judgement. verify is the
// command as written on the criterion, "" when unknown.
func commandJudgement(verify string, r CommandResult) judgement {
	name := commandName(verify)
	var what string
	switch {
	case r.met():
		return judgement{SourceCommand, true, name + " exited 0"}
	case r.Missing:
		what = " could not be run: its program was not found"
	case r.TimedOut:
		what = " timed out"
	case r.ExitCode != 0:
		what = fmt.Sprintf(" exited %d", r.ExitCode)
	default:
		what = " failed"
	}
	ev := name + what
	if out := tailRunes(text.OneLine(r.Output), maxOutputRunes); out != "" {
		ev += ": " + out
	}
	return judgement{SourceCommand, false, ev}
}

// commandName names a verify command for evidence text.
func commandName(verify string) string {
	if verify == "" {
		return "verify command"
	}
	return "verify command `" + verify + "`"
}
