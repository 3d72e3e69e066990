// Package worktree knows where ralph's worktrees of a repository live and
// what goes in them: the mark that makes a worktree ralph's, and the files
// git ignores that an agent still needs (.worktreeinclude).
//
// Worktrees live outside the repository, by default next to it:
//
//	<parent>/.ralph-worktrees/<repo>/<run>/<task>
//
// Outside, because an agent started inside the repository's folder finds
// the outer .git and writes into the person's checkout (ralph-tui moved
// its worktrees out for that reason), and because worktrees nested in
// worktrees are how peers lost track of theirs.
package worktree

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/store"
)

// DirName is the folder, next to the repository, that holds ralph's
// worktrees of every repository in the same parent folder.
const DirName = ".ralph-worktrees"

// DefaultRoot is where the worktrees of the repository at repoRoot go when
// nothing else is configured: <parent>/.ralph-worktrees/<repo>.
func DefaultRoot(repoRoot string) string {
	repoRoot = filepath.Clean(repoRoot)
	return filepath.Join(filepath.Dir(repoRoot), DirName, filepath.Base(repoRoot))
}

// Root is the folder for the worktrees of the repository at repoRoot:
// override when it is set ([build] worktree_root; a relative one is taken
// from the repository's root), DefaultRoot otherwise.
func Root(repoRoot, override string) string {
	switch {
	case override == "":
		return DefaultRoot(repoRoot)
	case filepath.IsAbs(override):
		return filepath.Clean(override)
	}
	return filepath.Join(repoRoot, override)
}

// PathUnder is the worktree of task in run under root, as Root returns it.
// Run and task ids become one folder name each, whatever they hold: a
// subtask id's "/" or a leading "." could otherwise nest folders or climb
// out of root, so such bytes are written as %XX (US-001 stays US-001).
func PathUnder(root, run, task string) string {
	return filepath.Join(root, segment(run), segment(task))
}

// segment escapes s into one safe folder name: letters, digits, "-", "_"
// and (not first) "." stay, every other byte becomes %XX, so different
// ids never share a folder.
func segment(s string) string {
	if s == "" {
		return "%"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// MarkerName is the file in a worktree's own git folder
// (.git/worktrees/<name>/ of the repository) that makes it ralph's.
const MarkerName = "ralph-worktree"

// markerVersion is the schema_version of the marker this ralph writes.
const markerVersion = 1

// Marker is what the mark of a worktree records, for the person who finds
// one: which repository, run and task it was made for.
type Marker struct {
	SchemaVersion int    `json:"schema_version"`
	Repo          string `json:"repo"`
	Run           string `json:"run"`
	Task          string `json:"task"`
}

// Mark makes the linked worktree at dir ralph's, so IsInside recognises it
// wherever its root is. The mark lives in the worktree's git folder, not
// among its files: the agent never sees it or commits it, it is per
// worktree, and git deletes it with the worktree.
func Mark(dir string, m Marker) error {
	_, gitDir, ok := linkedWorktree(dir)
	if !ok {
		return fmt.Errorf("cannot mark %s as ralph's worktree: it is not a linked git worktree", dir)
	}
	m.SchemaVersion = markerVersion
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return store.WriteFileAtomic(filepath.Join(gitDir, MarkerName), append(b, '\n'), 0o644)
}

// IsInside reports whether dir is in one of ralph's worktrees, so that
// ralph can refuse to run there: a run started in a worker's worktree
// would nest worktrees in worktrees and race the run that owns it.
//
// It is decided by the mark (Mark), which works wherever the worktrees'
// root is configured, and, for a worktree that was never marked, by the
// layout: a linked worktree inside a folder named .ralph-worktrees. It
// reads the .git file git leaves in a linked worktree rather than running
// git, so it is cheap and cannot fail; the main checkout, whose .git is a
// folder, is never inside.
func IsInside(dir string) bool {
	top, gitDir, ok := linkedWorktree(dir)
	if !ok {
		return false
	}
	if _, err := os.Stat(filepath.Join(gitDir, MarkerName)); err == nil {
		return true
	}
	for p := top; ; p = filepath.Dir(p) {
		if filepath.Base(p) == DirName {
			return true
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// linkedWorktree finds the work tree holding dir, as git does, by the
// nearest .git above it. It reports ok only for a linked worktree (its .git
// is a file, "gitdir: <path>"), with its top folder and git folder.
func linkedWorktree(dir string) (top, gitDir string, ok bool) {
	p, err := filepath.Abs(dir)
	if err != nil {
		return "", "", false
	}
	for {
		info, err := os.Lstat(filepath.Join(p, ".git"))
		switch {
		case err == nil && info.Mode().IsRegular():
			b, err := os.ReadFile(filepath.Join(p, ".git"))
			if err != nil {
				return "", "", false
			}
			g, found := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
			if !found {
				return "", "", false
			}
			g = strings.TrimSpace(g)
			if !filepath.IsAbs(g) {
				g = filepath.Join(p, g)
			}
			return p, g, true
		case err == nil, !errors.Is(err, os.ErrNotExist):
			return "", "", false
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", "", false
		}
		p = parent
	}
}

// ClearLeftLock removes git's index.lock from ralph's own (marked)
// worktree at dir and returns its path, "" when there was none or dir is
// not a worktree ralph marked. Call it only where no git can be running in
// that worktree: a parallel worker's, once the agents a killed run left
// were stopped. A kill of ralph during its own `git add` leaves the lock,
// and git would refuse every later commit there, blocking the task for
// good although nothing is wrong with its work.
func ClearLeftLock(dir string) string {
	_, gitDir, ok := linkedWorktree(dir)
	if !ok {
		return ""
	}
	if _, err := os.Stat(filepath.Join(gitDir, MarkerName)); err != nil {
		return ""
	}
	lock := filepath.Join(gitDir, "index.lock")
	if os.Remove(lock) != nil {
		return ""
	}
	return lock
}
