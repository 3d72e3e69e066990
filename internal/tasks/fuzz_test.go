package tasks

// Fuzz targets for the editors of the task files. Each one loads a file,
// makes the edit ralph makes, and checks what a user would notice if it
// went wrong: the file still parses into the same stories, the edit says
// what was intended, and nothing outside the edited values changed. The
// seeds run as ordinary tests; run a target longer with, for example,
//
//	go test -run '^$' -fuzz FuzzPRDMarkdown -fuzztime 60s ./internal/tasks/

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// maxFuzzInput keeps each input small, so the fuzzer explores shapes rather
// than sizes.
const maxFuzzInput = 4 << 10

func FuzzPRDMarkdown(f *testing.F) {
	f.Add([]byte("### [x] US-001: Show finished items\n- [X] the list shows [x] next to finished items\n"))
	f.Add([]byte(examplePRD))
	f.Add([]byte("\uFEFF### [ ] US-001: Mark [x] in the title\r\n  * [x] criterion (verify: `grep -q '[x]' out`)\r\n\t+ [X]\tTab [X]\r\n- [ ] open [X]\r\n## Notes\n- [x] not a criterion\n### [X] US-002: B\n```\n- [x] in a fence\n```\n- [x] b1\n"))
	f.Add([]byte(dependsPRD))
	f.Add([]byte("### [ ] US-1: A\r\n- **Depends on:** US-2,US-3\r\n- [x] c\r\n### [x] US-2: B\r\ndepends: none\r\n### [ ] US-3: C\r\n  * Depends: US-2 \r\n- [X] d\r\n"))
	f.Add([]byte("### [ ] US-1: A\nDepends: US-2\n### [ ] US-2: B\nDepends on: US-1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		prd, err := ParseMarkdown("", data)
		if err == nil {
			// What ralph's scheduler relies on: every dependency is a
			// story of the file, and none is the story itself.
			ids := map[string]bool{}
			for _, s := range prd.Stories {
				ids[s.ID] = true
			}
			for _, s := range prd.Stories {
				for _, d := range s.DependsOn {
					if !ids[d] || d == s.ID {
						t.Fatalf("story %s depends on %q, which is itself or no story of the PRD", s.ID, d)
					}
				}
			}
		}
		if err != nil {
			if _, err2 := SetStoryDone(data, "US-1", true); err2 == nil {
				t.Fatalf("SetStoryDone edited a PRD that does not parse (%v)", err)
			}
			if _, err2 := CheckCriteria(data, "US-1"); err2 == nil {
				t.Fatalf("CheckCriteria edited a PRD that does not parse (%v)", err)
			}
			if _, err2 := SetCriteriaMarks(data, "US-1", []bool{true}); err2 == nil {
				t.Fatalf("SetCriteriaMarks edited a PRD that does not parse (%v)", err)
			}
			if _, err2 := UncheckCriteria(data, "US-1"); err2 == nil {
				t.Fatalf("UncheckCriteria edited a PRD that does not parse (%v)", err)
			}
			return
		}
		lines := bytes.SplitAfter(data, []byte("\n"))
		for i, s := range prd.Stories {
			heading := []int{s.Line}
			var ticked []int
			for _, c := range s.Criteria {
				if c.Done {
					ticked = append(ticked, c.Line)
				}
			}

			done, err := SetStoryDone(data, s.ID, true)
			if err != nil {
				t.Fatalf("tick %s: %v", s.ID, err)
			}
			checkOnlyBoxesChanged(t, lines, data, done, heading)
			checkReparse(t, done, prd, i, func(st *Story) { st.Done, st.Status = true, StatusComplete })

			open, err := SetStoryDone(done, s.ID, false)
			if err != nil {
				t.Fatalf("untick %s: %v", s.ID, err)
			}
			checkOnlyBoxesChanged(t, lines, data, open, heading)
			checkReparse(t, open, prd, i, func(st *Story) { st.Done, st.Status = false, StatusNotStarted })

			unchecked, err := UncheckCriteria(data, s.ID)
			if err != nil {
				t.Fatalf("uncheck %s: %v", s.ID, err)
			}
			checkOnlyBoxesChanged(t, lines, data, unchecked, ticked)
			checkReparse(t, unchecked, prd, i, func(st *Story) {
				st.Criteria = append([]Criterion(nil), st.Criteria...)
				for k := range st.Criteria {
					st.Criteria[k].Done = false
				}
			})

			// ralph ticks every criterion of a story it accepts, and
			// keeps an agent's own ticks (its claim) when it puts the
			// rest of the PRD back: only boxes change, and exactly those.
			var all []int
			for _, c := range s.Criteria {
				all = append(all, c.Line)
			}
			checked, err := CheckCriteria(data, s.ID)
			if err != nil {
				t.Fatalf("check %s: %v", s.ID, err)
			}
			checkOnlyBoxesChanged(t, lines, data, checked, all)
			checkReparse(t, checked, prd, i, func(st *Story) {
				st.Criteria = append([]Criterion(nil), st.Criteria...)
				for k := range st.Criteria {
					st.Criteria[k].Done = true
				}
			})
			marks := make([]bool, len(s.Criteria))
			for k := range marks {
				marks[k] = (len(data)+k+i)%3 == 0
			}
			marked, err := SetCriteriaMarks(data, s.ID, marks)
			if err != nil {
				t.Fatalf("set marks of %s: %v", s.ID, err)
			}
			checkOnlyBoxesChanged(t, lines, data, marked, all)
			checkReparse(t, marked, prd, i, func(st *Story) {
				st.Criteria = append([]Criterion(nil), st.Criteria...)
				for k := range st.Criteria {
					st.Criteria[k].Done = marks[k]
				}
			})
		}
	})
}

// checkOnlyBoxesChanged fails unless edited equals data except for box
// characters of the given lines (1-based): the character between the
// brackets that open the line after "### ", or after the indentation and
// list marker of an item.
func checkOnlyBoxesChanged(t *testing.T, lines [][]byte, data, edited []byte, boxLines []int) {
	t.Helper()
	if len(edited) != len(data) {
		t.Fatalf("edit changed the length from %d to %d bytes:\n%q\n%q", len(data), len(edited), data, edited)
	}
	allowed := map[int]bool{}
	start := 0
	for no, line := range lines {
		if at := boxIn(line); at >= 0 && containsInt(boxLines, no+1) {
			allowed[start+at] = true
		}
		start += len(line)
	}
	for i := range data {
		if data[i] != edited[i] && !allowed[i] {
			t.Fatalf("edit changed byte %d (%q to %q), which is not a box:\n%q\n%q", i, data[i], edited[i], data, edited)
		}
	}
}

// boxIn returns the offset of the box character of a story heading or list
// item line, or -1; it is the test's own reading of the format.
func boxIn(line []byte) int {
	if bytes.HasPrefix(bytes.TrimPrefix(line, []byte(byteOrderMark)), []byte("### [")) {
		return len(line) - len(bytes.TrimPrefix(line, []byte(byteOrderMark))) + len("### [")
	}
	rest := bytes.TrimLeft(line, " \t")
	if len(rest) < 2 || !bytes.ContainsRune([]byte("-*+"), rune(rest[0])) {
		return -1
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	if len(rest) < 2 || rest[0] != '[' {
		return -1
	}
	return len(line) - len(rest) + 1
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// checkReparse fails unless edited parses into the stories of before, with
// story i changed by want and every Block aside (the edited boxes are in
// them).
func checkReparse(t *testing.T, edited []byte, before *PRD, i int, want func(*Story)) {
	t.Helper()
	after, err := ParseMarkdown("", edited)
	if err != nil {
		t.Fatalf("the edited PRD does not parse: %v\n%q", err, edited)
	}
	expected := append([]Story(nil), before.Stories...)
	want(&expected[i])
	if len(after.Stories) != len(expected) {
		t.Fatalf("the edited PRD has %d stories, want %d", len(after.Stories), len(expected))
	}
	for k := range expected {
		got, exp := after.Stories[k], expected[k]
		got.Block, exp.Block = "", ""
		if len(got.Criteria) == 0 && len(exp.Criteria) == 0 {
			got.Criteria, exp.Criteria = nil, nil
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("story %d reads back as\n%+v\nwant\n%+v\nedited:\n%q", k, got, exp, edited)
		}
	}
}

// fuzzStatuses are the statuses the JSON and YAML targets write.
var fuzzStatuses = []Status{StatusNotStarted, StatusInProgress, StatusBlocked, StatusComplete}

func FuzzPRDJSON(f *testing.F) {
	f.Add([]byte(shape1Fixture), uint8(0))
	f.Add([]byte(shape2Fixture), uint8(0x31))
	f.Add([]byte(strings.ReplaceAll(shape2Fixture, "\n", "\r\n")), uint8(0x12))
	f.Add([]byte(`{"stories":[{"id":"A","status":"open","title":"shows \"[x]\" marks"}, {"id":2}]}`), uint8(0x30))
	f.Add([]byte(`{"userStories":[{"id":"US-1"}]}`), uint8(0x30))
	f.Fuzz(func(t *testing.T, data []byte, pick uint8) {
		if len(data) > maxFuzzInput {
			return
		}
		path := filepath.Join(t.TempDir(), "prd.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		src := Open(KindJSON, path)
		before, err := parsePRDJSON(path, data)
		if err != nil {
			if err2 := src.SetState("US-1", StatusComplete, 0, nil, testNow); err2 == nil {
				t.Fatalf("SetState edited a prd.json that does not parse (%v)", err)
			}
			assertFile(t, path, string(data))
			return
		}
		i := int(pick&0x0f) % len(before.board.Stories)
		status := fuzzStatuses[int(pick>>4)%len(fuzzStatuses)]
		story := before.board.Stories[i]
		if err := src.SetState(story.ID, status, 0, nil, testNow); err != nil {
			t.Fatalf("SetState(%s, %s): %v\n%q", story.ID, status, err, data)
		}
		out, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		after, err := parsePRDJSON(path, out)
		if err != nil {
			t.Fatalf("the edited prd.json does not parse: %v\n%q", err, out)
		}

		// Only the story's own object may change.
		obj := before.stories[i]
		prefix, suffix := commonPrefix(data, out), commonPrefix(reversed(data), reversed(out))
		if prefix < obj.start || len(data)-suffix > obj.end {
			t.Fatalf("SetState(%s) changed bytes outside the story's object:\n%q\n%q", story.ID, data, out)
		}

		// Every story reads back as before but for the edited status.
		if len(after.board.Stories) != len(before.board.Stories) {
			t.Fatalf("%d stories after the edit, want %d", len(after.board.Stories), len(before.board.Stories))
		}
		for k, want := range before.board.Stories {
			got := after.board.Stories[k]
			if k == i {
				wantStatus := status
				if before.shape == shapeUserStories && status != StatusComplete && status != StatusNotStarted {
					wantStatus = want.Status // shape 1 has no place for it
				}
				if got.Status != wantStatus {
					t.Fatalf("story %s reads back as %s, want %s\n%q", want.ID, got.Status, wantStatus, out)
				}
				want.Status, want.Done = got.Status, got.Done
			}
			got.Block, want.Block = "", ""
			got.Line, want.Line = 0, 0
			for c := range got.Criteria {
				got.Criteria[c].Line = 0
			}
			want.Criteria = append([]Criterion(nil), want.Criteria...)
			for c := range want.Criteria {
				want.Criteria[c].Line = 0
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("story %d reads back as\n%+v\nwant\n%+v", k, got, want)
			}
		}

		// Where encoding/json reads the file too, the documents differ only
		// in the values ralph owns.
		var a, b map[string]any
		if json.Unmarshal(data, &a) != nil {
			return
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("encoding/json no longer reads the edited prd.json: %v\n%q", err, out)
		}
		for _, doc := range []map[string]any{a, b} {
			key := jkUserStories
			if before.shape == shapeStories {
				key = jkStories
			}
			if m, ok := doc[key].([]any)[i].(map[string]any); ok {
				for _, k := range []string{jkPasses, jkStatus, jkStartedAt, jkCompletedAt, jkUpdatedAt} {
					delete(m, k)
				}
			}
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("SetState changed values ralph does not own:\n%q\n%q", data, out)
		}
	})
}

func FuzzProgressYAML(f *testing.F) {
	f.Add([]byte(progressFixture), uint8(0x21))
	f.Add([]byte(progressTemplate), uint8(0x20))
	f.Add([]byte(strings.ReplaceAll(progressFixture, "\n", "\r\n")), uint8(0x33))
	f.Add([]byte("stories: [{id: a, status: blocked, blocker_reason: x}, {id: b}] # flow\n"), uint8(0x00))
	f.Add([]byte("stories:\n- id: a # [x] not a box\n  title: 'it''s [x]'\n  status: in_progress\n"), uint8(0x30))
	f.Fuzz(func(t *testing.T, data []byte, pick uint8) {
		if len(data) > maxFuzzInput {
			return
		}
		path := filepath.Join(t.TempDir(), "progress.txt")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		src := Open(KindProgress, path)
		before, err := parseProgress(path, data, nil)
		if err != nil {
			if err2 := src.SetState("1.1", StatusComplete, 0, nil, testNow); err2 == nil {
				t.Fatalf("SetState edited a progress file that does not parse (%v)", err)
			}
			assertFile(t, path, string(data))
			return
		}
		i := int(pick&0x0f) % len(before.board.Stories)
		status := fuzzStatuses[int(pick>>4)%len(fuzzStatuses)]
		story := before.board.Stories[i]
		var blocker *Blocker
		if status == StatusBlocked {
			blocker = &Blocker{Reason: "tests: fail # [x]", Type: BlockerTransient, AttemptedFixes: []string{"retried"}}
		}
		err = src.SetState(story.ID, status, int(pick&3), blocker, testNow)
		if err != nil && !strings.Contains(err.Error(), "internal error") {
			// A value the editor cannot locate (an anchor, a tag) is
			// refused with a message; that leaves the file alone.
			assertFile(t, path, string(data))
			return
		}
		if err != nil {
			t.Fatalf("SetState(%s, %s): %v\n%q", story.ID, status, err, data)
		}
		out, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		after, err := parseProgress(path, out, nil)
		if err != nil {
			t.Fatalf("the edited progress file does not parse: %v\n%q", err, out)
		}
		got := after.board.Stories[i]
		if got.Status != status || got.RetryCount != int(pick&3) || !sameBlocker(got.Blocker, blocker) {
			t.Fatalf("story %s reads back as %s/%d/%+v\n%q", story.ID, got.Status, got.RetryCount, got.Blocker, out)
		}
		for k, want := range before.board.Stories {
			if k == i {
				continue
			}
			got := after.board.Stories[k]
			got.Line, want.Line = 0, 0
			if !reflect.DeepEqual(got.ID, want.ID) || got.Status != want.Status || got.Title != want.Title || got.RetryCount != want.RetryCount || !sameBlocker(got.Blocker, want.Blocker) {
				t.Fatalf("story %s changed: %+v, want %+v\n%q", want.ID, got, want, out)
			}
			if !before.stories[k].m.flow && !after.stories[k].m.flow && got.Block != want.Block {
				t.Fatalf("story %s's lines changed:\n%q\nwant\n%q", want.ID, got.Block, want.Block)
			}
		}
		for _, c := range commentLines(data) {
			if !bytes.Contains(out, c) {
				t.Fatalf("comment %q was lost:\n%q\n%q", c, data, out)
			}
		}
	})
}

// commentLines returns the lines of data that hold only a comment.
func commentLines(data []byte) [][]byte {
	var out [][]byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		if t := bytes.TrimSpace(line); bytes.HasPrefix(t, []byte("#")) {
			out = append(out, t)
		}
	}
	return out
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func reversed(b []byte) []byte {
	r := make([]byte, len(b))
	for i, c := range b {
		r[len(b)-1-i] = c
	}
	return r
}
