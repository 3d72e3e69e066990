package role

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/text"
)

// errNoResult starts the message of every error of ParseResult that comes
// from not finding a usable JSON object in the reply.
const errNoResult = "no JSON result found"

// ParseResult reads the JSON result at the end of the final message text of
// a run of the role roleName (Planner, Questioner, Executor, Reviewer or
// GoalCheck; any other name is an error).
//
// The result is the last fenced block (```json or a plain ```) whose content
// is a JSON object; when no fenced block holds one, it is the last balanced
// top-level {...} of the text that is a JSON object (braces inside JSON
// strings do not count). A ```json block, or a {...} that starts like a JSON
// object, that comes after that result and is not valid JSON is an error: it
// is taken to be the agent's real, broken result. Fields ralph does not know
// are ignored.
//
// The result is normalised: every string is trimmed, the status is lower
// case, the verdict is exactly VerdictQualified or VerdictFailed whatever
// its case, and empty entries of string lists (criteria, questions,
// blockers, reasons, human questions) are dropped. It is then checked
// against the rules of the role. The error's message says what is wrong in
// terms of the JSON fields, so that it can be quoted back to the agent (see
// ResultReaskPrompt).
func ParseResult(roleName, text string) (Result, error) {
	if !knownRole(roleName) {
		return Result{}, fmt.Errorf("unknown role %q: want %s, %s, %s, %s or %s",
			roleName, Planner, Questioner, Executor, Reviewer, GoalCheck)
	}
	// Looking for the result costs time that grows with the square of the
	// unclosed braces, so a reply nested beyond any real result is refused
	// first.
	var refusal *inputlimit.Error
	if errors.As(inputlimit.CheckJSON("your reply", []byte(text)), &refusal) {
		refusal.Hint = "end your reply with the result as a JSON object a few levels deep"
		return Result{}, fmt.Errorf("%s: %w", errNoResult, refusal)
	}
	obj, err := findResultObject(text)
	if err != nil {
		return Result{}, err
	}
	var r Result
	if err := json.Unmarshal([]byte(obj), &r); err != nil {
		return Result{}, fmt.Errorf("invalid %s result: %s", roleName, decodeProblem(err))
	}
	var problems []string
	normaliseResult(&r, &problems)
	validateResult(roleName, r, &problems)
	if len(problems) > 0 {
		return Result{}, fmt.Errorf("invalid %s result: %s", roleName, strings.Join(problems, "; "))
	}
	return r, nil
}

// knownRole reports whether name is one of the five session roles.
func knownRole(name string) bool {
	switch name {
	case Planner, Questioner, Executor, Reviewer, GoalCheck:
		return true
	}
	return false
}

// findResultObject returns the text of the JSON object that is the result.
// Its errors start with errNoResult.
func findResultObject(text string) (string, error) {
	obj, fenceProblem := lastFencedObject(text)
	if fenceProblem != "" && obj != "" {
		return "", errors.New(errNoResult + ": " + fenceProblem)
	}
	if obj != "" {
		return obj, nil
	}
	obj, problem := lastBareObject(text)
	switch {
	case obj != "":
		return obj, nil
	case fenceProblem != "":
		// More telling than the same object's problem found without
		// fences.
		return "", errors.New(errNoResult + ": " + fenceProblem)
	case problem != "":
		return "", errors.New(errNoResult + ": " + problem)
	}
	return "", errors.New(errNoResult + ": end your reply with the result as a ```json block")
}

// fence is a fenced block of Markdown.
type fence struct {
	info    string // the word after the opening backticks, lower case
	content string
}

// fencedBlocks returns the fenced blocks of text in order. A block that is
// never closed runs to the end of the text.
func fencedBlocks(text string) []fence {
	var (
		blocks []fence
		open   bool
		ticks  int
		cur    fence
		body   []string
	)
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		n := len(t) - len(strings.TrimLeft(t, "`"))
		if !open {
			// A line that also ends with backticks is inline code, not a
			// fence.
			if n >= 3 && !strings.HasSuffix(t[n:], "```") {
				open, ticks, body = true, n, nil
				info := strings.Fields(t[n:])
				cur = fence{}
				if len(info) > 0 {
					cur.info = strings.ToLower(info[0])
				}
			}
			continue
		}
		if n >= ticks && n == len(t) {
			cur.content = strings.Join(body, "\n")
			blocks = append(blocks, cur)
			open = false
			continue
		}
		body = append(body, line)
	}
	if open {
		cur.content = strings.Join(body, "\n")
		blocks = append(blocks, cur)
	}
	return blocks
}

// lastFencedObject returns the content of the last ```json or plain ```
// block that is a JSON object. problem describes the last ```json block
// after it (or anywhere, when obj is "") that is not a valid JSON object.
func lastFencedObject(text string) (obj, problem string) {
	blocks := fencedBlocks(text)
	for i := len(blocks) - 1; i >= 0; i-- {
		b := blocks[i]
		if b.info != "" && b.info != "json" {
			continue
		}
		c := strings.TrimSpace(b.content)
		p := objectProblem(c)
		if p == "" {
			return c, problem
		}
		if b.info == "json" && problem == "" {
			problem = "the last ```json block of your reply is not a valid JSON object: " + p
		}
	}
	return "", problem
}

// objectProblem returns "" when s is one JSON object, and otherwise what is
// wrong with it.
func objectProblem(s string) string {
	if s == "" {
		return "it is empty"
	}
	if s[0] != '{' {
		return "it does not start with {"
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var v map[string]json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return syntaxProblem(s, err)
	}
	if dec.InputOffset() != int64(len(s)) {
		return "there is more text after the object's closing }"
	}
	return ""
}

// syntaxProblem describes the JSON error err of s with its place.
func syntaxProblem(s string, err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "it ends before the object is closed"
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	at := max(0, min(int(se.Offset)-1, len(s)))
	line := 1 + strings.Count(s[:at], "\n")
	col := 1 + len([]rune(s[strings.LastIndexByte(s[:at], '\n')+1:at]))
	from, to := max(0, at-20), min(len(s), at+20)
	return fmt.Sprintf("%v at line %d, column %d, near `%s`", se, line, col,
		strings.ReplaceAll(text.OneLine(strings.ToValidUTF8(s[from:to], "")), "`", "'"))
}

// lastBareObject returns the last balanced top-level {...} of text that is
// a JSON object. A top-level {...} that starts like a JSON object ({ then a
// string or }) but is not valid JSON, or that the text ends inside of, sets
// problem when it ends at or after the object found (obj is then "").
func lastBareObject(text string) (obj, problem string) {
	bestEnd, problemEnd := -1, -1
	for i := 0; i < len(text); {
		k := strings.IndexByte(text[i:], '{')
		if k < 0 {
			break
		}
		i += k
		end, closed := matchBrace(text, i)
		if !closed {
			rest := text[i:]
			if looksLikeObject(rest) {
				var v any
				if err := json.NewDecoder(strings.NewReader(rest)).Decode(&v); errors.Is(err, io.ErrUnexpectedEOF) {
					problem, problemEnd = "the JSON object at the end of your reply is not closed: it ends before its closing }", len(text)
				}
			}
			i++
			continue
		}
		s := text[i:end]
		if p := objectProblem(s); p == "" {
			obj, bestEnd = s, end
		} else if looksLikeObject(s) {
			problem, problemEnd = "the last JSON object of your reply is not valid JSON: "+p, end
		}
		i = end
	}
	if problemEnd >= 0 && problemEnd >= bestEnd {
		return "", problem
	}
	return obj, ""
}

// matchBrace returns the end (exclusive) of the {...} that opens at
// text[i], skipping braces inside JSON strings; closed is false when the
// text ends first.
func matchBrace(text string, i int) (end int, closed bool) {
	depth, inString, escaped := 0, false, false
	for j := i; j < len(text); j++ {
		c := text[j]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

// looksLikeObject reports whether s, which starts with {, goes on like a
// JSON object: with a string key or the closing brace.
func looksLikeObject(s string) bool {
	t := strings.TrimLeft(s[1:], " \t\r\n")
	return t != "" && (t[0] == '"' || t[0] == '}')
}

// decodeProblem describes an error of decoding a result object into Result.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the result"
		} else {
			field = fmt.Sprintf("%q", field)
		}
		return fmt.Sprintf("%s must be %s, not %s", field, jsonKind(te.Type), jsonValueName(te.Value))
	}
	return err.Error()
}

// jsonKind names the JSON form of values of type t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		e := t.Elem()
		switch e.Kind() {
		case reflect.String:
			return "a list of strings"
		case reflect.Struct, reflect.Map:
			return "a list of objects"
		}
		return "a list"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// jsonValueName names the JSON value kind that encoding/json reports.
func jsonValueName(v string) string {
	switch v {
	case "string":
		return "a string"
	case "number":
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	if strings.HasPrefix(v, "number") {
		return "the " + v
	}
	return v
}

// normaliseResult trims r's strings, lower-cases the status, spells the
// verdict as the constants do, drops empty list entries, and adds a problem
// for each task without a title and each incomplete answer.
func normaliseResult(r *Result, problems *[]string) {
	r.Status = strings.ToLower(strings.TrimSpace(r.Status))
	r.Verdict = strings.TrimSpace(r.Verdict)
	switch {
	case strings.EqualFold(r.Verdict, VerdictQualified):
		r.Verdict = VerdictQualified
	case strings.EqualFold(r.Verdict, VerdictFailed):
		r.Verdict = VerdictFailed
	}
	r.Summary = strings.TrimSpace(r.Summary)
	r.Questions = cleanList(r.Questions)
	r.HumanQuestions = cleanList(r.HumanQuestions)
	r.Blockers = cleanList(r.Blockers)
	r.Reasons = cleanList(r.Reasons)
	r.Tasks = cleanTasks("tasks", r.Tasks, problems)
	r.NewTasks = cleanTasks("new_tasks", r.NewTasks, problems)
	for i := range r.Answers {
		a := &r.Answers[i]
		a.Question = strings.TrimSpace(a.Question)
		a.Answer = strings.TrimSpace(a.Answer)
		if a.Question == "" {
			*problems = append(*problems, fmt.Sprintf("\"answers\" entry %d has an empty \"question\"", i+1))
		}
		if a.Answer == "" {
			*problems = append(*problems, fmt.Sprintf("\"answers\" entry %d has an empty \"answer\"", i+1))
		}
	}
}

// cleanList trims every entry of l and drops the empty ones.
func cleanList(l []string) []string {
	var out []string
	for _, s := range l {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// cleanTasks trims the tasks' titles and criteria, drops empty criteria,
// and adds a problem for each task without a title.
func cleanTasks(field string, tasks []NewTask, problems *[]string) []NewTask {
	if tasks == nil {
		return nil
	}
	out := make([]NewTask, len(tasks))
	for i, t := range tasks {
		t.Title = strings.TrimSpace(t.Title)
		t.Criteria = cleanList(t.Criteria)
		if t.Title == "" {
			*problems = append(*problems, fmt.Sprintf("%q entry %d has an empty \"title\"", field, i+1))
		}
		out[i] = t
	}
	return out
}

// validateResult adds a problem for each rule of the role that r breaks.
func validateResult(roleName string, r Result, problems *[]string) {
	add := func(format string, args ...any) { *problems = append(*problems, fmt.Sprintf(format, args...)) }
	status := func(allowed ...string) bool {
		for _, a := range allowed {
			if r.Status == a {
				return true
			}
		}
		if r.Status == "" {
			add("\"status\" is missing: it must be %s", quoteAlternatives(allowed))
		} else {
			add("\"status\" is %q: it must be %s", r.Status, quoteAlternatives(allowed))
		}
		return false
	}
	switch roleName {
	case Planner:
		if !status(StatusCompleted, StatusNeedsQACycle, StatusBlocked) {
			return
		}
		if r.Status == StatusNeedsQACycle && len(r.Questions) == 0 {
			add("status %q needs at least one entry in \"questions\"", StatusNeedsQACycle)
		}
		if r.Status == StatusBlocked && len(r.Blockers) == 0 {
			add("status %q needs at least one entry in \"blockers\" saying why", StatusBlocked)
		}
	case Questioner:
		if len(r.Answers) == 0 && len(r.HumanQuestions) == 0 {
			add("a questioner's result needs at least one entry in \"answers\" or in \"human_questions\"")
		}
	case Executor:
		if !status(StatusCompleted, StatusBlocked) {
			return
		}
		if r.Status == StatusBlocked && len(r.Blockers) == 0 {
			add("status %q needs at least one entry in \"blockers\" saying why", StatusBlocked)
		}
	case Reviewer:
		switch r.Verdict {
		case VerdictQualified:
		case VerdictFailed:
			if len(r.Reasons) == 0 {
				add("verdict %q needs at least one entry in \"reasons\"", VerdictFailed)
			}
		case "":
			add("\"verdict\" is missing: it must be %s", quoteAlternatives([]string{VerdictQualified, VerdictFailed}))
		default:
			add("\"verdict\" is %q: it must be %s", r.Verdict, quoteAlternatives([]string{VerdictQualified, VerdictFailed}))
		}
	case GoalCheck:
		if !status(StatusPassed, StatusFailed) {
			return
		}
		if r.Status == StatusFailed && len(r.Reasons) == 0 && len(r.NewTasks) == 0 {
			add("status %q needs at least one entry in \"reasons\" or in \"new_tasks\"", StatusFailed)
		}
	}
}

// quoteAlternatives lists values as `"a" or "b"` or `"a", "b" or "c"`.
func quoteAlternatives(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = fmt.Sprintf("%q", v)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// ResultFormat returns the text, for a prompt, that tells an agent in the
// role roleName how to end its reply: the fields of its result, their
// allowed values, and one ```json block showing the shape. The block is
// deliberately not a valid result of the four roles that have a status or
// verdict (it spells the choices as "a|b"), so that an agent that merely
// echoes it is asked again. It returns "" for an unknown role.
func ResultFormat(roleName string) string {
	return resultFormats[roleName]
}

const formatIntro = "End your reply with your result: one ```json block holding one JSON object, the very last thing in your reply, with nothing after it.\n"

var resultFormats = map[string]string{
	Planner: formatIntro + `- "status": "completed" when the plan and the tasks are ready; "needs_qa_cycle" when something must be answered first (list it in "questions"); "blocked" only when the request cannot be done (say why in "blockers").
- "summary": one paragraph on the plan.
- "tasks": the complete task list in order, each with a "title" and "criteria", its success criteria.
- "questions" and "blockers": lists of strings, [] when there are none.

` + "```json" + `
{
  "status": "completed|needs_qa_cycle|blocked",
  "summary": "<one paragraph on the plan>",
  "tasks": [
    {"title": "<a small task>", "criteria": ["<a success criterion a reviewer can check>"]}
  ],
  "questions": [],
  "blockers": []
}
` + "```",

	Questioner: formatIntro + `- "answers": one entry per question you can answer from the code or the request: the "question" copied exactly, and the "answer" with the file, code or text that shows it.
- "human_questions": the questions only a person can answer (product decisions, credentials, preferences), copied exactly; never guess them.
- "summary": one sentence.
At least one of "answers" and "human_questions" must have an entry.

` + "```json" + `
{
  "answers": [
    {"question": "<the planner's question, copied exactly>", "answer": "<the answer, and where it comes from>"}
  ],
  "human_questions": ["<a question only a person can answer>"],
  "summary": "<one sentence>"
}
` + "```",

	Executor: formatIntro + `- "status": "completed" when the task is implemented; "blocked" when it cannot be done (say why in "blockers").
- "summary": what you changed and how you checked it.
- "new_tasks": work you found that this task does not cover, each with a "title" and "criteria"; [] when none.
- "new_requirements": true only when the plan itself must change; otherwise false.

` + "```json" + `
{
  "status": "completed|blocked",
  "summary": "<what you changed and how you checked it>",
  "blockers": [],
  "new_tasks": [],
  "new_requirements": false
}
` + "```",

	Reviewer: formatIntro + `- "verdict": exactly "Qualified" when every success criterion is met, "Failed" when at least one is not.
- "reasons": for "Failed", one entry per unmet criterion saying what must change; [] for "Qualified".
- "summary": one paragraph on what you checked.
- "new_tasks": work outside this task's criteria that you found missing, each with a "title" and "criteria"; [] when none.

` + "```json" + `
{
  "verdict": "Qualified|Failed",
  "summary": "<what you checked>",
  "reasons": ["<an unmet criterion and what must change>"],
  "new_tasks": []
}
` + "```",

	GoalCheck: formatIntro + `- "status": "passed" when the request is fully done; "failed" when anything is missing or wrong.
- "reasons": for "failed", what is missing or wrong; [] for "passed".
- "new_tasks": for "failed", the tasks that would finish the request, each with a "title" and "criteria".
- "summary": one paragraph on how the work meets the request.

` + "```json" + `
{
  "status": "passed|failed",
  "summary": "<how the work meets the request>",
  "reasons": [],
  "new_tasks": [
    {"title": "<a missing piece of work>", "criteria": ["<a success criterion a reviewer can check>"]}
  ]
}
` + "```",
}

// ReaskLine is the first line of ResultReaskPrompt.
const ReaskLine = "Your previous reply had no valid result"

// ResultReaskPrompt returns the follow-up prompt for a run of the role
// roleName whose reply had no valid result: it quotes err (the error of
// ParseResult; nil reads as "no JSON result found") and asks for only the
// JSON result, in the form ResultFormat shows. Its first line is ReaskLine.
//
// (It is not called ReaskPrompt because the reviewer verdict of the
// single-loop review already has that name in this package.)
func ResultReaskPrompt(roleName string, err error) string {
	problem := errNoResult
	if err != nil {
		problem = text.OneLine(err.Error())
	}
	var b strings.Builder
	b.WriteString(ReaskLine + "\n\n")
	fmt.Fprintf(&b, "Ralph could not read it: %s.\n\n", strings.TrimRight(problem, "."))
	b.WriteString("Do not redo the work and do not change any file: ")
	b.WriteString("reply with ONLY the JSON result for the work already done")
	if knownRole(roleName) {
		fmt.Fprintf(&b, " as the %s, in this format:\n\n", strings.ReplaceAll(roleName, "-", " "))
		b.WriteString(ResultFormat(roleName))
	} else {
		b.WriteString(", as one ```json block holding one JSON object.")
	}
	b.WriteString("\n")
	return b.String()
}
