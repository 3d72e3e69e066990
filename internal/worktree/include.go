package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
)

// IncludeFile lists, in a repository's root, the files git ignores that a
// worktree still needs, such as .env: gitignore-style patterns, one a
// line, "#" comments, "!" to exclude again. Claude Code reads the same
// file for its own worktrees.
const IncludeFile = ".worktreeinclude"

// CopyReport says what CopyIncluded did.
type CopyReport struct {
	// Copied are the files copied, relative to the repository's root with
	// "/" as separator, sorted.
	Copied []string
	// Skipped are the files the patterns named that were not copied, with
	// the reason, in the same order.
	Skipped []Skipped
}

// Skipped is a file CopyIncluded left out, and why.
type Skipped struct {
	Path   string
	Reason string
}

// The reasons of Skipped.
const (
	ReasonExists         = "the worktree has it already"
	ReasonOutside        = "a symbolic link that leads out of the repository"
	ReasonBrokenLink     = "a symbolic link that leads nowhere"
	ReasonLinkInWorktree = "a symbolic link in the worktree is in its way"
	ReasonNotRegular     = "not a regular file"
)

// CopyIncluded copies into the worktree at worktreeDir the files of the
// repository at repoRoot that its .worktreeinclude names and git ignores,
// each to the same relative path, keeping its permission bits. Files git
// does not ignore are never copied: tracked ones are in the worktree
// already, and untracked ones are the person's work in progress. No
// .worktreeinclude means nothing to copy.
//
// It never follows a symbolic link out of the repository, and never writes
// through a symbolic link in the worktree (one committed on the task's
// branch could point anywhere); a link to a file inside the repository is
// copied as that file's content. A file the worktree has already is left
// alone, so a resumed worker keeps what its agent changed. A file that
// cannot be copied for such a reason is reported in Skipped; only failing
// to write (a full disk) is an error.
func CopyIncluded(repoRoot, worktreeDir string) (CopyReport, error) {
	var rep CopyReport
	list := filepath.Join(repoRoot, IncludeFile)
	if _, err := os.Stat(list); errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	} else if err != nil {
		return rep, fmt.Errorf("read %s: %w", list, err)
	}
	ctx := context.Background()
	repo, err := gitx.Open(ctx, repoRoot)
	if err != nil {
		return rep, err
	}
	named, err := repo.UntrackedMatching(ctx, list)
	if err != nil {
		return rep, fmt.Errorf("list the files %s names: %w", list, err)
	}
	ignored, err := repo.IgnoredAmong(ctx, named)
	if err != nil {
		return rep, fmt.Errorf("list the files %s names: %w", list, err)
	}
	if len(ignored) == 0 {
		return rep, nil
	}

	// os.Root confines every open to its folder: a path through a
	// symbolic link that leads out fails instead of being followed. The
	// checks in copyOne come first only to say why a file was skipped.
	src, err := os.OpenRoot(repo.Dir)
	if err != nil {
		return rep, err
	}
	defer src.Close()
	dst, err := os.OpenRoot(worktreeDir)
	if err != nil {
		return rep, fmt.Errorf("open the worktree %s: %w", worktreeDir, err)
	}
	defer dst.Close()
	for _, rel := range ignored {
		reason, err := copyOne(src, dst, rel)
		switch {
		case err != nil:
			return rep, fmt.Errorf("copy %s into the worktree %s: %w", rel, worktreeDir, err)
		case reason != "":
			rep.Skipped = append(rep.Skipped, Skipped{Path: rel, Reason: reason})
		default:
			rep.Copied = append(rep.Copied, rel)
		}
	}
	return rep, nil
}

// copyOne copies rel from src to dst. It returns a reason when the file is
// skipped, and an error only when writing fails.
func copyOne(src, dst *os.Root, rel string) (reason string, err error) {
	name := filepath.FromSlash(rel)
	if _, err := dst.Lstat(name); err == nil {
		return ReasonExists, nil
	}
	if linkInTheWay(dst, name) {
		return ReasonLinkInWorktree, nil
	}
	info, err := src.Lstat(name)
	if err != nil {
		return "cannot be read: " + err.Error(), nil
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(filepath.Join(src.Name(), name))
		if err != nil {
			return ReasonBrokenLink, nil
		}
		root, err := filepath.EvalSymlinks(src.Name())
		if err != nil {
			return "", err
		}
		if r, err := filepath.Rel(root, target); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return ReasonOutside, nil
		}
	}
	// Opening through the Root as well means a link swapped in meanwhile
	// still cannot lead out.
	in, err := src.Open(name)
	if err != nil {
		return "cannot be read: " + err.Error(), nil
	}
	defer in.Close()
	if info, err = in.Stat(); err != nil || !info.Mode().IsRegular() {
		return ReasonNotRegular, nil
	}
	if dir := filepath.Dir(name); dir != "." {
		if err := dst.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
	}
	out, err := dst.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
	if err != nil {
		return "", err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		dst.Remove(name) // a torn copy is worse than none
		return "", err
	}
	return "", nil
}

// linkInTheWay reports whether a folder on the way to name in the worktree
// is a symbolic link, which ralph does not write through, wherever it
// points.
func linkInTheWay(dst *os.Root, name string) bool {
	for dir := filepath.Dir(name); dir != "."; dir = filepath.Dir(dir) {
		if info, err := dst.Lstat(dir); err == nil && info.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}
