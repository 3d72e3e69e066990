package tasks

import (
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
