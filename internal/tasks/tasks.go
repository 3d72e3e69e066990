// Package tasks holds ralph's task model and the three task files it reads
// and writes: the PRD markdown file (this comment), prd.json in either of its
// two popular shapes (see prdjson.go) and the BMAD progress.txt (see
// progress.go). A Source loads any of them into a Board, Board.Select picks
// the next unit of work, and the Source's write methods record what ralph
// decided. Ralph, not the agent, owns task status, so every write is made by
// ralph itself: atomically, and by editing the original bytes in place so
// that comments, unknown keys, key order and formatting survive.
//
// A PRD markdown file looks like this:
//
//	# PRD: Something
//
//	Some intro text.
//
//	### [ ] US-001: Story Title
//	Free text description lines...
//	- [ ] Acceptance criterion 1
//	- [x] Acceptance criterion 2 (verify: `sh tests/crit2.sh`)
//
//	### [x] US-002: Another story
//	- [x] Criterion
//
// A story heading is "### ", a checkbox ("[ ]" pending, "[x]" or "[X]" done),
// a space, an id (uppercase prefix, dash, digits: US-001, STORY-12, BUG-7), a
// colon, a space and a title. The checkbox on the heading alone decides
// whether a story is done; criteria checkboxes are informational, so an agent
// ticking every criterion does not by itself finish a story. A criterion may
// end with "(verify: `command`)", an acceptance command ralph can run; the
// suffix is not part of the criterion's text.
//
// A story may name the stories that must be done before it starts with a
// line in its block, outside any code fence:
//
//	Depends: US-001, US-002
//
// The key is case-insensitive, "Depends on:" works too, and so do a list
// marker or bold around the key ("- **Depends on:** US-001"); the ids are
// separated by commas and/or blanks, and "none" or nothing means no
// dependencies. The ids fill Story.DependsOn as prd.json's dependsOn and
// progress.txt's depends_on do, so Board.Select and ReadyStories hold the
// story back until they are done. An id of no story in the file, a word that
// is not an id, or a cycle is refused with the line and column. Stories
// without such a line are independent. The editors never change the line.
//
// Nothing inside a fenced code block (``` or ~~~) is ever a heading, a
// criterion or a Depends line, so PRDs can quote the format in examples
// safely.
package tasks

import "errors"

// ErrStoryNotFound is wrapped by errors about a story id that no story heading
// in the PRD carries; test for it with errors.Is.
var ErrStoryNotFound = errors.New("unknown story id")

// Criterion is one acceptance criterion of a story. In the PRD markdown it is
// a task-list item ("- [ ] text", "* [x] text", "+ [ ] text", optionally
// indented) inside the story's block and outside any fenced code block; in
// prd.json and progress.txt it is an item of the story's acceptance criteria
// list, either a string or an object with "text" and "verify".
type Criterion struct {
	// Text is the criterion without the list marker and checkbox, with
	// surrounding whitespace removed; it is never empty.
	Text string
	// Done reports whether the criterion's checkbox is ticked ("[x]" or "[X]").
	Done bool
	// Line is the 1-based line number of the criterion in the task file, or
	// in the BMAD story file when the criterion was read from one.
	Line int
	// Verify is an acceptance command attached to the criterion, such as
	// "sh tests/add.sh"; it is empty when the criterion has none. Text never
	// contains the command's markup.
	Verify string
}

// Status is where a story or subtask stands. Ralph owns it: the agent does
// the work, ralph decides and records whether it is done.
type Status string

// The four statuses of seed 000's state machine. Every format maps its own
// words onto these (prd.json shape 2 says "open" and "done", shape 1 and the
// markdown PRD only know complete and not started).
const (
	StatusNotStarted Status = "not_started"
	StatusInProgress Status = "in_progress"
	StatusBlocked    Status = "blocked"
	StatusComplete   Status = "complete"
)

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusNotStarted, StatusInProgress, StatusBlocked, StatusComplete:
		return true
	}
	return false
}

// BlockerType says whether a blocker may clear by itself.
type BlockerType string

const (
	// BlockerTransient is a blocker that may clear without a human, such as a
	// network timeout; seed 000 retries it automatically after a while.
	BlockerTransient BlockerType = "transient"
	// BlockerPermanent needs a human: a missing test framework, a dependency
	// conflict, a gap in the domain logic.
	BlockerPermanent BlockerType = "permanent"
)

// Blocker records why a story cannot proceed. Only progress.txt has places
// for it; for other formats the caller keeps it.
type Blocker struct {
	// Reason says what went wrong, in words a human can act on.
	Reason string
	// Type is BlockerTransient, BlockerPermanent or empty when unknown.
	Type BlockerType
	// RequiresHuman reports whether only a human can unblock the story.
	RequiresHuman bool
	// AttemptedFixes lists what was tried already, oldest first.
	AttemptedFixes []string
}

// Subtask is one step of a story, done in order: Select picks the first one
// that is not done. Only progress.txt has subtasks.
type Subtask struct {
	// ID is unique within its story and never empty or contains "/", so
	// TaskID can join it to the story id unambiguously.
	ID string
	// Title describes the step; it is the ID when the file gives no title.
	Title string
	// Done reports whether the step is finished.
	Done bool
}

// Story is one unit of work: a story heading and the lines that follow it in
// the markdown PRD, or one story object of prd.json or progress.txt.
type Story struct {
	// ID is the story id, such as "US-001". IDs are unique within a task
	// file. In the markdown PRD they match [A-Z][A-Z0-9]*-[0-9]+; in the
	// other formats they are any non-empty text without "/".
	ID string
	// Title is the story's title without surrounding whitespace. It is never
	// empty: a prd.json or progress.txt story without a title uses its ID.
	Title string
	// Done reports whether the story is complete; it always equals
	// Status == StatusComplete. In the markdown PRD only the heading's
	// checkbox decides it; criteria do not influence it.
	Done bool
	// Line is the 1-based line number of the story heading, or of the story
	// object's first line in prd.json and progress.txt.
	Line int
	// Block is the story exactly as it appears in the file. In the markdown
	// PRD that is the heading line and every following line up to the next
	// story heading, the next level 1 or 2 heading, or the end of the file,
	// with trailing blank lines and the final line ending dropped. In
	// prd.json it is the story's JSON object, in progress.txt the story's
	// list item. Line endings inside the block are kept as they are in the
	// file (so a CRLF file yields "\r\n" separators).
	Block string
	// Criteria lists the story's acceptance criteria in file order; it is nil
	// when the story has none.
	Criteria []Criterion

	// Status is where the story stands; it is always one of the four valid
	// statuses in a loaded Board or PRD.
	Status Status
	// Description is the story's description text ("" when the format or
	// the story has none; the markdown PRD keeps it inside Block instead).
	Description string
	// Subtasks lists the story's steps in file order; nil when it has none.
	Subtasks []Subtask
	// DependsOn lists the ids of stories that must be complete before this
	// one may start; every id names a story of the same file, and the
	// dependencies never form a cycle.
	DependsOn []string
	// Priority orders not-started stories: lower first, 0 means unset.
	Priority int
	// RetryCount is how many attempts at the story failed since it last
	// succeeded or was unblocked (progress.txt retry_count; 0 elsewhere).
	RetryCount int
	// Blocker says why the story is blocked; nil when nothing is recorded.
	Blocker *Blocker
	// ClaimedBy names who else has the story in progress (a beads issue
	// claimed by another actor: a person, another tool); "" when it is
	// ralph's or unclaimed. Such a story is theirs: never selected.
	ClaimedBy string
}

// PRD is a parsed product requirements document: its stories in file order.
type PRD struct {
	// Path is the file the PRD was read from, as given by the caller; error
	// messages use it to point at the file.
	Path string
	// Stories holds every story in file order; a successfully parsed PRD has
	// at least one, and no two share an ID.
	Stories []Story
}

// Remaining returns how many stories are not done yet; zero means the PRD is
// complete. A nil PRD has no stories.
func (p *PRD) Remaining() int {
	if p == nil {
		return 0
	}
	remaining := 0
	for i := range p.Stories {
		if !p.Stories[i].Done {
			remaining++
		}
	}
	return remaining
}

// Find returns the story whose ID equals id exactly (ids are case-sensitive)
// and reports whether there is one.
func (p *PRD) Find(id string) (Story, bool) {
	if p == nil {
		return Story{}, false
	}
	for i := range p.Stories {
		if p.Stories[i].ID == id {
			return p.Stories[i], true
		}
	}
	return Story{}, false
}
