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
	"io/fs"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
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
