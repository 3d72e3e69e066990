package tasks

// progress.txt is the BMAD state file of seed 000: one YAML document that
// ralph reads before every iteration and updates after it. The format:
//
//	# Comments anywhere are preserved when ralph writes the file.
//	current_task: "1.1/1.1.2"    # ralph: TaskID of the next unit of work, or null
//	last_updated: 2026-11-22T10:00:00Z   # ralph: when ralph last wrote the file
//	current_iteration:           # free-form; ralph leaves it alone
//	  number: 0
//	  neo4j_connected: true
//	stories:                     # required, at least one story, in work order
//	  - id: "1.1"                # required, unique, without "/"; quote numeric ids
//	    title: Login form        # optional, defaults to the id
//	    description: ...         # optional
//	    status: in_progress      # not_started (default) | in_progress | blocked | complete
//	    priority: 1              # optional; lower first among not_started stories
//	    file: docs/stories/1.1.md  # optional BMAD story file, relative to progress.txt
//	    retry_count: 0           # failed attempts since the last success
//	    acceptance_criteria:     # optional; strings or {text, verify} mappings
//	      - Form shows email and password
//	      - text: Submit calls the API
//	        verify: sh tests/login.sh
//	    subtasks:                # optional; done in order
//	      - id: "1.1.1"          # required, unique within the story
//	        title: Write the form component
//	        status: complete     # or done: true
//	    depends_on: ["1.0"]      # ids of stories that must be complete first
//	    blocker_reason: "..."    # blocker fields, present while blocked
//	    blocker_type: transient  # transient | permanent
//	    requires_human: true
//	    attempted_fixes: ["..."]
//	metrics:                     # written by ralph at the end of a run
//	  stories_completed: 0
//	  total_iterations: 0
//
// Unknown keys are allowed everywhere and kept. When a story has a file and
// no acceptance_criteria, the list items under the file's "## Acceptance
// Criteria" heading are its criteria. A string criterion, like a markdown
// one, may end in "(verify: `command`)".
//
// Ralph edits the file by replacing the bytes of the values it owns (status,
// done, retry_count, the blocker fields, current_task, last_updated and the
// metrics), adding missing keys as new lines indented like their siblings
// and deleting blocker lines when a blocker is cleared. Everything else,
// comments included, stays byte for byte; a file that does not parse is
// never edited.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

// ProgressTemplate returns the progress.txt that `ralph init --bmad` writes:
// a valid file with one example story whose comments explain every field.
func ProgressTemplate() string {
	return progressTemplate
}

const progressTemplate = `# progress.txt: BMAD story state for ralph.
# Ralph owns the status fields: it picks the next task from this file and
# records the outcome after every iteration. Edit stories freely; comments
# and keys ralph does not know are kept when it writes.

# current_task is written by ralph: the next task as "story/subtask" or
# "story", or null when nothing is selectable.
current_task: null
# last_updated is written by ralph whenever it changes this file.
last_updated: null
current_iteration:
  number: 0
  neo4j_connected: false

# Stories are worked in order: in_progress first, then the first
# not_started story whose depends_on stories are all complete.
# Blocked and complete stories are skipped.
stories:
  - id: "1.1"            # unique; quote ids that look like numbers
    title: Example story
    description: Replace this with the first story of your epic.
    status: not_started  # not_started | in_progress | blocked | complete
    # file: docs/stories/1.1.md  # optional BMAD story file; its
    #   "## Acceptance Criteria" list is used when acceptance_criteria is absent
    retry_count: 0       # failed attempts; the story is blocked after 2
    acceptance_criteria:
      - The example works
      - text: The tests pass
        verify: make test  # a command that must succeed
    subtasks:            # done in order; each is one iteration of work
      - id: "1.1.1"
        title: Write a failing test
        status: not_started  # or done: true
      - id: "1.1.2"
        title: Make the test pass
        status: not_started
    depends_on: []       # ids of stories that must be complete first
    # While blocked, ralph adds blocker_reason, blocker_type
    # (transient | permanent), requires_human and attempted_fixes here.
    # To unblock: set status: in_progress, retry_count: 0 and delete them.

# metrics is written by ralph when a run ends.
metrics:
  stories_completed: 0
  total_iterations: 0
`

// Keys of progress.txt that ralph reads or writes.
const (
	pkCurrentTask = "current_task"
	pkLastUpdated = "last_updated"
	pkStories     = "stories"
	pkMetrics     = "metrics"

	pkID             = "id"
	pkTitle          = "title"
	pkDescription    = "description"
	pkStatus         = "status"
	pkDone           = "done"
	pkFile           = "file"
	pkPriority       = "priority"
	pkRetryCount     = "retry_count"
	pkCriteria       = "acceptance_criteria"
	pkSubtasks       = "subtasks"
	pkDependsOn      = "depends_on"
	pkBlockerReason  = "blocker_reason"
	pkBlockerType    = "blocker_type"
	pkRequiresHuman  = "requires_human"
	pkAttemptedFixes = "attempted_fixes"
)

// storyStateKeys are the story keys ralph writes, in the order it adds them,
// so new keys land next to the related ones already in the story.
var storyStateKeys = []string{pkStatus, pkRetryCount, pkBlockerReason, pkBlockerType, pkRequiresHuman, pkAttemptedFixes}

// blockerKeys are removed together when a blocker is cleared.
var blockerKeys = []string{pkBlockerReason, pkBlockerType, pkRequiresHuman, pkAttemptedFixes}

// metricOrder puts the seed's summary fields first among new metrics keys.
var metricOrder = []string{"stories_completed", "total_iterations", "final_commit", "time_elapsed"}

const progressStatusHint = "use not_started, in_progress, blocked or complete"

// progressFile is a parsed progress.txt with the nodes edits need.
type progressFile struct {
	doc     *yamlDoc
	top     *ymap
	stories []progressStory
	board   *Board
}

// progressStory is one story's mapping and its subtasks' mappings.
type progressStory struct {
	m        *ymap
	subtasks []*ymap
}

// storyFileReader returns the content of a story file named relative to
// progress.txt; nil skips story files, which writes do because they only
// need statuses.
type storyFileReader func(rel string) ([]byte, error)

// parseProgress parses and validates progress.txt.
func parseProgress(path string, data []byte, readStory storyFileReader) (*progressFile, error) {
	d, err := parseYAMLDoc(path, data)
	if err != nil {
		return nil, err
	}
	const templateHint = "start from the template `ralph init --bmad` writes"
	if d.body == nil {
		return nil, &ParseError{Path: path, Msg: "the progress file is empty", Hint: templateHint}
	}
	top, ok, err := d.asMap(d.body)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, d.errAt(d.body, templateHint, "the progress file must be a YAML mapping with a %q list", pkStories)
	}
	pf := &progressFile{doc: d, top: top, board: &Board{Kind: KindProgress, Path: path}}

	if e := top.get(pkCurrentTask); e != nil {
		text, _, ok := scalarText(e.Value)
		if !ok {
			return nil, d.errAt(e, `write a task id like "1.1/1.1.2", or null`, "%s must be a single value", pkCurrentTask)
		}
		pf.board.CurrentTask = text
	}
	if e := top.get(pkMetrics); e != nil {
		if _, null, _ := scalarText(e.Value); !null {
			if _, ok, err := d.asMap(e.Value); err != nil {
				return nil, err
			} else if !ok {
				return nil, d.errAt(e, "write metrics as key: value lines", "%s must be a mapping", pkMetrics)
			}
		}
	}

	storiesEntry := top.get(pkStories)
	if storiesEntry == nil {
		return nil, d.errAt(d.body, templateHint, "no %q list", pkStories)
	}
	seq, ok := unwrapAnchor(storiesEntry.Value).(*ast.SequenceNode)
	if !ok || len(seq.Values) == 0 {
		if _, null, _ := scalarText(storiesEntry.Value); null || ok {
			return nil, d.errAt(storiesEntry, "add at least one story", "%s is empty", pkStories)
		}
		return nil, d.errAt(storiesEntry, `write stories as a list of mappings ("- id: ...")`, "%s must be a list", pkStories)
	}

	stories := make([]Story, 0, len(seq.Values))
	deps := make([][]depRef, 0, len(seq.Values))
	firstLine := make(map[string]int, len(seq.Values))
	for i, item := range seq.Values {
		m, ok, err := d.asMap(item)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, d.errAt(item, `write each story as a mapping starting with "- id: ..."`, "story %d is not a mapping", i+1)
		}
		story, storyDeps, subs, err := pf.parseStory(m, i, readStory)
		if err != nil {
			return nil, err
		}
		if line, dup := firstLine[story.ID]; dup {
			return nil, d.errAt(m.get(pkID), "give every story its own id",
				"duplicate story id %q: line %d already defines a story with this id", story.ID, line)
		}
		firstLine[story.ID] = story.Line
		stories = append(stories, story)
		deps = append(deps, storyDeps)
		pf.stories = append(pf.stories, progressStory{m: m, subtasks: subs})
	}
	if err := checkGraph(path, pkDependsOn, stories, deps); err != nil {
		return nil, err
	}
	pf.board.Stories = stories
	return pf, nil
}

// parseStory reads story number i (0-based) from its mapping.
func (pf *progressFile) parseStory(m *ymap, i int, readStory storyFileReader) (Story, []depRef, []*ymap, error) {
	d := pf.doc
	var s Story
	idEntry := m.get(pkID)
	if idEntry == nil {
		return s, nil, nil, d.errAt(m.node, `add an id, like id: "1.1"`, "story %d has no %s", i+1, pkID)
	}
	id, err := pf.idValue(idEntry, "story")
	if err != nil {
		return s, nil, nil, err
	}
	s.ID = id
	s.Line = d.nodePos(m.node).line
	s.Block = pf.storyBlock(m)

	if s.Title, err = pf.text(m, pkTitle); err != nil {
		return s, nil, nil, err
	}
	if s.Title = strings.TrimSpace(s.Title); s.Title == "" {
		s.Title = s.ID
	}
	if s.Description, err = pf.text(m, pkDescription); err != nil {
		return s, nil, nil, err
	}
	s.Status = StatusNotStarted
	if e := m.get(pkStatus); e != nil {
		text, null, ok := scalarText(e.Value)
		switch {
		case !ok:
			return s, nil, nil, d.errAt(e, progressStatusHint, "story %s: %s must be a single word", s.ID, pkStatus)
		case !null:
			if s.Status = Status(text); !s.Status.Valid() {
				return s, nil, nil, d.errAt(e.Value, progressStatusHint, "story %s: unknown status %q", s.ID, text)
			}
		}
	}
	if s.RetryCount, err = pf.integer(m, pkRetryCount, s.ID); err != nil {
		return s, nil, nil, err
	}
	if s.RetryCount < 0 {
		return s, nil, nil, d.errAt(m.get(pkRetryCount), "use 0 or more", "story %s: %s is negative", s.ID, pkRetryCount)
	}
	if s.Priority, err = pf.integer(m, pkPriority, s.ID); err != nil {
		return s, nil, nil, err
	}
	if s.Blocker, err = pf.blocker(m, s.ID); err != nil {
		return s, nil, nil, err
	}

	var deps []depRef
	depItems, err := pf.list(m, pkDependsOn, s.ID)
	if err != nil {
		return s, nil, nil, err
	}
	for _, item := range depItems {
		text, null, ok := scalarText(item)
		if !ok || null || text == "" {
			return s, nil, nil, d.errAt(item, "list story ids", "story %s: %s entries must be story ids", s.ID, pkDependsOn)
		}
		s.DependsOn = append(s.DependsOn, text)
		deps = append(deps, depRef{id: text, at: d.nodePos(item)})
	}

	if s.Criteria, err = pf.criteria(m, s.ID); err != nil {
		return s, nil, nil, err
	}
	if e := m.get(pkFile); e != nil {
		file, null, ok := scalarText(e.Value)
		if !ok {
			return s, nil, nil, d.errAt(e, "give the path of the story file", "story %s: %s must be a path", s.ID, pkFile)
		}
		if !null && file != "" && m.get(pkCriteria) == nil && readStory != nil {
			content, err := readStory(file)
			if err != nil {
				return s, nil, nil, d.errAt(e.Value, "fix the path (it is relative to the progress file) or add acceptance_criteria to the story",
					"story %s: cannot read story file %s: %v", s.ID, file, unwrapPathError(err))
			}
			s.Criteria = storyFileCriteria(content)
		}
	}

	subItems, err := pf.list(m, pkSubtasks, s.ID)
	if err != nil {
		return s, nil, nil, err
	}
	var subMaps []*ymap
	subLine := make(map[string]int, len(subItems))
	for j, item := range subItems {
		sm, ok, err := d.asMap(item)
		if err != nil {
			return s, nil, nil, err
		}
		if !ok {
			return s, nil, nil, d.errAt(item, `write each subtask as a mapping starting with "- id: ..."`, "story %s: subtask %d is not a mapping", s.ID, j+1)
		}
		sub, err := pf.subtask(sm, s.ID, j)
		if err != nil {
			return s, nil, nil, err
		}
		if line, dup := subLine[sub.ID]; dup {
			return s, nil, nil, d.errAt(sm.get(pkID), "give every subtask of a story its own id",
				"story %s: duplicate subtask id %q: line %d already defines a subtask with this id", s.ID, sub.ID, line)
		}
		subLine[sub.ID] = d.nodePos(sm.node).line
		s.Subtasks = append(s.Subtasks, sub)
		subMaps = append(subMaps, sm)
	}
	s.Done = s.Status == StatusComplete
	return s, deps, subMaps, nil
}

// idValue reads a story or subtask id: a non-empty scalar without "/".
func (pf *progressFile) idValue(e *ast.MappingValueNode, what string) (string, error) {
	d := pf.doc
	text, null, ok := scalarText(e.Value)
	text = strings.TrimSpace(text)
	switch {
	case !ok || null || text == "":
		return "", d.errAt(e, `write an id like "1.1"`, "%s %s must be a non-empty value", what, pkID)
	case strings.Contains(text, TaskIDSeparator):
		return "", d.errAt(e.Value, `"/" separates story and subtask ids in current_task; use "." or "-" instead`, "%s id %q contains %q", what, text, TaskIDSeparator)
	}
	return text, nil
}

func (pf *progressFile) subtask(m *ymap, storyID string, j int) (Subtask, error) {
	d := pf.doc
	var sub Subtask
	idEntry := m.get(pkID)
	if idEntry == nil {
		return sub, d.errAt(m.node, `add an id, like id: "1.1.1"`, "story %s: subtask %d has no %s", storyID, j+1, pkID)
	}
	id, err := pf.idValue(idEntry, "subtask")
	if err != nil {
		return sub, err
	}
	sub.ID = id
	if sub.Title, err = pf.text(m, pkTitle); err != nil {
		return sub, err
	}
	if sub.Title = strings.TrimSpace(sub.Title); sub.Title == "" {
		sub.Title = sub.ID
	}
	statusDone, doneFlag := false, false
	statusEntry, doneEntry := m.get(pkStatus), m.get(pkDone)
	if statusEntry != nil {
		text, null, ok := scalarText(statusEntry.Value)
		if !ok || (!null && !Status(text).Valid()) {
			return sub, d.errAt(statusEntry.Value, progressStatusHint, "story %s: subtask %s has unknown status %q", storyID, id, text)
		}
		statusDone = Status(text) == StatusComplete
	}
	if doneEntry != nil {
		b, null, ok := boolValue(doneEntry.Value)
		if !ok {
			return sub, d.errAt(doneEntry.Value, "use done: true or done: false", "story %s: subtask %s: %s must be true or false", storyID, id, pkDone)
		}
		doneFlag = b && !null
	}
	if statusEntry != nil && doneEntry != nil && statusDone != doneFlag {
		return sub, d.errAt(doneEntry, "keep only one of status and done", "story %s: subtask %s has %s and %s disagreeing", storyID, id, pkStatus, pkDone)
	}
	sub.Done = statusDone || doneFlag
	return sub, nil
}

// blocker reads the blocker fields; a story without any has a nil Blocker.
func (pf *progressFile) blocker(m *ymap, storyID string) (*Blocker, error) {
	d := pf.doc
	var b Blocker
	present := false
	if e := m.get(pkBlockerReason); e != nil {
		text, null, ok := scalarText(e.Value)
		if !ok {
			return nil, d.errAt(e, "describe the blocker in one string", "story %s: %s must be text", storyID, pkBlockerReason)
		}
		b.Reason, present = text, present || !null
	}
	if e := m.get(pkBlockerType); e != nil {
		text, null, ok := scalarText(e.Value)
		if !ok || (!null && text != string(BlockerTransient) && text != string(BlockerPermanent)) {
			return nil, d.errAt(e.Value, "use transient or permanent", "story %s: unknown %s %q", storyID, pkBlockerType, text)
		}
		b.Type, present = BlockerType(text), present || !null
	}
	if e := m.get(pkRequiresHuman); e != nil {
		v, null, ok := boolValue(e.Value)
		if !ok {
			return nil, d.errAt(e.Value, "use true or false", "story %s: %s must be true or false", storyID, pkRequiresHuman)
		}
		b.RequiresHuman, present = v, present || !null
	}
	if e := m.get(pkAttemptedFixes); e != nil {
		if text, null, ok := scalarText(e.Value); ok {
			if !null && text != "" {
				b.AttemptedFixes = []string{text}
				present = true
			}
		} else {
			items, err := pf.list(m, pkAttemptedFixes, storyID)
			if err != nil {
				return nil, err
			}
			for _, item := range items {
				text, _, ok := scalarText(item)
				if !ok {
					return nil, d.errAt(item, "list each fix as one string", "story %s: %s entries must be text", storyID, pkAttemptedFixes)
				}
				b.AttemptedFixes = append(b.AttemptedFixes, text)
			}
			present = present || len(items) > 0
		}
	}
	if !present {
		return nil, nil
	}
	return &b, nil
}

// criteria reads acceptance_criteria: strings or {text, verify} mappings.
func (pf *progressFile) criteria(m *ymap, storyID string) ([]Criterion, error) {
	d := pf.doc
	items, err := pf.list(m, pkCriteria, storyID)
	if err != nil {
		return nil, err
	}
	var out []Criterion
	for _, item := range items {
		c := Criterion{Line: d.nodePos(item).line}
		if text, null, ok := scalarText(item); ok {
			if null || strings.TrimSpace(text) == "" {
				return nil, d.errAt(item, "write the criterion's text or remove the empty item", "story %s: empty acceptance criterion", storyID)
			}
			c.Text, c.Verify = splitVerify(strings.TrimSpace(text))
			out = append(out, c)
			continue
		}
		cm, ok, err := d.asMap(item)
		if err != nil {
			return nil, err
		}
		const hint = "write a criterion as a string or as a mapping with text and verify"
		if !ok {
			return nil, d.errAt(item, hint, "story %s: unsupported acceptance criterion", storyID)
		}
		if c.Text, err = pf.text(cm, "text"); err != nil {
			return nil, err
		}
		if c.Text = strings.TrimSpace(c.Text); c.Text == "" {
			return nil, d.errAt(item, hint, "story %s: acceptance criterion without text", storyID)
		}
		if c.Verify, err = pf.text(cm, "verify"); err != nil {
			return nil, err
		}
		c.Verify = strings.TrimSpace(c.Verify)
		out = append(out, c)
	}
	return out, nil
}

// text reads an optional scalar as text; null and absent read as "".
func (pf *progressFile) text(m *ymap, key string) (string, error) {
	e := m.get(key)
	if e == nil {
		return "", nil
	}
	text, _, ok := scalarText(e.Value)
	if !ok {
		return "", pf.doc.errAt(e, "write it as a single string", "%s must be text", key)
	}
	return text, nil
}

// integer reads an optional integer; null and absent read as 0.
func (pf *progressFile) integer(m *ymap, key, storyID string) (int, error) {
	e := m.get(key)
	if e == nil {
		return 0, nil
	}
	text, null, ok := scalarText(e.Value)
	if ok && null {
		return 0, nil
	}
	n, err := strconv.Atoi(text)
	if !ok || err != nil {
		return 0, pf.doc.errAt(e.Value, "use a whole number", "story %s: %s must be a whole number, not %q", storyID, key, text)
	}
	return n, nil
}

// list returns the items of an optional sequence; null and absent are empty.
func (pf *progressFile) list(m *ymap, key, storyID string) ([]ast.Node, error) {
	e := m.get(key)
	if e == nil {
		return nil, nil
	}
	if _, null, _ := scalarText(e.Value); null {
		return nil, nil
	}
	seq, ok := unwrapAnchor(e.Value).(*ast.SequenceNode)
	if !ok {
		return nil, pf.doc.errAt(e, `write a list: "- item" lines or [a, b]`, "story %s: %s must be a list", storyID, key)
	}
	return seq.Values, nil
}

// boolValue reads a YAML boolean; null reads as false with null set.
func boolValue(n ast.Node) (v, null, ok bool) {
	switch n := unwrapAnchor(n).(type) {
	case nil, *ast.NullNode:
		return false, true, true
	case *ast.BoolNode:
		return n.Value, false, true
	}
	return false, false, false
}

// storyBlock is the story's list item as written in the file: whole lines
// for a block mapping, the braces and what is between for a flow mapping.
func (pf *progressFile) storyBlock(m *ymap) string {
	d := pf.doc
	if m.flow {
		return d.origSlice(d.tokenStart(m.node.GetToken()), d.offset(m.end.Position)+1)
	}
	first := m.entries[0].Key.GetToken().Position.Line
	last := first
	for _, e := range m.entries {
		last = max(last, lastLine(e))
	}
	return d.origSlice(d.lineStart(first), d.lineEnd(last))
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// acHeading matches a BMAD story file's "## Acceptance Criteria" heading.
var acHeading = regexp.MustCompile(`(?i)^#{1,6}\s+acceptance\s+criteria\s*#*\s*$`)

// listItem matches a bullet or numbered list item, capturing the indentation
// and the text after the marker.
var listItem = regexp.MustCompile(`^([ \t]*)(?:[-*+]|\d+[.)])[ \t]+(.*)$`)

// storyFileCriteria returns the list items under the first "Acceptance
// Criteria" heading of a BMAD story file, up to the next heading of the same
// or a higher level. Only items at the outermost indentation count, since
// nested items elaborate on their parent; a checkbox sets Done and a
// "(verify: `cmd`)" suffix sets Verify. Lines are 1-based in the story file.
func storyFileCriteria(data []byte) []Criterion {
	text := strings.TrimPrefix(string(data), byteOrderMark)
	var (
		out      []Criterion
		inAC     bool
		acLevel  int
		itemIndt = -1
		fence    codeFence
	)
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if fence.isOpen() {
			if fence.isClosedBy(line) {
				fence = codeFence{}
			}
			continue
		}
		if opened, ok := openingFence(line); ok {
			fence = opened
			continue
		}
		if level := markerRun(line, '#'); level > 0 && level < len(line) && (line[level] == ' ' || line[level] == '\t') {
			if inAC && level <= acLevel {
				break
			}
			if !inAC && acHeading.MatchString(line) {
				inAC, acLevel = true, level
			}
			continue
		}
		if !inAC {
			continue
		}
		match := listItem.FindStringSubmatch(line)
		if match == nil {
			continue
		}
		indent := len(match[1])
		if itemIndt < 0 {
			itemIndt = indent
		}
		if indent != itemIndt {
			continue
		}
		item := strings.TrimSpace(match[2])
		c := Criterion{Line: i + 1}
		if len(item) >= 3 && item[0] == '[' && item[2] == ']' && strings.IndexByte(" xX", item[1]) >= 0 {
			c.Done = item[1] != ' '
			item = strings.TrimSpace(item[3:])
		}
		if item == "" {
			continue
		}
		c.Text, c.Verify = splitVerify(item)
		out = append(out, c)
	}
	return out
}

// progressSource reads and writes progress.txt.
type progressSource struct{ path string }

func (s *progressSource) Kind() Kind   { return KindProgress }
func (s *progressSource) Path() string { return s.path }

// Load reads progress.txt, and the story files of stories without
// acceptance_criteria, and validates them.
func (s *progressSource) Load() (*Board, error) {
	data, err := inputlimit.ReadFile(s.path)
	if err != nil {
		return nil, fmt.Errorf("load progress file: %w", err)
	}
	dir := filepath.Dir(s.path)
	pf, err := parseProgress(s.path, data, func(rel string) ([]byte, error) {
		if !filepath.IsAbs(rel) {
			rel = filepath.Join(dir, filepath.FromSlash(rel))
		}
		return inputlimit.ReadFile(rel)
	})
	if err != nil {
		return nil, err
	}
	return pf.board, nil
}

// findStory returns the index of the story with id.
func (pf *progressFile) findStory(id string) int {
	for i := range pf.board.Stories {
		if pf.board.Stories[i].ID == id {
			return i
		}
	}
	return -1
}

// setStoryKey writes key: v into story i, replacing the value in place or
// adding the key next to the related state keys already there.
func (pf *progressFile) setStoryKey(ed *yamlEditor, m *ymap, key string, v yval) error {
	if e := m.get(key); e != nil {
		return ed.setValue(m, e, v)
	}
	ed.insertAfter(m, pf.anchorFor(m, key), key, v)
	return nil
}

// anchorFor picks the entry a missing state key goes after: the nearest
// state key before it in storyStateKeys, else the title, else the id, else
// the end of the mapping. Keys added in one edit share the anchor and keep
// the order they are written in.
func (pf *progressFile) anchorFor(m *ymap, key string) int {
	at := slices.Index(storyStateKeys, key)
	for k := at - 1; k >= 0; k-- {
		if i := m.index(storyStateKeys[k]); i >= 0 {
			return i
		}
	}
	for _, k := range []string{pkTitle, pkID} {
		if i := m.index(k); i >= 0 {
			return i
		}
	}
	return -1
}

// removeKeys deletes the given keys from a mapping where present.
func (pf *progressFile) removeKeys(ed *yamlEditor, m *ymap, keys ...string) error {
	for _, k := range keys {
		if i := m.index(k); i >= 0 {
			if err := ed.remove(m, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// setTopKey writes a top-level key, adding it above the first key when it
// is missing (after the other header key when that exists).
func (pf *progressFile) setTopKey(ed *yamlEditor, key string, v yval) error {
	top := pf.top
	if e := top.get(key); e != nil {
		return ed.setValue(top, e, v)
	}
	if key == pkLastUpdated {
		if i := top.index(pkCurrentTask); i >= 0 {
			ed.insertAfter(top, i, key, v)
			return nil
		}
	}
	ed.insertBefore(top, 0, key, v)
	return nil
}

// update runs one write of progress.txt: change edits the stories, check
// verifies the result reads back as intended, and then current_task (when
// setCurrent) and last_updated are refreshed from the edited board. Nothing
// is written when nothing changed or when any step fails.
func (s *progressSource) update(now time.Time, setCurrent bool,
	change func(pf *progressFile, ed *yamlEditor) error, check func(b *Board) error) error {
	data, perm, err := readTaskFile(s.path)
	if err != nil {
		return err
	}
	pf, err := parseProgress(s.path, data, nil)
	if err != nil {
		return err
	}
	ed := &yamlEditor{d: pf.doc}
	if err := change(pf, ed); err != nil {
		return err
	}
	out, err := pf.doc.render(ed.edits)
	if err != nil {
		return err
	}
	pf2, err := parseProgress(s.path, out, nil)
	if err != nil {
		return fmt.Errorf("internal error: the edited progress file does not parse, so it was not written: %w", err)
	}
	if err := check(pf2.board); err != nil {
		return fmt.Errorf("internal error: the edited progress file does not read back as intended, so it was not written: %w", err)
	}

	ed2 := &yamlEditor{d: pf2.doc}
	if setCurrent {
		next := yval{inline: "null"}
		nextID := ""
		if sel, _, ok, _ := pf2.board.Select(); ok {
			nextID = sel.TaskID()
			next = inlineVal(yamlString(nextID))
		}
		if e := pf2.top.get(pkCurrentTask); e == nil || pf2.board.CurrentTask != nextID {
			if err := pf2.setTopKey(ed2, pkCurrentTask, next); err != nil {
				return err
			}
		}
	}
	if len(ed.edits) == 0 && len(ed2.edits) == 0 {
		return nil
	}
	if err := pf2.setTopKey(ed2, pkLastUpdated, inlineVal(timestamp(now))); err != nil {
		return err
	}
	final, err := pf2.doc.render(ed2.edits)
	if err != nil {
		return err
	}
	if _, err := parseProgress(s.path, final, nil); err != nil {
		return fmt.Errorf("internal error: the edited progress file does not parse, so it was not written: %w", err)
	}
	return writeIfChanged(s.path, data, final, perm)
}

// MarkDone records a finished task. A subtask is marked done (its done key
// becomes true and its status complete, whichever it has; status: complete
// is added when it has neither), and its story becomes complete when no
// subtask is left, or in_progress otherwise. A story-level task makes the
// story complete and leaves its subtasks as they are. Either way the
// story's retry_count is reset to 0, its blocker fields are removed, and
// current_task and last_updated are refreshed.
func (s *progressSource) MarkDone(storyID, subtaskID string, now time.Time) error {
	return s.update(now, true, func(pf *progressFile, ed *yamlEditor) error {
		i := pf.findStory(storyID)
		if i < 0 {
			return storyNotFound(s.path, storyID)
		}
		story, ps := pf.board.Stories[i], pf.stories[i]
		status := StatusComplete
		if subtaskID != "" {
			j := slices.IndexFunc(story.Subtasks, func(st Subtask) bool { return st.ID == subtaskID })
			if j < 0 {
				return fmt.Errorf("%s: story %s: %w %q", s.path, storyID, ErrSubtaskNotFound, subtaskID)
			}
			if !story.Subtasks[j].Done {
				sm := ps.subtasks[j]
				if err := pf.markSubtaskDone(ed, sm); err != nil {
					return err
				}
			}
			for k, st := range story.Subtasks {
				if k != j && !st.Done {
					status = StatusInProgress
				}
			}
		}
		if story.Status != status {
			if err := pf.setStoryKey(ed, ps.m, pkStatus, inlineVal(string(status))); err != nil {
				return err
			}
		}
		if e := ps.m.get(pkRetryCount); e != nil && story.RetryCount != 0 {
			if err := ed.setValue(ps.m, e, inlineVal("0")); err != nil {
				return err
			}
		}
		return pf.removeKeys(ed, ps.m, blockerKeys...)
	}, func(b *Board) error {
		st, _ := b.Find(storyID)
		switch {
		case st.RetryCount != 0 || st.Blocker != nil:
			return fmt.Errorf("story %s still has retries or a blocker", storyID)
		case subtaskID == "" && st.Status != StatusComplete:
			return fmt.Errorf("story %s is %s", storyID, st.Status)
		case subtaskID != "" && !slices.ContainsFunc(st.Subtasks, func(x Subtask) bool { return x.ID == subtaskID && x.Done }):
			return fmt.Errorf("subtask %s/%s is not done", storyID, subtaskID)
		}
		return nil
	})
}

// markSubtaskDone sets the subtask's done marker(s).
func (pf *progressFile) markSubtaskDone(ed *yamlEditor, sm *ymap) error {
	wrote := false
	if e := sm.get(pkDone); e != nil {
		if err := ed.setValue(sm, e, inlineVal("true")); err != nil {
			return err
		}
		wrote = true
	}
	if e := sm.get(pkStatus); e != nil {
		if err := ed.setValue(sm, e, inlineVal(string(StatusComplete))); err != nil {
			return err
		}
		wrote = true
	}
	if !wrote {
		at := sm.index(pkTitle)
		if at < 0 {
			at = sm.index(pkID)
		}
		ed.insertAfter(sm, at, pkStatus, inlineVal(string(StatusComplete)))
	}
	return nil
}

// SetState writes a story's status, retry_count and blocker fields, then
// current_task and last_updated (added at the top of the file when
// missing, as MarkDone does). A nil blocker removes the blocker fields;
// otherwise blocker_reason and blocker_type are written when not empty
// (removed when empty), requires_human always, and attempted_fixes when
// there are any. Keys that are missing are added next to the story's other
// state keys; a default (not_started, retry_count 0) is not added when
// absent, since absent already means that.
func (s *progressSource) SetState(storyID string, status Status, retryCount int, b *Blocker, now time.Time) error {
	if err := validateStatus(status); err != nil {
		return err
	}
	if retryCount < 0 {
		return fmt.Errorf("invalid retry count %d: want 0 or more", retryCount)
	}
	if b != nil && b.Type != "" && b.Type != BlockerTransient && b.Type != BlockerPermanent {
		return fmt.Errorf("invalid blocker type %q: want %s or %s", b.Type, BlockerTransient, BlockerPermanent)
	}
	return s.update(now, true, func(pf *progressFile, ed *yamlEditor) error {
		i := pf.findStory(storyID)
		if i < 0 {
			return storyNotFound(s.path, storyID)
		}
		story, m := pf.board.Stories[i], pf.stories[i].m
		if story.Status != status && (status != StatusNotStarted || m.get(pkStatus) != nil) {
			if err := pf.setStoryKey(ed, m, pkStatus, inlineVal(string(status))); err != nil {
				return err
			}
		}
		if story.RetryCount != retryCount {
			if err := pf.setStoryKey(ed, m, pkRetryCount, inlineVal(strconv.Itoa(retryCount))); err != nil {
				return err
			}
		}
		if b == nil {
			return pf.removeKeys(ed, m, blockerKeys...)
		}
		old := story.Blocker
		if old == nil {
			old = &Blocker{}
		}
		// Each field is written only when it differs, so a re-sent blocker
		// keeps the human's formatting.
		type field struct {
			key     string
			set     bool // false removes the key
			same    bool
			present bool
			v       yval
		}
		fixes := make([]string, len(b.AttemptedFixes))
		for k, f := range b.AttemptedFixes {
			fixes[k] = yamlString(f)
		}
		fields := []field{
			{pkBlockerReason, b.Reason != "", old.Reason == b.Reason, m.get(pkBlockerReason) != nil, inlineVal(yamlString(b.Reason))},
			{pkBlockerType, b.Type != "", old.Type == b.Type, m.get(pkBlockerType) != nil, inlineVal(string(b.Type))},
			{pkRequiresHuman, true, old.RequiresHuman == b.RequiresHuman && m.get(pkRequiresHuman) != nil, m.get(pkRequiresHuman) != nil, inlineVal(strconv.FormatBool(b.RequiresHuman))},
			{pkAttemptedFixes, len(fixes) > 0, slices.Equal(old.AttemptedFixes, b.AttemptedFixes), m.get(pkAttemptedFixes) != nil, listVal(fixes)},
		}
		for _, f := range fields {
			switch {
			case !f.set && f.present:
				if err := pf.removeKeys(ed, m, f.key); err != nil {
					return err
				}
			case f.set && !(f.same && f.present):
				if err := pf.setStoryKey(ed, m, f.key, f.v); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(board *Board) error {
		st, _ := board.Find(storyID)
		if st.Status != status || st.RetryCount != retryCount || !sameBlocker(st.Blocker, b) {
			return fmt.Errorf("story %s reads back as %s/%d/%+v", storyID, st.Status, st.RetryCount, st.Blocker)
		}
		return nil
	})
}

// sameBlocker compares blockers field by field, nil and empty fixes alike.
func sameBlocker(a, b *Blocker) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Reason == b.Reason && a.Type == b.Type && a.RequiresHuman == b.RequiresHuman &&
		slices.Equal(a.AttemptedFixes, b.AttemptedFixes)
}

var integerText = regexp.MustCompile(`^-?[0-9]+$`)

// SetMetrics writes the given keys into the metrics mapping, replacing
// values in place and adding missing keys at its end (the seed's summary
// keys first, the rest sorted), creates the mapping at the end of the file
// when it is missing, and refreshes last_updated. Whole numbers are written
// as YAML integers, everything else as strings.
func (s *progressSource) SetMetrics(metrics map[string]string, now time.Time) error {
	keys := make([]string, 0, len(metrics))
	for k := range metrics {
		if strings.TrimSpace(k) == "" {
			return errors.New("invalid metrics key: empty")
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := metricRank(keys[i]), metricRank(keys[j])
		if ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	format := func(v string) string {
		if integerText.MatchString(v) {
			return v
		}
		return yamlString(v)
	}
	return s.update(now, false, func(pf *progressFile, ed *yamlEditor) error {
		d := pf.doc
		e := pf.top.get(pkMetrics)
		if e == nil {
			if len(keys) == 0 {
				return nil
			}
			var b strings.Builder
			if len(d.norm) > 0 && d.norm[len(d.norm)-1] != '\n' {
				b.WriteString("\n")
			}
			b.WriteString(pkMetrics + ":\n")
			for _, k := range keys {
				b.WriteString("  " + yamlString(k) + ": " + format(metrics[k]) + "\n")
			}
			ed.add(len(d.norm), len(d.norm), b.String())
			return nil
		}
		m, ok, err := d.asMap(e.Value)
		if err != nil {
			return err
		}
		if !ok || len(m.entries) == 0 {
			// metrics: (empty), null, ~ or {}: drop the placeholder and
			// write the keys on the lines below.
			_, end, implicit, err := d.valueSpan(e)
			if err != nil {
				return err
			}
			if !implicit {
				ed.add(d.offset(e.Start.Position)+1, end, "")
			}
			var b strings.Builder
			for _, k := range keys {
				b.WriteString("\n  " + yamlString(k) + ": " + format(metrics[k]))
			}
			at := d.lineEnd(e.Key.GetToken().Position.Line)
			if len(keys) > 0 {
				ed.add(at, at, b.String())
			}
			return nil
		}
		for _, k := range keys {
			v := format(metrics[k])
			entry := m.get(k)
			if entry == nil {
				ed.insertAfter(m, -1, yamlString(k), inlineVal(v))
				continue
			}
			old, _, ok := scalarText(entry.Value)
			if !ok {
				return d.errAt(entry, "make it a single value", "metrics %s is not a single value", k)
			}
			if old != metrics[k] {
				if err := ed.setValue(m, entry, inlineVal(v)); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(*Board) error { return nil })
}

func metricRank(k string) int {
	if i := slices.Index(metricOrder, k); i >= 0 {
		return i
	}
	return len(metricOrder)
}

// isProgressYAML reports whether data looks like a BMAD progress.txt rather
// than the free-text log snarktank's ralph keeps under the same name: it
// has a top-level "stories:" key.
func isProgressYAML(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte(byteOrderMark))
	for _, line := range bytes.Split(data, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("stories:")) {
			return true
		}
	}
	return false
}
