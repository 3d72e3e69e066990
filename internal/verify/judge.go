package verify

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/ralphloop/ralph/internal/words"
)

// Outcome is the judgement of one attempt.
type Outcome string

// Outcomes. Only Verified and AgentWord accept the work; the two are kept
// apart everywhere a story is shown, so that nobody reads the agent's word
// as ralph's verification.
const (
	// Verified: ralph produced evidence itself and nothing broke.
	Verified Outcome = "verified"
	// AgentWord: every check passes and nothing broke, but nothing ralph
	// could run shows this story done: a docs-only story, or one whose
	// only verify commands already passed before the work.
	AgentWord Outcome = "agent_word"
	// Rejected: the attempt broke something, or a check fails and the
	// attempt proves nothing. The reasons say what and what proof is
	// missing; the agent gets them in its next prompt.
	Rejected Outcome = "rejected"
	// Review: the attempt changed tests that the story says must change,
	// and the start's tests fail against the new code: a behaviour change
	// a person (or the reviewer agent) must approve, with the test diff.
	Review Outcome = "review"
)

// Story is what the judgement reads of the story under work.
type Story struct {
	ID    string
	Title string
	// Criteria are the acceptance criteria's texts (verify commands
	// included as written).
	Criteria []string
	// Block is the story as the task file has it, for the words that say
	// a test must change.
	Block string
}

// CommandRun is one criterion's verify command, run by ralph.
type CommandRun struct {
	Criterion string `json:"criterion"`
	Command   string `json:"command"`
	Passed    bool   `json:"passed"`
	// AtStart is how the command fared on the tree the run started from:
	// "" when it did not run there (added since), else "passed" or
	// "failed". A command that already passed proves nothing.
	AtStart string `json:"at_start,omitempty"`
	// WithStartFiles is how it fared with the start's versions of the
	// protected files put back, "" when it was not run so (nothing it
	// depends on changed).
	WithStartFiles string `json:"with_start_files,omitempty"`
}

// The values of CommandRun.AtStart and WithStartFiles.
const (
	RunPassed = "passed"
	RunFailed = "failed"
)

// Input is everything one judgement reads.
type Input struct {
	Story Story
	// Diffs compare each check on the start tree with the attempt's tree.
	Diffs []Diff
	// WithStartTests compare each check on the start tree with the
	// attempt's code run against the start's protected files; nil when
	// the attempt changed no protected file.
	WithStartTests []Diff
	// ProtectedChanged are the protected files the attempt changed.
	ProtectedChanged []string
	// RedGreen, when asked for ([verify] red_green), names the new tests
	// that fail when run against the start tree's code: only those count
	// as evidence. nil when not asked.
	RedGreen map[string]bool
	// Commands are the story's verify commands as run now.
	Commands []CommandRun
	// Reviewer is the reviewer agent's verdict: nil when there is none.
	Reviewer *bool
	// RequireEvidence sends back a story whose checks all pass but that
	// has no evidence of its own, instead of accepting it on the agent's
	// word ([verify] require_evidence).
	RequireEvidence bool
}

// Judgement is what ralph concludes of an attempt.
type Judgement struct {
	Outcome Outcome `json:"outcome"`
	// Evidence lists what ralph ran that shows the story done.
	Evidence []string `json:"evidence,omitempty"`
	// Problems say why the attempt is not accepted, or what a person must
	// approve; for a Rejected attempt, the last one says what proof is
	// missing.
	Problems []string `json:"problems,omitempty"`
	// Failing are the checks that fail on the attempt's tree, accepted or
	// not: a run never ends complete while one of them fails.
	Failing []string `json:"failing,omitempty"`
	// FailedAtStartToo are those of Failing that failed on the start tree
	// too.
	FailedAtStartToo []string `json:"failed_at_start_too,omitempty"`
	// Notes are things worth saying that change nothing: a verify command
	// that proves nothing, a report ralph could not read.
	Notes []string `json:"notes,omitempty"`
}

// Accepted reports whether the work may be committed as done.
func (j Judgement) Accepted() bool { return j.Outcome == Verified || j.Outcome == AgentWord }

// Label is how a story accepted by j is shown: "verified" or "done,
// agent's word".
func (j Judgement) Label() string {
	if j.Outcome == AgentWord {
		return "done, agent's word"
	}
	return string(j.Outcome)
}

// Judge applies the rules. They are written so that an agent cannot pass
// them without the work, whatever it does to the tree:
//
//  1. Nothing may break: a test that passed (or existed) at the start
//     must still pass, with the attempt's tests and, when it changed
//     protected files, with the start's.
//  2. A verify command that fails means a criterion is not met.
//  3. When any check fails after the attempt, even one that failed at the
//     start, the story needs evidence of its own, and no still-failing
//     test may name the story's own work; the agent's word is not enough.
//  4. When every check passes and there is no evidence, the story is done
//     on the agent's word, unless RequireEvidence.
//  5. A broken test the story itself says to change goes to review.
func Judge(in Input) Judgement {
	var j Judgement
	wantsTestChange := StoryChangesTests(in.Story)
	var regressions []string
	for _, d := range in.Diffs {
		if !d.Passed {
			j.Failing = append(j.Failing, d.Check)
			if d.Known && !d.PassedBefore {
				j.FailedAtStartToo = append(j.FailedAtStartToo, d.Check)
			}
		}
		if d.Regressed() {
			for _, r := range d.Regressions() {
				regressions = append(regressions, checkPrefix(d.Check, r))
			}
		}
	}
	var startRegressions []string
	heldFixes := map[string]bool{}
	heldChecks := map[string]bool{}
	passesWithStart := map[string]bool{}
	for _, d := range in.WithStartTests {
		if d.Regressed() {
			for _, r := range d.Regressions() {
				startRegressions = append(startRegressions, checkPrefix(d.Check, r))
			}
		}
		for _, f := range d.Fixed {
			heldFixes[d.Check+"\x00"+f] = true
		}
		if d.FixedCheck() || (d.Passed && !d.PassedBefore) {
			heldChecks[d.Check] = true
		}
		passesWithStart[d.Check] = d.Passed
	}
	changed := ""
	if len(in.ProtectedChanged) > 0 {
		changed = strings.Join(clipList(in.ProtectedChanged, 6), ", ")
	}
	// What passes only with the attempt's own versions of the tests or the
	// checks' files does not pass: the start's versions say what the code
	// does.
	if in.WithStartTests != nil {
		for _, d := range in.Diffs {
			for _, f := range d.Fixed {
				if !heldFixes[d.Check+"\x00"+f] {
					startRegressions = append(startRegressions, fmt.Sprintf("%s: %s passes only with the attempt's version of %s; with the start's it still fails", d.Check, f, changed))
				}
			}
			if with, ran := passesWithStart[d.Check]; ran && d.Passed && !with {
				startRegressions = append(startRegressions, fmt.Sprintf("check %q passes only with the attempt's version of %s; with the start's it fails", d.Check, changed))
			}
		}
	}
	if len(regressions) > 0 || len(startRegressions) > 0 {
		if wantsTestChange && len(in.ProtectedChanged) > 0 {
			j.Outcome = Review
			j.Problems = append(j.Problems, regressions...)
			for _, r := range startRegressions {
				j.Problems = append(j.Problems, "with the start's "+changed+": "+r)
			}
			j.Problems = append(j.Problems, fmt.Sprintf("the story says tests change, and the attempt changed %s: a person must approve the test change (`ralph approve %s`)", changed, in.Story.ID))
			return j
		}
		j.Outcome = Rejected
		j.Problems = append(j.Problems, regressions...)
		for _, r := range startRegressions {
			if strings.Contains(r, "passes only with") {
				j.Problems = append(j.Problems, r)
				continue
			}
			j.Problems = append(j.Problems, fmt.Sprintf("with the start's version of %s put back, %s", changed, r))
		}
		j.Problems = append(j.Problems, "changing the tests or the checks instead of the code does not count: put them back and make the code pass them")
		return j
	}

	// Evidence.
	rerun := in.WithStartTests != nil
	for _, d := range in.Diffs {
		for _, f := range d.Fixed {
			if rerun && !heldFixes[d.Check+"\x00"+f] {
				continue // a problem above
			}
			j.Evidence = append(j.Evidence, fmt.Sprintf("%s failed at the start and passes now (%s)", f, d.Check))
		}
		if !d.PerTest && d.FixedCheck() && (!rerun || heldChecks[d.Check]) {
			j.Evidence = append(j.Evidence, fmt.Sprintf("check %q failed at the start and passes now", d.Check))
		}
		for _, n := range d.New {
			if in.RedGreen != nil && !in.RedGreen[n] {
				j.Notes = append(j.Notes, fmt.Sprintf("new test %s passes against the start's code too: it proves nothing", n))
				continue
			}
			what := "is new and passes"
			if in.RedGreen != nil {
				what = "is new, fails against the start's code and passes now"
			}
			j.Evidence = append(j.Evidence, fmt.Sprintf("%s %s (%s)", n, what, d.Check))
		}
	}
	for _, c := range in.Commands {
		switch {
		case !c.Passed:
			j.Problems = append(j.Problems, fmt.Sprintf("%s: verify command `%s` fails", c.Criterion, c.Command))
		case c.AtStart == RunPassed:
			j.Notes = append(j.Notes, fmt.Sprintf("%s: verify command `%s` already passed before any work: it proves nothing", c.Criterion, c.Command))
		case c.WithStartFiles == RunFailed:
			j.Problems = append(j.Problems, fmt.Sprintf("%s: verify command `%s` passes only with the attempt's version of %s; with the start's it fails: changing the test instead of the code does not count", c.Criterion, c.Command, changed))
		case c.AtStart == RunFailed:
			j.Evidence = append(j.Evidence, fmt.Sprintf("%s: verify command `%s` failed at the start and passes now", c.Criterion, c.Command))
		default:
			j.Notes = append(j.Notes, fmt.Sprintf("%s: verify command `%s` passes; it did not run on the start tree, so it is no evidence", c.Criterion, c.Command))
		}
	}
	if in.Reviewer != nil {
		if *in.Reviewer {
			j.Evidence = append(j.Evidence, "the reviewer agent found every criterion met")
		} else {
			j.Problems = append(j.Problems, "the reviewer agent found criteria not met")
		}
	}
	if len(j.Problems) > 0 {
		j.Outcome = Rejected
		return j
	}

	if len(j.Failing) > 0 {
		var mine []string
		for _, d := range in.Diffs {
			for _, t := range d.StillFailing {
				if TestOfStory(in.Story, t) {
					mine = append(mine, t)
				}
			}
		}
		failing := quoteList(j.Failing)
		switch {
		case len(mine) > 0:
			j.Outcome = Rejected
			j.Problems = append(j.Problems, fmt.Sprintf("%s still %s, and the story names %s: make %s pass by changing the code; the agent's word is not enough next to a failing check", strings.Join(clipList(mine, 8), ", "), words.Plural(len(mine), "fails", "fail"), words.Plural(len(mine), "it", "them"), words.Plural(len(mine), "it", "them")))
		case len(j.Evidence) == 0:
			j.Outcome = Rejected
			// Under red_green a new test counts only when it failed on the
			// start's code, so a passing new test is no way out there.
			add := " (or add a test that passes)"
			if in.RedGreen != nil {
				add = " (or add a test that fails on the start's code and passes on yours)"
			}
			j.Problems = append(j.Problems, fmt.Sprintf("%s still %s and nothing ralph ran shows %s done: make a failing test pass%s by changing the code, not the tests; the agent's word is not enough next to a failing check", failing, words.Plural(len(j.Failing), "fails", "fail"), in.Story.ID, add))
		default:
			j.Outcome = Verified
			j.Notes = append(j.Notes, fmt.Sprintf("%s still %s, as at the start: the run is not complete until it passes", failing, words.Plural(len(j.Failing), "fails", "fail")))
		}
		return j
	}
	if len(j.Evidence) > 0 {
		j.Outcome = Verified
		return j
	}
	if in.RequireEvidence {
		j.Outcome = Rejected
		checks := "every check passes"
		if len(in.Diffs) == 0 {
			checks = "no checks are configured"
		}
		j.Problems = append(j.Problems, fmt.Sprintf("%s, but nothing ralph ran shows %s done and [verify] require_evidence is on: add a test that fails without the work, or a verify command to a criterion", checks, in.Story.ID))
		return j
	}
	j.Outcome = AgentWord
	return j
}

func checkPrefix(check, what string) string {
	if strings.HasPrefix(what, "check ") {
		return what
	}
	return fmt.Sprintf("%s: %s", check, what)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("check %q", n)
	}
	return strings.Join(q, ", ")
}

func clipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(slices.Clone(l[:n]), fmt.Sprintf("%d more", len(l)-n))
}

// changeVerbs and testNouns find a story that says its tests change: a
// behaviour change whose old test must go.
var testChange = regexp.MustCompile(`(?i)\b(update|updates|updated|change|changes|changed|modify|modifies|rewrite|rewrites|remove|removes|removed|delete|deletes|deleted|replace|replaces|replaced|drop|drops|adjust|adjusts|retire|retires)\b[^.\n]{0,60}\b(tests?|specs?)\b|\b(tests?|specs?)\b[^.\n]{0,40}\b(must|should|will|to)\s+(be\s+)?(updated|changed|removed|deleted|replaced|rewritten|dropped|adjusted|change)\b`)

// StoryChangesTests reports whether the story's own words say that tests
// change: "update the test of Parse for the new format", "remove the
// legacy tests". Only then can a broken start test be a behaviour change
// for a person to approve rather than a cheat to send back.
func StoryChangesTests(s Story) bool {
	text := s.Title + "\n" + strings.Join(s.Criteria, "\n") + "\n" + s.Block
	return testChange.MatchString(text)
}

// stopWords are parts of test names that say nothing about what is tested.
var stopWords = map[string]bool{"test": true, "tests": true, "spec": true, "it": true, "should": true, "when": true, "then": true,
	"the": true, "and": true, "with": true, "for": true, "can": true, "does": true, "case": true, "cases": true, "works": true,
	"returns": true, "return": true, "is": true, "are": true, "a": true, "an": true, "of": true, "to": true, "in": true, "on": true}

// TestOfStory reports whether a test's name says it tests this story's
// work: the story names it, or every meaningful word of its name appears
// in the story's criteria (its title when it has none). "TestSub" belongs
// to "Sub(5,3) is 2"; "TestAddUser" does not belong to "Add(2,3) is 5".
// A still-failing test that belongs to the story means the work is not
// finished, whatever else passes.
func TestOfStory(s Story, test string) bool {
	text := strings.Join(s.Criteria, "\n")
	if strings.TrimSpace(text) == "" {
		text = s.Title
	}
	lower := strings.ToLower(text + "\n" + s.Block)
	short := test
	if i := strings.LastIndexAny(short, " >:"); i >= 0 {
		short = short[i+1:]
	}
	if len(short) >= 4 && strings.Contains(lower, strings.ToLower(short)) {
		return true
	}
	tokens := nameTokens(short)
	if len(tokens) == 0 {
		return false
	}
	storyWords := nameTokens(text)
	for _, t := range tokens {
		found := false
		for _, w := range storyWords {
			if strings.HasPrefix(w, t) || (len(w) >= 3 && strings.HasPrefix(t, w)) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// nameTokens splits a name into lower-case words: camelCase, snake_case,
// kebab-case, paths and punctuation all separate words; digits, short
// words and stop words are dropped.
func nameTokens(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		w := strings.ToLower(string(cur))
		cur = cur[:0]
		if len(w) < 3 || stopWords[w] {
			return
		}
		out = append(out, w)
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r):
			if unicode.IsUpper(r) && len(cur) > 0 && (unicode.IsLower(cur[len(cur)-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
	}
	flush()
	return out
}
