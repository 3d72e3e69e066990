// Package tasks holds ralph's task model — a PRD made of stories, each with
// acceptance criteria — and the parser for the PRD markdown format.
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
//	- [x] Acceptance criterion 2
//
//	### [x] US-002: Another story
//	- [x] Criterion
//
// A story heading is "### ", a checkbox ("[ ]" pending, "[x]" or "[X]" done),
// a space, an id (uppercase prefix, dash, digits: US-001, STORY-12, BUG-7), a
// colon, a space and a title. The checkbox on the heading alone decides
// whether a story is done; criteria checkboxes are informational, so an agent
// ticking every criterion does not by itself finish a story.
//
// Nothing inside a fenced code block (``` or ~~~) is ever a heading or a
// criterion, so PRDs can quote the format in examples safely.
package tasks

import "errors"

// ErrStoryNotFound is wrapped by errors about a story id that no story heading
// in the PRD carries; test for it with errors.Is.
var ErrStoryNotFound = errors.New("unknown story id")

// Criterion is one acceptance criterion line of a story: a task-list item
// ("- [ ] text", "* [x] text", "+ [ ] text", optionally indented) inside the
// story's block and outside any fenced code block.
type Criterion struct {
	// Text is the criterion without the list marker and checkbox, with
	// surrounding whitespace removed; it is never empty.
	Text string
	// Done reports whether the criterion's checkbox is ticked ("[x]" or "[X]").
	Done bool
	// Line is the 1-based line number of the criterion in the PRD file.
	Line int
}

// Story is one unit of work: a story heading and the lines that follow it.
type Story struct {
	// ID is the story id from the heading, such as "US-001". IDs are unique
	// within a PRD and match [A-Z][A-Z0-9]*-[0-9]+.
	ID string
	// Title is the heading text after "ID: ", without trailing whitespace; it
	// is never empty and never starts with whitespace.
	Title string
	// Done reports whether the heading's checkbox is ticked. Criteria do not
	// influence it.
	Done bool
	// Line is the 1-based line number of the story heading.
	Line int
	// Block is the story exactly as it appears in the file: the heading line
	// and every following line up to the next story heading, the next level
	// 1 or 2 heading, or the end of the file. Trailing blank lines and the
	// final line ending are dropped; line endings inside the block are kept
	// as they are in the file (so a CRLF file yields "\r\n" separators).
	Block string
	// Criteria lists the story's acceptance criteria in file order; it is nil
	// when the story has none.
	Criteria []Criterion
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

// Next returns the first story, in file order, that is not done. Authors order
// stories by priority and dependency, so file order is the work order. It
// reports false when every story is done.
func (p *PRD) Next() (Story, bool) {
	if p == nil {
		return Story{}, false
	}
	for i := range p.Stories {
		if !p.Stories[i].Done {
			return p.Stories[i], true
		}
	}
	return Story{}, false
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
