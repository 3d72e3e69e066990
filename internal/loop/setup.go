package loop

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// checkCleanTree refuses a fresh run over uncommitted changes that are not
// ralph's own (its folder, the task file, the plan), and over pending edits
// to committed files a person owns in .ralph: the first task's commit
// would otherwise sweep them in. Files ralph created and nobody committed
// yet are not refused: commitSetup commits them on their own.
func checkCleanTree(ctx context.Context, ws *workspace.Workspace, git GitPort, taskFile, planFile string) error {
	snap, err := git.Snapshot(ctx)
	if err != nil {
		return err
	}
	untracked, err := git.Untracked(ctx, workspace.DirName)
	if err != nil {
		return err
	}
	isNew := map[string]bool{}
	for _, f := range untracked {
		isNew[f] = true
	}
	// A file staged as new but never committed is new too: a kill between
	// the setup commit's `git add` and its commit leaves ralph's own files
	// so, and they are not a person's edits.
	for _, f := range snap.Added {
		isNew[f] = true
	}
	own := map[string]bool{ws.Rel(taskFile): true, ws.Rel(planFile): true}
	var foreign, edited []string
	for _, f := range snap.Dirty {
		switch {
		case workspace.PersonOwned(f) && !isNew[f]:
			edited = append(edited, f)
		case own[f] || strings.HasPrefix(f, workspace.DirName+"/") || strings.HasPrefix(f, ws.Rel(taskFile)+"/"): // a task folder (.beads) owns its files
		default:
			foreign = append(foreign, f)
		}
	}
	if len(edited) > 0 {
		return &SetupError{Msg: fmt.Sprintf("%s %s uncommitted changes: commit them first (git commit %s) or undo them (git checkout -- %s); ralph would otherwise commit them inside a story's commit",
			strings.Join(edited, ", "), words.Plural(len(edited), "has", "have"), strings.Join(edited, " "), strings.Join(edited, " "))}
	}
	if len(foreign) > 0 {
		return &SetupError{Msg: fmt.Sprintf("the working tree has uncommitted changes (%s): commit or stash them first, or run with --no-commit", strings.Join(clipList(foreign, 5), ", "))}
	}
	return nil
}

// commitSetup commits what `ralph init`, `ralph prd` and `ralph plan` (or
// this run's start) created and nobody committed yet: ralph's files in
// .ralph, the task file and the plan, as one "ralph: workspace setup"
// commit before the first story, so that a story's commit holds only its
// attempt's changes and ralph's bookkeeping.
func commitSetup(ctx context.Context, ws *workspace.Workspace, git GitPort, taskFile, planFile string, say func(report.Kind, string, report.Payload)) error {
	paths := []string{workspace.DirName}
	for _, p := range []string{taskFile, planFile} {
		// A task store outside the work tree (a parallel worker's
		// shared beads database) is not the work tree's to commit.
		if rel := ws.Rel(p); p != "" && !filepath.IsAbs(rel) && !strings.HasPrefix(rel, "..") {
			paths = append(paths, rel)
		}
	}
	files, err := git.Untracked(ctx, paths...)
	if err != nil {
		return err
	}
	snap, err := git.Snapshot(ctx)
	if err != nil {
		return err
	}
	// Files staged as new and never committed are the setup's too: a kill
	// between an earlier setup's `git add` and its commit leaves them so.
	for _, f := range snap.Added {
		for _, p := range paths {
			if (f == p || strings.HasPrefix(f, p+"/")) && !contains(files, f) {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		return nil
	}
	// .ralph/.gitignore keeps ralph's machine state out: commit it (and
	// any lines EnsureStateFiles added to an older one) with the rest.
	ignore := workspace.DirName + "/.gitignore"
	for _, f := range snap.Dirty {
		if f == ignore && !contains(files, f) {
			files = append(files, f)
		}
	}
	hash, err := git.CommitPaths(ctx, "ralph: workspace setup\n\nFiles ralph created before its first run here: "+strings.Join(clipList(files, 10), ", ")+"\n", files...)
	if err != nil {
		said := err.Error()
		var ee *gitx.ExitError
		if errors.As(err, &ee) && ee.Stderr != "" {
			said = ee.Stderr
		}
		return &SetupError{Msg: fmt.Sprintf("could not commit the workspace setup (%s): git said: %s\ncommit those files yourself (git add %s && git commit), then run the command again",
			strings.Join(clipList(files, 5), ", "), said, strings.Join(files, " "))}
	}
	say(report.KindRun, fmt.Sprintf("ralph: committed the workspace setup (%s) · commit %s\n", strings.Join(clipList(files, 5), ", "), short(hash)), nil)
	return nil
}

// PrepareCheckout does to the person's checkout what a fresh build does
// before any agent works there: it refuses uncommitted changes that are
// not ralph's and pending edits to the files a person owns in .ralph, and
// commits what ralph created and nobody committed as "ralph: workspace
// setup". A parallel build calls it once for the checkout its workers
// branch from, so that every worktree starts from a committed workspace.
func PrepareCheckout(ctx context.Context, ws *workspace.Workspace, taskFile, planFile string, say func(report.Kind, string, report.Payload)) error {
	if _, err := ws.EnsureStateFiles(time.Now()); err != nil {
		return err
	}
	git := repoGit{ws.Repo}
	if err := checkCleanTree(ctx, ws, git, taskFile, planFile); err != nil {
		return err
	}
	return commitSetup(ctx, ws, git, taskFile, planFile, say)
}
