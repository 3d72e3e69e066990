package role

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/text"
)

// The tags around the reviewer's verdict.
const (
	verdictOpen  = "<verdict>"
	verdictClose = "</verdict>"
)

// Bounds on the text put into the review prompt. A diff summary keeps its
// beginning (the first files are as telling as the last); check output keeps
// its end, where failures and summaries are printed.
const (
	maxDiffSummaryBytes = 32 << 10
	maxCheckOutputBytes = 32 << 10
)

// ReviewVars returns the variables for PROMPT_review.md:
//
//   - STORY_ID, STORY_TITLE, STORY_BLOCK: the story as given;
//   - CRITERIA: the criteria as a list of "AC-n: text" lines in order, each
//     followed by an indented note when the criterion has a verify command
//     that ralph runs itself;
//   - DIFF_SUMMARY and CHECK_OUTPUT: as given, cut to 32 KiB (the summary
//     keeps its head, the check output its tail);
//   - VERDICT_FORMAT: the verdict block the reviewer must end with, shown
//     with the criteria's ids and placeholder values that are deliberately
//     invalid, followed by the rules for filling it in.
//
// Empty values are replaced by a short note in parentheses, so that the
// rendered prompt never has a blank where the reviewer expects content.
// Because VERDICT_FORMAT is the last thing in the embedded template and its
// example fails ParseVerdict, a reviewer that only echoes its prompt never
// produces a valid verdict.
func ReviewVars(storyID, storyTitle, storyBlock string, criteria []Criterion, diffSummary string, checkOutput string) map[string]string {
	return map[string]string{
		"STORY_ID":       orNote(strings.TrimSpace(storyID), "(no story id)"),
		"STORY_TITLE":    orNote(strings.TrimSpace(storyTitle), "(no title)"),
		"STORY_BLOCK":    orNote(strings.TrimRight(storyBlock, " \t\r\n"), "(the story has no text)"),
		"CRITERIA":       criteriaList(criteria),
		"DIFF_SUMMARY":   orNote(headBytes(strings.TrimRight(diffSummary, " \t\r\n"), maxDiffSummaryBytes), "(no changes were recorded)"),
		"CHECK_OUTPUT":   orNote(tailBytes(strings.TrimRight(checkOutput, " \t\r\n"), maxCheckOutputBytes), "(the checks printed nothing)"),
		"VERDICT_FORMAT": verdictFormat(criteria),
	}
}

// criteriaList renders the criteria for the prompt, one "AC-n: text" line
// each.
func criteriaList(criteria []Criterion) string {
	if len(criteria) == 0 {
		return "(this story lists no acceptance criteria)"
	}
	var b strings.Builder
	for i, c := range criteria {
		fmt.Fprintf(&b, "%s: %s\n", text.OneLine(idOf(c, i)), orNote(text.OneLine(c.Text), "(no text)"))
		if v := text.OneLine(c.Verify); v != "" {
			fmt.Fprintf(&b, "   (ralph also runs this criterion's verify command: `%s`; judge the criterion all the same)\n", v)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// verdictFormat shows the verdict block with placeholders, and the rules for
// filling it in. The example is deliberately not a valid verdict: its "met"
// values are the placeholder true|false, which is not JSON, and its verdict
// is "Qualified|Failed". The rules after the example name no tag, so that the
// last <verdict> in an echoed prompt is the invalid example.
func verdictFormat(criteria []Criterion) string {
	var b strings.Builder
	b.WriteString(verdictOpen + "\n")
	b.WriteString("{\"verdict\": \"Qualified|Failed\",\n \"criteria\": [")
	for i, id := range ids(criteria) {
		if i > 0 {
			b.WriteString(",")
		}
		evidence := "..."
		if i == 0 {
			evidence = "one sentence: where the code shows it holds, or what is missing"
		}
		fmt.Fprintf(&b, "\n  {\"id\": %s, \"met\": true|false, \"evidence\": %s}", jsonString(id), jsonString(evidence))
	}
	if len(criteria) > 0 {
		b.WriteString("\n ")
	}
	b.WriteString("],\n \"reasons\": [\"for each unmet criterion, what must change\"]}\n")
	b.WriteString(verdictClose + "\n\n")

	b.WriteString("In the block, \"verdict\" is exactly \"Qualified\" (every criterion is met) or \"Failed\" (at least one is not); ")
	b.WriteString("\"met\" is true or false, written without quotes; ")
	if len(criteria) == 0 {
		b.WriteString("\"criteria\" is [] because the story lists no acceptance criteria; ")
	} else {
		fmt.Fprintf(&b, "\"criteria\" has exactly one entry for each of %s; ", joinIDs(ids(criteria)))
	}
	b.WriteString("\"reasons\" is [] when the verdict is Qualified. ")
	b.WriteString("The block holds one JSON object and is the very last thing in your reply: write nothing after it.")
	return b.String()
}

// jsonString returns s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// joinIDs lists ids as "AC-1", "AC-1 and AC-2" or "AC-1, AC-2 and AC-3".
func joinIDs(ids []string) string {
	switch len(ids) {
	case 0:
		return "no criterion"
	case 1:
		return ids[0]
	}
	return strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
}

// MalformedError is the error of ParseVerdict when the reviewer's answer is
// not a valid verdict. Its message says everything that is wrong, so that it
// can be quoted back to the reviewer in the re-ask prompt.
type MalformedError struct {
	// Problems lists what is wrong, each as one line of text without a
	// final period, in the order found. It is never empty.
	Problems []string
}

// Error joins the problems into one line.
func (e *MalformedError) Error() string {
	return "malformed reviewer verdict: " + strings.Join(e.Problems, "; ")
}

// malformed returns a MalformedError with one problem.
func malformed(format string, args ...any) *MalformedError {
	return &MalformedError{Problems: []string{fmt.Sprintf(format, args...)}}
}

// ParseVerdict reads the reviewer's final message. The reviewer must end
// with a block
//
//	<verdict>{"verdict":"Qualified"|"Failed","criteria":[{"id":"AC-1","met":true,"evidence":"..."}],"reasons":["..."]}</verdict>
//
// The block is the one opened by the LAST <verdict> tag in final; it must be
// closed by a </verdict> after it. A later opening tag is never skipped in
// favour of an earlier complete block, so a draft verdict followed by a cut
// off final one is an error rather than the draft. White space around the
// JSON and a Markdown code fence directly inside the tags are tolerated.
//
// Any other deviation is a *MalformedError naming every problem found: no
// block, an unclosed or empty block, invalid JSON (with line, column and the
// text near the error), a value that is not one JSON object, "verdict" other
// than "Qualified" or "Failed" (in any letter case), "criteria" missing or
// not a list, an entry that is not an object or has no "id" string, an id
// that is not one of criteria's ids, an id listed twice, a criterion missing
// from the answer, "met" missing or not a JSON boolean, "evidence" or
// "reasons" of the wrong type, a Qualified verdict with some criterion not
// met, and a Failed verdict with every criterion met (the reviewer judges
// only the explicit criteria, so it cannot fail a story whose criteria all
// hold). Fields other than these are ignored. The ids of criteria are
// expected to be unique; of two criteria with the same id only the first can
// be answered, so such a list never yields a verdict.
//
// On success the verdict has one finding per criterion, in the order of
// criteria, with Source SourceReviewer, and Qualified is true exactly when
// every finding is met. Reasons keeps the reviewer's non-empty reasons.
func ParseVerdict(final string, criteria []Criterion) (Verdict, error) {
	body, merr := lastBlock(final)
	if merr != nil {
		return Verdict{}, merr
	}
	var doc any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		return Verdict{}, jsonProblem(body, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return Verdict{}, malformed("the <verdict> block must hold one JSON object, found %s", describe(doc))
	}

	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// "verdict"
	verdictKnown, qualified := false, false
	switch v, present := obj["verdict"]; {
	case !present:
		add(`"verdict" is missing: it must be "Qualified" or "Failed"`)
	default:
		s, isString := v.(string)
		switch {
		case !isString:
			add(`"verdict" must be the string "Qualified" or "Failed", found %s`, describe(v))
		case strings.EqualFold(s, "Qualified"):
			verdictKnown, qualified = true, true
		case strings.EqualFold(s, "Failed"):
			verdictKnown = true
		default:
			add(`"verdict" must be "Qualified" or "Failed", found %s`, describe(v))
		}
	}

	// "criteria"
	all := ids(criteria)
	index := make(map[string]int, len(all))
	for i, id := range all {
		if _, dup := index[idKey(id)]; !dup {
			index[idKey(id)] = i
		}
	}
	findings := make([]Finding, len(criteria))
	for i, c := range criteria {
		findings[i] = Finding{ID: all[i], Text: c.Text, Source: SourceReviewer}
	}
	seen := make([]bool, len(criteria))   // an entry names the criterion
	judged := make([]bool, len(criteria)) // and its "met" is a boolean
	entries, present := obj["criteria"]
	list, isList := entries.([]any)
	switch {
	case !present:
		add(`"criteria" is missing: it must list %s`, joinIDs(all))
	case !isList:
		add(`"criteria" must be a list, found %s`, describe(entries))
	}
	for n, e := range list {
		entry, isObj := e.(map[string]any)
		if !isObj {
			add(`criteria[%d] must be an object with "id", "met" and "evidence", found %s`, n, describe(e))
			continue
		}
		rawID, hasID := entry["id"].(string)
		if !hasID || strings.TrimSpace(rawID) == "" {
			add(`criteria[%d] has no "id" string`, n)
			continue
		}
		i, known := index[idKey(rawID)]
		if !known {
			add(`criteria[%d] has id %s, which is not one of %s`, n, describeText(rawID), orNote(strings.Join(all, ", "), "the story's criteria (it has none)"))
			continue
		}
		id := all[i]
		if seen[i] {
			add(`criterion %s is listed more than once`, id)
			continue
		}
		seen[i] = true
		switch met, hasMet := entry["met"]; {
		case !hasMet:
			add(`criterion %s has no "met": it must be true or false`, id)
		default:
			b, isBool := met.(bool)
			if !isBool {
				add(`criterion %s: "met" must be true or false without quotes, found %s`, id, describe(met))
				break
			}
			findings[i].Met = b
			judged[i] = true
		}
		if ev, hasEv := entry["evidence"]; hasEv && ev != nil {
			s, isString := ev.(string)
			if !isString {
				add(`criterion %s: "evidence" must be a string, found %s`, id, describe(ev))
			}
			findings[i].Evidence = strings.TrimSpace(s)
		}
	}
	if present && isList {
		for i, id := range all {
			if !seen[i] {
				add(`criterion %s is missing from "criteria"`, id)
			}
		}
	}

	// "reasons"
	var reasons []string
	if rs, hasReasons := obj["reasons"]; hasReasons && rs != nil {
		list, isList := rs.([]any)
		if !isList {
			add(`"reasons" must be a list of strings, found %s`, describe(rs))
		}
		for n, r := range list {
			s, isString := r.(string)
			if !isString {
				add(`reasons[%d] must be a string, found %s`, n, describe(r))
				continue
			}
			if s = strings.TrimSpace(s); s != "" {
				reasons = append(reasons, s)
			}
		}
	}

	// The verdict must agree with the criteria.
	if verdictKnown {
		var unmet []string
		allJudged := true
		for i := range findings {
			if !judged[i] {
				allJudged = false
			} else if !findings[i].Met {
				unmet = append(unmet, findings[i].ID)
			}
		}
		switch {
		case qualified && len(unmet) > 0:
			add(`"verdict" is "Qualified" but %s not met: Qualified needs every criterion met`, isAre(unmet))
		case !qualified && len(criteria) == 0:
			add(`"verdict" is "Failed" but the story has no acceptance criteria to fail: give "Qualified"`)
		case !qualified && allJudged && len(unmet) == 0 && len(problems) == 0:
			add(`"verdict" is "Failed" but every criterion is marked met: mark the criteria that do not hold as "met": false, or give "Qualified"`)
		}
	}

	if len(problems) > 0 {
		return Verdict{}, &MalformedError{Problems: problems}
	}
	return Verdict{Qualified: qualified, Findings: findings, Reasons: reasons}, nil
}

// isAre says "AC-2 is" or "AC-2 and AC-3 are".
func isAre(ids []string) string {
	if len(ids) == 1 {
		return ids[0] + " is"
	}
	return joinIDs(ids) + " are"
}

// lastBlock returns the trimmed content of the block opened by the last
// <verdict> tag in s, without a Markdown code fence around it.
func lastBlock(s string) (string, *MalformedError) {
	i := strings.LastIndex(s, verdictOpen)
	if i < 0 {
		if strings.Contains(s, verdictClose) {
			return "", malformed("found %s without an opening %s tag", verdictClose, verdictOpen)
		}
		return "", malformed("no %s block found: the reply must end with %s{...}%s", verdictOpen, verdictOpen, verdictClose)
	}
	rest := s[i+len(verdictOpen):]
	j := strings.Index(rest, verdictClose)
	if j < 0 {
		return "", malformed("the last %s block is not closed with %s", verdictOpen, verdictClose)
	}
	body := stripFence(strings.TrimSpace(rest[:j]))
	if body == "" {
		return "", malformed("the %s block is empty", verdictOpen)
	}
	return body, nil
}

// stripFence removes a Markdown code fence (``` or ```json) around s.
func stripFence(s string) string {
	if !strings.HasPrefix(s, "```") {
		return s
	}
	nl := strings.IndexByte(s, '\n')
	if nl < 0 {
		return s
	}
	inner := strings.TrimSpace(s[nl+1:])
	if !strings.HasSuffix(inner, "```") {
		return s
	}
	return strings.TrimSpace(strings.TrimSuffix(inner, "```"))
}

// jsonProblem describes a JSON decoding error of body with its position.
func jsonProblem(body string, err error) *MalformedError {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return malformed("the %s block is not valid JSON: %v", verdictOpen, err)
	}
	// Offset counts the bytes read when the error was found, the offending
	// byte included.
	at := int(se.Offset) - 1
	at = max(0, min(at, len(body)))
	line := 1 + strings.Count(body[:at], "\n")
	col := 1 + utf8.RuneCountInString(body[strings.LastIndexByte(body[:at], '\n')+1:at])
	return malformed("the %s block is not valid JSON: %v at line %d, column %d, near %s",
		verdictOpen, se, line, col, "`"+strings.ReplaceAll(near(body, at), "`", "'")+"`")
}

// near returns the text of body around byte offset at, on one line.
func near(body string, at int) string {
	from, to := max(0, at-20), min(len(body), at+20)
	for from > 0 && !utf8.RuneStart(body[from]) {
		from--
	}
	for to < len(body) && !utf8.RuneStart(body[to]) {
		to++
	}
	return text.OneLine(body[from:to])
}

// describe names a decoded JSON value for an error message, quoting strings.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("%t", x)
	case float64:
		return fmt.Sprintf("the number %v", x)
	case string:
		return "the string " + describeText(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// describeText quotes s for an error message: on one line and at most 60
// runes long.
func describeText(s string) string {
	return fmt.Sprintf("%q", clipRunes(text.OneLine(s), 60))
}

// ReaskPrompt returns the short follow-up prompt sent once after a malformed
// answer: it quotes err (the error of ParseVerdict; nil is read as "no
// verdict block") on one line and repeats the required block format with the
// criteria's ids. Like the review prompt, the format it shows is not itself
// a valid verdict, so an echo of this prompt does not parse either.
func ReaskPrompt(err error, criteria []Criterion) string {
	problem := "the reply had no " + verdictOpen + " block"
	if err != nil {
		problem = strings.TrimRight(text.OneLine(err.Error()), ".")
	}
	var b strings.Builder
	b.WriteString("Ralph could not read a verdict from your last reply. The problem: ")
	b.WriteString(problem)
	b.WriteString(".\n\n")
	b.WriteString("Do not review the story again and do not change any file. Reply with the verdict you reached, ")
	b.WriteString("as one block in exactly this form, with the placeholders replaced by your judgement:\n\n")
	b.WriteString(verdictFormat(criteria))
	b.WriteString("\n")
	return b.String()
}

// NoVerdict returns the reviewer verdict that stands for a reviewer who gave
// no valid verdict even after the re-ask, for passing to Combine: it is not
// qualified, has no findings, and its first reason is ReasonNoVerdict,
// followed by what was wrong with the last answer when err is not nil.
// Combine then fails the validation whatever the commands say.
func NoVerdict(err error) *Verdict {
	v := &Verdict{Reasons: []string{ReasonNoVerdict}}
	if err != nil {
		v.Reasons = append(v.Reasons, "its last answer: "+text.OneLine(err.Error()))
	}
	return v
}

// orNote returns s, or note when s is empty.
func orNote(s, note string) string {
	if s == "" {
		return note
	}
	return s
}

// headBytes cuts s to about n bytes, keeping its beginning up to a line end,
// and says how much was cut.
func headBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	cut := s[:n]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	return fmt.Sprintf("%s\n[... %d more bytes cut ...]", cut, len(s)-len(cut))
}

// tailBytes cuts s to about n bytes, keeping its end from a line start, and
// says how much was cut.
func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[len(s)-n:]
	if i := strings.IndexByte(cut, '\n'); i >= 0 && i < len(cut)-1 {
		cut = cut[i+1:]
	}
	for len(cut) > 0 && !utf8.RuneStart(cut[0]) {
		cut = cut[1:]
	}
	return fmt.Sprintf("[... %d earlier bytes cut ...]\n%s", len(s)-len(cut), cut)
}
