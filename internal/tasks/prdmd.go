package tasks

import (
	"fmt"
	"iter"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

// storyHeadingExample is the canonical story heading shown to users whenever
// they got one wrong, so every message teaches the same shape.
const storyHeadingExample = "### [ ] US-001: Title"

// byteOrderMark is skipped at the start of a file because some editors on
// Windows add it, and it would otherwise hide a story heading on line 1.
const byteOrderMark = "\uFEFF"

// ParseError is a user-facing error about a task file: it names the file,
// line and, where known, column, says what is wrong, and, through Hint, what
// to do about it.
type ParseError struct {
	// Path is the task file; it is empty when the data did not come from a
	// named file.
	Path string
	// Line is the 1-based line the problem is on, or 0 when the problem
	// concerns the whole file.
	Line int
	// Column is the 1-based column, counted in characters, or 0 when
	// unknown. It is only meaningful when Line is set.
	Column int
	// Msg states what is wrong.
	Msg string
	// Hint, when not empty, tells the user how to fix it.
	Hint string
}

// Error formats the error compiler-style as "path:line:column: msg; hint",
// so editors and terminals can jump to the location. The column is left out
// when it is 0, the line when it is 0, and the path is replaced by "line N"
// when it is empty.
func (e *ParseError) Error() string {
	var b strings.Builder
	switch {
	case e.Path != "" && e.Line > 0:
		b.WriteString(e.Path)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
		b.WriteString(": ")
	case e.Path != "":
		b.WriteString(e.Path)
		b.WriteString(": ")
	case e.Line > 0:
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(", column ")
			b.WriteString(strconv.Itoa(e.Column))
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// LoadMarkdown reads and parses the PRD markdown file at path. When the file
// does not exist the returned error wraps fs.ErrNotExist, so callers can offer
// to create it; parse problems are returned as *ParseError.
func LoadMarkdown(path string) (*PRD, error) {
	data, err := inputlimit.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load PRD: %w", err)
	}
	return ParseMarkdown(path, data)
}

// ParseMarkdown parses PRD markdown read from path (used only in errors and
// stored in PRD.Path). Every problem is reported as a *ParseError naming the
// line: invalid UTF-8, a heading that looks like a story but is malformed, a
// duplicate story id, a Depends line naming something that is not a story
// id or no story of the file, a dependency cycle, or a file without any
// story. A returned PRD therefore always has at least one story, unique ids
// and dependencies that can be done in some order.
//
// The strings in the result share one copy of data, so callers may reuse data
// afterwards.
func ParseMarkdown(path string, data []byte) (*PRD, error) {
	prd, _, err := parseMarkdown(path, data)
	return prd, err
}

// SetStoryDone returns a copy of the PRD markdown data in which the checkbox
// of the story heading with the given id is ticked (done) or cleared (not
// done). Exactly one byte may change, so descriptions, criteria, line endings
// (CRLF stays CRLF) and formatting survive; a story that is already in the
// requested state, including "[X]", is left as it is. data itself is never
// modified. The data must parse as a PRD, because an ambiguous or broken file
// is better reported than edited; an id without a story heading yields an
// error wrapping ErrStoryNotFound.
func SetStoryDone(data []byte, id string, done bool) ([]byte, error) {
	heading := func(b markdownBoxes, i int) []int { return []int{b.story[i]} }
	return editBoxes(data, id, heading, func(int) (bool, bool) { return done, true })
}

// CheckCriteria ticks the checkbox of every acceptance criterion of the
// story with the given id, as UncheckCriteria clears them: ralph ticks a
// story's criteria itself when it accepts the story.
func CheckCriteria(data []byte, id string) ([]byte, error) {
	return editBoxes(data, id, markdownBoxes.allCriteriaOf, func(int) (bool, bool) { return true, true })
}

// SetCriteriaMarks sets the checkbox of each acceptance criterion of the
// story with the given id to marks[i] (criteria past the end of marks are
// left as they are), changing only the box characters. ralph uses it to
// keep an agent's ticks on its own story, its claim, when it puts back
// everything else the agent changed in the PRD.
func SetCriteriaMarks(data []byte, id string, marks []bool) ([]byte, error) {
	return editBoxes(data, id, markdownBoxes.allCriteriaOf, func(j int) (bool, bool) {
		if j >= len(marks) {
			return false, false
		}
		return marks[j], true
	})
}

// UncheckCriteria clears the checkbox of every acceptance criterion of the
// story with the given id and returns the new file content; only the box
// character at the start of each ticked criterion changes, so a "[x]" inside
// a criterion's text stays as written. ralph uses it when it reopens a story
// it did not accept, so that marks from the rejected attempt cannot count as
// the next attempt's claim.
func UncheckCriteria(data []byte, id string) ([]byte, error) {
	return editBoxes(data, id, markdownBoxes.allCriteriaOf, func(int) (bool, bool) { return false, true })
}

// editBoxes sets the j-th of story id's boxes (its heading's or its
// criteria's, as boxesOf picks them) to what mark says, when it says to
// (set); an already ticked box keeps its "x" or "X". The data must parse
// as a PRD; only box characters change.
func editBoxes(data []byte, id string, boxesOf func(b markdownBoxes, i int) []int, mark func(j int) (ticked, set bool)) ([]byte, error) {
	prd, boxes, err := parseMarkdown("", data)
	if err != nil {
		return nil, err
	}
	for i := range prd.Stories {
		if prd.Stories[i].ID != id {
			continue
		}
		updated := append([]byte(nil), data...)
		for j, at := range boxesOf(boxes, i) {
			switch ticked, set := mark(j); {
			case !set:
			case !ticked:
				updated[at] = ' '
			case updated[at] == ' ':
				updated[at] = 'x'
			}
		}
		return updated, nil
	}
	return nil, fmt.Errorf("%w %q: no story heading in the PRD has that id", ErrStoryNotFound, id)
}

// markdownBoxes locates the checkbox characters of a parsed PRD, so editors
// change exactly the box they mean and never a "[x]" that is part of a
// title or a criterion's text.
type markdownBoxes struct {
	// story[i] is the offset of story i's heading checkbox character.
	story []int
	// all holds the offsets of every criterion's checkbox character, in
	// file order; allStart[i] is where story i's begin.
	all      []int
	allStart []int
}

// allCriteriaOf returns the offsets of every criterion box of story i.
func (b markdownBoxes) allCriteriaOf(i int) []int {
	end := len(b.all)
	if i+1 < len(b.allStart) {
		end = b.allStart[i+1]
	}
	return b.all[b.allStart[i]:end]
}

// parseMarkdown does the work of ParseMarkdown in a single pass over the
// lines and additionally returns where the checkboxes are, so the editors
// can flip them without re-deriving the layout.
func parseMarkdown(path string, data []byte) (*PRD, markdownBoxes, error) {
	var boxes markdownBoxes
	if err := inputlimit.CheckSize(displayName(path, "PRD"), data); err != nil {
		return nil, boxes, err
	}
	if !utf8.Valid(data) {
		return nil, boxes, invalidUTF8Error(path, data)
	}
	// One conversion up front lets every ID, title, block and criterion be a
	// substring of it instead of an allocation of its own.
	text := string(data)

	// Growing these slices and the map by doubling dominated large parses, so
	// size them from cheap upper-bound estimates: every story heading follows
	// a "\n### " (or starts the file), every criterion contains a "[" and
	// sits on a line of its own.
	maxStories := strings.Count(text, "\n### ") + 1
	maxCriteria := min(strings.Count(text, "["), strings.Count(text, "\n")+1)
	var (
		stories         = make([]Story, 0, maxStories)
		checkboxOffsets = make([]int, 0, maxStories)
		allBoxes        []int
		allBoxStart     = make([]int, 0, maxStories)
		// All criteria live in one backing array; criteriaStart[i] is where
		// story i's criteria begin, and the stories get their sub-slices once
		// the array has stopped growing.
		criteria      = make([]Criterion, 0, maxCriteria)
		criteriaStart = make([]int, 0, maxStories)
		storyLineByID = make(map[string]int, maxStories)
		// deps[i] are story i's Depends references with their positions,
		// for checkGraph. It is made at the first Depends line, so the many
		// PRDs without one pay nothing for it.
		deps [][]depRef

		inStory    bool // a story block is open and collecting lines
		blockStart int  // byte offset of the open story's heading
		blockEnd   int  // byte offset just past the open story's last non-blank line
		fence      codeFence
	)
	closeStory := func() {
		if inStory {
			stories[len(stories)-1].Block = text[blockStart:blockEnd]
			inStory = false
		}
	}

	for l := range markdownLines(text) {
		lineNo, lineStart, line := l.No, l.Start, l.Text
		lineEnd := lineStart + len(line)

		if fence.isOpen() {
			if fence.isClosedBy(line) {
				fence = codeFence{}
			}
			if inStory && !isBlank(line) {
				blockEnd = lineEnd
			}
			continue
		}
		if opened, ok := openingFence(line); ok {
			fence = opened
			fence.line = lineNo
			if inStory {
				blockEnd = lineEnd
			}
			continue
		}

		if len(line) > 0 && line[0] == '#' {
			if isSectionHeading(line) {
				closeStory()
				continue
			}
			if after, ok := strings.CutPrefix(line, "### "); ok && looksLikeStoryHeading(after) {
				heading := trimTrailingSpace(line)
				id, title, done, problem := matchStoryHeading(heading)
				if problem != "" {
					return nil, boxes, &ParseError{
						Path: path,
						Line: lineNo,
						Msg:  fmt.Sprintf("malformed story heading %q: want %q", heading, storyHeadingExample),
						Hint: problem,
					}
				}
				if firstLine, seen := storyLineByID[id]; seen {
					return nil, boxes, &ParseError{
						Path: path,
						Line: lineNo,
						Msg:  fmt.Sprintf("duplicate story id %s: line %d already defines a story with this id", id, firstLine),
						Hint: "give every story its own id",
					}
				}
				storyLineByID[id] = lineNo

				closeStory()
				status := StatusNotStarted
				if done {
					status = StatusComplete
				}
				stories = append(stories, Story{ID: id, Title: title, Done: done, Line: lineNo, Status: status})
				// The checkbox character sits right after "### [".
				checkboxOffsets = append(checkboxOffsets, lineStart+len("### ["))
				criteriaStart = append(criteriaStart, len(criteria))
				allBoxStart = append(allBoxStart, len(allBoxes))
				if deps != nil {
					deps = append(deps, nil)
				}
				inStory = true
				blockStart = lineStart
				blockEnd = lineEnd
				continue
			}
		}

		if !inStory || isBlank(line) {
			continue
		}
		blockEnd = lineEnd
		if value, at, ok := dependsValue(line); ok {
			refs, err := parseDepends(path, lineNo, line, value, at, stories[len(stories)-1].ID)
			if err != nil {
				return nil, boxes, err
			}
			if deps == nil {
				deps = make([][]depRef, len(stories), maxStories)
			}
			deps[len(deps)-1] = append(deps[len(deps)-1], refs...)
			continue
		}
		if criterion, box, ok := matchCriterion(line); ok {
			criterion.Line = lineNo
			criteria = append(criteria, criterion)
			allBoxes = append(allBoxes, lineStart+box)
		}
	}
	closeStory()

	if len(stories) == 0 {
		hint := `stories look like "` + storyHeadingExample + `"`
		if fence.isOpen() {
			hint = fmt.Sprintf("the code fence opened on line %d is never closed, which hides everything after it; %s", fence.line, hint)
		}
		return nil, boxes, &ParseError{Path: path, Msg: "no stories found", Hint: hint}
	}

	if deps != nil {
		for i, refs := range deps {
			for _, r := range refs {
				stories[i].DependsOn = append(stories[i].DependsOn, r.id)
			}
		}
		if err := checkGraph(path, dependsKey, stories, deps); err != nil {
			return nil, boxes, err
		}
	}

	boxes = markdownBoxes{story: checkboxOffsets, all: allBoxes, allStart: allBoxStart}
	for i := range stories {
		first := criteriaStart[i]
		last := len(criteria)
		if i+1 < len(stories) {
			last = criteriaStart[i+1]
		}
		if first < last {
			// The capacity limit keeps an append to one story's criteria
			// from overwriting the next story's.
			stories[i].Criteria = criteria[first:last:last]
		}
	}
	return &PRD{Path: path, Stories: stories}, boxes, nil
}

// invalidUTF8Error locates the first invalid byte so the user can find it in
// an editor, which usually shows it as a replacement character.
func invalidUTF8Error(path string, data []byte) *ParseError {
	offset := 0
	for offset < len(data) {
		r, size := utf8.DecodeRune(data[offset:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		offset += size
	}
	line, lineStart := 1, 0
	for i, b := range data[:offset] {
		if b == '\n' {
			line++
			lineStart = i + 1
		}
	}
	return &ParseError{
		Path: path,
		Line: line,
		Msg:  fmt.Sprintf("invalid UTF-8: byte 0x%02x at column %d", data[offset], offset-lineStart+1),
		Hint: "save the PRD as UTF-8 text",
	}
}

// isSectionHeading reports whether line is a level 1 or 2 ATX heading, which
// ends the current story block: stories are level 3, so a higher-level
// heading starts a new part of the document.
func isSectionHeading(line string) bool {
	level := 0
	for level < len(line) && line[level] == '#' {
		level++
	}
	if level == 0 || level > 2 {
		return false
	}
	rest := line[level:]
	return rest == "" || rest[0] == ' ' || rest[0] == '\t'
}

// looksLikeStoryHeading reports whether the text after "### " was meant to be
// a story heading: it starts with a checkbox or an id-like token such as
// "US-1". Such headings must be well-formed, because silently treating a
// mistyped story as description text would make the loop skip it.
func looksLikeStoryHeading(afterHashes string) bool {
	s := trimIndent(afterHashes)
	if strings.HasPrefix(s, "[") {
		return true
	}
	letters := 0
	for letters < len(s) && isASCIILetter(s[letters]) {
		letters++
	}
	return letters > 0 && len(s) > letters+1 && s[letters] == '-' && isDigit(s[letters+1])
}

// matchStoryHeading parses heading, a line starting with "### " whose
// trailing whitespace is already removed, against
// `^### \[( |x|X)\] ([A-Z][A-Z0-9]*-[0-9]+): (\S.*)$`. On mismatch it returns
// a problem describing the first deviation as advice, because a precise hint
// fixes a typo faster than a pattern does.
func matchStoryHeading(heading string) (id, title string, done bool, problem string) {
	rest := heading[len("### "):]
	if !strings.HasPrefix(rest, "[") {
		return "", "", false, `start the heading with a checkbox: "### [ ] " for a pending story, "### [x] " for a done one`
	}
	if len(rest) < 3 || rest[2] != ']' || (rest[1] != ' ' && rest[1] != 'x' && rest[1] != 'X') {
		return "", "", false, `the checkbox must be "[ ]" (pending) or "[x]" (done)`
	}
	done = rest[1] != ' '
	rest = rest[3:]
	if !strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "  ") {
		return "", "", false, "put exactly one space between the checkbox and the story id"
	}
	rest = rest[1:]

	idLen := storyIDLength(rest)
	if idLen == 0 {
		return "", "", false, "the story id must be an uppercase prefix, a dash and digits, like US-001 or BUG-7"
	}
	id, rest = rest[:idLen], rest[idLen:]
	switch {
	case rest == ":":
		return "", "", false, fmt.Sprintf("the title after %q is empty", id+":")
	case !strings.HasPrefix(rest, ": "):
		return "", "", false, fmt.Sprintf(`put ": " and the title right after the story id %s`, id)
	}
	title = rest[len(": "):]
	if isBlank(title[:1]) {
		return "", "", false, fmt.Sprintf(`put exactly one space between %q and the title`, id+":")
	}
	return id, title, done, ""
}

// storyIDLength returns the length of the story id ([A-Z][A-Z0-9]*-[0-9]+)
// at the start of s, or 0 when s does not start with one.
func storyIDLength(s string) int {
	if s == "" || !isUpper(s[0]) {
		return 0
	}
	i := 1
	for i < len(s) && (isUpper(s[i]) || isDigit(s[i])) {
		i++
	}
	if i >= len(s) || s[i] != '-' {
		return 0
	}
	i++
	digitsStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == digitsStart {
		return 0
	}
	return i
}

// matchCriterion recognises a GitHub task-list item ("- [ ] text", with "-",
// "*" or "+" as marker, any indentation, and non-empty text) and returns
// the offset in line of its box character, the one between the brackets. A
// bare "- [ ]" is not a criterion because there is nothing for an agent to
// satisfy.
func matchCriterion(line string) (c Criterion, box int, ok bool) {
	s := trimIndent(line)
	if len(s) < 2 || (s[0] != '-' && s[0] != '*' && s[0] != '+') || (s[1] != ' ' && s[1] != '\t') {
		return Criterion{}, 0, false
	}
	s = trimIndent(s[1:])
	if len(s) < 4 || s[0] != '[' || s[2] != ']' || (s[3] != ' ' && s[3] != '\t') {
		return Criterion{}, 0, false
	}
	box = len(line) - len(s) + 1
	var done bool
	switch s[1] {
	case ' ':
	case 'x', 'X':
		done = true
	default:
		return Criterion{}, 0, false
	}
	text := strings.TrimSpace(s[4:])
	if text == "" {
		return Criterion{}, 0, false
	}
	text, verify := splitVerify(text)
	return Criterion{Text: text, Done: done, Verify: verify}, box, true
}

// dependsKey names the Depends line in graph errors ("fix the id in Depends
// or add the missing story").
const dependsKey = "Depends"

// dependsExample is the Depends line shown to users who got one wrong.
const dependsExample = "Depends: US-001, US-002"

// dependsValue recognises a story's Depends line and returns the text after
// its colon and that text's byte offset in line. The key is "Depends" or
// "Depends on" in any case, optionally indented, after a list marker, or
// in bold ("**Depends on:** US-001"), because that is how people and agents
// write such a line in a PRD; anything else is description text.
func dependsValue(line string) (value string, at int, ok bool) {
	s := trimIndent(line)
	if len(s) >= 2 && (s[0] == '-' || s[0] == '*' || s[0] == '+') && (s[1] == ' ' || s[1] == '\t') {
		s = trimIndent(s[1:])
	}
	// Cheap first test: most lines of a PRD start with some other letter.
	if s == "" || (s[0]|0x20 != 'd' && s[0] != '*' && s[0] != '_') {
		return "", 0, false
	}
	colon := strings.IndexByte(s, ':')
	if colon < 0 {
		return "", 0, false
	}
	key := strings.Fields(strings.Trim(s[:colon], "*_ \t"))
	switch {
	case len(key) == 1 && strings.EqualFold(key[0], "depends"):
	case len(key) == 2 && strings.EqualFold(key[0], "depends") && strings.EqualFold(key[1], "on"):
	default:
		return "", 0, false
	}
	// "**Depends:** US-001" closes the bold after the colon.
	value = strings.TrimLeft(s[colon+1:], "*_")
	return value, len(line) - len(value), true
}

// parseDepends reads the story ids of a Depends line: ids separated by
// commas and/or blanks. An empty list and "none" mean no dependencies. Any
// other word is an error rather than description text, because ignoring a
// dependency someone meant would let the story start too early.
func parseDepends(path string, lineNo int, line, value string, at int, storyID string) ([]depRef, error) {
	if strings.EqualFold(strings.TrimSpace(value), "none") {
		return nil, nil
	}
	var refs []depRef
	for i := 0; i < len(value); {
		c := value[i]
		if c == ',' || c == ' ' || c == '\t' || c == '\r' {
			i++
			continue
		}
		end := i
		for end < len(value) && value[end] != ',' && value[end] != ' ' && value[end] != '\t' && value[end] != '\r' {
			end++
		}
		tok := value[i:end]
		col := utf8.RuneCountInString(line[:at+i]) + 1
		if storyIDLength(tok) != len(tok) {
			return nil, &ParseError{
				Path: path, Line: lineNo, Column: col,
				Msg:  fmt.Sprintf("story %s: %q in its Depends line is not a story id", storyID, tok),
				Hint: fmt.Sprintf("list the ids of stories in this PRD, like %q, or reword the line so that it does not start with \"Depends:\"", dependsExample),
			}
		}
		refs = append(refs, depRef{id: tok, at: position{line: lineNo, col: col}})
		i = end
	}
	return refs, nil
}

// verifyMarker opens the acceptance command suffix of a markdown criterion.
const verifyMarker = "(verify:"

// markdownLine is one line of a task file.
type markdownLine struct {
	No    int    // 1-based line number
	Start int    // byte offset of the line in the text
	Text  string // the line without its "\n" or "\r\n" ending
}

// markdownLines yields the lines of text in order, after a leading
// byte-order mark. A last line without an ending is yielded too.
func markdownLines(text string) iter.Seq[markdownLine] {
	return func(yield func(markdownLine) bool) {
		pos := 0
		if strings.HasPrefix(text, byteOrderMark) {
			pos = len(byteOrderMark)
		}
		for no := 1; pos < len(text); no++ {
			start := pos
			line := text[pos:]
			if newline := strings.IndexByte(line, '\n'); newline >= 0 {
				line = line[:newline]
				pos += newline + 1
			} else {
				pos = len(text)
			}
			if !yield(markdownLine{No: no, Start: start, Text: strings.TrimSuffix(line, "\r")}) {
				return
			}
		}
	}
}

// splitVerify separates a trailing "(verify: `command`)" from a criterion's
// text. The command is a code span, so it may contain parentheses, and a
// command containing backticks can be delimited by a longer backtick run, as
// in CommonMark. Text that does not end in a well-formed suffix is returned
// unchanged with no command, so a criterion that merely mentions "(verify:"
// keeps its words. When the suffix is the whole text, the text is kept as it
// is, because a criterion's text is never empty.
func splitVerify(text string) (rest, verify string) {
	if !strings.HasSuffix(text, ")") {
		return text, ""
	}
	for at := strings.LastIndex(text, verifyMarker); at >= 0; at = strings.LastIndex(text[:at], verifyMarker) {
		// A command may itself contain "(verify:", so an earlier marker is
		// tried when the text after this one is not a lone code span.
		cmd, ok := parseCodeSpan(text[at+len(verifyMarker) : len(text)-1])
		if !ok {
			continue
		}
		if rest = strings.TrimSpace(text[:at]); rest == "" {
			return text, cmd
		}
		return rest, cmd
	}
	return text, ""
}

// parseCodeSpan parses s, after trimming blanks, as exactly one code span:
// a run of n backticks, content without a run of exactly n backticks, and a
// closing run of n. It returns the trimmed content, which must not be empty.
func parseCodeSpan(s string) (string, bool) {
	s = strings.TrimSpace(s)
	n := markerRun(s, '`')
	if n == 0 || len(s) < 2*n+1 {
		return "", false
	}
	inner := s[n : len(s)-n]
	if s[len(s)-n:] != s[:n] || strings.HasSuffix(inner, "`") || hasBacktickRun(inner, n) {
		return "", false
	}
	inner = strings.TrimSpace(inner)
	return inner, inner != ""
}

// hasBacktickRun reports whether s contains a run of exactly n backticks,
// which would close a code span opened by n backticks.
func hasBacktickRun(s string, n int) bool {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		run := markerRun(s[i:], '`')
		if run == n {
			return true
		}
		i += run
	}
	return false
}

// codeFence is the fenced code block the scanner is inside; its zero value
// means "not inside one".
type codeFence struct {
	marker byte // '`' or '~'
	length int  // the closing fence needs at least this many markers
	line   int  // 1-based line of the opening fence, for error hints
}

func (f codeFence) isOpen() bool { return f.length > 0 }

// openingFence recognises a line that opens a fenced code block: at least
// three backticks or tildes after optional indentation. As in CommonMark, a
// backtick fence's info string may not contain backticks, which keeps inline
// code like ```x``` from swallowing the rest of the file.
func openingFence(line string) (codeFence, bool) {
	s := trimIndent(line)
	if len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return codeFence{}, false
	}
	marker := s[0]
	n := markerRun(s, marker)
	if n < 3 || (marker == '`' && strings.IndexByte(s[n:], '`') >= 0) {
		return codeFence{}, false
	}
	return codeFence{marker: marker, length: n}, true
}

// isClosedBy reports whether line closes the fence: only the fence's marker,
// at least as many as opened it, and nothing but whitespace after them.
func (f codeFence) isClosedBy(line string) bool {
	s := trimIndent(line)
	n := markerRun(s, f.marker)
	return n >= f.length && isBlank(s[n:])
}

func markerRun(s string, marker byte) int {
	n := 0
	for n < len(s) && s[n] == marker {
		n++
	}
	return n
}

// trimIndent drops leading spaces and tabs; it is hand-written because
// strings.TrimLeft builds a character set on every call, which showed up in
// profiles of large PRDs.
func trimIndent(s string) string {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return s[i:]
}

// trimTrailingSpace drops trailing whitespace, including a CR left over from
// a "\r\r\n" ending, without strings.TrimRight's per-call set construction.
func trimTrailingSpace(s string) string {
	end := len(s)
	for end > 0 && isBlank(s[end-1:end]) {
		end--
	}
	return s[:end]
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\r', '\f', '\v':
		default:
			return false
		}
	}
	return true
}

func isUpper(c byte) bool       { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool       { return '0' <= c && c <= '9' }
func isASCIILetter(c byte) bool { return isUpper(c) || ('a' <= c && c <= 'z') }
