package tasks

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// shape1Fixture is snarktank/ralph's prd.json, with an unknown key and a
// compact story to show that layout survives edits.
var shape1Fixture = lines(
	`{`,                                 //  1
	`  "project": "Shop",`,              //  2
	`  "branchName": "ralph/checkout",`, //  3
	`  "description": "Checkout flow",`, //  4
	`  "userStories": [`,                //  5
	`    {`,                             //  6
	`      "id": "US-001",`,             //  7
	`      "title": "Cart",`,            //  8
	`      "description": "As a buyer I see my cart",`,                  //  9
	`      "acceptanceCriteria": [`,                                     // 10
	`        "Shows items",`,                                            // 11
	"        \"Typecheck passes (verify: `npm run tsc`)\",",             // 12
	`        {"text": "Totals add up", "verify": "npm test -- totals"}`, // 13
	`      ],`,                         // 14
	`      "priority": 2,`,             // 15
	`      "passes": false,`,           // 16
	`      "notes": "",`,               // 17
	`      "x-owner": {"team": "web"}`, // 18
	`    },`,                           // 19
	`    {"id": "US-002", "title": "Pay", "priority": 1, "passes": false},`,   // 20
	`    {"id": "US-003", "title": "Receipt", "priority": 3, "passes": true}`, // 21
	`  ]`, // 22
	`}`,   // 23
)

// shape2Fixture is iannuttall/ralph's prd.json.
var shape2Fixture = lines(
	`{`,                    //  1
	`  "version": 1,`,      //  2
	`  "project": "Shop",`, //  3
	`  "qualityGates": ["npm test", "npm run lint"],`, //  4
	`  "stories": [`,                              //  5
	`    {`,                                       //  6
	`      "id": "S-1",`,                          //  7
	`      "title": "Schema",`,                    //  8
	`      "status": "done",`,                     //  9
	`      "dependsOn": [],`,                      // 10
	`      "completedAt": "2026-11-01T00:00:00Z"`, // 11
	`    },`,                                 // 12
	`    {`,                                  // 13
	`      "id": "S-2",`,                     // 14
	`      "title": "API",`,                  // 15
	`      "description": "REST endpoints",`, // 16
	`      "acceptanceCriteria": ["GET works"],`, // 17
	`      "dependsOn": ["S-1"],`,                // 18
	`      "status": "open",`,                    // 19
	`      "startedAt": null,`,                   // 20
	`      "updatedAt": null`,                    // 21
	`    },`,                                     // 22
	`    {`,                                      // 23
	`      "id": "S-3",`,                         // 24
	`      "title": "UI",`,                       // 25
	`      "dependsOn": ["S-2"],`,                // 26
	`      "status": "in_progress",`,             // 27
	`      "updatedAt": "2026-11-02T00:00:00Z"`,  // 28
	`    },`, // 29
	`    {"id": "S-4", "title": "Docs", "status": "blocked"}`, // 30
	`  ]`, // 31
	`}`,   // 32
)

func TestPRDJSONLoadShape1(t *testing.T) {
	path := writeTemp(t, "prd.json", shape1Fixture)
	src := Open(KindJSON, path)
	if src.Kind() != KindJSON || src.Path() != path {
		t.Errorf("Kind, Path = %q, %q", src.Kind(), src.Path())
	}
	b := mustLoad(t, src)
	if b.Kind != KindJSON || b.QualityGates != nil || b.CurrentTask != "" {
		t.Errorf("board header = %q %v %q", b.Kind, b.QualityGates, b.CurrentTask)
	}
	fileLines := strings.Split(shape1Fixture, "\n")
	want := []Story{
		{
			ID: "US-001", Title: "Cart", Description: "As a buyer I see my cart", Line: 6, Priority: 2,
			Status: StatusNotStarted,
			Block:  strings.TrimSpace(strings.TrimSuffix(strings.Join(fileLines[5:19], "\n"), ",")),
			Criteria: []Criterion{
				{Text: "Shows items", Line: 11},
				{Text: "Typecheck passes", Verify: "npm run tsc", Line: 12},
				{Text: "Totals add up", Verify: "npm test -- totals", Line: 13},
			},
		},
		{ID: "US-002", Title: "Pay", Line: 20, Priority: 1, Status: StatusNotStarted,
			Block: `{"id": "US-002", "title": "Pay", "priority": 1, "passes": false}`},
		{ID: "US-003", Title: "Receipt", Line: 21, Priority: 3, Status: StatusComplete, Done: true,
			Block: `{"id": "US-003", "title": "Receipt", "priority": 3, "passes": true}`},
	}
	if !reflect.DeepEqual(b.Stories, want) {
		t.Errorf("stories:\n got %+v\nwant %+v", b.Stories, want)
	}
	// Priority 1 beats file order.
	if sel, _, ok, _ := b.Select(); !ok || sel.TaskID() != "US-002" || sel.Subtask != nil {
		t.Errorf("Select = %q, %v; want US-002", sel.TaskID(), ok)
	}
}

func TestPRDJSONLoadShape2(t *testing.T) {
	path := writeTemp(t, "prd.json", shape2Fixture)
	b := mustLoad(t, Open(KindJSON, path))
	if !reflect.DeepEqual(b.QualityGates, []string{"npm test", "npm run lint"}) {
		t.Errorf("QualityGates = %v", b.QualityGates)
	}
	got := make([]string, len(b.Stories))
	for i, s := range b.Stories {
		got[i] = s.ID + ":" + string(s.Status) + ":" + strings.Join(s.DependsOn, ",")
	}
	want := []string{"S-1:complete:", "S-2:not_started:S-1", "S-3:in_progress:S-2", "S-4:blocked:"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stories = %v, want %v", got, want)
	}
	if s := b.Stories[1]; s.Description != "REST endpoints" || len(s.Criteria) != 1 || s.Line != 13 {
		t.Errorf("S-2 = %+v", s)
	}
	// In-progress work comes first even though its dependency is open.
	if sel, _, ok, _ := b.Select(); !ok || sel.TaskID() != "S-3" {
		t.Errorf("Select = %q, %v; want S-3", sel.TaskID(), ok)
	}
	if b.Remaining() != 3 {
		t.Errorf("Remaining = %d, want 3", b.Remaining())
	}
}

func TestPRDJSONShape1Writes(t *testing.T) {
	path := writeTemp(t, "prd.json", shape1Fixture)
	src := Open(KindJSON, path)
	if err := src.MarkDone("US-002", "", testNow); err != nil {
		t.Fatal(err)
	}
	want := replaceOnce(t, shape1Fixture, `"priority": 1, "passes": false}`, `"priority": 1, "passes": true}`)
	assertFile(t, path, want)

	// Blocked and in-progress have no place in shape 1: nothing changes.
	if err := src.SetState("US-001", StatusBlocked, 2, &Blocker{Reason: "r"}, testNow); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, want)

	if err := src.SetState("US-003", StatusNotStarted, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, `"priority": 3, "passes": true}`, `"priority": 3, "passes": false}`)
	assertFile(t, path, want)

	if err := src.MarkDone("US-001", "", testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, `      "passes": false,`, `      "passes": true,`)
	assertFile(t, path, want)
}

func TestPRDJSONShape1AddsMissingPasses(t *testing.T) {
	in := lines(
		`{"userStories": [`,
		`  {"id": "A", "title": "One"},`,
		`  {"id": "B",`,
		`   "title": "Two"},`,
		`  {"id": "C"},`,
		`  {}`,
		`]}`,
	)
	in = strings.Replace(in, "  {}\n", "  {\n    \"id\": \"D\",\n    \"title\": \"Four\"\n  }\n", 1)
	path := writeTemp(t, "prd.json", in)
	src := Open(KindJSON, path)
	for _, id := range []string{"A", "B", "C", "D"} {
		if err := src.MarkDone(id, "", testNow); err != nil {
			t.Fatal(err)
		}
	}
	assertFile(t, path, lines(
		`{"userStories": [`,
		`  {"id": "A", "title": "One", "passes": true},`,
		`  {"id": "B",`,
		`   "title": "Two",`,
		`   "passes": true},`,
		`  {"id": "C", "passes": true},`,
		`  {`,
		`    "id": "D",`,
		`    "title": "Four",`,
		`    "passes": true`,
		`  }`,
		`]}`,
	))
}

func TestPRDJSONShape2Writes(t *testing.T) {
	path := writeTemp(t, "prd.json", shape2Fixture)
	src := Open(KindJSON, path)

	if err := src.SetState("S-2", StatusInProgress, 1, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want := replaceOnce(t, shape2Fixture, `      "status": "open",
      "startedAt": null,
      "updatedAt": null`, `      "status": "in_progress",
      "startedAt": "`+testStamp+`",
      "updatedAt": "`+testStamp+`"`)
	assertFile(t, path, want)

	// MarkDone adds completedAt where it is missing.
	if err := src.MarkDone("S-3", "", testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, `      "status": "in_progress",
      "updatedAt": "2026-11-02T00:00:00Z"`, `      "status": "done",
      "updatedAt": "`+testStamp+`",
      "completedAt": "`+testStamp+`"`)
	assertFile(t, path, want)

	// Reopening a done story clears completedAt; a compact object keeps
	// its layout.
	if err := src.SetState("S-1", StatusNotStarted, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, `      "status": "done",
      "dependsOn": [],
      "completedAt": "2026-11-01T00:00:00Z"`, `      "status": "open",
      "dependsOn": [],
      "completedAt": null`)
	assertFile(t, path, want)

	if err := src.SetState("S-4", StatusInProgress, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, `"status": "blocked"}`, `"status": "in_progress"}`)
	assertFile(t, path, want)

	// Already done: nothing to write, not even timestamps.
	if err := src.MarkDone("S-3", "", testNow.Add(1)); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, want)
}

func TestPRDJSONCRLF(t *testing.T) {
	in := crlf(lines(`{`, `  "userStories": [`, `    {`, `      "id": "A",`, `      "title": "T"`, `    }`, `  ]`, `}`))
	path := writeTemp(t, "prd.json", in)
	src := Open(KindJSON, path)
	b := mustLoad(t, src)
	if b.Stories[0].Line != 3 || !strings.Contains(b.Stories[0].Block, "\r\n") {
		t.Errorf("story = %+v", b.Stories[0])
	}
	if err := src.MarkDone("A", "", testNow); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, crlf(lines(`{`, `  "userStories": [`, `    {`, `      "id": "A",`, `      "title": "T",`, `      "passes": true`, `    }`, `  ]`, `}`)))
}

func TestPRDJSONWriteErrors(t *testing.T) {
	path := writeTemp(t, "prd.json", shape2Fixture)
	src := Open(KindJSON, path)
	if err := src.MarkDone("S-9", "", testNow); !errors.Is(err, ErrStoryNotFound) {
		t.Errorf("MarkDone unknown story: %v", err)
	}
	if err := src.MarkDone("S-2", "1", testNow); !errors.Is(err, ErrSubtaskNotFound) {
		t.Errorf("MarkDone with a subtask: %v", err)
	}
	if err := src.SetState("S-2", "open", 0, nil, testNow); err == nil {
		t.Errorf("SetState with a format word instead of a Status succeeded")
	}
	assertFile(t, path, shape2Fixture)

	broken := strings.Replace(shape2Fixture, `"title": "API",`, `"title": "API"`, 1)
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	var pe *ParseError
	if err := src.MarkDone("S-2", "", testNow); !errors.As(err, &pe) {
		t.Errorf("MarkDone on broken JSON: %v, want *ParseError", err)
	}
	assertFile(t, path, broken)
}

func TestPRDJSONValidationErrors(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		line, col int
		phrases   []string
	}{
		{"trailing comma", "{\"stories\": [\n  {\"id\": \"A\"},\n]}", 3, 1, []string{"prd.json:3:1:", "invalid JSON: trailing comma before ']'", "fix the JSON syntax"}},
		{"missing colon", "{\n  \"stories\" [\n", 2, 13, []string{"expected ':' after the key \"stories\""}},
		{"unterminated string", "{\"stories\": [{\"id\": \"A}]}\n", 1, 21, []string{"unterminated string"}},
		{"missing comma", "{\"stories\": [{\"id\": \"A\" \"title\": \"x\"}]}", 1, 25, []string{"expected ',' or '}'"}},
		{"bad literal", "{\"stories\": [{\"id\": \"A\", \"passes\": tru}]}", 1, 36, []string{"expected true"}},
		{"column counts characters", "{\"title\": \"é\", x}", 1, 16, []string{"expected a string key"}},
		{"trailing data", "{\"stories\": []} {}", 1, 17, []string{"after the end of the JSON value"}},
		{"empty file", "", 1, 1, []string{"unexpected end of file"}},
		{"duplicate key", "{\"stories\": [{\"id\": \"A\", \"status\": \"open\",\n \"status\": \"done\"}]}", 2, 2, []string{`duplicate key "status" (first on line 1)`}},
		{"not an object", "[1]", 1, 1, []string{"must be a JSON object, not an array"}},
		{"neither key", "{\n  \"project\": \"x\"\n}", 1, 1, []string{`neither "userStories" nor "stories"`, "snarktank", "iannuttall"}},
		{"both keys", "{\"userStories\": [], \"stories\": []}", 1, 32, []string{"both"}},
		{"stories not an array", "{\"stories\": {}}", 1, 13, []string{`"stories" must be an array`}},
		{"no stories", "{\"userStories\": []}", 1, 17, []string{`"userStories" is empty`}},
		{"story not an object", "{\"stories\": [\"A\"]}", 1, 14, []string{"story 1 is a string, not an object"}},
		{"missing id", "{\"stories\": [\n  {\"id\": \"A\"},\n  {\"title\": \"T\"}\n]}", 3, 3, []string{`story 2 has no "id"`}},
		{"empty id", "{\"stories\": [{\"id\": \" \"}]}", 1, 21, []string{"empty \"id\""}},
		{"id not a string", "{\"stories\": [{\"id\": true}]}", 1, 21, []string{`"id" must be a string`}},
		{"slash in id", "{\"stories\": [{\"id\": \"A/B\"}]}", 1, 21, []string{`contains "/"`}},
		{"duplicate id", "{\"stories\": [\n  {\"id\": \"A\"},\n  {\"id\": \"B\"},\n  {\"id\": \"A\"}\n]}", 4, 10, []string{`duplicate story id "A": line 2 already defines`}},
		{"unknown status", "{\"stories\": [\n  {\"id\": \"A\", \"status\": \"finished\"}\n]}", 2, 25, []string{`story A: unknown status "finished"`, `"open", "in_progress", "blocked" or "done"`}},
		{"status not a string", "{\"stories\": [{\"id\": \"A\", \"status\": 1}]}", 1, 36, []string{"unknown status 1"}},
		{"passes not a bool", "{\"userStories\": [{\"id\": \"A\", \"passes\": \"yes\"}]}", 1, 40, []string{`"passes" must be true or false, not a string`}},
		{"priority not whole", "{\"userStories\": [{\"id\": \"A\", \"priority\": 1.5}]}", 1, 42, []string{`"priority" must be a whole number`}},
		{"title not a string", "{\"stories\": [{\"id\": \"A\", \"title\": 5}]}", 1, 35, []string{`"title" must be a string`}},
		{"criteria not an array", "{\"stories\": [{\"id\": \"A\", \"acceptanceCriteria\": \"x\"}]}", 1, 48, []string{`"acceptanceCriteria" must be an array`}},
		{"criterion wrong type", "{\"stories\": [{\"id\": \"A\", \"acceptanceCriteria\": [1]}]}", 1, 49, []string{"criterion is a number"}},
		{"criterion object without text", "{\"stories\": [{\"id\": \"A\", \"acceptanceCriteria\": [{\"verify\": \"x\"}]}]}", 1, 49, []string{`needs a "text" string`}},
		{"empty criterion", "{\"stories\": [{\"id\": \"A\", \"acceptanceCriteria\": [\"  \"]}]}", 1, 49, []string{"empty acceptance criterion"}},
		{"quality gates not strings", "{\"qualityGates\": [1], \"stories\": [{\"id\": \"A\"}]}", 1, 19, []string{`"qualityGates" entries must be strings`}},
		{"dependsOn not an array", "{\"stories\": [{\"id\": \"A\", \"dependsOn\": \"B\"}]}", 1, 39, []string{`"dependsOn" must be an array`}},
		{"missing dependency", "{\"stories\": [\n  {\"id\": \"A\", \"dependsOn\": [\"B\", \"Z\"]},\n  {\"id\": \"B\"}\n]}", 2, 34, []string{`story A depends on "Z", but no story has that id`, "fix the id in dependsOn"}},
		{"cycle", "{\"stories\": [\n  {\"id\": \"A\", \"dependsOn\": [\"B\"]},\n  {\"id\": \"B\", \"dependsOn\": [\"C\"]},\n  {\"id\": \"C\", \"dependsOn\": [\"A\"]}\n]}", 4, 29, []string{"dependency cycle: A → B → C → A", "remove one of these dependsOn entries"}},
		{"invalid escape", "{\"stories\": [{\"id\": \"A\\q\"}]}", 1, 23, []string{`invalid escape \q`}},
		{"control character", "{\"stories\": [{\"id\": \"A\tB\"}]}", 1, 23, []string{"control character"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "prd.json", tt.data)
			_, err := Open(KindJSON, path).Load()
			wantParseError(t, err, tt.line, tt.col, tt.phrases...)
		})
	}
}

func TestParseJSONValues(t *testing.T) {
	data := []byte(`{"s": "a\"b\\c\u00e9\ud83d\ude00\n", "n": -1.5e3, "t": true, "f": false, "z": null, "a": [1, [], {}]}`)
	v, err := parseJSON(data, newLineIndex(data))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.get("s").str; got != "a\"b\\cé😀\n" {
		t.Errorf("string = %q", got)
	}
	if n := v.get("n"); n.kind != jNumber || n.str != "-1.5e3" || string(data[n.start:n.end]) != "-1.5e3" {
		t.Errorf("number = %+v", n)
	}
	if v.get("t").kind != jBool || v.get("z").kind != jNull || len(v.get("a").elems) != 3 {
		t.Errorf("literals or array wrong: %+v", v)
	}
	deep := []byte(strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1))
	if _, err := parseJSON(deep, newLineIndex(deep)); err == nil || !strings.Contains(err.Error(), "nesting") {
		t.Errorf("deep nesting: %v", err)
	}
}

// prd.json's second shape reads progress.txt's words for the same states
// too; what ralph writes back is its own word.
func TestPRDJSONStatusWordsOfProgressTxt(t *testing.T) {
	path := writeTemp(t, "prd.json", "{\"stories\": [\n"+
		"  {\"id\": \"A\", \"title\": \"a\", \"status\": \"complete\"},\n"+
		"  {\"id\": \"B\", \"title\": \"b\", \"status\": \"not_started\"}\n]}\n")
	src := Open(KindJSON, path)
	b := mustLoad(t, src)
	if b.Stories[0].Status != StatusComplete || !b.Stories[0].Done || b.Stories[1].Status != StatusNotStarted {
		t.Fatalf("statuses = %s, %s; want complete, not_started", b.Stories[0].Status, b.Stories[1].Status)
	}
	if sel, _, ok, _ := b.Select(); !ok || sel.TaskID() != "B" {
		t.Fatalf("Select = %q, %v; want B", sel.TaskID(), ok)
	}
}

// parseJSON is parseJSONText without the text.
func parseJSON(data []byte, lines *lineIndex) (*jvalue, error) {
	v, _, err := parseJSONText(data, lines)
	return v, err
}
