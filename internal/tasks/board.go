package tasks

import (
	"fmt"
	"sort"
	"strings"
)

// Kind names a task file format.
type Kind string

const (
	// KindMarkdown is the PRD markdown file described in the package comment.
	KindMarkdown Kind = "prd-md"
	// KindJSON is prd.json, in the snarktank shape ("userStories" with
	// "passes") or the iannuttall shape ("stories" with "status").
	KindJSON Kind = "prd-json"
	// KindProgress is the BMAD progress.txt, a YAML document.
	KindProgress Kind = "progress"
)

// Board is a loaded task file: its stories in file order and the few
// file-level fields ralph uses. A Board returned by Source.Load is valid:
// story ids are unique, every Status is valid, Done agrees with Status,
// every DependsOn id names a story of the board and dependencies form no
// cycle.
type Board struct {
	// Kind is the format the board was read from.
	Kind Kind
	// Path is the file the board was read from, as given to Open or Detect.
	Path string
	// Stories holds every story in file order.
	Stories []Story
	// QualityGates lists prd.json's "qualityGates" commands; nil for other
	// formats or when the file has none.
	QualityGates []string
	// CurrentTask is progress.txt's current_task as written (a TaskID), or
	// "" when it is null, absent, or the format has no such field.
	CurrentTask string
}

// Selection is the next unit of work: a story and, when it has subtasks, its
// first subtask that is not done.
type Selection struct {
	// Story is a copy of the selected story.
	Story Story
	// Subtask points into Story.Subtasks at the first subtask not done; it
	// is nil when the story has no subtasks.
	Subtask *Subtask
}

// TaskIDSeparator joins a story id and a subtask id in a TaskID. Story ids
// of prd.json and progress.txt may not contain it, and markdown ids cannot,
// so the first separator always ends the story id.
const TaskIDSeparator = "/"

// TaskID names the selected unit of work: the story id ("US-001") for a
// story-level task, or the story id, "/" and the subtask id ("1.1/1.1.2")
// for a subtask. progress.txt's current_task holds this form.
func (s Selection) TaskID() string {
	if s.Subtask == nil {
		return s.Story.ID
	}
	return s.Story.ID + TaskIDSeparator + s.Subtask.ID
}

// ParseTaskID splits a TaskID into its story id and subtask id; subtaskID is
// "" for a story-level task.
func ParseTaskID(taskID string) (storyID, subtaskID string) {
	storyID, subtaskID, _ = strings.Cut(taskID, TaskIDSeparator)
	return storyID, subtaskID
}

// Remaining returns how many stories are not complete; zero means the board
// is finished. A nil board has no stories.
func (b *Board) Remaining() int {
	if b == nil {
		return 0
	}
	n := 0
	for i := range b.Stories {
		if b.Stories[i].Status != StatusComplete {
			n++
		}
	}
	return n
}

// Find returns the story whose ID equals id exactly and reports whether
// there is one.
func (b *Board) Find(id string) (Story, bool) {
	if b == nil {
		return Story{}, false
	}
	for i := range b.Stories {
		if b.Stories[i].ID == id {
			return b.Stories[i], true
		}
	}
	return Story{}, false
}

// Select implements seed 000's STORY_SELECT.
//
//  1. Stories in progress come first, in file order: work that was started
//     is finished before anything new begins, whatever its dependencies.
//  2. Otherwise the first not-started story whose DependsOn are all
//     complete is taken, ordered by Priority ascending where set (unset
//     priorities sort after every set one), then by file order.
//  3. Blocked and complete stories are skipped: a blocked story needs a
//     human, who clears it by editing its status.
//
// Within the chosen story the first subtask that is not done is selected. A
// story in progress or not started whose subtasks are all done is finished
// work that only lacks its status: it is listed in finished, in file order,
// so ralph can mark it complete, counts as complete for dependencies, and is
// never selected. ok is false when nothing is selectable; reason then says
// why: "all stories complete", or "N stories blocked or waiting on blocked
// stories" (a loaded board has no cycles or dangling dependencies, so
// nothing else can hold a story back). reason is "" when ok is true.
func (b *Board) Select() (sel Selection, finished []string, ok bool, reason string) {
	if b == nil {
		return Selection{}, nil, false, "all stories complete"
	}
	stories := b.Stories
	done, isFinished := doneStories(stories)
	for i := range stories {
		if isFinished[i] {
			finished = append(finished, stories[i].ID)
		}
	}

	pick := -1
	for i := range stories {
		if stories[i].Status == StatusInProgress && !isFinished[i] && stories[i].ClaimedBy == "" {
			pick = i
			break
		}
	}
	if pick < 0 {
		for _, i := range notStartedOrder(stories) {
			if isFinished[i] || !depsDone(stories[i].DependsOn, done) {
				continue
			}
			pick = i
			break
		}
	}
	if pick < 0 {
		waiting, elsewhere := 0, 0
		for i := range stories {
			if !done[stories[i].ID] {
				waiting++
				if stories[i].ClaimedBy != "" {
					elsewhere++
				}
			}
		}
		if waiting == 0 {
			return Selection{}, finished, false, "all stories complete"
		}
		if elsewhere == waiting {
			return Selection{}, finished, false, fmt.Sprintf("%d in progress by someone else (claimed in the task store)", waiting)
		}
		noun := "stories"
		if waiting == 1 {
			noun = "story"
		}
		return Selection{}, finished, false, fmt.Sprintf("%d %s blocked or waiting on blocked stories", waiting, noun)
	}

	sel.Story = stories[pick]
	if subs := sel.Story.Subtasks; len(subs) > 0 {
		// The copy keeps a caller's edits of the selection away from the
		// board.
		sel.Story.Subtasks = append([]Subtask(nil), subs...)
		for j := range sel.Story.Subtasks {
			if !sel.Story.Subtasks[j].Done {
				sel.Subtask = &sel.Story.Subtasks[j]
				break
			}
		}
	}
	return sel, finished, true, ""
}

// ReadyStories returns every story of the board that a worker could start
// now, in the order Select would pick them, leaving out the ids in inFlight
// (the stories already being worked). It is Select for a scheduler that
// keeps several tasks going: with an empty inFlight its first story is the
// one Select picks, and removing each pick in turn walks the rest.
//
// The rules are Select's: stories in progress come first in file order,
// whatever their dependencies, because started work is finished first;
// then not-started stories whose every DependsOn is complete (or finished
// by its subtasks), by priority and file order. Blocked and complete
// stories are never ready, and neither is a story whose subtasks are all
// done: Select reports those as finished, to be marked complete, not
// worked. A dependency that is in flight is not done, so its dependants
// wait for it to land.
//
// The returned stories are copies of the board's, but share its slices
// (criteria, subtasks, dependencies); the result is nil when nothing is
// ready.
func ReadyStories(b Board, inFlight map[string]bool) []Story {
	stories := b.Stories
	done, finished := doneStories(stories)
	var ready []Story
	for i := range stories {
		if stories[i].Status == StatusInProgress && !finished[i] && !inFlight[stories[i].ID] {
			ready = append(ready, stories[i])
		}
	}
	for _, i := range notStartedOrder(stories) {
		if !finished[i] && !inFlight[stories[i].ID] && depsDone(stories[i].DependsOn, done) {
			ready = append(ready, stories[i])
		}
	}
	return ready
}

// doneStories returns the ids of the stories that count as done for their
// dependants, and marks finished[i] the stories that are done only because
// all their subtasks are (their status does not say so yet).
func doneStories(stories []Story) (done map[string]bool, finished []bool) {
	done = make(map[string]bool, len(stories))
	finished = make([]bool, len(stories))
	for i := range stories {
		s := &stories[i]
		switch {
		case s.Status == StatusComplete:
			done[s.ID] = true
		case (s.Status == StatusInProgress || s.Status == StatusNotStarted) && allSubtasksDone(s.Subtasks):
			finished[i] = true
			done[s.ID] = true
		}
	}
	return done, finished
}

// allSubtasksDone reports whether a story has subtasks and all are done; a
// story without subtasks is never finished by its subtasks.
func allSubtasksDone(subs []Subtask) bool {
	if len(subs) == 0 {
		return false
	}
	for _, s := range subs {
		if !s.Done {
			return false
		}
	}
	return true
}

func depsDone(deps []string, done map[string]bool) bool {
	for _, d := range deps {
		if !done[d] {
			return false
		}
	}
	return true
}

// notStartedOrder returns the indexes of not-started stories by priority
// (set priorities ascending, then unset ones) and then file order.
func notStartedOrder(stories []Story) []int {
	var order []int
	prioritized := false
	for i := range stories {
		if stories[i].Status == StatusNotStarted {
			order = append(order, i)
			prioritized = prioritized || stories[i].Priority != 0
		}
	}
	if !prioritized {
		return order
	}
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := stories[order[a]].Priority, stories[order[b]].Priority
		switch {
		case pa == 0:
			return false
		case pb == 0:
			return true
		}
		return pa < pb
	})
	return order
}

// position is a 1-based line and column in a task file; zero values mean
// unknown.
type position struct{ line, col int }

// depRef is one dependsOn entry and where it is written, so graph errors can
// point at it.
type depRef struct {
	id string
	at position
}

// checkGraph validates the dependencies of stories whose ids are already
// known to be unique: every reference names a story, and no chain of
// references leads back to where it started. deps[i] are story i's
// references in file order. The cycle, if
// any, is reported as the path "A → B → A" at the reference that closes it.
func checkGraph(path, depsKey string, stories []Story, deps [][]depRef) error {
	index := make(map[string]int, len(stories))
	for i := range stories {
		index[stories[i].ID] = i
	}
	for i := range stories {
		for _, d := range deps[i] {
			if _, ok := index[d.id]; !ok {
				return &ParseError{
					Path: path, Line: d.at.line, Column: d.at.col,
					Msg:  fmt.Sprintf("story %s depends on %q, but no story has that id", stories[i].ID, d.id),
					Hint: fmt.Sprintf("fix the id in %s or add the missing story", depsKey),
				}
			}
		}
	}

	// Iterative depth-first search with three colours, so 10,000-story
	// chains cannot overflow the stack.
	const (
		white = iota
		grey
		black
	)
	colour := make([]byte, len(stories))
	type frame struct{ story, next int }
	var stack []frame
	for root := range stories {
		if colour[root] != white {
			continue
		}
		colour[root] = grey
		stack = append(stack[:0], frame{story: root})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(deps[top.story]) {
				colour[top.story] = black
				stack = stack[:len(stack)-1]
				continue
			}
			ref := deps[top.story][top.next]
			top.next++
			dep := index[ref.id]
			switch colour[dep] {
			case white:
				colour[dep] = grey
				stack = append(stack, frame{story: dep})
			case grey:
				var cycle []string
				for k := range stack {
					if stack[k].story == dep {
						for _, f := range stack[k:] {
							cycle = append(cycle, stories[f.story].ID)
						}
						break
					}
				}
				cycle = append(cycle, stories[dep].ID)
				return &ParseError{
					Path: path, Line: ref.at.line, Column: ref.at.col,
					Msg:  "dependency cycle: " + strings.Join(cycle, " → "),
					Hint: fmt.Sprintf("remove one of these %s entries so the stories can be done in some order", depsKey),
				}
			}
		}
	}
	return nil
}
