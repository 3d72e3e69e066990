package session

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/workspace"
)

// An executor that makes ralph's checks pass by changing the tests, the
// Makefile or the scripts the checks run, rather than the code, must not
// get a Qualified review out of it: the checks run again with the start's
// versions of those files put back (verify.Overlay, in place, kill-safe),
// and must pass so too. One extra run of the checks, only when the
// executor changed a protected file.

// startFiles is where the executor's versions wait while the start's
// stand in for them.
func (r *Runner) startFiles() verify.Overlay {
	return verify.Overlay{Root: r.WS.Root, Dir: filepath.Join(r.Dir, "overlay")}
}

// startTestsHold runs the checks with the start's versions of the
// protected files the task changed, when it changed any, and says in one
// line why the task fails so ("" when it does not), with the failed
// check's feedback for the next attempt.
func (r *Runner) startTestsHold(ctx context.Context) (reason, feedback string, err error) {
	base := r.prog.TaskBase
	repo := r.WS.Repo
	if base == "" || repo == nil || len(r.Checks) == 0 {
		return "", "", nil
	}
	bg := context.WithoutCancel(ctx)
	changed, err := repo.ChangedFiles(bg, base, "HEAD")
	if err != nil {
		return "", "", err
	}
	snap, err := repo.Snapshot(bg)
	if err != nil {
		return "", "", err
	}
	changed = append(changed, snap.Dirty...)
	var commands []string
	for _, c := range r.Checks {
		commands = append(commands, c.Run)
	}
	guard := verify.Guard{Defining: verify.FindDefining(r.WS.Root, commands)}
	var side []string
	for _, f := range changed {
		f = filepath.ToSlash(f)
		if f == workspace.DirName || strings.HasPrefix(f, workspace.DirName+"/") || !guard.InTestSide(f) {
			continue
		}
		side = append(side, f)
	}
	slices.Sort(side)
	side = slices.Compact(side)
	if len(side) == 0 {
		return "", "", nil
	}
	at, err := repo.FilesAt(bg, base, side)
	if err != nil {
		return "", "", err
	}
	have := map[string]verify.File{}
	for _, f := range at {
		have[f.Path] = verify.File{Path: f.Path, Content: f.Content, Mode: f.Mode}
	}
	var protected []string
	files := make([]verify.File, 0, len(side))
	for _, p := range side {
		f, existed := have[p]
		if !existed {
			f = verify.File{Path: p, Absent: true}
		}
		files = append(files, f)
		if guard.Protects(p, existed) {
			protected = append(protected, p)
		}
	}
	if len(protected) == 0 {
		return "", "", nil
	}
	r.say(report.KindCheck, report.Check{Protected: protected}, "")
	ov := r.startFiles()
	if err := ov.Apply(files); err != nil {
		return "", "", err
	}
	results, passed := r.runChecks(ctx)
	if err := ov.Restore(); err != nil {
		return "", "", err
	}
	if ctx.Err() != nil {
		return "", "", ctx.Err()
	}
	if passed {
		return "", "", nil
	}
	last := results[len(results)-1]
	return fmt.Sprintf("with the start's version of %s put back, ralph's check %q fails (exit %d): changing the tests or the checks instead of the code does not count%s",
		strings.Join(text.ClipList(protected, 5), ", "), last.Check.Name, last.ExitCode, lastLine(last)), check.Feedback(last), nil
}
