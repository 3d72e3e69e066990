package tasks

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var exampleTasksMD = lines(
	"# Tasks: Greet the user",               // 1
	"",                                      // 2
	"Some optional prose, ignored.",         // 3
	"",                                      // 4
	"- [ ] task-1: Add a greet function",    // 5
	`  - greet("Ann") returns "Hello, Ann"`, // 6
	"  - the tests pass",                    // 7
	"- [P] task-2: Print the greeting from main", // 8
	"- [x] task-3: Document it",                  // 9
)

var exampleTasks = []SessionTask{
	{ID: "task-1", Title: "Add a greet function", Mark: MarkTodo, Line: 5,
		Criteria: []string{`greet("Ann") returns "Hello, Ann"`, "the tests pass"}},
	{ID: "task-2", Title: "Print the greeting from main", Mark: MarkInReview, Line: 8},
	{ID: "task-3", Title: "Document it", Mark: MarkDone, Line: 9},
}

func mustParseTasks(t *testing.T, data string) []SessionTask {
	t.Helper()
	tasks, err := ParseTasksMD("tasks.md", []byte(data))
	if err != nil {
		t.Fatalf("ParseTasksMD: unexpected error: %v", err)
	}
	return tasks
}

// withoutLines returns a copy of tasks with every Line cleared, for
// comparisons with tasks that did not come from a file.
func withoutLines(tasks []SessionTask) []SessionTask {
	out := make([]SessionTask, len(tasks))
	for i, t := range tasks {
		t.Line = 0
		out[i] = t
	}
	return out
}

func TestParseTasksMDExample(t *testing.T) {
	for name, data := range map[string]string{"LF": exampleTasksMD, "CRLF": crlf(exampleTasksMD), "BOM": byteOrderMark + exampleTasksMD} {
		t.Run(name, func(t *testing.T) {
			got := mustParseTasks(t, data)
			if !reflect.DeepEqual(got, exampleTasks) {
				t.Errorf("tasks\n got %+v\nwant %+v", got, exampleTasks)
			}
		})
	}
}

func TestParseTasksMDWithoutTasks(t *testing.T) {
	for _, data := range []string{"", "# Tasks: Nothing yet\n", lines("# Tasks", "", "  - an item under no task", "-[ ] not a task line", " - [ ] indented, so prose")} {
		if got := mustParseTasks(t, data); len(got) != 0 {
			t.Errorf("ParseTasksMD(%q) = %+v, want no tasks", data, got)
		}
	}
}

func TestParseTasksMDMarksAndTitles(t *testing.T) {
	tests := []struct {
		line      string
		wantID    string
		wantTitle string
		wantMark  Mark
	}{
		{line: "- [ ] task-1: To do", wantID: "task-1", wantTitle: "To do", wantMark: MarkTodo},
		{line: "- [P] task-2: In review", wantID: "task-2", wantTitle: "In review", wantMark: MarkInReview},
		{line: "- [x] task-3: Done", wantID: "task-3", wantTitle: "Done", wantMark: MarkDone},
		{line: "- [X] task-4: Capital X reads as x", wantID: "task-4", wantTitle: "Capital X reads as x", wantMark: MarkDone},
		{line: "- [ ]  A.b_c-9:\tTabs and spaces  ", wantID: "A.b_c-9", wantTitle: "Tabs and spaces", wantMark: MarkTodo},
		{line: "- [ ] 7: Digit id: colons in the title stay", wantID: "7", wantTitle: "Digit id: colons in the title stay", wantMark: MarkTodo},
		{line: "- [ ] t: Ünïcode ✓ title", wantID: "t", wantTitle: "Ünïcode ✓ title", wantMark: MarkTodo},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got := mustParseTasks(t, lines("# Tasks: T", "", tt.line))
			want := []SessionTask{{ID: tt.wantID, Title: tt.wantTitle, Mark: tt.wantMark, Line: 3}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestParseTasksMDCriteria(t *testing.T) {
	tests := []struct {
		name string
		data string
		want map[string][]string // criteria per task id; absent means none
	}{
		{
			name: "blank line ends the criteria",
			data: lines("- [ ] a: A", "  - one", "", "  - after a blank line, prose", "- [ ] b: B"),
			want: map[string][]string{"a": {"one"}},
		},
		{
			name: "whitespace-only line ends the criteria",
			data: lines("- [ ] a: A", "  - one", "   ", "  - prose"),
			want: map[string][]string{"a": {"one"}},
		},
		{
			name: "next task takes over",
			data: lines("- [ ] a: A", "  - a1", "  - a2", "- [P] b: B", "  - b1", "- [x] c: C"),
			want: map[string][]string{"a": {"a1", "a2"}, "b": {"b1"}},
		},
		{
			name: "prose at column 0 ends the criteria",
			data: lines("- [ ] a: A", "  - one", "Prose.", "  - not a criterion"),
			want: map[string][]string{"a": {"one"}},
		},
		{
			name: "indented non-item line ends the criteria",
			data: lines("- [ ] a: A", "  - one", "    continued", "  - not a criterion"),
			want: map[string][]string{"a": {"one"}},
		},
		{
			name: "one space of indentation is not enough",
			data: lines("- [ ] a: A", " - prose", "  - too late"),
			want: map[string][]string{},
		},
		{
			name: "deeper indentation, a tab and checkboxes are criteria",
			data: lines("- [ ] a: A", "      - deep  ", "\t-\ttab", "  - [ ] box"),
			want: map[string][]string{"a": {"deep", "tab", "[ ] box"}},
		},
		{
			name: "an empty item is not a criterion and ends the criteria",
			data: lines("- [ ] a: A", "  -", "  - after the empty item"),
			want: map[string][]string{},
		},
		{
			name: "items other than dashes are not criteria",
			data: lines("- [ ] a: A", "  * star", "  - dash"),
			want: map[string][]string{},
		},
		{
			name: "last line without newline",
			data: "- [ ] a: A\n  - one\n  - two",
			want: map[string][]string{"a": {"one", "two"}},
		},
		{
			name: "CRLF",
			data: crlf(lines("- [ ] a: A", "  - one ", "", "- [ ] b: B", "  - two")),
			want: map[string][]string{"a": {"one"}, "b": {"two"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string][]string{}
			for _, task := range mustParseTasks(t, tt.data) {
				if task.Criteria != nil {
					got[task.ID] = task.Criteria
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("criteria = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseTasksMDErrors(t *testing.T) {
	valid := "- [ ] task-1: Valid" // always line 2 below
	tests := []struct {
		name        string
		line        string // the line after "# Tasks" and valid, so on line 3
		wantLine    int
		wantCol     int
		wantPhrases []string
	}{
		{
			name:        "unknown mark",
			line:        "- [y] task-2: T",
			wantLine:    3,
			wantCol:     4,
			wantPhrases: []string{`tasks.md:3:4: malformed task line "- [y] task-2: T": want "- [ ] task-1: Title"`, `"[ ]" (to do), "[P]" (in review) or "[x]" (done)`},
		},
		{
			name:        "lowercase p",
			line:        "- [p] task-2: T",
			wantLine:    3,
			wantCol:     4,
			wantPhrases: []string{"malformed task line", `"[P]" (in review)`},
		},
		{
			name:        "empty brackets",
			line:        "- [] task-2: T",
			wantLine:    3,
			wantCol:     4,
			wantPhrases: []string{"malformed task line", "one character between brackets"},
		},
		{
			name:        "multibyte mark",
			line:        "- [✓] task-2: T",
			wantLine:    3,
			wantCol:     4,
			wantPhrases: []string{"malformed task line", "one character between brackets"},
		},
		{
			name:        "markdown link at column 0",
			line:        "- [the docs](https://example.com)",
			wantLine:    3,
			wantCol:     4,
			wantPhrases: []string{"malformed task line", "indent the line if it is not meant to be a task"},
		},
		{
			name:        "neither id nor title",
			line:        "- [ ]   ",
			wantLine:    3,
			wantCol:     6,
			wantPhrases: []string{`malformed task line "- [ ]"`, `write the task id and title after the mark, like "- [ ] task-1: Title"`},
		},
		{
			name:        "missing id",
			line:        "- [ ] : Title",
			wantLine:    3,
			wantCol:     7,
			wantPhrases: []string{"malformed task line", "the task id must start with a letter or digit"},
		},
		{
			name:        "id with a forbidden character",
			line:        "- [x] -task: Title",
			wantLine:    3,
			wantCol:     7,
			wantPhrases: []string{"malformed task line", "like task-1"},
		},
		{
			name:        "no space after the mark",
			line:        "- [x]task-2: Title",
			wantLine:    3,
			wantCol:     6,
			wantPhrases: []string{"put a space between the mark and the task id"},
		},
		{
			name:        "title without colon",
			line:        "- [ ] Add a greet function",
			wantLine:    3,
			wantCol:     10,
			wantPhrases: []string{`put ": " and the title right after the task id Add`},
		},
		{
			name:        "id only",
			line:        "- [ ] task-2  ",
			wantLine:    3,
			wantCol:     13,
			wantPhrases: []string{`write ": " and the title after the task id task-2`},
		},
		{
			name:        "empty title",
			line:        "- [P] task-2:   ",
			wantLine:    3,
			wantCol:     14,
			wantPhrases: []string{`malformed task line "- [P] task-2:"`, `the title after "task-2:" is empty`},
		},
		{
			name:        "title of Unicode spaces only",
			line:        "- [P] task-2: \u00a0",
			wantLine:    3,
			wantCol:     14,
			wantPhrases: []string{`the title after "task-2:" is empty`},
		},
		{
			name:        "no space after the colon",
			line:        "- [ ] task-2:Title",
			wantLine:    3,
			wantCol:     14,
			wantPhrases: []string{`put a space between "task-2:" and the title`},
		},
		{
			name:        "duplicate id names both lines",
			line:        "- [x] task-1: Again",
			wantLine:    3,
			wantPhrases: []string{"tasks.md:3: duplicate task id task-1: line 2 already defines a task with this id", "give every task its own id"},
		},
		{
			name:        "invalid UTF-8 reports the line of the first bad byte",
			line:        "prose \xff",
			wantLine:    3,
			wantPhrases: []string{"tasks.md:3: invalid UTF-8: byte 0xff at column 7", "save the tasks file as UTF-8 text"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := lines("# Tasks", valid, tt.line, "- [ ] task-9: After")
			tasks, err := ParseTasksMD("tasks.md", []byte(data))
			if tasks != nil {
				t.Errorf("got tasks %+v along with the error", tasks)
			}
			wantParseError(t, err, tt.wantLine, tt.wantCol, tt.wantPhrases...)
		})
	}
}

func TestParseTasksMDErrorInCRLFFileOmitsTheCR(t *testing.T) {
	_, err := ParseTasksMD("tasks.md", []byte(crlf(lines("# Tasks", "- [ ] task-1:"))))
	wantParseError(t, err, 2, 14, `malformed task line "- [ ] task-1:": want`)
}

func TestMarkString(t *testing.T) {
	for m, want := range map[Mark]string{MarkTodo: "[ ]", MarkInReview: "[P]", MarkDone: "[x]", "": "[ ]"} {
		if got := m.String(); got != want {
			t.Errorf("Mark(%q).String() = %q, want %q", string(m), got, want)
		}
	}
}

func TestRenderTasksMD(t *testing.T) {
	tasks := []SessionTask{
		{ID: "task-1", Title: "Add a greet function", Mark: MarkTodo, Line: 12,
			Criteria: []string{`greet("Ann") returns "Hello, Ann"`, "the tests pass"}},
		{ID: "task-2", Title: "Print the greeting from main", Mark: MarkInReview},
		{ID: "task-3", Title: "Document it", Mark: MarkDone, Criteria: []string{}},
	}
	want := lines(
		"# Tasks: Greet the user",
		"",
		"- [ ] task-1: Add a greet function",
		`  - greet("Ann") returns "Hello, Ann"`,
		"  - the tests pass",
		"- [P] task-2: Print the greeting from main",
		"- [x] task-3: Document it",
	)
	got := RenderTasksMD("Greet the user", tasks)
	if string(got) != want {
		t.Fatalf("RenderTasksMD:\n%s\nwant:\n%s", got, want)
	}
	parsed := mustParseTasks(t, string(got))
	wantParsed := withoutLines(tasks)
	wantParsed[2].Criteria = nil // an empty list reads back as none
	if !reflect.DeepEqual(withoutLines(parsed), wantParsed) {
		t.Errorf("parse(render(x))\n got %+v\nwant %+v", withoutLines(parsed), wantParsed)
	}
}

func TestRenderTasksMDRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		title string
		tasks []SessionTask
	}{
		{name: "the example", title: "Greet the user", tasks: exampleTasks},
		{name: "no tasks", title: "Empty", tasks: nil},
		{name: "no title", tasks: []SessionTask{{ID: "a", Title: "A", Mark: MarkTodo}}},
		{name: "ids and titles of every shape", title: "Shapes", tasks: []SessionTask{
			{ID: "9", Title: "x", Mark: MarkDone, Criteria: []string{"- a dash", "[x] a box", "ü ✓"}},
			{ID: "A.b_c-d", Title: "title: with colon, [brackets] and  two spaces", Mark: MarkInReview},
			{ID: "task-10", Title: "- [ ] task-11: looks like a task", Mark: MarkTodo},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := RenderTasksMD(tt.title, tt.tasks)
			got, err := ParseTasksMD("tasks.md", data)
			if err != nil {
				t.Fatalf("parse(render): %v\n%s", err, data)
			}
			if len(got) == 0 && len(tt.tasks) == 0 {
				return
			}
			if want := withoutLines(tt.tasks); !reflect.DeepEqual(withoutLines(got), want) {
				t.Errorf("parse(render(x))\n got %+v\nwant %+v\nfile:\n%s", withoutLines(got), want, data)
			}
		})
	}
}

func TestRenderTasksMDKeepsEveryTextOnOneLine(t *testing.T) {
	tasks := []SessionTask{{
		ID:       "task-1",
		Title:    "  first\n- [x] task-2: forged\r\nthird  ",
		Criteria: []string{"one\ntwo", " \n ", "bad \xff byte"},
	}}
	got := string(RenderTasksMD("multi\nline", tasks))
	want := lines(
		"# Tasks: multi line",
		"",
		"- [ ] task-1: first - [x] task-2: forged third",
		"  - one two",
		"  - bad \uFFFD byte",
	)
	if got != want {
		t.Fatalf("RenderTasksMD:\n%q\nwant:\n%q", got, want)
	}
	if parsed := mustParseTasks(t, got); len(parsed) != 1 {
		t.Errorf("got %d tasks, want 1: %+v", len(parsed), parsed)
	}
}

func TestSetTaskMark(t *testing.T) {
	// prose has prose around and between the tasks, criteria, trailing
	// spaces, text after the title and no final newline.
	prose := "Intro [ ] task-1: prose that mentions a task\n" +
		"- [ ] task-1: First   \n" +
		"  - criterion [ ]\n" +
		"\n" +
		"Between the tasks.\n" +
		"- [X] task-2: Second (see notes) \t\n" +
		"- [P] task-3: Third"
	tests := []struct {
		name string
		data string
		id   string
		mark Mark
		want string
	}{
		{
			name: "example: to do to in review",
			data: exampleTasksMD, id: "task-1", mark: MarkInReview,
			want: replaceOnce(t, exampleTasksMD, "- [ ] task-1", "- [P] task-1"),
		},
		{
			name: "example: in review to done",
			data: exampleTasksMD, id: "task-2", mark: MarkDone,
			want: replaceOnce(t, exampleTasksMD, "- [P] task-2", "- [x] task-2"),
		},
		{
			name: "example: done back to to do",
			data: exampleTasksMD, id: "task-3", mark: MarkTodo,
			want: replaceOnce(t, exampleTasksMD, "- [x] task-3", "- [ ] task-3"),
		},
		{
			name: "zero mark sets to do",
			data: exampleTasksMD, id: "task-2", mark: "",
			want: replaceOnce(t, exampleTasksMD, "- [P] task-2", "- [ ] task-2"),
		},
		{
			name: "same mark leaves the file as it is",
			data: exampleTasksMD, id: "task-2", mark: MarkInReview,
			want: exampleTasksMD,
		},
		{
			name: "CRLF stays CRLF",
			data: crlf(exampleTasksMD), id: "task-3", mark: MarkInReview,
			want: replaceOnce(t, crlf(exampleTasksMD), "- [x] task-3", "- [P] task-3"),
		},
		{
			name: "byte order mark and first line",
			data: byteOrderMark + "- [ ] task-1: T\n", id: "task-1", mark: MarkDone,
			want: byteOrderMark + "- [x] task-1: T\n",
		},
		{
			name: "prose: first task, not the prose that mentions it",
			data: prose, id: "task-1", mark: MarkDone,
			want: replaceOnce(t, prose, "- [ ] task-1: First", "- [x] task-1: First"),
		},
		{
			name: "prose: capital X stays when marking done",
			data: prose, id: "task-2", mark: MarkDone,
			want: prose,
		},
		{
			name: "prose: capital X to in review keeps the trailing blanks",
			data: prose, id: "task-2", mark: MarkInReview,
			want: replaceOnce(t, prose, "- [X] task-2: Second (see notes) \t\n", "- [P] task-2: Second (see notes) \t\n"),
		},
		{
			name: "prose: last line without newline",
			data: prose, id: "task-3", mark: MarkTodo,
			want: replaceOnce(t, prose, "- [P] task-3: Third", "- [ ] task-3: Third"),
		},
		{
			name: "prose in CRLF",
			data: crlf(prose), id: "task-3", mark: MarkDone,
			want: replaceOnce(t, crlf(prose), "- [P] task-3: Third", "- [x] task-3: Third"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.data)
			got, err := SetTaskMark("tasks.md", data, tt.id, tt.mark)
			if err != nil {
				t.Fatalf("SetTaskMark: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("SetTaskMark:\n%q\nwant:\n%q", got, tt.want)
			}
			if string(data) != tt.data {
				t.Errorf("SetTaskMark modified its input: %q", data)
			}
		})
	}
}

func TestSetTaskMarkErrors(t *testing.T) {
	t.Run("unknown id", func(t *testing.T) {
		_, err := SetTaskMark("session/tasks.md", []byte(exampleTasksMD), "task-9", MarkDone)
		if !errors.Is(err, ErrTaskNotFound) {
			t.Fatalf("error %v does not wrap ErrTaskNotFound", err)
		}
		want := `session/tasks.md: unknown task id "task-9": no task line has that id; the file has task-1, task-2, task-3`
		if err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
	})
	t.Run("unknown id in a file without tasks", func(t *testing.T) {
		_, err := SetTaskMark("tasks.md", []byte("# Tasks\n"), "task-1", MarkDone)
		if !errors.Is(err, ErrTaskNotFound) || !strings.Contains(err.Error(), `"task-1"`) || !strings.Contains(err.Error(), "the file has no task lines") {
			t.Errorf("error = %v, want ErrTaskNotFound naming task-1 and saying there are no tasks", err)
		}
	})
	t.Run("long id list is cut short", func(t *testing.T) {
		var tasks []SessionTask
		for range 12 {
			tasks = append(tasks, SessionTask{ID: NextTaskID(tasks), Title: "T"})
		}
		_, err := SetTaskMark("tasks.md", RenderTasksMD("T", tasks), "task-13", MarkDone)
		if err == nil || !strings.HasSuffix(err.Error(), "task-9, task-10 and 2 more") {
			t.Errorf("error = %v, want the first ten ids and a count of the rest", err)
		}
	})
	t.Run("invalid mark", func(t *testing.T) {
		for _, m := range []Mark{"X", "p", "done", "[x]"} {
			_, err := SetTaskMark("tasks.md", []byte(exampleTasksMD), "task-1", m)
			if err == nil || !strings.Contains(err.Error(), "invalid mark") || !strings.Contains(err.Error(), "use MarkTodo, MarkInReview or MarkDone") {
				t.Errorf("SetTaskMark(%q) error = %v, want an invalid mark error", string(m), err)
			}
		}
	})
	t.Run("malformed file is reported, not edited", func(t *testing.T) {
		_, err := SetTaskMark("tasks.md", []byte(lines("- [ ] task-1: A", "- [?] task-2: B")), "task-1", MarkDone)
		wantParseError(t, err, 2, 4, "tasks.md:2:4: malformed task line")
	})
}

func TestAppendTasks(t *testing.T) {
	add := []SessionTask{
		{ID: "task-4", Title: "Fourth", Criteria: []string{"it works"}},
		{ID: "task-5", Title: "Fifth", Mark: MarkInReview, Line: 99},
	}
	appended := lines("- [ ] task-4: Fourth", "  - it works", "- [P] task-5: Fifth")
	tests := []struct {
		name string
		data string
		want string
	}{
		{name: "file ending in a newline", data: exampleTasksMD, want: exampleTasksMD + appended},
		{name: "file without trailing newline", data: strings.TrimSuffix(exampleTasksMD, "\n"), want: exampleTasksMD + appended},
		{name: "file ending in a criterion without newline", data: "- [ ] task-1: A\n  - c", want: "- [ ] task-1: A\n  - c\n" + appended},
		{name: "CRLF file", data: crlf(exampleTasksMD), want: crlf(exampleTasksMD + appended)},
		{name: "CRLF file without trailing newline", data: strings.TrimSuffix(crlf(exampleTasksMD), "\r\n"), want: crlf(exampleTasksMD + appended)},
		{name: "CRLF file ending in a lone CR", data: strings.TrimSuffix(crlf(exampleTasksMD), "\n"), want: crlf(exampleTasksMD + appended)},
		{name: "file ending in blank lines", data: "# Tasks: T\n\n\n", want: "# Tasks: T\n\n\n" + appended},
		{name: "empty file", data: "", want: appended},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.data)
			got := AppendTasks(data, add)
			if string(got) != tt.want {
				t.Errorf("AppendTasks:\n%q\nwant:\n%q", got, tt.want)
			}
			if string(data) != tt.data {
				t.Errorf("AppendTasks modified its input: %q", data)
			}
			tasks := mustParseTasks(t, string(got))
			if n := len(tasks); n < 2 || tasks[n-2].ID != "task-4" || tasks[n-1].ID != "task-5" {
				t.Errorf("appended file parses to %+v, want task-4 and task-5 last", tasks)
			}
		})
	}
}

func TestAppendTasksNothingToAdd(t *testing.T) {
	data := []byte("# Tasks: T\nno newline")
	got := AppendTasks(data, nil)
	if string(got) != string(data) {
		t.Errorf("AppendTasks(data, nil) = %q, want %q", got, data)
	}
	if len(got) > 0 && &got[0] == &data[0] {
		t.Error("AppendTasks returned its input instead of a copy")
	}
}

func TestAppendTasksToRenderEqualsRender(t *testing.T) {
	first, rest := exampleTasks[:1], exampleTasks[1:]
	got := AppendTasks(RenderTasksMD("T", first), rest)
	want := RenderTasksMD("T", exampleTasks)
	if !bytes.Equal(got, want) {
		t.Errorf("AppendTasks(Render(a), b):\n%s\nwant Render(a+b):\n%s", got, want)
	}
	if got := AppendTasks(RenderTasksMD("T", nil), exampleTasks); !bytes.Equal(got, want) {
		t.Errorf("AppendTasks(Render(none), all):\n%s\nwant:\n%s", got, want)
	}
}

func TestNextTaskID(t *testing.T) {
	tests := []struct {
		name string
		ids  []string
		want string
	}{
		{name: "no tasks", ids: nil, want: "task-1"},
		{name: "no task-N ids", ids: []string{"setup", "US-001", "Task-7", "task-", "task-x"}, want: "task-1"},
		{name: "consecutive", ids: []string{"task-1", "task-2", "task-3"}, want: "task-4"},
		{name: "gaps are not filled", ids: []string{"task-1", "task-5", "task-3"}, want: "task-6"},
		{name: "largest first", ids: []string{"task-12", "task-2"}, want: "task-13"},
		{name: "leading zeros count", ids: []string{"task-007"}, want: "task-8"},
		{name: "near misses are ignored", ids: []string{"task-2", "task-3a", "task-9.1", "task--9", "task-+9", "task-1_0", "xtask-50", "task-2-9"}, want: "task-3"},
		{name: "numbers too large are ignored", ids: []string{"task-4", "task-99999999999999999999999"}, want: "task-5"},
		{name: "task-0", ids: []string{"task-0"}, want: "task-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tasks := make([]SessionTask, len(tt.ids))
			for i, id := range tt.ids {
				tasks[i] = SessionTask{ID: id, Title: id}
			}
			if got := NextTaskID(tasks); got != tt.want {
				t.Errorf("NextTaskID(%v) = %q, want %q", tt.ids, got, tt.want)
			}
		})
	}
}

// FuzzTasksMD checks the invariants on arbitrary input: a parsed file renders
// to one that parses back to the same tasks, and SetTaskMark changes at most
// the one mark byte.
func FuzzTasksMD(f *testing.F) {
	f.Add(exampleTasksMD)
	f.Add(crlf(exampleTasksMD))
	f.Add("- [X] a: b\r\n  - c\r\n\r\n  - d\n- [P] e:\tf \r")
	f.Add(byteOrderMark + "- [ ] x.y: z\n\t- w")
	f.Fuzz(func(t *testing.T, data string) {
		tasks, err := ParseTasksMD("fuzz.md", []byte(data))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error %v is not a *ParseError with a line", err)
			}
			return
		}
		again, err := ParseTasksMD("fuzz.md", RenderTasksMD("T", tasks))
		if err != nil {
			t.Fatalf("parse(render(parse(data))): %v", err)
		}
		if len(tasks) > 0 && !reflect.DeepEqual(withoutLines(again), withoutLines(tasks)) {
			t.Fatalf("round trip\n got %+v\nwant %+v", again, tasks)
		}
		for _, task := range tasks {
			for _, m := range []Mark{MarkTodo, MarkInReview, MarkDone} {
				got, err := SetTaskMark("fuzz.md", []byte(data), task.ID, m)
				if err != nil {
					t.Fatalf("SetTaskMark(%s, %q): %v", task.ID, string(m), err)
				}
				if len(got) != len(data) {
					t.Fatalf("SetTaskMark changed the length: %q", got)
				}
				diff := 0
				for i := range got {
					if got[i] != data[i] {
						diff++
					}
				}
				if diff > 1 {
					t.Fatalf("SetTaskMark changed %d bytes: %q", diff, got)
				}
				edited, err := ParseTasksMD("fuzz.md", got)
				if err != nil {
					t.Fatalf("edited file does not parse: %v", err)
				}
				for _, e := range edited {
					if e.ID == task.ID && e.Mark != m {
						t.Fatalf("task %s has mark %q after setting %q", e.ID, string(e.Mark), string(m))
					}
				}
			}
		}
	})
}
