package tasks

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

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
