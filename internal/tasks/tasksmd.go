package tasks

// This file reads and edits the tasks.md of a seed-002 session: a markdown
// list of tasks whose marks record how far each one has come.
//
//	# Tasks: Greet the user
//
//	Some optional prose, ignored.
//
//	- [ ] task-1: Add a greet function
//	  - greet("Ann") returns "Hello, Ann"
//	  - the tests pass
//	- [P] task-2: Print the greeting from main
//	- [x] task-3: Document it
//
// A task line starts at column 0 with "- [", a mark, "] ", an id, ": " and a
// title. The criteria of a task are the list items ("- text", indented by at
// least two spaces or a tab) on the lines directly under its task line; the
// first line that is not such an item, a blank line included, ends them.
// Every other line is prose and is ignored.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

// ErrTaskNotFound is wrapped by errors about a task id that no task line in
// a tasks.md carries; test for it with errors.Is.
var ErrTaskNotFound = errors.New("unknown task id")

// Mark is the state of a task as its task line records it between the
// brackets. The zero Mark means MarkTodo wherever a Mark is written, so a
// task built without one is a task to do.
type Mark string

// The three marks of a session task. "[X]" in a file reads as MarkDone.
const (
	// MarkTodo ("[ ]") is a task nobody has finished.
	MarkTodo Mark = " "
	// MarkInReview ("[P]") is a task the executor reports done and that
	// waits for review.
	MarkInReview Mark = "P"
	// MarkDone ("[x]") is a task that passed review.
	MarkDone Mark = "x"
)

// String returns the mark as it appears in a task line, brackets included:
// "[ ]", "[P]" or "[x]". The zero Mark is shown as "[ ]"; any other value is
// put between brackets as it is.
func (m Mark) String() string {
	if m == "" {
		m = MarkTodo
	}
	return "[" + string(m) + "]"
}

// valid reports whether m is one of the three marks or the zero Mark.
func (m Mark) valid() bool {
	switch m {
	case "", MarkTodo, MarkInReview, MarkDone:
		return true
	}
	return false
}

// SessionTask is one task of a session's tasks.md.
type SessionTask struct {
	// ID names the task; it matches [A-Za-z0-9][A-Za-z0-9._-]* and is
	// unique within its file.
	ID string
	// Title is the text after "ID: ", without surrounding whitespace; it is
	// never empty when the task was parsed.
	Title string
	// Mark is the task's state. A parsed task has MarkTodo, MarkInReview or
	// MarkDone, never the zero Mark.
	Mark Mark
	// Criteria are the texts of the task's criteria in file order, without
	// the "- " marker and surrounding whitespace; none is empty. It is nil
	// when the task has no criteria.
	Criteria []string
	// Line is the 1-based line of the task line, or 0 when the task did not
	// come from a file.
	Line int
}

// taskLineExample is the canonical task line shown to users whenever they got
// one wrong, so every message teaches the same shape.
const taskLineExample = "- [ ] task-1: Title"

// notATaskHint is added to the problems that a prose line starting with "- ["
// is likely to cause, because such a line is read as a task all the same.
const notATaskHint = `; indent the line if it is not meant to be a task`

// ParseTasksMD parses the tasks.md data read from path (used only in errors).
// Every problem is reported as a *ParseError naming the line: invalid UTF-8,
// a line at column 0 starting with "- [" that is not a well-formed task line,
// or a duplicate task id. A file without task lines is not an error and
// yields no tasks. The returned tasks are in file order, have unique ids, a
// valid mark and a non-empty title, and share memory with nothing the
// caller holds, so data may be reused afterwards.
func ParseTasksMD(path string, data []byte) ([]SessionTask, error) {
	tasks, _, err := parseTasksMD(path, data)
	return tasks, err
}

// RenderTasksMD returns a new tasks.md: the heading "# Tasks: title" (just
// "# Tasks" when title is empty), a blank line, then every task line followed
// by its criteria, each line ending in "\n". Titles and criteria are written
// on one line each: line breaks inside them become spaces, invalid UTF-8
// becomes U+FFFD and surrounding whitespace is dropped, so no text can forge
// a task line or make the file unreadable; criteria that are empty after
// that are left out. The zero Mark is written as "[ ]".
//
// ParseTasksMD(RenderTasksMD(title, tasks)) returns tasks again, Line aside,
// whenever the tasks are as ParseTasksMD returns them: valid unique ids,
// valid marks, non-empty one-line titles and criteria. RenderTasksMD does not
// check that; a task with a malformed id, an unknown mark or an empty title
// makes a file ParseTasksMD refuses.
func RenderTasksMD(title string, tasks []SessionTask) []byte {
	var b []byte
	b = append(b, "# Tasks"...)
	if title = oneLine(title); title != "" {
		b = append(b, ": "...)
		b = append(b, title...)
	}
	b = append(b, "\n\n"...)
	for _, t := range tasks {
		b = appendTaskLines(b, t, "\n")
	}
	return b
}

// SetTaskMark returns a copy of the tasks.md data in which the task line of
// the task with the given id carries mark m. Exactly one byte, the mark
// character, may change; prose, criteria, line endings (CRLF stays CRLF) and
// any text on the task line survive byte for byte, and data itself is never
// modified. A task already marked "[X]" is left as it is when m is MarkDone.
// The zero Mark sets MarkTodo; any other value than the three marks is an
// error. The data must parse, because a broken file is better reported than
// edited, and an id without a task line yields an error wrapping
// ErrTaskNotFound that names the id and the file.
func SetTaskMark(path string, data []byte, id string, m Mark) ([]byte, error) {
	if !m.valid() {
		return nil, fmt.Errorf("mark task %s in %s: invalid mark %q: use MarkTodo, MarkInReview or MarkDone", id, displayPath(path), string(m))
	}
	if m == "" {
		m = MarkTodo
	}
	tasks, markOffsets, err := parseTasksMD(path, data)
	if err != nil {
		return nil, err
	}
	for i := range tasks {
		if tasks[i].ID != id {
			continue
		}
		updated := bytes.Clone(data)
		if at := markOffsets[i]; !(m == MarkDone && updated[at] == 'X') {
			updated[at] = m[0]
		}
		return updated, nil
	}
	return nil, fmt.Errorf("%s: %w %q: no task line has that id; %s", displayPath(path), ErrTaskNotFound, id, knownIDs(tasks))
}

// AppendTasks returns a copy of the tasks.md data with the task lines of add,
// each followed by its criteria, appended at the end. When data does not end
// with a newline one is added first, so the last line of data stays a line of
// its own. The appended lines end like the first line of data: "\r\n" when
// it ends in CRLF, "\n" otherwise. Titles and criteria are written as
// RenderTasksMD writes them, so appending to RenderTasksMD(title, a) gives
// RenderTasksMD(title, a+add). With nothing to add, data is returned as it
// is (copied).
//
// The caller gives the ids (NextTaskID helps); AppendTasks checks neither
// their form nor that they are new, and a file with a duplicate or malformed
// id is refused by ParseTasksMD.
func AppendTasks(data []byte, add []SessionTask) []byte {
	out := bytes.Clone(data)
	if len(add) == 0 {
		return out
	}
	eol := "\n"
	if i := bytes.IndexByte(data, '\n'); i > 0 && data[i-1] == '\r' {
		eol = "\r\n"
	}
	if n := len(out); n > 0 && out[n-1] != '\n' {
		if eol == "\r\n" && out[n-1] == '\r' {
			out = append(out, '\n')
		} else {
			out = append(out, eol...)
		}
	}
	for _, t := range add {
		out = appendTaskLines(out, t, eol)
	}
	return out
}

// NextTaskID returns "task-N" where N is one more than the largest N among
// the ids of the form "task-N" (N in decimal digits, leading zeros allowed)
// in tasks, or "task-1" when there is none. Other ids, and numbers too large
// for an int, are ignored; gaps are not filled, so an id that was once given
// out is not reused while a higher one exists.
func NextTaskID(tasks []SessionTask) string {
	largest := 0
	for _, t := range tasks {
		digits, ok := strings.CutPrefix(t.ID, "task-")
		if !ok || digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
			continue
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n == math.MaxInt {
			continue
		}
		largest = max(largest, n)
	}
	return "task-" + strconv.Itoa(largest+1)
}

// parseTasksMD does the work of ParseTasksMD in a single pass over the lines
// and additionally returns, per task, the byte offset in data of the task
// line's mark character, so SetTaskMark can change it without re-deriving
// the layout.
func parseTasksMD(path string, data []byte) ([]SessionTask, []int, error) {
	if err := inputlimit.CheckSize(displayPath(path), data); err != nil {
		return nil, nil, err
	}
	if !utf8.Valid(data) {
		err := invalidUTF8Error(path, data)
		err.Hint = "save the tasks file as UTF-8 text"
		return nil, nil, err
	}
	text := string(data)

	var (
		tasks       []SessionTask
		markOffsets []int
		lineByID    = make(map[string]int)
		// inCriteria is set while the lines since the last task line have
		// all been its criteria, so the next item still belongs to it.
		inCriteria bool
	)
	for l := range markdownLines(text) {
		lineNo, lineStart, line := l.No, l.Start, l.Text

		if strings.HasPrefix(line, "- [") {
			task, problemAt, problem := matchTaskLine(line)
			if problem != "" {
				return nil, nil, &ParseError{
					Path:   path,
					Line:   lineNo,
					Column: utf8.RuneCountInString(line[:problemAt]) + 1,
					Msg:    fmt.Sprintf("malformed task line %q: want %q", trimTrailingSpace(line), taskLineExample),
					Hint:   problem,
				}
			}
			if firstLine, seen := lineByID[task.ID]; seen {
				return nil, nil, &ParseError{
					Path: path,
					Line: lineNo,
					Msg:  fmt.Sprintf("duplicate task id %s: line %d already defines a task with this id", task.ID, firstLine),
					Hint: "give every task its own id",
				}
			}
			lineByID[task.ID] = lineNo
			task.Line = lineNo
			tasks = append(tasks, task)
			// The mark sits right after "- [".
			markOffsets = append(markOffsets, lineStart+len("- ["))
			inCriteria = true
			continue
		}
		if inCriteria {
			if criterion, ok := matchTaskCriterion(line); ok {
				last := &tasks[len(tasks)-1]
				last.Criteria = append(last.Criteria, criterion)
				continue
			}
		}
		inCriteria = false
	}
	return tasks, markOffsets, nil
}

// matchTaskLine parses line, which starts with "- [" and has no line ending,
// against `^- \[( |P|x|X)\][ \t]+ID:[ \t]+(\S.*)$` with ID as in SessionTask.
// On mismatch it returns the byte offset in line where the first deviation
// is and a problem describing it as advice, because a precise hint fixes a
// typo faster than a pattern does.
func matchTaskLine(line string) (task SessionTask, problemAt int, problem string) {
	const markAt = len("- [")
	rest := line[markAt:]
	if len(rest) < 2 || rest[1] != ']' {
		return SessionTask{}, markAt, `the mark must be one character between brackets: "[ ]" (to do), "[P]" (in review) or "[x]" (done)` + notATaskHint
	}
	switch rest[0] {
	case ' ':
		task.Mark = MarkTodo
	case 'P':
		task.Mark = MarkInReview
	case 'x', 'X':
		task.Mark = MarkDone
	default:
		return SessionTask{}, markAt, `the mark must be "[ ]" (to do), "[P]" (in review) or "[x]" (done)` + notATaskHint
	}
	at := markAt + len(" ]")
	rest = line[at:]
	afterBlanks := trimIndent(rest)
	switch {
	case isBlank(rest):
		return SessionTask{}, at, `write the task id and title after the mark, like "` + taskLineExample + `"` + notATaskHint
	case len(afterBlanks) == len(rest):
		return SessionTask{}, at, "put a space between the mark and the task id"
	}
	at += len(rest) - len(afterBlanks)
	rest = afterBlanks

	idLen := taskIDLength(rest)
	if idLen == 0 {
		return SessionTask{}, at, `the task id must start with a letter or digit and contain only letters, digits, ".", "_" and "-", like task-1` + notATaskHint
	}
	task.ID = rest[:idLen]
	at += idLen
	rest = rest[idLen:]
	switch {
	case isBlank(rest):
		return SessionTask{}, at, fmt.Sprintf(`write ": " and the title after the task id %s`, task.ID)
	case rest[0] != ':':
		return SessionTask{}, at, fmt.Sprintf(`put ": " and the title right after the task id %s`, task.ID)
	}
	at++
	rest = rest[1:]
	// TrimSpace also drops Unicode spaces such as U+00A0, so a title of only
	// those is empty too.
	task.Title = strings.TrimSpace(rest)
	switch {
	case task.Title == "":
		return SessionTask{}, at, fmt.Sprintf("the title after %q is empty", task.ID+":")
	case rest[0] != ' ' && rest[0] != '\t':
		return SessionTask{}, at, fmt.Sprintf("put a space between %q and the title", task.ID+":")
	}
	return task, 0, ""
}

// taskIDLength returns the length of the task id ([A-Za-z0-9][A-Za-z0-9._-]*)
// at the start of s, or 0 when s does not start with one.
func taskIDLength(s string) int {
	if s == "" || !(isASCIILetter(s[0]) || isDigit(s[0])) {
		return 0
	}
	i := 1
	for i < len(s) && (isASCIILetter(s[i]) || isDigit(s[i]) || s[i] == '.' || s[i] == '_' || s[i] == '-') {
		i++
	}
	return i
}

// matchTaskCriterion recognises a criterion line: indentation of at least two
// spaces or a tab, "-", a space or tab, and non-empty text, which it returns
// without surrounding whitespace.
func matchTaskCriterion(line string) (string, bool) {
	s := trimIndent(line)
	indent := line[:len(line)-len(s)]
	if indent == "" || indent == " " {
		return "", false
	}
	if len(s) < 2 || s[0] != '-' || (s[1] != ' ' && s[1] != '\t') {
		return "", false
	}
	text := strings.TrimSpace(s[2:])
	return text, text != ""
}

// appendTaskLines appends the task line of t and its criteria to b, each line
// ending in eol, and returns the extended slice.
func appendTaskLines(b []byte, t SessionTask, eol string) []byte {
	b = append(b, "- "...)
	b = append(b, t.Mark.String()...)
	b = append(b, ' ')
	b = append(b, t.ID...)
	b = append(b, ": "...)
	b = append(b, oneLine(t.Title)...)
	b = append(b, eol...)
	for _, c := range t.Criteria {
		if c = oneLine(c); c == "" {
			continue
		}
		b = append(b, "  - "...)
		b = append(b, c...)
		b = append(b, eol...)
	}
	return b
}

// lineBreaks turns every line ending inside a title or criterion into a
// space. A lone CR is kept: ParseTasksMD ends lines at LF only, so it cannot
// start a line, and keeping it lets such a title survive a round trip.
var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ")

// oneLine returns s as one line of valid UTF-8 without surrounding
// whitespace, the form in which ParseTasksMD returns titles and criteria.
func oneLine(s string) string {
	return strings.TrimSpace(lineBreaks.Replace(strings.ToValidUTF8(s, "\uFFFD")))
}

// displayPath names the file in errors that are not about one of its lines.
func displayPath(path string) string {
	if path == "" {
		return "tasks.md"
	}
	return path
}

// knownIDs tells the user which ids the file has, so a typo in an id is easy
// to spot; a long list is cut short.
func knownIDs(tasks []SessionTask) string {
	const shown = 10
	if len(tasks) == 0 {
		return "the file has no task lines"
	}
	ids := make([]string, 0, min(len(tasks), shown))
	for i := 0; i < len(tasks) && i < shown; i++ {
		ids = append(ids, tasks[i].ID)
	}
	list := strings.Join(ids, ", ")
	if len(tasks) > shown {
		list += fmt.Sprintf(" and %d more", len(tasks)-shown)
	}
	return "the file has " + list
}
