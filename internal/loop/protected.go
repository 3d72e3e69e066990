package loop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/testreport"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// The protected files of an attempt: which the agent changed, the start's
// versions of them put in place to run the checks again (kill-safe), the
// red-green run of new tests against the start's code, and the record of
// an attempt's check runs that TEST keeps for VALIDATE.

// protectedChanges lists the protected files that differ between the
// start tree (the baseline's HEAD) and the attempt's tree: the tests that
// existed, the files that define the checks, the user's globs, and any
// test runner configuration. A test the attempt added is not one: it is
// the attempt's own evidence.
func (b *builder) protectedChanges(ctx context.Context, rec *IterationRecord) ([]string, error) {
	bl := b.st.Baseline
	if bl == nil {
		return nil, nil
	}
	changed, err := b.changedSinceStart(ctx, rec)
	if err != nil {
		return nil, err
	}
	var candidates []string
	for _, f := range changed {
		if bl.Guard.InTestSide(f) {
			candidates = append(candidates, f)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	existed := map[string]bool{}
	if bl.Head != "" {
		files, err := b.git.FilesAt(ctx, bl.Head, candidates)
		if err != nil {
			return nil, fmt.Errorf("reading the start's versions of %s: %w", strings.Join(clipList(candidates, 5), ", "), err)
		}
		for _, f := range files {
			existed[f.Path] = true
		}
	}
	var out []string
	for _, f := range candidates {
		if bl.Guard.Protects(f, existed[f]) {
			out = append(out, f)
		}
	}
	return out, nil
}

// changedSinceStart lists the files the attempt's tree changes against
// the baseline's HEAD, ralph's own files left out: what the agent
// committed and what it left in the tree. When HEAD is still the
// baseline's (the agent did not commit), the tree read after the agent
// of rec says it all, with no git process.
func (b *builder) changedSinceStart(ctx context.Context, rec *IterationRecord) ([]string, error) {
	files, err := b.trees.changedSince(ctx, b.st.Baseline.Head, rec)
	if err != nil {
		return nil, err
	}
	own := b.ownPaths()
	var out []string
	for _, f := range files {
		f = filepath.ToSlash(f)
		if own(f) {
			continue
		}
		out = append(out, f)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ownPaths reports whether a path is one of ralph's own files: its folder,
// the task file, the plan.
func (b *builder) ownPaths() func(string) bool {
	task := filepath.ToSlash(b.ws.Rel(b.src.Path()))
	plan := filepath.ToSlash(b.ws.Rel(b.opts.PlanPath))
	return func(f string) bool {
		return f == task || f == plan || f == workspace.DirName || strings.HasPrefix(f, workspace.DirName+"/")
	}
}

// overlay is where the work's own versions wait while the checks run with
// other versions of some files.
func (b *builder) overlay() verify.Overlay {
	return verify.Overlay{Root: b.ws.Root, Dir: filepath.Join(b.dir, "overlay")}
}

// runWithStartFiles runs the checks, and the story's verify commands,
// with the start's versions of the attempt's test side put back: the
// protected files it changed as they were, the tests it added taken away.
// A test that passed at the start must still pass so, and a fix counts
// only if it holds with the start's test. One extra run of the checks,
// only when a protected file changed.
func (b *builder) runWithStartFiles(ctx context.Context, it iteration, ar *attemptRun, protected []string, start map[string]*verify.CheckRun) error {
	bl := b.st.Baseline
	changed, err := b.changedSinceStart(context.WithoutCancel(ctx), it.rec)
	if err != nil {
		return err
	}
	var side []string
	for _, f := range changed {
		if bl.Guard.InTestSide(f) {
			side = append(side, f)
		}
	}
	files, err := b.startVersions(ctx, side)
	if err != nil {
		return err
	}
	ar.Protected = protected
	b.sayf(report.KindCheck, "  ralph: %s changed %s; running the checks again with the start's %s against the new code\n",
		it.sel.TaskID(), strings.Join(clipList(protected, 5), ", "), words.Plural(len(protected), "version", "versions"))
	return b.withOverlay(ctx, files, func() error {
		for _, c := range b.opts.Checks {
			res := b.runCheck(context.WithoutCancel(ctx), c)
			if ctx.Err() != nil {
				return ErrInterrupted
			}
			run := checkRun(res)
			d := verify.Compare(start[c.Name+"\x00"+c.Run], run)
			ar.WithStart, ar.WithStartDiffs = append(ar.WithStart, run), append(ar.WithStartDiffs, d)
			mark := "✓"
			if !res.Passed() {
				mark = "✗"
			}
			line := fmt.Sprintf("  %s check %s with the start's tests (%s)", mark, c.Name, res.Duration.Round(time.Millisecond))
			if regs := d.Regressions(); len(regs) > 0 {
				line += " · " + strings.Join(clipList(regs, 3), "; ")
			}
			b.say(report.KindCheck, line+"\n", report.Check{Name: c.Name, Passed: report.Ptr(res.Passed()), WithStartTests: true})
		}
		ar.WithStartVerify = map[string]bool{}
		for _, c := range it.sel.Story.Criteria {
			if c.Verify == "" {
				continue
			}
			res := b.runCheck(context.WithoutCancel(ctx), check.Check{Name: "verify", Run: c.Verify, Timeout: 10 * time.Minute, Format: check.FormatNone})
			if ctx.Err() != nil {
				return ErrInterrupted
			}
			ar.WithStartVerify[c.Verify] = res.Passed()
		}
		return nil
	})
}

// runRedGreen runs the checks that gained new passing tests against the
// start's code with the attempt's tests ([verify] red_green): a new test
// counts only if it fails there. The attempt's changes outside its test
// side are taken back for the run.
func (b *builder) runRedGreen(ctx context.Context, rec *IterationRecord, ar *attemptRun, start map[string]*verify.CheckRun) error {
	var want []check.Check
	for i, d := range ar.Diffs {
		if len(d.New) > 0 {
			want = append(want, b.opts.Checks[i])
		}
	}
	if len(want) == 0 {
		return nil
	}
	changed, err := b.changedSinceStart(context.WithoutCancel(ctx), rec)
	if err != nil {
		return err
	}
	var code []string
	for _, f := range changed {
		if !b.st.Baseline.Guard.InTestSide(f) {
			code = append(code, f)
		}
	}
	files, err := b.startVersions(ctx, code)
	if err != nil {
		return err
	}
	b.sayf(report.KindCheck, "  ralph: running the new tests against the start's code ([verify] red_green)\n")
	ar.RedGreen = map[string]bool{}
	return b.withOverlay(ctx, files, func() error {
		for _, c := range want {
			res := b.runCheck(context.WithoutCancel(ctx), c)
			if ctx.Err() != nil {
				return ErrInterrupted
			}
			for i, d := range ar.Diffs {
				if d.Check != c.Name {
					continue
				}
				for _, n := range d.New {
					ar.RedGreen[n] = !testPasses(res.Tests, n)
				}
				_ = i
			}
		}
		return nil
	})
}

// testPasses reports whether the report holds a passing test named n.
func testPasses(r *testreport.Report, n string) bool {
	if r == nil {
		return false
	}
	for _, t := range r.Tests {
		if (t.Name == n || t.ID == n) && t.Status == testreport.Pass {
			return true
		}
	}
	return false
}

// startVersions returns the start tree's versions of paths: the content
// each had at the baseline's HEAD, or absent.
func (b *builder) startVersions(ctx context.Context, paths []string) ([]verify.File, error) {
	have := map[string]verify.File{}
	if head := b.st.Baseline.Head; head != "" && len(paths) > 0 {
		files, err := b.git.FilesAt(context.WithoutCancel(ctx), head, paths)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			have[f.Path] = verify.File{Path: f.Path, Content: f.Content, Mode: f.Mode}
		}
	}
	out := make([]verify.File, 0, len(paths))
	for _, p := range paths {
		if f, ok := have[p]; ok {
			out = append(out, f)
		} else {
			out = append(out, verify.File{Path: p, Absent: true})
		}
	}
	return out, nil
}

// withOverlay runs fn with files in place of the work's versions, and
// puts the work back whatever fn does. A kill in between is repaired by
// the next start (restoreOverlay).
func (b *builder) withOverlay(ctx context.Context, files []verify.File, fn func() error) error {
	ov := b.overlay()
	if err := ov.Apply(files); err != nil {
		rerr := ov.Restore()
		return errors.Join(fmt.Errorf("putting the start's versions in place: %w", err), rerr)
	}
	CrashPoint("overlay-applied")
	err := fn()
	if rerr := ov.Restore(); rerr != nil {
		return errors.Join(err, rerr)
	}
	CrashPoint("overlay-restored")
	return err
}

// restoreOverlay puts back what a run killed during an extra run of the
// checks left in place of the work: called before anything reads the
// tree.
func restoreOverlay(ws *workspace.Workspace, runDir string) error {
	ov := verify.Overlay{Root: ws.Root, Dir: filepath.Join(runDir, "overlay")}
	if !ov.Pending() {
		return nil
	}
	return ov.Restore()
}

// saveAttemptRun writes TEST's runs for VALIDATE and COMMIT.
func (b *builder) saveAttemptRun(ar attemptRun) error {
	name := fmt.Sprintf("iter-%d.checks.json", b.st.Machine.Iteration)
	if err := store.WriteJSONRecord(filepath.Join(b.dir, name), ar); err != nil {
		return err
	}
	if b.st.Attempt != nil {
		b.st.Attempt.Checks = name
	}
	return nil
}

// loadAttemptRun reads TEST's runs of the current attempt; ok is false
// when there are none (a resume from a state an older ralph wrote).
func (b *builder) loadAttemptRun() (attemptRun, bool) {
	var ar attemptRun
	a := b.st.Attempt
	if a == nil || a.Checks == "" {
		return ar, false
	}
	if _, err := store.ReadJSON(filepath.Join(b.dir, a.Checks), 1, &ar); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.logError("TEST's record %s is unreadable: %v", a.Checks, err)
		}
		return ar, false
	}
	return ar, true
}
