package gitx

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// UntrackedMatching returns the untracked files of the work tree that the
// gitignore-style patterns in patternFile match, sorted, with "/" as
// separator. Only those patterns count here, not .gitignore: it answers
// "which of my files does this list name", for a list such as
// .worktreeinclude.
func (r *Repo) UntrackedMatching(ctx context.Context, patternFile string) ([]string, error) {
	abs, err := filepath.Abs(patternFile)
	if err != nil {
		return nil, err
	}
	return r.paths(ctx, "ls-files", "--others", "--ignored", "--exclude-from="+abs, "-z")
}

// IgnoredAmong returns the paths (relative to the work tree) that git
// ignores, by .gitignore files, .git/info/exclude and core.excludesFile,
// sorted.
func (r *Repo) IgnoredAmong(ctx context.Context, paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	sr, ok := r.Runner.(StdinRunner)
	if !ok {
		return nil, errors.New("gitx: IgnoredAmong needs a Runner that can feed git's standard input")
	}
	for _, p := range paths {
		if strings.ContainsRune(p, 0) {
			return nil, fmt.Errorf("gitx: invalid path %q", p)
		}
	}
	out, err := sr.GitStdin(ctx, r.Dir, strings.NewReader(strings.Join(paths, "\x00")+"\x00"), "check-ignore", "--stdin", "-z")
	var ee *ExitError
	if errors.As(err, &ee) && ee.ExitCode == 1 {
		return nil, nil // none of them is ignored
	}
	if err != nil {
		return nil, err
	}
	var ignored []string
	for f := range strings.SplitSeq(string(out), "\x00") {
		if f != "" {
			ignored = append(ignored, f)
		}
	}
	slices.Sort(ignored)
	return ignored, nil
}
