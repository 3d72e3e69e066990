package gitx

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ReadHead returns the commit HEAD points at ("" on an unborn branch) and
// the checked-out branch ("" when HEAD is detached) of the work tree at
// dir, read from git's own files without starting git: HEAD, then the
// branch's loose ref or its line in packed-refs, in the repository shared
// by linked work trees. ok is false when the layout is anything else (a
// reftable repository, HEAD naming a ref outside refs/heads, a file that
// does not read as git writes it): then only git can tell.
//
// A loop that has just read HEAD with git uses it to learn, for the cost
// of three small file reads instead of a process, whether HEAD or the
// branch has moved since.
func ReadHead(dir string) (head, branch string, ok bool) {
	gitDir := filepath.Join(dir, ".git")
	fi, err := os.Stat(gitDir)
	if err != nil {
		return "", "", false
	}
	if !fi.IsDir() {
		// A linked work tree or a separate git dir: ".git" names it.
		b, err := os.ReadFile(gitDir)
		if err != nil {
			return "", "", false
		}
		p, found := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if !found {
			return "", "", false
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		gitDir = p
	}
	common := gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		common = c
	}
	if _, err := os.Stat(filepath.Join(common, "reftable")); err == nil {
		return "", "", false
	}
	b, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", "", false
	}
	s := strings.TrimSpace(string(b))
	ref, symbolic := strings.CutPrefix(s, "ref: ")
	if !symbolic {
		return s, "", isHash(s)
	}
	name, isBranch := strings.CutPrefix(ref, "refs/heads/")
	if !isBranch || name == "" {
		return "", "", false
	}
	// Branches live in the shared repository: a loose ref when it was
	// updated since the last pack, else its line in packed-refs.
	b, err = os.ReadFile(filepath.Join(common, filepath.FromSlash(ref)))
	if err == nil {
		h := strings.TrimSpace(string(b))
		return h, name, isHash(h)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", "", false
	}
	b, err = os.ReadFile(filepath.Join(common, "packed-refs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if h, r, found := strings.Cut(strings.TrimSuffix(line, "\r"), " "); found && r == ref {
			return h, name, isHash(h)
		}
	}
	return "", name, true // an unborn branch: no commit yet
}

// isHash reports whether s is a full SHA-1 or SHA-256 object name.
func isHash(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// AddAllListed is AddAll that also returns the paths it staged, new,
// changed or removed, sorted (git add --verbose): a caller that knows the
// tree before the staging learns what changed since without a status.
func (r *Repo) AddAllListed(ctx context.Context) ([]string, error) {
	out, err := r.git(ctx, "add", "--all", "--verbose")
	if err != nil {
		return nil, err
	}
	return parseAddVerbose(out), nil
}

// parseAddVerbose reads `git add --verbose` (under LC_ALL=C): a line
// "add 'PATH'" or "remove 'PATH'" per path, the path as it is.
func parseAddVerbose(out []byte) []string {
	var paths []string
	for line := range strings.SplitSeq(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "add '")
		if !ok {
			rest, ok = strings.CutPrefix(line, "remove '")
		}
		if p, ok2 := strings.CutSuffix(rest, "'"); ok && ok2 && p != "" {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths)
}
