package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var progressFixture = lines(
	"# Project progress: comments are preserved",     //  1
	"current_task: null",                             //  2
	"last_updated: 2026-11-20T09:00:00Z",             //  3
	"current_iteration:",                             //  4
	"  number: 3",                                    //  5
	"  neo4j_connected: true",                        //  6
	"owner: team-a          # unknown key",           //  7
	"stories:",                                       //  8
	`  - id: "1.1"`,                                  //  9
	"    title: Login form",                          // 10
	"    status: complete",                           // 11
	"    retry_count: 0",                             // 12
	`  - id: "1.2"`,                                  // 13
	"    title: Signup",                              // 14
	"    status: in_progress        # working on it", // 15
	"    retry_count: 1",                             // 16
	"    custom: keep me",                            // 17
	"    acceptance_criteria:",                       // 18
	"      - Form shows email and password",          // 19
	"      - text: Submit calls the API",             // 20
	"        verify: sh tests/signup.sh",             // 21
	"      - 'Validates input (verify: `sh tests/validate.sh`)'", // 22
	"    subtasks:",                           // 23
	`      - id: "1.2.1"`,                     // 24
	"        title: Write the form component", // 25
	"        status: complete",                // 26
	`      - id: "1.2.2"`,                     // 27
	"        title: Wire submit",              // 28
	"        done: false",                     // 29
	`      - id: "1.2.3"`,                     // 30
	"        title: Polish",                   // 31
	`    depends_on: ["1.1"]`,                 // 32
	`  - id: "2.1"`,                           // 33
	"    title: Dashboard",                    // 34
	"    status: blocked",                     // 35
	"    retry_count: 2",                      // 36
	`    blocker_reason: "API down: 503"`,     // 37
	"    blocker_type: transient",             // 38
	"    requires_human: false",               // 39
	"    attempted_fixes:",                    // 40
	"      - retried",                         // 41
	"      - waited",                          // 42
	`  - id: "2.2"`,                           // 43
	"    title: Reports",                      // 44
	"    depends_on:",                         // 45
	`      - "2.1"`,                           // 46
	`  - id: "3.1"`,                           // 47
	"    title: Settings",                     // 48
	"    file: stories/3.1.md",                // 49
	"    priority: 2",                         // 50
	"metrics:",                                // 51
	"  stories_completed: 1",                  // 52
	"  total_iterations: 7",                   // 53
)

var storyFile31 = lines(
	"# Story 3.1: Settings",
	"",
	"## Acceptance Criteria",
	"",
	"1. Settings page lists options",
	"   - a nested detail, not a criterion",
	"2. [x] Saving persists (verify: `sh tests/settings.sh`)",
	"",
	"```",
	"3. quoted, not a criterion",
	"```",
	"### Notes inside the section",
	"3. Reset restores defaults",
	"",
	"## Tasks / Subtasks",
	"- [ ] not a criterion",
)

// writeProgress writes the fixture with its story file and opens it.
func writeProgress(t *testing.T, content string) (Source, string) {
	t.Helper()
	path := writeTemp(t, "progress.txt", content)
	if err := os.MkdirAll(filepath.Join(filepath.Dir(path), "stories"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "stories", "3.1.md"), []byte(storyFile31), 0o644); err != nil {
		t.Fatal(err)
	}
	return Open(KindProgress, path), path
}

func TestProgressLoad(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	if src.Kind() != KindProgress || src.Path() != path {
		t.Errorf("Kind, Path = %q, %q", src.Kind(), src.Path())
	}
	b := mustLoad(t, src)
	if b.Kind != KindProgress || b.Path != path || b.CurrentTask != "" || b.QualityGates != nil {
		t.Errorf("board header = %q %q %q %v", b.Kind, b.Path, b.CurrentTask, b.QualityGates)
	}
	if got, want := storyIDs(b), []string{"1.1", "1.2", "2.1", "2.2", "3.1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("story ids = %v, want %v", got, want)
	}

	s := b.Stories[1]
	want := Story{
		ID: "1.2", Title: "Signup", Line: 13, Status: StatusInProgress, RetryCount: 1,
		Block: strings.Join(strings.Split(progressFixture, "\n")[12:32], "\n"),
		Criteria: []Criterion{
			{Text: "Form shows email and password", Line: 19},
			{Text: "Submit calls the API", Verify: "sh tests/signup.sh", Line: 20},
			{Text: "Validates input", Verify: "sh tests/validate.sh", Line: 22},
		},
		Subtasks: []Subtask{
			{ID: "1.2.1", Title: "Write the form component", Done: true},
			{ID: "1.2.2", Title: "Wire submit"},
			{ID: "1.2.3", Title: "Polish"},
		},
		DependsOn: []string{"1.1"},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("story 1.2:\n got %+v\nwant %+v", s, want)
	}
	if s := b.Stories[0]; !s.Done || s.Status != StatusComplete {
		t.Errorf("story 1.1 = %+v, want complete", s)
	}
	wantBlocker := &Blocker{Reason: "API down: 503", Type: BlockerTransient, AttemptedFixes: []string{"retried", "waited"}}
	if s := b.Stories[2]; s.Status != StatusBlocked || s.RetryCount != 2 || !reflect.DeepEqual(s.Blocker, wantBlocker) {
		t.Errorf("story 2.1 = %+v, blocker %+v", s, s.Blocker)
	}
	if s := b.Stories[3]; s.Status != StatusNotStarted || !reflect.DeepEqual(s.DependsOn, []string{"2.1"}) || s.Title != "Reports" {
		t.Errorf("story 2.2 = %+v", s)
	}
	wantAC := []Criterion{
		{Text: "Settings page lists options", Line: 5},
		{Text: "Saving persists", Verify: "sh tests/settings.sh", Done: true, Line: 7},
		{Text: "Reset restores defaults", Line: 13},
	}
	if s := b.Stories[4]; s.Priority != 2 || !reflect.DeepEqual(s.Criteria, wantAC) {
		t.Errorf("story 3.1 priority %d, criteria from the story file:\n got %+v\nwant %+v", s.Priority, s.Criteria, wantAC)
	}

	sel, finished, ok, reason := b.Select()
	if !ok || sel.TaskID() != "1.2/1.2.2" || finished != nil || reason != "" {
		t.Errorf("Select = %q, %v, %v, %q; want 1.2/1.2.2", sel.TaskID(), finished, ok, reason)
	}
	if b.Remaining() != 4 {
		t.Errorf("Remaining = %d, want 4", b.Remaining())
	}
}

func TestProgressTemplate(t *testing.T) {
	src, _ := writeProgress(t, ProgressTemplate())
	b := mustLoad(t, src)
	if len(b.Stories) != 1 || len(b.Stories[0].Subtasks) != 2 || len(b.Stories[0].Criteria) != 2 {
		t.Fatalf("template board = %+v", b.Stories)
	}
	sel, _, ok, _ := b.Select()
	if !ok || sel.TaskID() != "1.1/1.1.1" {
		t.Errorf("template selects %q, %v; want 1.1/1.1.1", sel.TaskID(), ok)
	}
	for _, word := range []string{"not_started", "in_progress", "blocked", "complete", "blocker_reason", "requires_human", "depends_on", "verify:", "retry_count", "current_task"} {
		if !strings.Contains(ProgressTemplate(), word) {
			t.Errorf("template does not explain %q", word)
		}
	}
}

func TestProgressMarkDoneSubtask(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	if err := src.MarkDone("1.2", "1.2.2", testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	want = replaceOnce(t, want, "current_task: null", `current_task: "1.2/1.2.3"`)
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "        done: false", "        done: true")
	want = replaceOnce(t, want, "    retry_count: 1", "    retry_count: 0")
	assertFile(t, path, want)

	// A subtask with neither done nor status gets "status: complete" after
	// its title; the last subtask completes the story.
	if err := src.MarkDone("1.2", "1.2.3", testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, "        title: Polish\n", "        title: Polish\n        status: complete\n")
	want = replaceOnce(t, want, "    status: in_progress        # working on it", "    status: complete           # working on it")
	// 2.2 waits on the blocked 2.1, so 3.1 is next.
	want = replaceOnce(t, want, `current_task: "1.2/1.2.3"`, `current_task: "3.1"`)
	assertFile(t, path, want)
	b := mustLoad(t, src)
	if s, _ := b.Find("1.2"); !s.Done || !allSubtasksDone(s.Subtasks) {
		t.Errorf("story 1.2 after marking every subtask = %+v", s)
	}
}

func TestProgressMarkDoneStoryClearsBlocker(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	if err := src.MarkDone("2.1", "", testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	want = replaceOnce(t, want, "current_task: null", `current_task: "1.2/1.2.2"`)
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "    status: blocked\n    retry_count: 2\n", "    status: complete\n    retry_count: 0\n")
	want = replaceOnce(t, want, "    blocker_reason: \"API down: 503\"\n    blocker_type: transient\n    requires_human: false\n    attempted_fixes:\n      - retried\n      - waited\n", "")
	assertFile(t, path, want)
}

func TestProgressSetStateBlocks(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	blocker := &Blocker{Reason: "tests fail: 3 of 10", Type: BlockerPermanent, RequiresHuman: true, AttemptedFixes: []string{"fix import", "1.2 rollback"}}
	if err := src.SetState("1.2", StatusBlocked, 2, blocker, testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	want = replaceOnce(t, want, "current_task: null", `current_task: "3.1"`)
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "    status: in_progress        # working on it\n    retry_count: 1\n",
		"    status: blocked            # working on it\n    retry_count: 2\n"+
			"    blocker_reason: \"tests fail: 3 of 10\"\n"+
			"    blocker_type: permanent\n"+
			"    requires_human: true\n"+
			"    attempted_fixes:\n"+
			"      - fix import\n"+
			"      - \"1.2 rollback\"\n")
	assertFile(t, path, want)
	b := mustLoad(t, src)
	if s, _ := b.Find("1.2"); !reflect.DeepEqual(s.Blocker, blocker) || s.Status != StatusBlocked || s.RetryCount != 2 {
		t.Errorf("story 1.2 reads back as %+v with blocker %+v", s, s.Blocker)
	}

	// Re-sending the same state changes nothing, not even last_updated.
	before := readString(t, path)
	if err := src.SetState("1.2", StatusBlocked, 2, blocker, testNow.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, before)
}

func TestProgressSetStateUpdatesBlocker(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	// The type and the reason change, requires_human already matches, the
	// fixes list grows and keeps its block style.
	b := &Blocker{Reason: "still down", Type: BlockerPermanent, AttemptedFixes: []string{"retried", "waited", "asked ops"}}
	if err := src.SetState("2.1", StatusBlocked, 3, b, testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	want = replaceOnce(t, want, "current_task: null", `current_task: "1.2/1.2.2"`)
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "    retry_count: 2\n    blocker_reason: \"API down: 503\"\n    blocker_type: transient\n",
		"    retry_count: 3\n    blocker_reason: still down\n    blocker_type: permanent\n")
	want = replaceOnce(t, want, "      - waited\n", "      - waited\n      - asked ops\n")
	assertFile(t, path, want)

	// A blocker without a type or fixes removes those keys.
	if err := src.SetState("2.1", StatusBlocked, 3, &Blocker{Reason: "still down"}, testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, "    blocker_type: permanent\n", "")
	want = replaceOnce(t, want, "    attempted_fixes:\n      - retried\n      - waited\n      - asked ops\n", "")
	assertFile(t, path, want)
}

func TestProgressSetStateUnblocks(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	if err := src.SetState("2.1", StatusInProgress, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	// 1.2 comes before 2.1 in the file, so it stays the current task.
	want = replaceOnce(t, want, "current_task: null", `current_task: "1.2/1.2.2"`)
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "    status: blocked\n    retry_count: 2\n    blocker_reason: \"API down: 503\"\n    blocker_type: transient\n    requires_human: false\n    attempted_fixes:\n      - retried\n      - waited\n",
		"    status: in_progress\n    retry_count: 0\n")
	assertFile(t, path, want)
}

func TestProgressSetStateAddsMissingKeys(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	// Story 2.2 has no status or retry_count: they go after its title.
	if err := src.SetState("2.2", StatusInProgress, 1, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	want = replaceOnce(t, want, "current_task: null", `current_task: "1.2/1.2.2"`)
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "    title: Reports\n", "    title: Reports\n    status: in_progress\n    retry_count: 1\n")
	assertFile(t, path, want)
}

func TestProgressSetMetrics(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	m := map[string]string{"stories_completed": "2", "total_iterations": "7", "time_elapsed": "1h 2m", "final_commit": "abc123", "cost_usd": "1.25"}
	if err := src.(MetricsRecorder).SetMetrics(m, testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "  stories_completed: 1\n  total_iterations: 7\n",
		"  stories_completed: 2\n  total_iterations: 7\n  final_commit: abc123\n  time_elapsed: \"1h 2m\"\n  cost_usd: \"1.25\"\n")
	assertFile(t, path, want)
}

func TestProgressSetMetricsCreatesBlock(t *testing.T) {
	tests := []struct {
		name, metrics, want string
	}{
		{"absent", "", "metrics:\n  stories_completed: 3\n  total_iterations: 47\n"},
		{"empty", "metrics:\n", "metrics:\n  stories_completed: 3\n  total_iterations: 47\n"},
		{"null with comment", "metrics: null # filled in later\n", "metrics: # filled in later\n  stories_completed: 3\n  total_iterations: 47\n"},
		{"empty flow mapping", "metrics: {}\n", "metrics:\n  stories_completed: 3\n  total_iterations: 47\n"},
		{"flow mapping", "metrics: {stories_completed: 1}\n", "metrics: {stories_completed: 3, total_iterations: 47}\n"},
	}
	head := "stories:\n  - id: A\n"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, path := writeProgress(t, head+tt.metrics)
			if err := src.(MetricsRecorder).SetMetrics(map[string]string{"total_iterations": "47", "stories_completed": "3"}, testNow); err != nil {
				t.Fatal(err)
			}
			assertFile(t, path, "last_updated: "+testStamp+"\n"+head+tt.want)
		})
	}
}

func TestProgressNoTrailingNewline(t *testing.T) {
	src, path := writeProgress(t, "current_task: null\nstories:\n  - id: A\n    title: Only")
	if err := src.SetState("A", StatusBlocked, 2, &Blocker{Reason: "r"}, testNow); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, "current_task: null\nlast_updated: "+testStamp+"\nstories:\n  - id: A\n    title: Only\n    status: blocked\n    retry_count: 2\n    blocker_reason: r\n    requires_human: false")
}

func TestProgressCRLFAndByteOrderMark(t *testing.T) {
	src, path := writeProgress(t, byteOrderMark+crlf(progressFixture))
	b := mustLoad(t, src)
	if s, _ := b.Find("1.2"); s.Line != 13 || !strings.Contains(s.Block, "\r\n") || len(s.Subtasks) != 3 {
		t.Fatalf("CRLF story 1.2 = %+v", s)
	}
	if err := src.SetState("1.2", StatusBlocked, 2, &Blocker{Reason: "r", RequiresHuman: true}, testNow); err != nil {
		t.Fatal(err)
	}
	want := progressFixture
	want = replaceOnce(t, want, "current_task: null", `current_task: "3.1"`)
	want = replaceOnce(t, want, "last_updated: 2026-11-20T09:00:00Z", "last_updated: "+testStamp)
	want = replaceOnce(t, want, "    status: in_progress        # working on it\n    retry_count: 1\n",
		"    status: blocked            # working on it\n    retry_count: 2\n    blocker_reason: r\n    requires_human: true\n")
	assertFile(t, path, byteOrderMark+crlf(want))
	if err := src.SetState("1.2", StatusInProgress, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	want = replaceOnce(t, want, `current_task: "3.1"`, `current_task: "1.2/1.2.2"`)
	want = replaceOnce(t, want, "    status: blocked            # working on it\n    retry_count: 2\n    blocker_reason: r\n    requires_human: true\n",
		"    status: in_progress        # working on it\n    retry_count: 0\n")
	assertFile(t, path, byteOrderMark+crlf(want))
}

func TestProgressFlowAndLeadingKeys(t *testing.T) {
	in := lines(
		"stories:",
		`  - {id: "9", title: Flow, status: not_started}`,
		"  - blocker_reason: first key of the item",
		"    id: B",
		"    status: blocked",
	)
	src, path := writeProgress(t, in)
	if err := src.SetState("9", StatusBlocked, 1, &Blocker{Reason: "x", Type: BlockerTransient}, testNow); err != nil {
		t.Fatal(err)
	}
	if err := src.SetState("B", StatusInProgress, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, lines(
		"current_task: B",
		"last_updated: "+testStamp,
		"stories:",
		`  - {id: "9", title: Flow, status: blocked, retry_count: 1, blocker_reason: x, blocker_type: transient, requires_human: false}`,
		"  - id: B",
		"    status: in_progress",
	))
}

func TestProgressMarkDoneNoOpLeavesFileAlone(t *testing.T) {
	in := replaceOnce(t, progressFixture, "current_task: null", `current_task: "1.2/1.2.2"`)
	src, path := writeProgress(t, in)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if err := src.MarkDone("1.1", "", testNow); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, in)
	if info, err := os.Stat(path); err != nil || !info.ModTime().Equal(old) {
		t.Errorf("file was rewritten although nothing changed (mtime %v, want %v)", info.ModTime(), old)
	}
}

func TestProgressWriteErrors(t *testing.T) {
	src, path := writeProgress(t, progressFixture)
	if err := src.MarkDone("9.9", "", testNow); !errors.Is(err, ErrStoryNotFound) {
		t.Errorf("MarkDone unknown story: %v, want ErrStoryNotFound", err)
	}
	if err := src.MarkDone("1.2", "1.2.9", testNow); !errors.Is(err, ErrSubtaskNotFound) {
		t.Errorf("MarkDone unknown subtask: %v, want ErrSubtaskNotFound", err)
	}
	if err := src.SetState("1.2", "done", 0, nil, testNow); err == nil || !strings.Contains(err.Error(), "not_started") {
		t.Errorf("SetState invalid status: %v", err)
	}
	if err := src.SetState("1.2", StatusBlocked, 0, &Blocker{Type: "forever"}, testNow); err == nil {
		t.Errorf("SetState invalid blocker type succeeded")
	}
	if err := src.SetState("1.2", StatusBlocked, -1, nil, testNow); err == nil {
		t.Errorf("SetState negative retry count succeeded")
	}
	assertFile(t, path, progressFixture)

	// A file that does not parse is never edited.
	broken := progressFixture + "  bad: [\n"
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	var pe *ParseError
	if err := src.MarkDone("1.2", "1.2.2", testNow); !errors.As(err, &pe) {
		t.Errorf("MarkDone on a broken file: %v, want a *ParseError", err)
	}
	assertFile(t, path, broken)
}

func TestProgressValidationErrors(t *testing.T) {
	story := func(extra ...string) string {
		return lines(append([]string{"stories:", "  - id: A", "    title: T"}, extra...)...)
	}
	tests := []struct {
		name      string
		data      string
		line, col int
		phrases   []string
	}{
		{"malformed YAML", "stories:\n  - id: [A\n", 2, 0, []string{"progress.txt:2:", "invalid YAML", "fix the YAML syntax"}},
		{"duplicate key", story("    status: complete", "    status: blocked"), 5, 5, []string{"invalid YAML", `"status" already defined`}},
		{"empty file", "# nothing\n", 0, 0, []string{"empty", "template"}},
		{"not a mapping", "- a\n", 1, 1, []string{"must be a YAML mapping"}},
		{"no stories key", "current_task: null\n", 1, 1, []string{`no "stories" list`}},
		{"stories empty", "stories: []\n", 1, 1, []string{"stories is empty"}},
		{"stories not a list", "stories: yes\n", 1, 1, []string{"stories must be a list"}},
		{"story not a mapping", "stories:\n  - just text\n", 2, 5, []string{"story 1 is not a mapping"}},
		{"missing id", "stories:\n  - title: T\n", 2, 5, []string{"story 1 has no id"}},
		{"empty id", "stories:\n  - id: \"\"\n", 2, 5, []string{"must be a non-empty value"}},
		{"slash in id", "stories:\n  - id: a/b\n", 2, 9, []string{`contains "/"`}},
		{"unknown status", story("    status: done"), 4, 13, []string{`story A: unknown status "done"`, "use not_started, in_progress, blocked or complete"}},
		{"status not a word", story("    status: [a]"), 4, 5, []string{"status must be a single word"}},
		{"duplicate story id", lines("stories:", "  - id: A", "  - id: B", "  - id: A"), 4, 5, []string{`duplicate story id "A"`, "line 2 already defines"}},
		{"duplicate subtask id", story("    subtasks:", "      - id: s1", "      - id: s1"), 6, 9, []string{`duplicate subtask id "s1"`, "line 5 already"}},
		{"subtask without id", story("    subtasks:", "      - title: x"), 5, 9, []string{"subtask 1 has no id"}},
		{"subtask unknown status", story("    subtasks:", "      - id: s1", "        status: finished"), 6, 17, []string{`unknown status "finished"`}},
		{"subtask done not bool", story("    subtasks:", "      - id: s1", "        done: maybe"), 6, 15, []string{"done must be true or false"}},
		{"subtask disagrees", story("    subtasks:", "      - id: s1", "        status: complete", "        done: false"), 7, 9, []string{"disagreeing"}},
		{"missing dependency", story("    depends_on: [Z]"), 4, 18, []string{`story A depends on "Z", but no story has that id`, "fix the id in depends_on"}},
		{"cycle", lines("stories:", "  - id: A", "    depends_on: [B]", "  - id: B", "    depends_on: [C]", "  - id: C", "    depends_on: [A]"), 7, 18, []string{"dependency cycle: A → B → C → A"}},
		{"self cycle", story("    depends_on: [A]"), 4, 18, []string{"dependency cycle: A → A"}},
		{"depends_on not a list", story("    depends_on: {a: b}"), 4, 5, []string{"depends_on must be a list"}},
		{"retry_count not a number", story("    retry_count: many"), 4, 18, []string{"retry_count must be a whole number"}},
		{"negative retry_count", story("    retry_count: -1"), 4, 5, []string{"retry_count is negative"}},
		{"unknown blocker type", story("    blocker_type: forever"), 4, 19, []string{`unknown blocker_type "forever"`, "transient or permanent"}},
		{"requires_human not bool", story("    requires_human: sometimes"), 4, 21, []string{"requires_human must be true or false"}},
		{"criterion without text", story("    acceptance_criteria:", "      - verify: x"), 5, 9, []string{"criterion without text"}},
		{"empty criterion", story("    acceptance_criteria:", "      -"), 5, 0, []string{"empty acceptance criterion"}},
		{"metrics not a mapping", "stories:\n  - id: A\nmetrics: [1]\n", 3, 1, []string{"metrics must be a mapping"}},
		{"missing story file", story("    file: nope.md"), 4, 11, []string{"cannot read story file nope.md", "relative to the progress file"}},
		{"second document", "stories:\n  - id: A\n---\nstories:\n  - id: B\n", 4, 0, []string{"second YAML document"}},
		{"merge key", "base: &b {status: complete}\nstories:\n  - <<: *b\n    id: A\n", 3, 0, []string{"merge keys"}},
		{"invalid UTF-8", "stories:\n  - id: \xff\n", 2, 0, []string{"invalid UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, path := writeProgress(t, tt.data)
			_, err := src.Load()
			wantParseError(t, err, tt.line, tt.col, tt.phrases...)
			if err != nil && !strings.HasPrefix(err.Error(), path) {
				t.Errorf("error %q does not start with the path", err)
			}
		})
	}
}

func TestStoryFileCriteria(t *testing.T) {
	got := storyFileCriteria([]byte(crlf(storyFile31)))
	want := []Criterion{
		{Text: "Settings page lists options", Line: 5},
		{Text: "Saving persists", Verify: "sh tests/settings.sh", Done: true, Line: 7},
		{Text: "Reset restores defaults", Line: 13},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("criteria:\n got %+v\nwant %+v", got, want)
	}
	if got := storyFileCriteria([]byte("# Story\n\nNo criteria here.\n")); got != nil {
		t.Errorf("criteria of a file without the section = %+v, want nil", got)
	}
}

func TestYAMLString(t *testing.T) {
	tests := map[string]string{
		"plain words":      "plain words",
		"1.1":              `"1.1"`,
		"":                 `""`,
		"true":             `"true"`,
		"No":               `"No"`,
		"null":             `"null"`,
		"key: value":       `"key: value"`,
		"a #comment":       `"a #comment"`,
		"- dash":           `"- dash"`,
		"line\nbreak":      `"line\nbreak"`,
		" padded":          `" padded"`,
		"ends with colon:": `"ends with colon:"`,
		`say "hi"`:         `say "hi"`,
		"'quoted'":         `"'quoted'"`,
		"tab\there":        `"tab\there"`,
		"ünïcode ok":       "ünïcode ok",
	}
	for in, want := range tests {
		if got := yamlString(in); got != want {
			t.Errorf("yamlString(%q) = %s, want %s", in, got, want)
		}
		// Whatever the quoting, the value must read back as the same
		// string.
		pf, err := parseProgress("p.txt", []byte("stories:\n  - id: A\n    description: "+yamlString(in)+"\n"), nil)
		if err != nil {
			t.Errorf("description %s does not parse: %v", yamlString(in), err)
		} else if got := pf.board.Stories[0].Description; got != in {
			t.Errorf("description %s reads back as %q, want %q", yamlString(in), got, in)
		}
	}
}

func TestApplyEditsRejectsOverlap(t *testing.T) {
	_, err := applyEdits([]byte("abcdef"), []edit{{start: 1, end: 4, text: "x"}, {start: 2, end: 3, text: "y"}})
	if err == nil {
		t.Fatal("overlapping edits were applied")
	}
	got, err := applyEdits([]byte("abcdef"), []edit{{start: 2, end: 4, text: ""}, {start: 2, end: 2, text: "1"}, {start: 2, end: 2, text: "2"}})
	if err != nil || string(got) != "ab12ef" {
		t.Errorf("applyEdits = %q, %v; want insertions in order before the removal", got, err)
	}
}

func TestProgressEditsAwkwardLayouts(t *testing.T) {
	in := lines(
		"---",
		"# head comment",
		"stories:",
		"  - id: A",
		"    status:",
		"    retry_count: 2",
		"    blocker_reason: |",
		"      first line",
		"      # not a comment: part of the reason",
		"",
		"      last line",
		"    # a comment between blocker keys stays",
		"    blocker_type: permanent   # why",
		`    requires_human: "yes"`,
		"    notes: keep",
		"  - id: B",
		"    status: 'not_started'",
		"...",
	)
	// requires_human must be a boolean: fix that first, as a human would.
	in = replaceOnce(t, in, `    requires_human: "yes"`, "    requires_human: yes_please")
	src, path := writeProgress(t, in)
	if _, err := src.Load(); err == nil {
		t.Fatal("a non-boolean requires_human loaded")
	}
	in = replaceOnce(t, in, "    requires_human: yes_please", "    requires_human: true")
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	b := mustLoad(t, src)
	if bl := b.Stories[0].Blocker; bl == nil || bl.Reason != "first line\n# not a comment: part of the reason\n\nlast line\n" || bl.Type != BlockerPermanent || !bl.RequiresHuman {
		t.Fatalf("blocker = %+v", bl)
	}

	if err := src.SetState("A", StatusInProgress, 0, nil, testNow); err != nil {
		t.Fatal(err)
	}
	if err := src.SetState("B", StatusBlocked, 1, &Blocker{Reason: "needs a key", RequiresHuman: true}, testNow); err != nil {
		t.Fatal(err)
	}
	assertFile(t, path, lines(
		"---",
		"# head comment",
		`current_task: A`,
		"last_updated: "+testStamp,
		"stories:",
		"  - id: A",
		"    status: in_progress",
		"    retry_count: 0",
		"    # a comment between blocker keys stays",
		"    notes: keep",
		"  - id: B",
		"    status: blocked",
		"    retry_count: 1",
		"    blocker_reason: needs a key",
		"    requires_human: true",
		"...",
	))
}
