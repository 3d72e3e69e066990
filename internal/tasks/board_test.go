package tasks

import (
	"fmt"
	"reflect"
	"testing"
)

// st builds a story for selection tests.
func st(id string, status Status, opts ...func(*Story)) Story {
	s := Story{ID: id, Title: id, Status: status, Done: status == StatusComplete}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func deps(ids ...string) func(*Story) { return func(s *Story) { s.DependsOn = ids } }
func prio(p int) func(*Story)         { return func(s *Story) { s.Priority = p } }
func subs(done ...bool) func(*Story) {
	return func(s *Story) {
		for i, d := range done {
			id := string(rune('a' + i))
			s.Subtasks = append(s.Subtasks, Subtask{ID: id, Title: id, Done: d})
		}
	}
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name         string
		stories      []Story
		wantTask     string // "" when nothing is selectable
		wantFinished []string
		wantReason   string
	}{
		{
			name:     "in progress beats an earlier not started story",
			stories:  []Story{st("A", StatusNotStarted), st("B", StatusInProgress), st("C", StatusInProgress)},
			wantTask: "B",
		},
		{
			name:     "in progress is taken even when its dependencies are open",
			stories:  []Story{st("A", StatusNotStarted), st("B", StatusInProgress, deps("A"))},
			wantTask: "B",
		},
		{
			name:     "file order without priorities",
			stories:  []Story{st("A", StatusComplete), st("B", StatusNotStarted), st("C", StatusNotStarted)},
			wantTask: "B",
		},
		{
			name:     "priority ascending, unset last, ties in file order",
			stories:  []Story{st("A", StatusNotStarted), st("B", StatusNotStarted, prio(3)), st("C", StatusNotStarted, prio(1)), st("D", StatusNotStarted, prio(1))},
			wantTask: "C",
		},
		{
			name:     "unmet dependencies are skipped",
			stories:  []Story{st("A", StatusNotStarted, deps("B")), st("B", StatusNotStarted, deps("C")), st("C", StatusNotStarted)},
			wantTask: "C",
		},
		{
			name:     "met dependencies allow the story",
			stories:  []Story{st("A", StatusComplete), st("B", StatusNotStarted, deps("A"), prio(1))},
			wantTask: "B",
		},
		{
			name:     "blocked and complete are skipped",
			stories:  []Story{st("A", StatusBlocked), st("B", StatusComplete), st("C", StatusNotStarted)},
			wantTask: "C",
		},
		{
			name:     "first subtask not done",
			stories:  []Story{st("A", StatusInProgress, subs(true, false, false))},
			wantTask: "A/b",
		},
		{
			name:         "a story whose subtasks are all done is finished, skipped and counts as complete",
			stories:      []Story{st("A", StatusInProgress, subs(true, true)), st("B", StatusNotStarted, deps("A")), st("C", StatusNotStarted, subs(true))},
			wantTask:     "B",
			wantFinished: []string{"A", "C"},
		},
		{
			name:         "blocked stories with done subtasks stay blocked",
			stories:      []Story{st("A", StatusBlocked, subs(true))},
			wantReason:   "1 story blocked or waiting on blocked stories",
			wantFinished: nil,
		},
		{
			name:       "all complete",
			stories:    []Story{st("A", StatusComplete), st("B", StatusComplete)},
			wantReason: "all stories complete",
		},
		{
			name:         "finished stories complete the board",
			stories:      []Story{st("A", StatusComplete), st("B", StatusInProgress, subs(true))},
			wantReason:   "all stories complete",
			wantFinished: []string{"B"},
		},
		{
			name:       "blocked and waiting",
			stories:    []Story{st("A", StatusBlocked), st("B", StatusNotStarted, deps("A")), st("C", StatusComplete), st("D", StatusNotStarted, deps("B"))},
			wantReason: "3 stories blocked or waiting on blocked stories",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &Board{Stories: tt.stories}
			sel, finished, ok, reason := b.Select()
			if tt.wantTask == "" {
				if ok || reason != tt.wantReason {
					t.Errorf("Select = %q, ok %v, reason %q; want nothing and %q", sel.TaskID(), ok, reason, tt.wantReason)
				}
			} else if !ok || sel.TaskID() != tt.wantTask || reason != "" {
				t.Errorf("Select = %q, ok %v, reason %q; want %q", sel.TaskID(), ok, reason, tt.wantTask)
			}
			if !reflect.DeepEqual(finished, tt.wantFinished) {
				t.Errorf("finished = %v, want %v", finished, tt.wantFinished)
			}
		})
	}
}

func TestSelectionCopiesSubtasks(t *testing.T) {
	b := &Board{Stories: []Story{st("A", StatusInProgress, subs(false))}}
	sel, _, _, _ := b.Select()
	sel.Subtask.Done = true
	if b.Stories[0].Subtasks[0].Done {
		t.Error("changing the selection changed the board")
	}
	if sel.Subtask != &sel.Story.Subtasks[0] {
		t.Error("Subtask does not point into the selected story")
	}
}

func TestTaskID(t *testing.T) {
	story := Selection{Story: Story{ID: "US-001"}}
	if got := story.TaskID(); got != "US-001" {
		t.Errorf("story TaskID = %q", got)
	}
	sub := Selection{Story: Story{ID: "1.1"}, Subtask: &Subtask{ID: "1.1.2"}}
	if got := sub.TaskID(); got != "1.1/1.1.2" {
		t.Errorf("subtask TaskID = %q", got)
	}
	for _, sel := range []Selection{story, sub} {
		storyID, subtaskID := ParseTaskID(sel.TaskID())
		want := ""
		if sel.Subtask != nil {
			want = sel.Subtask.ID
		}
		if storyID != sel.Story.ID || subtaskID != want {
			t.Errorf("ParseTaskID(%q) = %q, %q", sel.TaskID(), storyID, subtaskID)
		}
	}
	if s, sub := ParseTaskID("1.1/a/b"); s != "1.1" || sub != "a/b" {
		t.Errorf("ParseTaskID splits at the first separator: got %q, %q", s, sub)
	}
}

func TestRemainingAndFind(t *testing.T) {
	var nilBoard *Board
	if nilBoard.Remaining() != 0 {
		t.Error("nil board has remaining stories")
	}
	if _, _, ok, reason := nilBoard.Select(); ok || reason != "all stories complete" {
		t.Errorf("nil board Select = %v, %q", ok, reason)
	}
	b := &Board{Stories: []Story{st("A", StatusComplete), st("B", StatusBlocked), st("C", StatusInProgress)}}
	if b.Remaining() != 2 {
		t.Errorf("Remaining = %d, want 2", b.Remaining())
	}
	if s, ok := b.Find("B"); !ok || s.Status != StatusBlocked {
		t.Errorf("Find(B) = %+v, %v", s, ok)
	}
	if _, ok := b.Find("b"); ok {
		t.Error("Find is not case-sensitive")
	}
}

func TestStatusValid(t *testing.T) {
	for _, s := range []Status{StatusNotStarted, StatusInProgress, StatusBlocked, StatusComplete} {
		if !s.Valid() {
			t.Errorf("%q is not valid", s)
		}
	}
	for _, s := range []Status{"", "done", "open", "Complete"} {
		if s.Valid() {
			t.Errorf("%q is valid", s)
		}
	}
}

// TestReadyStoriesEightStoriesTwoDependOnAThird is issue 15's board: eight
// markdown stories, US-004 and US-007 waiting for US-002. A scheduler with
// three workers starts three ready stories, never one whose dependency has
// not landed, and never one already in flight.
func TestReadyStoriesEightStoriesTwoDependOnAThird(t *testing.T) {
	var ls []string
	for i := 1; i <= 8; i++ {
		ls = append(ls, fmt.Sprintf("### [ ] US-%03d: Story %d", i, i))
		if i == 4 || i == 7 {
			ls = append(ls, "Depends: US-002")
		}
	}
	path := writeTemp(t, "prd.md", lines(ls...))
	src := Open(KindMarkdown, path)

	ids := func(stories []Story) []string {
		var out []string
		for _, s := range stories {
			out = append(out, s.ID)
		}
		return out
	}
	check := func(what string, got []Story, want ...string) {
		t.Helper()
		if !reflect.DeepEqual(ids(got), want) {
			t.Errorf("%s: ready %q, want %q", what, ids(got), want)
		}
	}

	b := mustLoad(t, src)
	check("at the start", ReadyStories(*b, nil), "US-001", "US-002", "US-003", "US-005", "US-006", "US-008")
	if sel, _, _, _ := b.Select(); sel.Story.ID != ReadyStories(*b, nil)[0].ID {
		t.Errorf("Select picks %s, but ReadyStories starts with %s", sel.Story.ID, ReadyStories(*b, nil)[0].ID)
	}
	inFlight := map[string]bool{"US-001": true, "US-002": true, "US-003": true}
	check("with three in flight", ReadyStories(*b, inFlight), "US-005", "US-006", "US-008")

	// US-001 lands; US-002 is still in flight, so its dependants wait.
	if err := src.MarkDone("US-001", "", testNow); err != nil {
		t.Fatal(err)
	}
	delete(inFlight, "US-001")
	check("US-001 landed, US-002 in flight", ReadyStories(*mustLoad(t, src), inFlight), "US-005", "US-006", "US-008")

	// US-002 lands: both stories that depend on it become ready.
	if err := src.MarkDone("US-002", "", testNow); err != nil {
		t.Fatal(err)
	}
	delete(inFlight, "US-002")
	check("US-002 landed", ReadyStories(*mustLoad(t, src), inFlight), "US-004", "US-005", "US-006", "US-007", "US-008")

	for _, id := range []string{"US-003", "US-004", "US-005", "US-006", "US-007", "US-008"} {
		if err := src.MarkDone(id, "", testNow); err != nil {
			t.Fatal(err)
		}
	}
	if got := ReadyStories(*mustLoad(t, src), nil); got != nil {
		t.Errorf("every story done, but ready: %q", ids(got))
	}
}

// TestReadyStoriesFollowsSelect checks ReadyStories against Select's rules
// on boards of every status: walking Select while taking each pick out of
// play yields exactly ReadyStories' order.
func TestReadyStoriesFollowsSelect(t *testing.T) {
	boards := map[string][]Story{
		"in progress first, whatever its dependencies": {
			st("A", StatusNotStarted), st("B", StatusInProgress, deps("A")), st("C", StatusInProgress),
		},
		"priorities, blocked and complete": {
			st("A", StatusNotStarted, prio(2)), st("B", StatusBlocked), st("C", StatusNotStarted, prio(1)),
			st("D", StatusComplete), st("E", StatusNotStarted, deps("D")), st("F", StatusNotStarted, deps("B")),
		},
		"a story finished by its subtasks counts as done, and is not worked": {
			st("A", StatusInProgress, subs(true, true)), st("B", StatusNotStarted, deps("A")), st("C", StatusNotStarted, subs(true, false)),
		},
	}
	want := map[string][]string{
		"in progress first, whatever its dependencies":                       {"B", "C", "A"},
		"priorities, blocked and complete":                                   {"C", "A", "E"},
		"a story finished by its subtasks counts as done, and is not worked": {"B", "C"},
	}
	for name, stories := range boards {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, s := range ReadyStories(Board{Stories: stories}, nil) {
				got = append(got, s.ID)
			}
			if !reflect.DeepEqual(got, want[name]) {
				t.Fatalf("ready %q, want %q", got, want[name])
			}
			// Select, each pick marked blocked so it is out of play, must
			// walk the same order.
			walk := append([]Story(nil), stories...)
			var picks []string
			for {
				sel, _, ok, _ := (&Board{Stories: walk}).Select()
				if !ok {
					break
				}
				picks = append(picks, sel.Story.ID)
				for i := range walk {
					if walk[i].ID == sel.Story.ID {
						walk[i].Status = StatusBlocked
					}
				}
			}
			if !reflect.DeepEqual(picks, got) {
				t.Errorf("Select walks %q, ReadyStories says %q", picks, got)
			}
			for _, id := range got {
				for _, s := range ReadyStories(Board{Stories: stories}, map[string]bool{id: true}) {
					if s.ID == id {
						t.Errorf("%s is in flight but listed as ready", id)
					}
				}
			}
		})
	}
}
