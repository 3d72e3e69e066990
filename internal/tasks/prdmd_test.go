package tasks

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// lines joins its arguments into LF-terminated file content, so test inputs
// read line by line and their line numbers are easy to count.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// crlf converts LF-terminated content to CRLF, as a Windows editor saves it.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

var examplePRD = lines(
	"# PRD: Something", //  1
	"",                 //  2
	"Some intro text.", //  3
	"- [ ] intro task lists are not criteria", //  4
	"",                               //  5
	"### [ ] US-001: Story Title",    //  6
	"Free text description lines...", //  7
	"- [ ] Acceptance criterion 1",   //  8
	"- [x] Acceptance criterion 2",   //  9
	"",                               // 10
	"### [x] US-002: Another story",  // 11
	"- [x] Criterion",                // 12
	"",                               // 13
	"## Notes",                       // 14
	"",                               // 15
	"- [ ] section task lists are not criteria", // 16
	"### [X] BUG-7: Fix crash   ",               // 17
	"  * [ ] indented star item",                // 18
	"### Notes",                                 // 19
	"Not a story heading, so part of BUG-7.",    // 20
	"",                                          // 21
	"",                                          // 22
)

func mustParse(t *testing.T, data string) *PRD {
	t.Helper()
	prd, err := ParseMarkdown("prd.md", []byte(data))
	if err != nil {
		t.Fatalf("ParseMarkdown: unexpected error: %v", err)
	}
	return prd
}

func TestParseMarkdownExample(t *testing.T) {
	prd := mustParse(t, examplePRD)
	want := []Story{
		{
			ID: "US-001", Title: "Story Title", Done: false, Line: 6, Status: StatusNotStarted,
			// The block stops before the next story heading and drops the
			// blank line in between.
			Block: "### [ ] US-001: Story Title\nFree text description lines...\n- [ ] Acceptance criterion 1\n- [x] Acceptance criterion 2",
			Criteria: []Criterion{
				{Text: "Acceptance criterion 1", Done: false, Line: 8},
				{Text: "Acceptance criterion 2", Done: true, Line: 9},
			},
		},
		{
			ID: "US-002", Title: "Another story", Done: true, Line: 11, Status: StatusComplete,
			// The block stops before the "## Notes" section.
			Block:    "### [x] US-002: Another story\n- [x] Criterion",
			Criteria: []Criterion{{Text: "Criterion", Done: true, Line: 12}},
		},
		{
			ID: "BUG-7", Title: "Fix crash", Done: true, Line: 17, Status: StatusComplete,
			// Trailing whitespace of the heading is part of the file and
			// stays in the block, but not in the title.
			Block:    "### [X] BUG-7: Fix crash   \n  * [ ] indented star item\n### Notes\nNot a story heading, so part of BUG-7.",
			Criteria: []Criterion{{Text: "indented star item", Done: false, Line: 18}},
		},
	}
	if prd.Path != "prd.md" {
		t.Errorf("Path = %q, want %q", prd.Path, "prd.md")
	}
	if len(prd.Stories) != len(want) {
		t.Fatalf("got %d stories, want %d: %+v", len(prd.Stories), len(want), prd.Stories)
	}
	for i := range want {
		if !reflect.DeepEqual(prd.Stories[i], want[i]) {
			t.Errorf("story %d:\n got %+v\nwant %+v", i, prd.Stories[i], want[i])
		}
	}
}

func TestNextAndRemaining(t *testing.T) {
	tests := []struct {
		name          string
		prd           string
		wantNext      string // "" when no story is left
		wantRemaining int
	}{
		{
			name:          "first story pending",
			prd:           lines("### [ ] US-001: A", "### [ ] US-002: B"),
			wantNext:      "US-001",
			wantRemaining: 2,
		},
		{
			name:          "skips done stories and picks the first pending in file order",
			prd:           lines("### [x] US-003: C", "### [X] US-001: A", "### [ ] US-010: J", "### [ ] US-002: B"),
			wantNext:      "US-010",
			wantRemaining: 2,
		},
		{
			name:          "ticked criteria do not finish a pending story",
			prd:           lines("### [ ] US-001: A", "- [x] all", "- [x] done", "### [ ] US-002: B"),
			wantNext:      "US-001",
			wantRemaining: 2,
		},
		{
			name:          "everything done",
			prd:           lines("### [x] US-001: A", "- [ ] forgotten criterion", "### [x] US-002: B"),
			wantNext:      "",
			wantRemaining: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prd := mustParse(t, tt.prd)
			next, ok := prd.Next()
			if ok != (tt.wantNext != "") || next.ID != tt.wantNext {
				t.Errorf("Next() = %q, %v; want %q, %v", next.ID, ok, tt.wantNext, tt.wantNext != "")
			}
			if got := prd.Remaining(); got != tt.wantRemaining {
				t.Errorf("Remaining() = %d, want %d", got, tt.wantRemaining)
			}
		})
	}
}

func TestFind(t *testing.T) {
	prd := mustParse(t, examplePRD)
	tests := []struct {
		id        string
		wantFound bool
		wantTitle string
	}{
		{id: "US-002", wantFound: true, wantTitle: "Another story"},
		{id: "BUG-7", wantFound: true, wantTitle: "Fix crash"},
		{id: "us-002", wantFound: false},
		{id: "US-2", wantFound: false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			story, ok := prd.Find(tt.id)
			if ok != tt.wantFound || story.Title != tt.wantTitle {
				t.Errorf("Find(%q) = %q, %v; want %q, %v", tt.id, story.Title, ok, tt.wantTitle, tt.wantFound)
			}
		})
	}
}

func TestParseMarkdownValidationErrors(t *testing.T) {
	valid := "### [ ] US-001: Valid story" // always line 3 below
	tests := []struct {
		name        string
		data        string
		wantLine    int
		wantPhrases []string
	}{
		{
			name:        "invalid UTF-8 reports the line of the first bad byte",
			data:        lines("# PRD", "", valid, "ok line", "bad \xff byte", "worse \xfe"),
			wantLine:    5,
			wantPhrases: []string{"prd.md:5: ", "invalid UTF-8", "column 5", "save the PRD as UTF-8"},
		},
		{
			name:        "no stories",
			data:        lines("# PRD: Empty", "", "Intro only.", "### Notes", "- [ ] a task list but no story"),
			wantLine:    0,
			wantPhrases: []string{"prd.md: no stories found", `stories look like "### [ ] US-001: Title"`},
		},
		{
			name:        "empty file",
			data:        "",
			wantLine:    0,
			wantPhrases: []string{"no stories found"},
		},
		{
			name:        "no stories because a code fence is never closed",
			data:        lines("# PRD", "```", "### [ ] US-001: Hidden"),
			wantLine:    0,
			wantPhrases: []string{"no stories found", "code fence opened on line 2 is never closed"},
		},
		{
			name:        "id runs into the title",
			data:        lines("# PRD", "", valid, "", "### [ ] US-1Title"),
			wantLine:    5,
			wantPhrases: []string{`prd.md:5: malformed story heading "### [ ] US-1Title": want "### [ ] US-001: Title"`, `put ": " and the title right after the story id US-1`},
		},
		{
			name:        "unknown checkbox mark",
			data:        lines("# PRD", "", valid, "", "### [y] US-001: T"),
			wantLine:    5,
			wantPhrases: []string{"malformed story heading", `the checkbox must be "[ ]" (pending) or "[x]" (done)`},
		},
		{
			name:        "missing checkbox",
			data:        lines("# PRD", "", valid, "", "### US-002: Title"),
			wantLine:    5,
			wantPhrases: []string{"malformed story heading", "start the heading with a checkbox"},
		},
		{
			name:        "no space after checkbox",
			data:        lines("# PRD", "", valid, "", "### [ ]US-002: T"),
			wantLine:    5,
			wantPhrases: []string{"malformed story heading", "one space between the checkbox and the story id"},
		},
		{
			name:        "empty title",
			data:        lines("# PRD", "", valid, "", "### [ ] US-002:   "),
			wantLine:    5,
			wantPhrases: []string{`malformed story heading "### [ ] US-002:"`, `the title after "US-002:" is empty`},
		},
		{
			name:        "lowercase id",
			data:        lines("# PRD", "", valid, "", "### [ ] us-002: lower"),
			wantLine:    5,
			wantPhrases: []string{"malformed story heading", "uppercase prefix, a dash and digits"},
		},
		{
			name:        "two spaces before the title",
			data:        lines("# PRD", "", valid, "", "### [x] US-002:  Title"),
			wantLine:    5,
			wantPhrases: []string{"malformed story heading", `exactly one space between "US-002:" and the title`},
		},
		{
			name:        "malformed heading before any valid story",
			data:        lines("# PRD", "### [ ] US-001 Title"),
			wantLine:    2,
			wantPhrases: []string{"prd.md:2: malformed story heading"},
		},
		{
			name:        "duplicate id names both lines",
			data:        lines("# PRD", "", valid, "text", "### [x] US-002: Other", "### [x] US-001: Again"),
			wantLine:    6,
			wantPhrases: []string{"prd.md:6: duplicate story id US-001", "line 3 already defines", "give every story its own id"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prd, err := ParseMarkdown("prd.md", []byte(tt.data))
			if err == nil {
				t.Fatalf("ParseMarkdown succeeded with %d stories, want an error", len(prd.Stories))
			}
			var parseErr *ParseError
			if !errors.As(err, &parseErr) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if parseErr.Line != tt.wantLine || parseErr.Path != "prd.md" {
				t.Errorf("error at %s:%d, want prd.md:%d (%v)", parseErr.Path, parseErr.Line, tt.wantLine, err)
			}
			for _, phrase := range tt.wantPhrases {
				if !strings.Contains(err.Error(), phrase) {
					t.Errorf("error %q does not contain %q", err, phrase)
				}
			}
		})
	}
}

func TestHeadingsThatAreNotStoriesStayInTheBlock(t *testing.T) {
	data := lines(
		"### [ ] US-001: First",
		"### Notes",
		"### Technical details",
		"#### [ ] US-9 deeper headings are never stories",
		"###Tight heading",
		"### [ ] US-002: Second",
	)
	prd := mustParse(t, data)
	if len(prd.Stories) != 2 {
		t.Fatalf("got %d stories, want 2", len(prd.Stories))
	}
	wantBlock := "### [ ] US-001: First\n### Notes\n### Technical details\n#### [ ] US-9 deeper headings are never stories\n###Tight heading"
	if prd.Stories[0].Block != wantBlock {
		t.Errorf("Block = %q, want %q", prd.Stories[0].Block, wantBlock)
	}
}

func TestFencedCodeBlocksAreIgnored(t *testing.T) {
	data := lines(
		"# PRD",                                //  1
		"```md",                                //  2
		"### [ ] US-100: example in the intro", //  3
		"```",                                  //  4
		"### [ ] US-001: Document the format",  //  5
		"Example:",                             //  6
		"````markdown",                         //  7
		"### [ ] US-999: not a story",          //  8
		"- [ ] not a criterion",                //  9
		"## not a section",                     // 10
		"### US-1 quoted malformed heading",    // 11
		"```",                                  // 12
		"still inside: the fence needs four backticks to close", // 13
		"````",                             // 14
		"- [ ] real criterion",             // 15
		"  ~~~",                            // 16
		"  - [x] indented fence content",   // 17
		"  ~~~",                            // 18
		"- [x] second real criterion",      // 19
		"### [x] US-002: After the fences", // 20
	)
	prd := mustParse(t, data)
	var ids []string
	for _, s := range prd.Stories {
		ids = append(ids, s.ID)
	}
	if want := []string{"US-001", "US-002"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("story ids = %v, want %v", ids, want)
	}
	wantCriteria := []Criterion{
		{Text: "real criterion", Done: false, Line: 15},
		{Text: "second real criterion", Done: true, Line: 19},
	}
	if got := prd.Stories[0].Criteria; !reflect.DeepEqual(got, wantCriteria) {
		t.Errorf("criteria = %+v, want %+v", got, wantCriteria)
	}
	wantBlock := strings.Join(strings.Split(data, "\n")[4:19], "\n")
	if got := prd.Stories[0].Block; got != wantBlock {
		t.Errorf("Block = %q, want %q", got, wantBlock)
	}
}

func TestCriterionLineFormats(t *testing.T) {
	tests := []struct {
		line     string
		wantText string // "" when the line is not a criterion
		wantDone bool
	}{
		{line: "- [ ] dash pending", wantText: "dash pending"},
		{line: "- [x] dash done", wantText: "dash done", wantDone: true},
		{line: "- [X] capital X", wantText: "capital X", wantDone: true},
		{line: "* [ ] star", wantText: "star"},
		{line: "+ [x] plus", wantText: "plus", wantDone: true},
		{line: "    - [ ] indented", wantText: "indented"},
		{line: "\t* [x] tab indented  ", wantText: "tab indented", wantDone: true},
		{line: "- [ ]", wantText: ""},
		{line: "- [ ]    ", wantText: ""},
		{line: "-[ ] no space after marker", wantText: ""},
		{line: "- [y] odd mark", wantText: ""},
		{line: "- [ ]no space after box", wantText: ""},
		{line: "- plain bullet", wantText: ""},
		{line: "1. [ ] numbered", wantText: ""},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			prd := mustParse(t, lines("### [ ] US-001: T", tt.line))
			criteria := prd.Stories[0].Criteria
			if tt.wantText == "" {
				if len(criteria) != 0 {
					t.Errorf("line %q parsed as criterion %+v, want none", tt.line, criteria)
				}
				return
			}
			want := []Criterion{{Text: tt.wantText, Done: tt.wantDone, Line: 2}}
			if !reflect.DeepEqual(criteria, want) {
				t.Errorf("criteria = %+v, want %+v", criteria, want)
			}
		})
	}
}

func TestBlockTrimsTrailingBlankLines(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		wantBlock string
	}{
		{
			name:      "whitespace-only lines before the next story",
			data:      lines("### [ ] US-001: A", "body", "   ", "\t", "", "### [ ] US-002: B"),
			wantBlock: "### [ ] US-001: A\nbody",
		},
		{
			name:      "file without final newline",
			data:      "### [ ] US-001: A\nlast line",
			wantBlock: "### [ ] US-001: A\nlast line",
		},
		{
			name:      "blank lines inside the block are kept",
			data:      lines("### [ ] US-001: A", "one", "", "two", "", ""),
			wantBlock: "### [ ] US-001: A\none\n\ntwo",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prd := mustParse(t, tt.data)
			if got := prd.Stories[0].Block; got != tt.wantBlock {
				t.Errorf("Block = %q, want %q", got, tt.wantBlock)
			}
		})
	}
}

func TestParseMarkdownCRLF(t *testing.T) {
	prd := mustParse(t, crlf(examplePRD))
	if len(prd.Stories) != 3 {
		t.Fatalf("got %d stories, want 3", len(prd.Stories))
	}
	first := prd.Stories[0]
	if first.ID != "US-001" || first.Title != "Story Title" || first.Line != 6 {
		t.Errorf("first story = %q %q line %d, want US-001 \"Story Title\" line 6", first.ID, first.Title, first.Line)
	}
	wantCriteria := []Criterion{
		{Text: "Acceptance criterion 1", Done: false, Line: 8},
		{Text: "Acceptance criterion 2", Done: true, Line: 9},
	}
	if !reflect.DeepEqual(first.Criteria, wantCriteria) {
		t.Errorf("criteria = %+v, want %+v", first.Criteria, wantCriteria)
	}
	wantBlock := "### [ ] US-001: Story Title\r\nFree text description lines...\r\n- [ ] Acceptance criterion 1\r\n- [x] Acceptance criterion 2"
	if first.Block != wantBlock {
		t.Errorf("Block = %q, want %q", first.Block, wantBlock)
	}
	if got := prd.Stories[2].Title; got != "Fix crash" {
		t.Errorf("title with trailing spaces and CR = %q, want %q", got, "Fix crash")
	}
}

func TestParseMarkdownSkipsByteOrderMark(t *testing.T) {
	prd := mustParse(t, "\uFEFF### [ ] US-001: First\n")
	if len(prd.Stories) != 1 || prd.Stories[0].ID != "US-001" || prd.Stories[0].Line != 1 {
		t.Fatalf("stories = %+v, want US-001 on line 1", prd.Stories)
	}
	if got := prd.Stories[0].Block; got != "### [ ] US-001: First" {
		t.Errorf("Block = %q, want the heading without the byte order mark", got)
	}
}

func TestSetStoryDone(t *testing.T) {
	doc := lines(
		"# PRD",
		"",
		"### [ ] US-001: First   ",
		"- [ ] criterion stays unticked",
		"",
		"### [X] US-002: Second",
		"```",
		"### [ ] US-003: quoted, not a story",
		"```",
		"### [x] US-003: Third",
	)
	tests := []struct {
		name string
		data string
		id   string
		done bool
		want string
	}{
		{
			name: "tick a pending story",
			data: doc, id: "US-001", done: true,
			want: strings.Replace(doc, "### [ ] US-001", "### [x] US-001", 1),
		},
		{
			name: "untick a done story, ignoring a quoted heading with the same id",
			data: doc, id: "US-003", done: false,
			want: strings.Replace(doc, "### [x] US-003", "### [ ] US-003", 1),
		},
		{
			name: "untick a capital X",
			data: doc, id: "US-002", done: false,
			want: strings.Replace(doc, "### [X] US-002", "### [ ] US-002", 1),
		},
		{
			name: "ticking a done story keeps its capital X",
			data: doc, id: "US-002", done: true,
			want: doc,
		},
		{
			name: "CRLF file stays CRLF",
			data: crlf(doc), id: "US-001", done: true,
			want: crlf(strings.Replace(doc, "### [ ] US-001", "### [x] US-001", 1)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := []byte(tt.data)
			got, err := SetStoryDone(input, tt.id, tt.done)
			if err != nil {
				t.Fatalf("SetStoryDone: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("SetStoryDone result:\n%q\nwant:\n%q", got, tt.want)
			}
			if string(input) != tt.data {
				t.Errorf("SetStoryDone modified its input")
			}
			prd := mustParse(t, string(got))
			if story, _ := prd.Find(tt.id); story.Done != tt.done {
				t.Errorf("after SetStoryDone, story %s Done = %v, want %v", tt.id, story.Done, tt.done)
			}
		})
	}
}

func TestSetStoryDoneErrors(t *testing.T) {
	t.Run("unknown id", func(t *testing.T) {
		data := []byte(lines("### [ ] US-001: First", "```", "### [ ] US-404: quoted", "```"))
		_, err := SetStoryDone(data, "US-404", true)
		if !errors.Is(err, ErrStoryNotFound) {
			t.Fatalf("error = %v, want one wrapping ErrStoryNotFound", err)
		}
		if !strings.Contains(err.Error(), `"US-404"`) {
			t.Errorf("error %q does not name the id", err)
		}
	})
	t.Run("ambiguous file is not edited", func(t *testing.T) {
		data := []byte(lines("### [ ] US-001: First", "### [ ] US-001: Copy"))
		_, err := SetStoryDone(data, "US-001", true)
		var parseErr *ParseError
		if !errors.As(err, &parseErr) || parseErr.Line != 2 {
			t.Fatalf("error = %v, want a *ParseError on line 2", err)
		}
	})
}

func TestLoadMarkdown(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadMarkdown(filepath.Join(dir, "missing.md"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("error = %v, want one wrapping fs.ErrNotExist", err)
		}
	})
	t.Run("existing file", func(t *testing.T) {
		path := filepath.Join(dir, "prd.md")
		if err := os.WriteFile(path, []byte(examplePRD), 0o644); err != nil {
			t.Fatal(err)
		}
		prd, err := LoadMarkdown(path)
		if err != nil {
			t.Fatalf("LoadMarkdown: %v", err)
		}
		if prd.Path != path || len(prd.Stories) != 3 {
			t.Errorf("got path %q with %d stories, want %q with 3", prd.Path, len(prd.Stories), path)
		}
	})
	t.Run("parse errors name the file", func(t *testing.T) {
		path := filepath.Join(dir, "broken.md")
		if err := os.WriteFile(path, []byte("### [ ] US-1 Title\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadMarkdown(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+":1: malformed story heading") {
			t.Errorf("error = %v, want it to start with %q", err, path+":1: malformed story heading")
		}
	})
}

func TestParseErrorFormat(t *testing.T) {
	tests := []struct {
		err  ParseError
		want string
	}{
		{
			err:  ParseError{Path: "prd.md", Line: 12, Msg: "bad", Hint: "fix it"},
			want: "prd.md:12: bad; fix it",
		},
		{
			err:  ParseError{Path: "prd.md", Line: 12, Msg: "bad"},
			want: "prd.md:12: bad",
		},
		{
			err:  ParseError{Path: "prd.md", Msg: "no stories found", Hint: "add one"},
			want: "prd.md: no stories found; add one",
		},
		{
			err:  ParseError{Line: 3, Msg: "bad"},
			want: "line 3: bad",
		},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestCriteriaOfOneStoryDoNotAliasTheNext(t *testing.T) {
	prd := mustParse(t, lines("### [ ] US-001: A", "- [ ] a1", "### [ ] US-002: B", "- [ ] b1"))
	first := prd.Stories[0].Criteria
	_ = append(first, Criterion{Text: "appended"})
	if got := prd.Stories[1].Criteria[0].Text; got != "b1" {
		t.Errorf("appending to story 1's criteria changed story 2's to %q", got)
	}
}

func TestUncheckCriteriaClearsOnlyThatStorysMarks(t *testing.T) {
	in := "### [ ] US-001: A\n- [x] one\n- [X] two\n- [ ] three\n\n### [x] US-002: B\n- [x] other\n"
	want := "### [ ] US-001: A\n- [ ] one\n- [ ] two\n- [ ] three\n\n### [x] US-002: B\n- [x] other\n"
	got, err := UncheckCriteria([]byte(in), "US-001")
	if err != nil || string(got) != want {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := UncheckCriteria([]byte(in), "US-009"); err == nil {
		t.Fatal("unknown id accepted")
	}
}

// A criterion that mentions a box in its text keeps its words when the
// story is reopened: only the box that starts the item is cleared.
func TestUncheckCriteriaLeavesBoxesInTheTextAlone(t *testing.T) {
	in := lines(
		"### [x] US-001: Show [x] next to finished items",
		"- [X] the list shows [x] next to finished items",
		"  * [x] a nested item mentions [X] too",
		"- [ ] an open item mentions [x]",
	)
	want := lines(
		"### [x] US-001: Show [x] next to finished items",
		"- [ ] the list shows [x] next to finished items",
		"  * [ ] a nested item mentions [X] too",
		"- [ ] an open item mentions [x]",
	)
	got, err := UncheckCriteria([]byte(in), "US-001")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("UncheckCriteria changed the text:\n%s\nwant:\n%s", got, want)
	}
	open, err := SetStoryDone(got, "US-001", false)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(want, "### [x]", "### [ ]", 1); string(open) != want {
		t.Fatalf("SetStoryDone changed the text:\n%s\nwant:\n%s", open, want)
	}
}

// Next returns the first story, in file order, that is not done. Authors order
// stories by priority and dependency, so file order is the work order. It
// reports false when every story is done.
func (p *PRD) Next() (Story, bool) {
	if p == nil {
		return Story{}, false
	}
	for i := range p.Stories {
		if !p.Stories[i].Done {
			return p.Stories[i], true
		}
	}
	return Story{}, false
}
