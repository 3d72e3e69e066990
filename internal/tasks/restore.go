package tasks

import (
	"fmt"
	"slices"
)

// RestoreOtherMarks undoes an agent's marks on stories it was not asked to
// work on. before is the markdown PRD as it was when the agent started on
// story keep, after is what the agent left. Every other story whose heading
// box or criterion boxes changed gets its block back exactly as it was in
// before; keep's block and every story whose marks did not change stay as
// the agent left them. It returns the new content and the ids it restored
// (nil, with after itself, when there was nothing to restore). A story the
// agent added already marked done is reopened, and a PRD the agent broke
// is put back whole.
//
// ralph owns the marks: a story counts as done only when ralph verified it,
// never because an agent ticked it while working on another.
func RestoreOtherMarks(before, after []byte, keep string) ([]byte, []string, error) {
	old, err := ParseMarkdown("", before)
	if err != nil {
		return nil, nil, err
	}
	cur, _, err := parseMarkdown("", after)
	if err != nil {
		return before, []string{"the whole PRD (the agent left it unreadable: " + err.Error() + ")"}, nil
	}
	// By id, not with PRD.Find: a scan per story is quadratic, minutes
	// on a PRD of 100,000 stories.
	oldByID := make(map[string]int, len(old.Stories))
	for i, s := range old.Stories {
		oldByID[s.ID] = i
	}
	updated := after
	var restored []string
	// Later stories first, so earlier offsets stay valid while blocks of
	// different lengths are swapped in.
	for i := len(cur.Stories) - 1; i >= 0; i-- {
		s := cur.Stories[i]
		if s.ID == keep {
			continue
		}
		var prev Story
		j, ok := oldByID[s.ID]
		if ok {
			prev = old.Stories[j]
		}
		switch {
		case !ok && !s.Done && !anyDone(s.Criteria):
			continue
		case !ok:
			// A story that was not there before cannot be done yet.
			var err error
			if updated, err = SetStoryDone(updated, s.ID, false); err == nil {
				updated, err = UncheckCriteria(updated, s.ID)
			}
			if err != nil {
				return nil, nil, err
			}
		case sameMarks(prev, s):
			continue
		default:
			at, err := blockOffset(updated, s)
			if err != nil {
				return nil, nil, err
			}
			updated = slices.Concat(updated[:at], []byte(prev.Block), updated[at+len(s.Block):])
		}
		restored = append(restored, s.ID)
	}
	if restored == nil {
		return after, nil, nil
	}
	slices.Reverse(restored)
	return updated, restored, nil
}

func anyDone(cs []Criterion) bool { return countDone(cs) > 0 }

func countDone(cs []Criterion) int {
	n := 0
	for _, c := range cs {
		if c.Done {
			n++
		}
	}
	return n
}

// sameMarks reports whether a story's heading box and criterion boxes are
// as they were.
func sameMarks(a, b Story) bool {
	if a.Done != b.Done {
		return false
	}
	if len(a.Criteria) != len(b.Criteria) {
		return countDone(a.Criteria) == countDone(b.Criteria)
	}
	for i := range a.Criteria {
		if a.Criteria[i].Done != b.Criteria[i].Done {
			return false
		}
	}
	return true
}

// blockOffset finds where story s's block starts in data: at the start of
// its heading line.
func blockOffset(data []byte, s Story) (int, error) {
	line, at := 1, 0
	for at < len(data) && line < s.Line {
		if data[at] == '\n' {
			line++
		}
		at++
	}
	if at+len(s.Block) > len(data) || string(data[at:at+len(s.Block)]) != s.Block {
		return 0, fmt.Errorf("tasks: story %s is not at line %d", s.ID, s.Line)
	}
	return at, nil
}
