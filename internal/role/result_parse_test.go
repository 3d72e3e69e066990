package role

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseResultFindsTheResult(t *testing.T) {
	tests := []struct {
		name string
		role string
		text string
		want Result
	}{
		{
			name: "json fence with prose around it",
			role: Executor,
			text: "I implemented the flag.\n\n```json\n{\"status\": \"completed\", \"summary\": \"added --dry-run\"}\n```\n\nThat is all.",
			want: Result{Status: StatusCompleted, Summary: "added --dry-run"},
		},
		{
			name: "plain fence",
			role: Executor,
			text: "Done.\n```\n{\"status\": \"completed\"}\n```",
			want: Result{Status: StatusCompleted},
		},
		{
			name: "uppercase JSON info string and indented fence",
			role: Executor,
			text: "Done.\n  ```JSON\n  {\"status\": \"completed\"}\n  ```",
			want: Result{Status: StatusCompleted},
		},
		{
			name: "no fence at all",
			role: Reviewer,
			text: "All criteria hold.\n{\"verdict\": \"Qualified\", \"summary\": \"ok\"}\nThanks.",
			want: Result{Verdict: VerdictQualified, Summary: "ok"},
		},
		{
			name: "last of several fenced blocks wins",
			role: Executor,
			text: "First draft:\n```json\n{\"status\": \"blocked\", \"blockers\": [\"x\"]}\n```\nFinal:\n```json\n{\"status\": \"completed\", \"summary\": \"final\"}\n```",
			want: Result{Status: StatusCompleted, Summary: "final"},
		},
		{
			name: "last fenced object wins over a later non-JSON fence",
			role: Executor,
			text: "```json\n{\"status\": \"completed\"}\n```\nThe tests:\n```\nok  ./...  0.3s\n```",
			want: Result{Status: StatusCompleted},
		},
		{
			name: "a fence of another language is not the result",
			role: Executor,
			text: "```json\n{\"status\": \"completed\", \"summary\": \"real\"}\n```\n```go\n{\"status\": \"blocked\"}\n```",
			want: Result{Status: StatusCompleted, Summary: "real"},
		},
		{
			name: "a fenced object beats a later unfenced one",
			role: Executor,
			text: "```json\n{\"status\": \"completed\", \"summary\": \"fenced\"}\n```\nand inline {\"status\": \"blocked\"}",
			want: Result{Status: StatusCompleted, Summary: "fenced"},
		},
		{
			name: "last of several unfenced objects wins",
			role: Executor,
			text: "Example {\"status\": \"blocked\", \"blockers\": [\"b\"]} then the result:\n{\"status\": \"completed\", \"summary\": \"last\"}",
			want: Result{Status: StatusCompleted, Summary: "last"},
		},
		{
			name: "braces and quotes inside strings",
			role: Executor,
			text: "Result: {\"status\": \"completed\", \"summary\": \"wrote func f() { return \\\"}\\\" } and a {\"}\nbye",
			want: Result{Status: StatusCompleted, Summary: "wrote func f() { return \"}\" } and a {"},
		},
		{
			name: "nested objects are not taken for the result",
			role: Planner,
			text: "{\"status\": \"completed\", \"tasks\": [{\"title\": \"one\", \"criteria\": [\"c1\"]}, {\"title\": \"two\"}]}",
			want: Result{Status: StatusCompleted, Tasks: []NewTask{{Title: "one", Criteria: []string{"c1"}}, {Title: "two"}}},
		},
		{
			name: "prose braces before the result",
			role: Executor,
			text: "The map literal map[string]int{ is unbalanced here, and {this} is not JSON.\n{\"status\": \"completed\"}",
			want: Result{Status: StatusCompleted},
		},
		{
			name: "inline triple backticks are not a fence",
			role: Executor,
			text: "I ran ```go test``` and it passed.\n```json\n{\"status\": \"completed\"}\n```",
			want: Result{Status: StatusCompleted},
		},
		{
			name: "unclosed final fence",
			role: Executor,
			text: "Done.\n```json\n{\"status\": \"completed\"}\n",
			want: Result{Status: StatusCompleted},
		},
		{
			name: "unknown fields are ignored",
			role: Reviewer,
			text: "```json\n{\"verdict\": \"Qualified\", \"confidence\": 0.9, \"criteria\": [{\"id\": \"AC-1\"}]}\n```",
			want: Result{Verdict: VerdictQualified},
		},
		{
			name: "CRLF line ends",
			role: Executor,
			text: "Done.\r\n```json\r\n{\"status\": \"completed\"}\r\n```\r\n",
			want: Result{Status: StatusCompleted},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResult(tt.role, tt.text)
			if err != nil {
				t.Fatalf("ParseResult: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseResultNormalises(t *testing.T) {
	text := "```json\n" + `{
  "status": "  Completed ",
  "verdict": " qualified",
  "summary": "  did it \n",
  "tasks": [{"title": "  Add flag ", "criteria": [" prints plan ", "", "   "]}],
  "new_tasks": [{"title": "Docs", "criteria": ["", " README mentions it"]}],
  "questions": [" q1 ", ""],
  "human_questions": ["", " h1"],
  "blockers": ["  "],
  "reasons": [" r1 ", "\t"],
  "answers": [{"question": " Q? ", "answer": " A. "}]
}` + "\n```"
	got, err := ParseResult(Planner, text)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{
		Status:         StatusCompleted,
		Verdict:        VerdictQualified,
		Summary:        "did it",
		Tasks:          []NewTask{{Title: "Add flag", Criteria: []string{"prints plan"}}},
		NewTasks:       []NewTask{{Title: "Docs", Criteria: []string{"README mentions it"}}},
		Questions:      []string{"q1"},
		HumanQuestions: []string{"h1"},
		Reasons:        []string{"r1"},
		Answers:        []Answer{{Question: "Q?", Answer: "A."}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseResultVerdictCase(t *testing.T) {
	for in, want := range map[string]string{
		"Qualified": VerdictQualified, "QUALIFIED": VerdictQualified, " qualified ": VerdictQualified,
		"failed": VerdictFailed, "FAILED": VerdictFailed,
	} {
		got, err := ParseResult(Reviewer, `{"verdict": "`+in+`", "reasons": ["r"]}`)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got.Verdict != want {
			t.Errorf("verdict %q became %q, want %q", in, got.Verdict, want)
		}
	}
}

func TestParseResultAcceptsEachRolesValidResults(t *testing.T) {
	tests := []struct {
		role, json string
	}{
		{Planner, `{"status": "completed", "tasks": [{"title": "t"}]}`},
		{Planner, `{"status": "needs_qa_cycle", "questions": ["which db?"]}`},
		{Planner, `{"status": "blocked", "blockers": ["no such repo"]}`},
		{Questioner, `{"answers": [{"question": "q", "answer": "a"}]}`},
		{Questioner, `{"human_questions": ["which licence?"]}`},
		{Executor, `{"status": "completed", "new_requirements": true}`},
		{Executor, `{"status": "blocked", "blockers": ["needs an API key"]}`},
		{Reviewer, `{"verdict": "Qualified"}`},
		{Reviewer, `{"verdict": "Failed", "reasons": ["AC-1 unmet"]}`},
		{GoalCheck, `{"status": "passed"}`},
		{GoalCheck, `{"status": "failed", "reasons": ["no docs"]}`},
		{GoalCheck, `{"status": "failed", "new_tasks": [{"title": "write docs"}]}`},
	}
	for _, tt := range tests {
		if _, err := ParseResult(tt.role, "```json\n"+tt.json+"\n```"); err != nil {
			t.Errorf("%s %s: %v", tt.role, tt.json, err)
		}
	}
}

func TestParseResultErrors(t *testing.T) {
	tests := []struct {
		name string
		role string
		text string
		want []string // substrings of the error
	}{
		{"no JSON at all", Executor, "I did the task.", []string{"no JSON result found", "```json"}},
		{"empty reply", Executor, "", []string{"no JSON result found"}},
		{"a JSON list is not a result", Executor, "```json\n[1, 2]\n```", []string{"no JSON result found", "not a valid JSON object", "does not start with {"}},
		{"broken last json fence", Executor, "```json\n{\"status\": \"completed\",}\n```",
			[]string{"no JSON result found", "last ```json block", "line 1, column"}},
		{"broken json fence after a good one", Executor,
			"```json\n{\"status\": \"blocked\", \"blockers\": [\"x\"]}\n```\n```json\n{\"status\": \"completed\" \"summary\": \"y\"}\n```",
			[]string{"last ```json block", "not a valid JSON object"}},
		{"broken unfenced object after a good one", Executor,
			"draft {\"status\": \"blocked\", \"blockers\": [\"x\"]}\nfinal {\"status\": \"completed\", }",
			[]string{"no JSON result found", "last JSON object of your reply is not valid JSON"}},
		{"truncated unfenced object", Planner,
			"{\"status\": \"completed\", \"tasks\": [{\"title\": \"a\"}",
			[]string{"not closed"}},
		{"wrong field type", Planner, `{"status": "completed", "tasks": ["just a string"]}`,
			[]string{"invalid planner result", `"tasks"`, "must be an object", "not a string"}},
		{"wrong list type", Executor, `{"status": "blocked", "blockers": "no key"}`,
			[]string{`"blockers" must be a list of strings, not a string`}},

		{"planner without status", Planner, `{"tasks": []}`,
			[]string{`"status" is missing`, `"completed", "needs_qa_cycle" or "blocked"`}},
		{"planner bad status", Planner, `{"status": "done"}`,
			[]string{`"status" is "done"`, `"completed", "needs_qa_cycle" or "blocked"`}},
		{"planner qa without questions", Planner, `{"status": "needs_qa_cycle", "questions": [" "]}`,
			[]string{`status "needs_qa_cycle" needs at least one entry in "questions"`}},
		{"planner blocked without blockers", Planner, `{"status": "blocked"}`,
			[]string{`status "blocked" needs at least one entry in "blockers"`}},
		{"planner task without title", Planner, `{"status": "completed", "tasks": [{"title": "a"}, {"title": "  ", "criteria": ["c"]}]}`,
			[]string{`"tasks" entry 2 has an empty "title"`}},

		{"questioner with nothing", Questioner, `{"summary": "nothing to say"}`,
			[]string{`needs at least one entry in "answers" or in "human_questions"`}},
		{"questioner empty answer", Questioner, `{"answers": [{"question": "q", "answer": " "}]}`,
			[]string{`"answers" entry 1 has an empty "answer"`}},
		{"questioner empty question", Questioner, `{"answers": [{"question": "q", "answer": "a"}, {"answer": "a"}]}`,
			[]string{`"answers" entry 2 has an empty "question"`}},

		{"executor bad status", Executor, `{"status": "needs_qa_cycle"}`,
			[]string{`"status" is "needs_qa_cycle"`, `"completed" or "blocked"`}},
		{"executor blocked without blockers", Executor, `{"status": "blocked", "blockers": [""]}`,
			[]string{`status "blocked" needs at least one entry in "blockers"`}},
		{"executor new task without title", Executor, `{"status": "completed", "new_tasks": [{"criteria": ["c"]}]}`,
			[]string{`"new_tasks" entry 1 has an empty "title"`}},

		{"reviewer without verdict", Reviewer, `{"summary": "fine"}`,
			[]string{`"verdict" is missing`, `"Qualified" or "Failed"`}},
		{"reviewer bad verdict", Reviewer, `{"verdict": "Pass"}`,
			[]string{`"verdict" is "Pass"`, `"Qualified" or "Failed"`}},
		{"reviewer failed without reasons", Reviewer, `{"verdict": "failed"}`,
			[]string{`verdict "Failed" needs at least one entry in "reasons"`}},

		{"goal check bad status", GoalCheck, `{"status": "completed"}`,
			[]string{`"status" is "completed"`, `"passed" or "failed"`}},
		{"goal check failed without reasons or tasks", GoalCheck, `{"status": "failed", "reasons": [], "new_tasks": []}`,
			[]string{`status "failed" needs at least one entry in "reasons" or in "new_tasks"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResult(tt.role, tt.text)
			if err == nil {
				t.Fatalf("no error; got %+v", got)
			}
			if !reflect.DeepEqual(got, Result{}) {
				t.Errorf("a failed parse returned %+v", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestParseResultReportsEveryProblem(t *testing.T) {
	_, err := ParseResult(Planner, `{"status": "needs_qa_cycle", "tasks": [{"title": ""}]}`)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{`"tasks" entry 1 has an empty "title"`, `needs at least one entry in "questions"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

func TestParseResultUnknownRole(t *testing.T) {
	for _, name := range []string{"", "Planner", "review", "boss"} {
		_, err := ParseResult(name, `{"status": "completed"}`)
		if err == nil || !strings.Contains(err.Error(), "unknown role") {
			t.Errorf("role %q: err = %v", name, err)
		}
	}
}

var allRoles = []string{Planner, Questioner, Executor, Reviewer, GoalCheck}

func TestResultFormatShowsEachRolesFields(t *testing.T) {
	want := map[string][]string{
		Planner:    {`"status"`, "completed", "needs_qa_cycle", "blocked", `"tasks"`, `"title"`, `"criteria"`, `"questions"`, `"blockers"`},
		Questioner: {`"answers"`, `"question"`, `"answer"`, `"human_questions"`},
		Executor:   {`"status"`, "completed", "blocked", `"blockers"`, `"new_tasks"`, `"new_requirements"`},
		Reviewer:   {`"verdict"`, "Qualified", "Failed", `"reasons"`},
		GoalCheck:  {`"status"`, "passed", "failed", `"reasons"`, `"new_tasks"`},
	}
	for _, r := range allRoles {
		f := ResultFormat(r)
		if !strings.Contains(f, "```json\n{") || !strings.HasSuffix(f, "}\n```") {
			t.Errorf("%s: the format has no ```json block at its end:\n%s", r, f)
		}
		if n := strings.Count(f, "\n") + 1; n > 25 {
			t.Errorf("%s: the format has %d lines, want at most 25", r, n)
		}
		for _, w := range want[r] {
			if !strings.Contains(f, w) {
				t.Errorf("%s: the format lacks %s", r, w)
			}
		}
		// The block is JSON that ParseResult finds.
		if _, err := ParseResult(r, f); err != nil && strings.Contains(err.Error(), errNoResult) {
			t.Errorf("%s: the format's block is not a JSON object: %v", r, err)
		}
	}
	if ResultFormat("boss") != "" {
		t.Error("an unknown role has a format")
	}
}

// An agent that merely echoes the format is asked again rather than taken
// at its word (the questioner has no status to spell as a choice).
func TestEchoedResultFormatIsNotAValidResult(t *testing.T) {
	for _, r := range []string{Planner, Executor, Reviewer, GoalCheck} {
		if got, err := ParseResult(r, "Here is the format:\n"+ResultFormat(r)); err == nil {
			t.Errorf("%s: the echoed format parsed as %+v", r, got)
		}
	}
}

func TestResultReaskPrompt(t *testing.T) {
	_, perr := ParseResult(Executor, "```json\n{\"status\": \"done\"}\n```")
	if perr == nil {
		t.Fatal("no parse error")
	}
	p := ResultReaskPrompt(Executor, perr)
	lines := strings.Split(p, "\n")
	if lines[0] != "Your previous reply had no valid result" {
		t.Errorf("first line = %q", lines[0])
	}
	for _, w := range []string{
		`"status" is "done": it must be "completed" or "blocked"`,
		"ONLY the JSON result",
		"as the executor",
		ResultFormat(Executor),
	} {
		if !strings.Contains(p, w) {
			t.Errorf("re-ask prompt lacks %q:\n%s", w, p)
		}
	}

	multi := ResultReaskPrompt(GoalCheck, errors.New("line one\nline two"))
	if !strings.Contains(multi, "Ralph could not read it: line one line two.\n") {
		t.Errorf("the error is not quoted on one line:\n%s", multi)
	}
	if !strings.Contains(multi, "as the goal check") || !strings.Contains(multi, ResultFormat(GoalCheck)) {
		t.Errorf("goal-check re-ask lacks its format:\n%s", multi)
	}

	none := ResultReaskPrompt(Planner, nil)
	if !strings.Contains(none, "Ralph could not read it: no JSON result found.") {
		t.Errorf("nil error:\n%s", none)
	}
	if !strings.Contains(ResultReaskPrompt("boss", nil), ReaskLine+"\n") {
		t.Error("unknown role: no re-ask line")
	}
}
