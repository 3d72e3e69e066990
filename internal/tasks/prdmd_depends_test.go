package tasks

import (
	"reflect"
	"strings"
	"testing"
)

// dependsPRD has a story of every Depends spelling a user may write, one
// quoted in a code fence, and one without the line.
var dependsPRD = lines(
	"# PRD: Depends",                       //  1
	"",                                     //  2
	"### [x] US-001: Base",                 //  3
	"### [ ] US-002: Comma list",           //  4
	"Depends: US-001, BUG-7",               //  5
	"- [ ] a criterion",                    //  6
	"### [ ] US-003: Blanks and commas",    //  7
	"  depends on:US-001  US-002,,BUG-7",   //  8
	"### [ ] US-004: Bold in a list",       //  9
	"- **Depends on:** US-003",             // 10
	"### [ ] US-005: Two lines add up",     // 11
	"DEPENDS: US-001",                      // 12
	"Depends On: US-002",                   // 13
	"### [ ] US-006: None",                 // 14
	"Depends on: none",                     // 15
	"### [ ] US-007: Fenced example",       // 16
	"```",                                  // 17
	"Depends: NOPE-1",                      // 18
	"```",                                  // 19
	"Depends on the weather, not a story.", // 20
	"### [x] BUG-7: Independent",           // 21
)

func TestMarkdownDependsLineFillsDependsOn(t *testing.T) {
	prd := mustParse(t, dependsPRD)
	want := map[string][]string{
		"US-001": nil,
		"US-002": {"US-001", "BUG-7"},
		"US-003": {"US-001", "US-002", "BUG-7"},
		"US-004": {"US-003"},
		"US-005": {"US-001", "US-002"},
		"US-006": nil,
		"US-007": nil, // the fenced line is an example, and prose is prose
		"BUG-7":  nil,
	}
	for _, s := range prd.Stories {
		if !reflect.DeepEqual(s.DependsOn, want[s.ID]) {
			t.Errorf("%s depends on %q, want %q", s.ID, s.DependsOn, want[s.ID])
		}
	}
	// The line stays part of the story as the agent sees it, and is no
	// criterion.
	s, _ := prd.Find("US-002")
	if !strings.Contains(s.Block, "Depends: US-001, BUG-7") || len(s.Criteria) != 1 {
		t.Errorf("US-002 block %q with %d criteria, want the Depends line in it and 1 criterion", s.Block, len(s.Criteria))
	}
}

func TestMarkdownDependsErrors(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		line, col int
		phrases   []string
	}{
		{
			name:    "unknown id",
			data:    lines("### [ ] US-001: A", "### [ ] US-002: B", "Depends: US-001, US-009"),
			line:    3,
			col:     18,
			phrases: []string{"prd.md:3:18: ", `story US-002 depends on "US-009", but no story has that id`, "fix the id in Depends"},
		},
		{
			name:    "cycle",
			data:    lines("### [ ] US-001: A", "Depends on: US-002", "### [ ] US-002: B", "Depends on: US-001"),
			line:    4,
			col:     13,
			phrases: []string{"dependency cycle: US-001 → US-002 → US-001", "remove one of these Depends entries"},
		},
		{
			name:    "a story depending on itself",
			data:    lines("### [ ] US-001: A", "**Depends:** US-001"),
			line:    2,
			col:     14,
			phrases: []string{"dependency cycle: US-001 → US-001"},
		},
		{
			name:    "a word that is not an id",
			data:    lines("### [ ] US-001: A", "### [ ] US-002: B", "Depends: US-001 and the API"),
			line:    3,
			col:     17,
			phrases: []string{`story US-002: "and" in its Depends line is not a story id`, `like "Depends: US-001, US-002"`},
		},
		{
			name:    "a lowercase id",
			data:    lines("### [ ] US-001: A", "### [ ] US-002: B", "depends: us-001"),
			line:    3,
			col:     10,
			phrases: []string{`"us-001" in its Depends line is not a story id`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMarkdown("prd.md", []byte(tt.data))
			wantParseError(t, err, tt.line, tt.col, tt.phrases...)
			// The editors refuse a PRD they could not read back.
			if _, err := SetStoryDone([]byte(tt.data), "US-001", true); err == nil {
				t.Error("SetStoryDone edited a PRD with a broken Depends line")
			}
		})
	}
}

// TestMarkdownWritersKeepTheDependsLine checks that ralph marking stories
// done and reopening them leaves the dependencies as the user wrote them.
func TestMarkdownWritersKeepTheDependsLine(t *testing.T) {
	path := writeTemp(t, "prd.md", crlf(dependsPRD))
	src := Open(KindMarkdown, path)
	if err := src.MarkDone("US-002", "", testNow); err != nil {
		t.Fatal(err)
	}
	if err := src.SetState("US-004", StatusComplete, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	if err := src.SetState("US-001", StatusNotStarted, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want := dependsPRD
	want = replaceOnce(t, want, "### [ ] US-002", "### [x] US-002")
	want = replaceOnce(t, want, "- [ ] a criterion", "- [x] a criterion") // MarkDone ticks the criteria too
	want = replaceOnce(t, want, "### [ ] US-004", "### [x] US-004")
	want = replaceOnce(t, want, "### [x] US-001", "### [ ] US-001")
	assertFile(t, path, crlf(want))

	b := mustLoad(t, src)
	if got, _ := b.Find("US-003"); !reflect.DeepEqual(got.DependsOn, []string{"US-001", "US-002", "BUG-7"}) {
		t.Errorf("after the writes US-003 depends on %q", got.DependsOn)
	}

	data := []byte(readString(t, path))
	out, err := UncheckCriteria(data, "US-002")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "Depends: US-001, BUG-7\r\n") {
		t.Errorf("UncheckCriteria lost the Depends line:\n%s", out)
	}
}

// TestMarkdownDependsHoldSelectBack checks what a user of a markdown PRD
// notices: a story waits for the stories its Depends line names.
func TestMarkdownDependsHoldSelectBack(t *testing.T) {
	path := writeTemp(t, "prd.md", lines(
		"### [ ] US-001: Needs the schema",
		"Depends: US-002",
		"### [ ] US-002: Schema",
	))
	src := Open(KindMarkdown, path)
	sel, _, ok, _ := mustLoad(t, src).Select()
	if !ok || sel.Story.ID != "US-002" {
		t.Fatalf("selected %q (ok %v), want US-002 before the story that depends on it", sel.Story.ID, ok)
	}
	if err := src.MarkDone("US-002", "", testNow); err != nil {
		t.Fatal(err)
	}
	sel, _, ok, _ = mustLoad(t, src).Select()
	if !ok || sel.Story.ID != "US-001" {
		t.Fatalf("selected %q (ok %v) once US-002 is done, want US-001", sel.Story.ID, ok)
	}
}
