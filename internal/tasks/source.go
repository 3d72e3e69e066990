package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/inputlimit"
)

// Source reads and writes one task file. Ralph owns task status, so these
// writes are how it records outcomes; each one re-reads the file (the agent
// may have edited it meanwhile), refuses to touch a file that does not
// parse, changes only the bytes of the values it owns, checks that the
// result parses and says what was intended, and replaces the file
// atomically (temporary file in the same folder, fsync, rename) keeping its
// permissions. A write that changes nothing leaves the file untouched. An
// unknown story id yields an error wrapping ErrStoryNotFound, an unknown
// subtask id one wrapping ErrSubtaskNotFound.
type Source interface {
	// Kind is the file's format.
	Kind() Kind
	// Path is the file, as given to Open or found by Detect.
	Path() string
	// Load parses and validates the file. A missing file yields an error
	// wrapping fs.ErrNotExist; problems with the content are *ParseError
	// values naming the file, the line (and column where known) and what
	// to do.
	Load() (*Board, error)
	// MarkDone records a finished task: the subtask is marked done (a
	// subtask id) or the story complete (subtaskID ""), the story becomes
	// complete when all its subtasks are done, its retry count and blocker
	// fields are reset, and current_task (to the next task or null) and
	// last_updated are updated where the format has them.
	MarkDone(storyID, subtaskID string, now time.Time) error
	// SetState writes a story's status, retry count and blocker where the
	// format has places for them, and current_task and last_updated where
	// present. Formats without such places keep what they can (the
	// markdown checkbox and shape 1's "passes" only record complete versus
	// not started); the caller keeps the rest.
	SetState(storyID string, status Status, retryCount int, b *Blocker, now time.Time) error
}

// Open returns the Source for a task file of the given kind. It does not
// touch the file; Load reports a missing or broken one. An unknown kind
// yields a Source whose methods all fail.
func Open(kind Kind, path string) Source {
	switch kind {
	case KindMarkdown:
		return &markdownSource{path: path}
	case KindJSON:
		return &prdJSONSource{path: path}
	case KindProgress:
		return &progressSource{path: path}
	case KindBeads:
		// path is the .beads folder or the repository holding it.
		root := path
		if filepath.Base(path) == beads.DirName {
			root = filepath.Dir(path)
		}
		return OpenBeads(root, "", nil)
	}
	return &unknownSource{kind: kind, path: path}
}

// Files Detect looks for, relative to the repository root and with "/" as
// separator.
const (
	ProgressFileName = "progress.txt"
	PRDJSONFileName  = "prd.json"
	// PRDJSONAltPath is where iannuttall/ralph keeps prd.json.
	PRDJSONAltPath = ".agents/tasks/prd.json"
)

// Detect picks the task source for a repository. An explicit path (relative
// paths are taken from root) wins, with its kind from KindForPath; it need
// not exist yet, so callers can offer to create it. Otherwise the first of
// these that exists is used:
//
//  0. a .beads folder in root: the beads database, driven through bd;
//  1. progress.txt in root, when it is a BMAD progress file (it has a
//     top-level "stories:" key; snarktank's free-text progress.txt log,
//     which sits next to its prd.json, is not one);
//  2. prd.json in root, then .agents/tasks/prd.json;
//  3. the markdown PRD at defaultMD (relative to root unless absolute).
//
// When none exists the error names everything looked for and wraps
// fs.ErrNotExist.
func Detect(root, explicitPath, defaultMD string) (Source, error) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	if explicitPath != "" {
		p := abs(explicitPath)
		return Open(KindForPath(p), p), nil
	}
	var looked []string
	beadsDir := filepath.Join(root, beads.DirName)
	looked = append(looked, beadsDir+" (a beads database)")
	if info, err := os.Stat(beadsDir); err == nil && info.IsDir() {
		return Open(KindBeads, beadsDir), nil
	}
	progress := filepath.Join(root, ProgressFileName)
	looked = append(looked, progress+" (with a stories: list)")
	if data, err := inputlimit.ReadFile(progress); err == nil && isProgressYAML(data) {
		return Open(KindProgress, progress), nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("detect task file: %w", err)
	}
	for _, p := range []string{filepath.Join(root, PRDJSONFileName), filepath.Join(root, filepath.FromSlash(PRDJSONAltPath))} {
		looked = append(looked, p)
		if exists, err := fileExists(p); err != nil {
			return nil, err
		} else if exists {
			return Open(KindJSON, p), nil
		}
	}
	if defaultMD != "" {
		p := abs(defaultMD)
		looked = append(looked, p)
		if exists, err := fileExists(p); err != nil {
			return nil, err
		} else if exists {
			return Open(KindMarkdown, p), nil
		}
	}
	return nil, fmt.Errorf("no task file found (looked for %s): %w", strings.Join(looked, ", "), fs.ErrNotExist)
}

// fileExists reports whether p is an existing regular file; errors other
// than "does not exist" are returned, because guessing past a permission
// problem would pick the wrong source.
func fileExists(p string) (bool, error) {
	info, err := os.Stat(p)
	switch {
	case err == nil:
		return info.Mode().IsRegular(), nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("detect task file: %w", err)
}

// KindForPath is the one place that infers a task source's kind from a
// path, for --tasks, --prd, [tasks] path and Detect alike. In order:
//
//   - a .beads folder, or a folder holding one, is the beads database;
//   - any other folder is no task file: "";
//   - ".json" is prd.json; ".yaml", ".yml" and ".txt" are progress files
//     (BMAD's is progress.txt, and a missing one is answered with its
//     setup template); ".md" and ".markdown" are the markdown PRD;
//   - a file with another name is sniffed when it exists: a leading "{"
//     means prd.json, a top-level "stories:" key a progress file;
//   - anything else is the markdown PRD.
func KindForPath(path string) Kind {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		if filepath.Base(path) == beads.DirName {
			return KindBeads
		}
		if info, err := os.Stat(filepath.Join(path, beads.DirName)); err == nil && info.IsDir() {
			return KindBeads
		}
		return ""
	}
	if filepath.Base(path) == beads.DirName {
		return KindBeads // not made yet: `bd init` makes it
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return KindJSON
	case ".yaml", ".yml", ".txt":
		return KindProgress
	case ".md", ".markdown":
		return KindMarkdown
	}
	if data, err := inputlimit.ReadFile(path); err == nil {
		trimmed := bytes.TrimLeft(bytes.TrimPrefix(data, []byte(byteOrderMark)), " \t\r\n")
		switch {
		case bytes.HasPrefix(trimmed, []byte("{")):
			return KindJSON
		case isProgressYAML(data):
			return KindProgress
		}
	}
	return KindMarkdown
}

// markdownSource reads and writes the PRD markdown file.
type markdownSource struct{ path string }

func (s *markdownSource) Kind() Kind   { return KindMarkdown }
func (s *markdownSource) Path() string { return s.path }

// Load parses the PRD with ParseMarkdown.
func (s *markdownSource) Load() (*Board, error) {
	prd, err := LoadMarkdown(s.path)
	if err != nil {
		return nil, err
	}
	return &Board{Kind: KindMarkdown, Path: s.path, Stories: prd.Stories}, nil
}

// MarkDone ticks the story's heading checkbox with SetStoryDone, and its
// criteria with CheckCriteria: the agent's own ticks were only its claim,
// and ralph takes them off until it accepts the story. Markdown stories
// have no subtasks, retry counts or blockers.
func (s *markdownSource) MarkDone(storyID, subtaskID string, _ time.Time) error {
	if subtaskID != "" {
		return fmt.Errorf("%s: story %s: %w %q: markdown stories have no subtasks", s.path, storyID, ErrSubtaskNotFound, subtaskID)
	}
	data, perm, err := readTaskFile(s.path)
	if err != nil {
		return err
	}
	if _, err := ParseMarkdown(s.path, data); err != nil {
		return err // named with the path, as setDone does
	}
	out, err := SetStoryDone(data, storyID, true)
	if err == nil {
		out, err = CheckCriteria(out, storyID)
	}
	if err != nil {
		if errors.Is(err, ErrStoryNotFound) {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		return err
	}
	// One write for both: the task file is written durably, and a story
	// is done in one step.
	return writeIfChanged(s.path, data, out, perm)
}

// SetState ticks the checkbox for complete and clears it for not_started.
// The checkbox cannot express in_progress or blocked, so those, the retry
// count and the blocker are left to the caller; the story must exist.
func (s *markdownSource) SetState(storyID string, status Status, _ int, _ *Blocker, _ time.Time) error {
	if err := validateStatus(status); err != nil {
		return err
	}
	switch status {
	case StatusComplete:
		return s.setDone(storyID, true)
	case StatusNotStarted:
		return s.setDone(storyID, false)
	}
	prd, err := LoadMarkdown(s.path)
	if err != nil {
		return err
	}
	if _, ok := prd.Find(storyID); !ok {
		return storyNotFound(s.path, storyID)
	}
	return nil
}

func (s *markdownSource) setDone(storyID string, done bool) error {
	data, perm, err := readTaskFile(s.path)
	if err != nil {
		return err
	}
	if _, err := ParseMarkdown(s.path, data); err != nil {
		// SetStoryDone reports parse errors without the path; parsing
		// here first names the file in them.
		return err
	}
	out, err := SetStoryDone(data, storyID, done)
	if err != nil {
		if errors.Is(err, ErrStoryNotFound) {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		return err
	}
	return writeIfChanged(s.path, data, out, perm)
}

// unknownSource stands in for a kind Open does not know.
type unknownSource struct {
	kind Kind
	path string
}

func (s *unknownSource) err() error {
	return fmt.Errorf("unknown task file kind %q for %s: want %s, %s, %s or %s", s.kind, s.path, KindMarkdown, KindJSON, KindProgress, KindBeads)
}
func (s *unknownSource) Kind() Kind                                              { return s.kind }
func (s *unknownSource) Path() string                                            { return s.path }
func (s *unknownSource) Load() (*Board, error)                                   { return nil, s.err() }
func (s *unknownSource) MarkDone(string, string, time.Time) error                { return s.err() }
func (s *unknownSource) SetState(string, Status, int, *Blocker, time.Time) error { return s.err() }
