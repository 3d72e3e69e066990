package tasks

// prd.json comes in the two shapes popular ralph loops use, told apart by
// the key holding the stories:
//
// Shape 1, snarktank/ralph:
//
//	{"project": "...", "branchName": "...", "description": "...",
//	 "userStories": [{"id": "US-001", "title": "...", "description": "...",
//	   "acceptanceCriteria": ["..."], "priority": 1, "passes": false, "notes": ""}]}
//
// A story is complete when "passes" is true and not started otherwise.
//
// Shape 2, iannuttall/ralph:
//
//	{"version": 1, "project": "...", "qualityGates": ["npm test"],
//	 "stories": [{"id": "US-001", "title": "...", "description": "...",
//	   "acceptanceCriteria": ["..."], "dependsOn": ["US-000"],
//	   "status": "open", "startedAt": null, "completedAt": null, "updatedAt": null}]}
//
// "status" is open (not started), in_progress, blocked or done (complete).
//
// Both shapes also accept "dependsOn" and "priority" on any story, and an
// acceptance criterion may be a string (optionally ending in
// "(verify: `command`)") or an object {"text": "...", "verify": "command"}.
// Unknown keys are allowed and kept.
//
// Ralph writes by replacing the bytes of the values it owns ("passes",
// "status" and the timestamps) and by inserting a missing key before the
// closing brace of its object, indented like its last sibling, so key order,
// spacing, line endings and unknown keys stay byte for byte.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

// JSON keys ralph reads or writes.
const (
	jkUserStories  = "userStories"
	jkStories      = "stories"
	jkQualityGates = "qualityGates"
	jkID           = "id"
	jkTitle        = "title"
	jkDescription  = "description"
	jkCriteria     = "acceptanceCriteria"
	jkPriority     = "priority"
	jkPasses       = "passes"
	jkStatus       = "status"
	jkDependsOn    = "dependsOn"
	jkStartedAt    = "startedAt"
	jkCompletedAt  = "completedAt"
	jkUpdatedAt    = "updatedAt"
)

// jsonStatuses maps shape 2's status words onto the model. progress.txt's
// words for the same states (not_started, complete) are read too: a
// person moving between the two formats writes either, and a refusal of
// "complete" where "done" is meant helps nobody. ralph writes shape 2's.
var jsonStatuses = map[string]Status{
	"open":        StatusNotStarted,
	"in_progress": StatusInProgress,
	"blocked":     StatusBlocked,
	"done":        StatusComplete,
	"not_started": StatusNotStarted,
	"complete":    StatusComplete,
}

// jsonStatusWord is the shape 2 word for each status.
var jsonStatusWord = map[Status]string{
	StatusNotStarted: "open",
	StatusInProgress: "in_progress",
	StatusBlocked:    "blocked",
	StatusComplete:   "done",
}

const jsonStatusHint = `use "open", "in_progress", "blocked" or "done" (progress.txt's "not_started" and "complete" are read too)`

// jsonShape says which of the two prd.json shapes a file has.
type jsonShape int

const (
	shapeUserStories jsonShape = 1 // snarktank: userStories + passes
	shapeStories     jsonShape = 2 // iannuttall: stories + status
)

// prdJSON is a parsed prd.json with the values edits need.
type prdJSON struct {
	path    string
	data    []byte
	text    string // data as a string, shared by every Block
	lines   *lineIndex
	shape   jsonShape
	stories []*jvalue
	board   *Board
}

// errAt builds a *ParseError at a byte offset.
func (pj *prdJSON) errAt(off int, hint, format string, args ...any) *ParseError {
	at := pj.lines.pos(off)
	return &ParseError{Path: pj.path, Line: at.line, Column: at.col, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// parsePRDJSON parses and validates prd.json.
func parsePRDJSON(path string, data []byte) (*prdJSON, error) {
	if err := inputlimit.CheckJSON(displayName(path, "prd.json"), data); err != nil {
		return nil, err
	}
	pj := &prdJSON{path: path, data: data, lines: newLineIndex(data)}
	root, text, err := parseJSONText(data, pj.lines)
	pj.text = text
	if err != nil {
		se := err.(*jsonSyntaxError)
		return nil, pj.errAt(se.off, "fix the JSON syntax; ralph only edits a prd.json it can parse", "invalid JSON: %s", se.msg)
	}
	const shapeHint = `put the stories in a "userStories" array (snarktank shape) or a "stories" array (iannuttall shape)`
	if root.kind != jObject {
		return nil, pj.errAt(root.start, shapeHint, "prd.json must be a JSON object, not %s", root.kind)
	}
	userStories, stories := root.get(jkUserStories), root.get(jkStories)
	var list *jvalue
	switch {
	case userStories != nil && stories != nil:
		return nil, pj.errAt(stories.start, "keep only one of them", "prd.json has both %q and %q", jkUserStories, jkStories)
	case userStories != nil:
		pj.shape, list = shapeUserStories, userStories
	case stories != nil:
		pj.shape, list = shapeStories, stories
	default:
		return nil, pj.errAt(root.start, shapeHint, "prd.json has neither %q nor %q", jkUserStories, jkStories)
	}
	key := jkUserStories
	if pj.shape == shapeStories {
		key = jkStories
	}
	if list.kind != jArray {
		return nil, pj.errAt(list.start, "make it an array of story objects", "%q must be an array, not %s", key, list.kind)
	}
	if len(list.elems) == 0 {
		return nil, pj.errAt(list.start, "add at least one story", "%q is empty", key)
	}

	board := &Board{Kind: KindJSON, Path: path}
	if gates := root.get(jkQualityGates); gates != nil && gates.kind != jNull {
		if gates.kind != jArray {
			return nil, pj.errAt(gates.start, "list the commands as strings", "%q must be an array of strings", jkQualityGates)
		}
		board.QualityGates = make([]string, 0, len(gates.elems))
		for _, g := range gates.elems {
			if g.kind != jString {
				return nil, pj.errAt(g.start, "list the commands as strings", "%q entries must be strings, not %s", jkQualityGates, g.kind)
			}
			board.QualityGates = append(board.QualityGates, g.str)
		}
	}

	board.Stories = make([]Story, 0, len(list.elems))
	deps := make([][]depRef, 0, len(list.elems))
	firstLine := make(map[string]int, len(list.elems))
	for i, v := range list.elems {
		s, storyDeps, err := pj.story(v, i)
		if err != nil {
			return nil, err
		}
		if line, dup := firstLine[s.ID]; dup {
			return nil, pj.errAt(v.get(jkID).start, "give every story its own id",
				"duplicate story id %q: line %d already defines a story with this id", s.ID, line)
		}
		firstLine[s.ID] = s.Line
		board.Stories = append(board.Stories, s)
		deps = append(deps, storyDeps)
	}
	if err := checkGraph(path, jkDependsOn, board.Stories, deps); err != nil {
		return nil, err
	}
	pj.stories = list.elems
	pj.board = board
	return pj, nil
}

// story reads story number i (0-based) from its object.
func (pj *prdJSON) story(v *jvalue, i int) (Story, []depRef, error) {
	var s Story
	if v.kind != jObject {
		return s, nil, pj.errAt(v.start, `write each story as an object like {"id": "US-001", ...}`, "story %d is %s, not an object", i+1, v.kind)
	}
	at := pj.lines.pos(v.start)
	s.Line = at.line
	s.Block = pj.text[v.start:v.end]

	id := v.get(jkID)
	switch {
	case id == nil:
		return s, nil, pj.errAt(v.start, `add "id": "US-001" (any unique text)`, "story %d has no %q", i+1, jkID)
	case id.kind != jString && id.kind != jNumber:
		return s, nil, pj.errAt(id.start, "use a string", "story %d: %q must be a string, not %s", i+1, jkID, id.kind)
	}
	s.ID = strings.TrimSpace(id.str)
	switch {
	case s.ID == "":
		return s, nil, pj.errAt(id.start, `use an id like "US-001"`, "story %d has an empty %q", i+1, jkID)
	case strings.Contains(s.ID, TaskIDSeparator):
		return s, nil, pj.errAt(id.start, `"/" separates story and subtask ids in task ids; use "-" instead`, "story id %q contains %q", s.ID, TaskIDSeparator)
	}

	var err error
	if s.Title, err = pj.optString(v, jkTitle, s.ID); err != nil {
		return s, nil, err
	}
	if s.Title = strings.TrimSpace(s.Title); s.Title == "" {
		s.Title = s.ID
	}
	if s.Description, err = pj.optString(v, jkDescription, s.ID); err != nil {
		return s, nil, err
	}
	if p := v.get(jkPriority); p != nil && p.kind != jNull {
		n, convErr := strconv.Atoi(p.str)
		if p.kind != jNumber || convErr != nil {
			return s, nil, pj.errAt(p.start, "use a whole number; lower runs first", "story %s: %q must be a whole number", s.ID, jkPriority)
		}
		s.Priority = n
	}

	s.Status = StatusNotStarted
	switch pj.shape {
	case shapeUserStories:
		if p := v.get(jkPasses); p != nil && p.kind != jNull {
			if p.kind != jBool {
				return s, nil, pj.errAt(p.start, "use true or false", "story %s: %q must be true or false, not %s", s.ID, jkPasses, p.kind)
			}
			if p.str == "true" {
				s.Status = StatusComplete
			}
		}
	case shapeStories:
		if st := v.get(jkStatus); st != nil && st.kind != jNull {
			status, ok := jsonStatuses[st.str]
			if st.kind != jString || !ok {
				return s, nil, pj.errAt(st.start, jsonStatusHint, "story %s: unknown status %s", s.ID, string(pj.data[st.start:st.end]))
			}
			s.Status = status
		}
	}
	s.Done = s.Status == StatusComplete

	if ac := v.get(jkCriteria); ac != nil && ac.kind != jNull {
		const hint = `write each criterion as a string or as {"text": "...", "verify": "command"}`
		if ac.kind != jArray {
			return s, nil, pj.errAt(ac.start, hint, "story %s: %q must be an array", s.ID, jkCriteria)
		}
		for _, item := range ac.elems {
			c := Criterion{Line: pj.lines.pos(item.start).line}
			switch item.kind {
			case jString:
				c.Text, c.Verify = splitVerify(strings.TrimSpace(item.str))
			case jObject:
				text, verify := item.get("text"), item.get("verify")
				if text == nil || text.kind != jString {
					return s, nil, pj.errAt(item.start, hint, "story %s: criterion object needs a \"text\" string", s.ID)
				}
				if verify != nil && verify.kind != jString && verify.kind != jNull {
					return s, nil, pj.errAt(verify.start, hint, "story %s: criterion \"verify\" must be a string", s.ID)
				}
				c.Text = strings.TrimSpace(text.str)
				if verify != nil {
					c.Verify = strings.TrimSpace(verify.str)
				}
			default:
				return s, nil, pj.errAt(item.start, hint, "story %s: criterion is %s", s.ID, item.kind)
			}
			if c.Text == "" {
				return s, nil, pj.errAt(item.start, hint, "story %s: empty acceptance criterion", s.ID)
			}
			s.Criteria = append(s.Criteria, c)
		}
	}

	var deps []depRef
	if dv := v.get(jkDependsOn); dv != nil && dv.kind != jNull {
		if dv.kind != jArray {
			return s, nil, pj.errAt(dv.start, `list story ids, like ["US-001"]`, "story %s: %q must be an array", s.ID, jkDependsOn)
		}
		for _, d := range dv.elems {
			if (d.kind != jString && d.kind != jNumber) || strings.TrimSpace(d.str) == "" {
				return s, nil, pj.errAt(d.start, `list story ids, like ["US-001"]`, "story %s: %q entries must be story ids", s.ID, jkDependsOn)
			}
			id := strings.TrimSpace(d.str)
			s.DependsOn = append(s.DependsOn, id)
			deps = append(deps, depRef{id: id, at: pj.lines.pos(d.start)})
		}
	}
	return s, deps, nil
}

// optString reads an optional string member; null and absent read as "".
func (pj *prdJSON) optString(v *jvalue, key, storyID string) (string, error) {
	m := v.get(key)
	if m == nil || m.kind == jNull {
		return "", nil
	}
	if m.kind != jString {
		return "", pj.errAt(m.start, "use a string", "story %s: %q must be a string, not %s", storyID, key, m.kind)
	}
	return m.str, nil
}

// jsonEditor collects edits against one prd.json.
type jsonEditor struct {
	pj    *prdJSON
	edits []edit
}

// set writes key: text into obj, replacing an existing value when its text
// differs, or, when add is true, inserting the member before the closing
// brace.
func (ed *jsonEditor) set(obj *jvalue, key, text string, add bool) {
	for _, m := range obj.members {
		if m.key == key {
			if string(ed.pj.data[m.value.start:m.value.end]) != text {
				ed.edits = append(ed.edits, edit{start: m.value.start, end: m.value.end, text: text})
			}
			return
		}
	}
	if add {
		ed.insert(obj, key, text)
	}
}

// insert adds a member after the object's last one, copying its layout: on
// a line of its own with the same indentation when the last key starts its
// line, on the same line after the same gap otherwise, and with the same
// spacing around the colon.
func (ed *jsonEditor) insert(obj *jvalue, key, text string) {
	data := ed.pj.data
	if len(obj.members) == 0 {
		ed.edits = append(ed.edits, edit{start: obj.start + 1, end: obj.start + 1, text: jsonString(key) + ": " + text})
		return
	}
	last := obj.members[len(obj.members)-1]
	colon := string(data[last.keyEnd:last.value.start])
	if strings.ContainsAny(colon, "\r\n") {
		colon = ": "
	}
	lineStart := ed.pj.lines.lineStartOf(last.keyStart)
	indent := string(data[lineStart:last.keyStart])
	var gap string
	if strings.Trim(indent, " \t") == "" {
		gap = eolOf(data) + indent
	} else {
		// Same line: reuse the whitespace that follows the comma before
		// the last member, or a single space.
		gap = " "
		if len(obj.members) > 1 {
			i := last.keyStart
			for i > 0 && (data[i-1] == ' ' || data[i-1] == '\t') {
				i--
			}
			if i > 0 && data[i-1] == ',' {
				gap = string(data[i:last.keyStart])
			}
		}
	}
	ed.edits = append(ed.edits, edit{start: last.value.end, end: last.value.end, text: "," + gap + jsonString(key) + colon + text})
}

// prdJSONSource reads and writes prd.json.
type prdJSONSource struct{ path string }

func (s *prdJSONSource) Kind() Kind   { return KindJSON }
func (s *prdJSONSource) Path() string { return s.path }

// Load reads and validates prd.json.
func (s *prdJSONSource) Load() (*Board, error) {
	data, err := inputlimit.ReadFile(s.path)
	if err != nil {
		return nil, fmt.Errorf("load prd.json: %w", err)
	}
	pj, err := parsePRDJSON(s.path, data)
	if err != nil {
		return nil, err
	}
	return pj.board, nil
}

// update runs one write of prd.json: change edits the story with the given
// id and returns the status the story must read back as ("" for no check);
// the result must parse and pass that check before the file is replaced.
// No change, no write.
func (s *prdJSONSource) update(storyID string, change func(pj *prdJSON, ed *jsonEditor, obj *jvalue, story Story) Status) error {
	data, perm, err := readTaskFile(s.path)
	if err != nil {
		return err
	}
	pj, err := parsePRDJSON(s.path, data)
	if err != nil {
		return err
	}
	i := -1
	for k := range pj.board.Stories {
		if pj.board.Stories[k].ID == storyID {
			i = k
			break
		}
	}
	if i < 0 {
		return storyNotFound(s.path, storyID)
	}
	ed := &jsonEditor{pj: pj}
	want := change(pj, ed, pj.stories[i], pj.board.Stories[i])
	out, err := applyEdits(data, ed.edits)
	if err != nil {
		return err
	}
	check, err := parsePRDJSON(s.path, out)
	if err != nil {
		return fmt.Errorf("internal error: the edited prd.json does not parse, so it was not written: %w", err)
	}
	if st, _ := check.board.Find(storyID); want != "" && st.Status != want {
		return fmt.Errorf("internal error: story %s reads back as %s instead of %s, so prd.json was not written", storyID, st.Status, want)
	}
	return writeIfChanged(s.path, data, out, perm)
}

// MarkDone marks a story complete: "passes": true in shape 1; in shape 2
// "status": "done", "completedAt" set to now (added when missing) and
// "updatedAt" set when the story has it. A story already complete is left
// as it is. prd.json stories have no subtasks, so a subtask id is an error
// wrapping ErrSubtaskNotFound, and there are no retry or blocker fields to
// reset.
func (s *prdJSONSource) MarkDone(storyID, subtaskID string, now time.Time) error {
	if subtaskID != "" {
		return fmt.Errorf("%s: story %s: %w %q: prd.json stories have no subtasks", s.path, storyID, ErrSubtaskNotFound, subtaskID)
	}
	return s.SetState(storyID, StatusComplete, 0, nil, now)
}

// SetState writes a story's status where the shape has a place for it.
// Shape 2 writes every status as its word ("open", "in_progress",
// "blocked", "done") and keeps the timestamps the story has current:
// "updatedAt" on every change, "startedAt" when work starts and it is
// empty, "completedAt" set on completion (added when missing) and cleared
// to null when a done story is reopened. Shape 1 only has "passes", so it
// records complete and not_started and leaves in_progress and blocked to
// the caller, as it does retry counts and blockers in both shapes.
func (s *prdJSONSource) SetState(storyID string, status Status, retryCount int, b *Blocker, now time.Time) error {
	if err := validateStatus(status); err != nil {
		return err
	}
	ts := jsonString(timestamp(now))
	return s.update(storyID, func(pj *prdJSON, ed *jsonEditor, obj *jvalue, story Story) Status {
		if story.Status == status {
			return status
		}
		switch pj.shape {
		case shapeUserStories:
			switch status {
			case StatusComplete:
				ed.set(obj, jkPasses, "true", true)
			case StatusNotStarted:
				ed.set(obj, jkPasses, "false", false)
			default:
				return ""
			}
		case shapeStories:
			ed.set(obj, jkStatus, jsonString(jsonStatusWord[status]), status != StatusNotStarted || obj.get(jkStatus) != nil)
			ed.set(obj, jkUpdatedAt, ts, false)
			if v := obj.get(jkStartedAt); status == StatusInProgress && v != nil && (v.kind == jNull || v.str == "") {
				ed.set(obj, jkStartedAt, ts, false)
			}
			if status == StatusComplete {
				ed.set(obj, jkCompletedAt, ts, true)
			} else if v := obj.get(jkCompletedAt); v != nil && v.kind != jNull {
				ed.set(obj, jkCompletedAt, "null", false)
			}
		}
		return status
	})
}
