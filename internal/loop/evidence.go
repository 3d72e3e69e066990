package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/testreport"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// The evidence steps of the loop: the baseline a run takes before any
// agent works, TEST's checks judged test by test against it, and the
// extra runs a changed protected file asks for. The judgement itself is
// package verify's; this file runs what it reads.

// attemptRun is what TEST ran on an attempt's tree, kept in
// runs/<run>/iter-N.checks.json for VALIDATE and COMMIT (after a resume
// too) and for people.
type attemptRun struct {
	SchemaVersion int `json:"schema_version"`
	// Now are the checks on the attempt's tree, Diffs each against the
	// start.
	Now   []verify.CheckRun `json:"now"`
	Diffs []verify.Diff     `json:"diffs"`
	// Protected are the protected files the attempt changed; WithStart
	// the checks run with their start versions put back, and
	// WithStartVerify the story's verify commands run so.
	Protected       []string          `json:"protected,omitempty"`
	WithStart       []verify.CheckRun `json:"with_start,omitempty"`
	WithStartDiffs  []verify.Diff     `json:"with_start_diffs,omitempty"`
	WithStartVerify map[string]bool   `json:"with_start_verify,omitempty"`
	// RedGreen holds, with [verify] red_green, whether each new test
	// failed against the start's code.
	RedGreen map[string]bool `json:"red_green,omitempty"`
	// Complete says every check ran: TEST stops at the first check the
	// attempt broke.
	Complete bool `json:"complete"`
}

// baselineTests is the per-test results of the baseline's checks, by
// check name: runs/<run>/baseline-N.json.
type baselineTests struct {
	SchemaVersion int                           `json:"schema_version"`
	Reports       map[string]*testreport.Report `json:"reports"`
}

// checkRun is a check's result as the judgement reads it.
func checkRun(res check.Result) verify.CheckRun { return verify.FromResult(res) }

// startRuns returns the baseline's checks as runs, with their per-test
// results, by name.
func (b *builder) startRuns() map[string]*verify.CheckRun {
	bl := b.st.Baseline
	out := map[string]*verify.CheckRun{}
	if bl == nil {
		return out
	}
	var tests baselineTests
	if bl.Tests != "" {
		data, err := os.ReadFile(filepath.Join(b.dir, bl.Tests))
		sum := sha256.Sum256(data)
		switch {
		case err != nil:
			b.logError("the baseline's per-test results (%s) are unreadable, so its checks are judged by their exit codes: %v", bl.Tests, err)
		case bl.TestsSum != "" && hex.EncodeToString(sum[:]) != bl.TestsSum:
			msg := fmt.Sprintf("the baseline's per-test results (%s) were changed since ralph wrote them: they are not used, and its checks are judged by their exit codes", bl.Tests)
			b.logError("%s", msg)
			b.sayf(report.KindWarning, "  ! %s\n", msg)
		default:
			if err := json.Unmarshal(data, &tests); err != nil {
				b.logError("the baseline's per-test results (%s) are unreadable, so its checks are judged by their exit codes: %v", bl.Tests, err)
			}
		}
	}
	for _, c := range bl.Checks {
		run := &verify.CheckRun{Name: c.Name, Run: c.Run, Passed: c.Passed}
		if c.PerTest && tests.Reports[c.Name] != nil {
			// Merge sorts what JSON read back, for Find's binary search.
			run.Tests = testreport.Merge(tests.Reports[c.Name])
		}
		out[c.Name+"\x00"+c.Run] = run
	}
	return out
}

// setBaseline makes runs the baseline: the checks on the tree at head.
func (b *builder) setBaseline(head string, runs []verify.CheckRun) error {
	bl := b.st.Baseline
	if bl == nil {
		bl = &Baseline{}
		b.st.Baseline = bl
	}
	bl.Head, bl.Checks, bl.Tests = head, []BaselineCheck{}, ""
	tests := baselineTests{SchemaVersion: 1, Reports: map[string]*testreport.Report{}}
	for _, r := range runs {
		bl.Checks = append(bl.Checks, BaselineCheck{Name: r.Name, Run: r.Run, Passed: r.Passed, PerTest: r.Tests != nil})
		if r.Tests != nil {
			tests.Reports[r.Name] = r.Tests
		}
	}
	if len(tests.Reports) == 0 {
		return nil
	}
	data, err := json.MarshalIndent(tests, "", "  ")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	bl.Tests, bl.TestsSum = fmt.Sprintf("baseline-%d.json", b.st.Machine.Iteration), hex.EncodeToString(sum[:])
	return store.WriteRecord(filepath.Join(b.dir, bl.Tests), data, 0o644)
}

// Values of Options.OnFailingBaseline.
const (
	BaselineJudgeNew = "judge-new-failures"
	BaselineStop     = "stop"
)

// takeBaseline runs the checks once on the tree a fresh run starts from,
// before any agent works on it, with the verify commands of the stories
// still open, and finds the files that define them. Every attempt is
// judged against it: a test that already fails is nobody's fault, but it
// is no excuse either, and a verify command that already passes proves
// nothing. A resume keeps the baseline of its run: its tree is no longer
// the start.
func (b *builder) takeBaseline(ctx context.Context) error {
	b.st.Baseline = &Baseline{Head: b.trees.head(), Checks: []BaselineCheck{}}
	var commands []string
	for _, c := range b.opts.Checks {
		commands = append(commands, c.Run)
	}
	open := b.openVerifyCommands()
	for _, v := range open {
		commands = append(commands, v.cmd)
	}
	b.st.Baseline.Guard = verify.Guard{Defining: verify.FindDefining(b.ws.Root, commands), Globs: b.opts.Protected}
	for _, g := range verify.GlobsMatchingNothing(b.ws.Root, b.opts.Protected) {
		b.sayf(report.KindWarning, "  ! [verify] protected = %q matches no file of the repository: it protects nothing (a typo?)\n", g)
	}
	if len(b.opts.Checks) == 0 && len(open) == 0 {
		return nil
	}
	b.say(report.KindCheck, "ralph: running the checks on the starting tree, before any agent works on it\n", nil)
	var runs []verify.CheckRun
	var failing []string
	for _, c := range b.opts.Checks {
		res := b.runCheck(ctx, c)
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		runs = append(runs, checkRun(res))
		b.printCheck(res, nil, true)
		if !res.Passed() {
			failing = append(failing, describeFailure(res))
			b.logError("starting tree: %s; last lines of its output: %s", describeFailure(res), check.Tail(res.Output, CheckOutputTail))
		}
	}
	if err := b.setBaseline(b.st.Baseline.Head, runs); err != nil {
		return err
	}
	if len(open) > 0 {
		b.st.Baseline.Verify = map[string]bool{}
	}
	for _, v := range open {
		if _, done := b.st.Baseline.Verify[v.cmd]; done {
			continue
		}
		res := b.runCheck(ctx, check.Check{Name: v.id, Run: v.cmd, Timeout: 10 * time.Minute, Format: check.FormatNone})
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		b.st.Baseline.Verify[v.cmd] = res.Passed()
		if res.Passed() {
			b.sayf(report.KindWarning, "  ! %s: verify command `%s` already passes before any work: it proves nothing about the story\n", v.id, v.cmd)
		}
	}
	if len(failing) == 0 {
		return nil
	}
	what := "already failing before any agent ran: " + strings.Join(failing, "; ")
	if b.opts.OnFailingBaseline == BaselineStop {
		return &SetupError{Msg: fmt.Sprintf("%s. Fix it first, or set on_failing_baseline = %q under [build] in .ralph/config.toml to judge each attempt by what it fixes and breaks", what, BaselineJudgeNew)}
	}
	msg := what + `. An attempt is judged by what it changes: it may break nothing, and while a check fails a story needs evidence of its own (a failing test it makes pass, a verify command); the run is complete only once every check passes (on_failing_baseline = "stop" under [build] in .ralph/config.toml stops the run instead)`
	b.sayf(report.KindWarning, "  ! %s\n", msg)
	b.event("%s", msg)
	return nil
}

// verifyCommand is one criterion's verify command of an open story.
type verifyCommand struct{ id, cmd string }

// openVerifyCommands lists the verify commands of the stories not yet
// complete, as "US-001 AC-2", each command once.
func (b *builder) openVerifyCommands() []verifyCommand {
	var out []verifyCommand
	seen := map[string]bool{}
	for _, s := range b.board.Stories {
		if s.Status == tasks.StatusComplete {
			continue
		}
		for i, c := range s.Criteria {
			if c.Verify == "" || seen[c.Verify] {
				continue
			}
			seen[c.Verify] = true
			out = append(out, verifyCommand{id: fmt.Sprintf("%s AC-%d", s.ID, i+1), cmd: c.Verify})
		}
	}
	return out
}

// test is TEST's action: every check on the attempt's tree, each judged
// against the baseline test by test where the runner reports tests, and,
// when the attempt changed a protected file, the checks again with the
// start's versions of those files put back. The first check the attempt
// broke ends the run of checks (cheap checks run first). A check that
// failed at the start and still fails does not end it: VALIDATE then asks
// the story for evidence of its own.
func (b *builder) test(ctx context.Context, it iteration) (Event, error) {
	bg := context.WithoutCancel(ctx)
	start := b.startRuns()
	ar := attemptRun{SchemaVersion: 1, Complete: true}
	var broke *check.Result
	var brokeDiff verify.Diff
	for _, c := range b.opts.Checks {
		res := b.runCheck(bg, c)
		if ctx.Err() != nil {
			return Event{}, ErrInterrupted
		}
		run := checkRun(res)
		d := verify.Compare(start[c.Name+"\x00"+c.Run], run)
		ar.Now, ar.Diffs = append(ar.Now, run), append(ar.Diffs, d)
		it.rec.Checks = append(it.rec.Checks, checkRecord(res, d))
		b.printCheck(res, &d, false)
		if d.Regressed() || res.Missing {
			broke, brokeDiff = &res, d
			ar.Complete = len(ar.Now) == len(b.opts.Checks)
			break
		}
	}
	if broke == nil {
		protected, err := b.protectedChanges(bg, it.rec)
		if err != nil {
			return Event{}, err
		}
		if len(protected) > 0 {
			if err := b.runWithStartFiles(ctx, it, &ar, protected, start); err != nil {
				return Event{}, err
			}
		}
		if b.opts.RedGreen {
			if err := b.runRedGreen(ctx, it.rec, &ar, start); err != nil {
				return Event{}, err
			}
		}
	}
	if err := b.saveAttemptRun(ar); err != nil {
		return Event{}, err
	}
	if broke == nil {
		for _, d := range ar.WithStartDiffs {
			if d.Regressed() {
				j := verify.Judge(b.judgeInput(it.sel.Story, ar, nil, nil))
				return b.judgedFailure(it, j, StatusTestsFailed, TrigTestsFailed), nil
			}
		}
		return Event{Trigger: TrigTestsPassed}, nil
	}
	it.rec.Status = StatusTestsFailed
	if out := check.Tail(broke.Output, CheckOutputTail); out != "" {
		b.logError("iteration %d (%s): output of check %q, last lines: %s", b.st.Machine.Iteration, b.st.Machine.TaskID, broke.Check.Name, out)
	}
	if broke.Missing {
		return b.failWith(it, TrigRunnerMissing, "test runner missing: "+describeFailure(*broke), check.Feedback(*broke), "permanent"), nil
	}
	j := verify.Judge(b.judgeInput(it.sel.Story, ar, nil, nil))
	if j.Outcome == verify.Review {
		return b.judgedFailure(it, j, StatusTestsFailed, TrigTestsFailed), nil
	}
	why := "tests failed: " + describeFailure(*broke)
	if regs := brokeDiff.Regressions(); brokeDiff.PerTest && len(regs) > 0 {
		why = "tests failed: " + strings.Join(clipList(regs, 5), "; ")
	}
	return b.failWith(it, TrigTestsFailed, why, check.Feedback(*broke), classify(broke.Output, broke.TimedOut)), nil
}

// judgedFailure sends the attempt back, or to review, on j.
func (b *builder) judgedFailure(it iteration, j verify.Judgement, status string, trig Trigger) Event {
	it.rec.Status = status
	for _, p := range j.Problems {
		b.sayf(report.KindVerdict, "  ✗ %s\n", p)
	}
	why := strings.Join(j.Problems, "; ")
	if j.Outcome == verify.Review {
		it.rec.Status = StatusNeedsReview
		return b.fail(it, TrigNeedsReview, "needs review: "+why, strings.Join(j.Problems, "\n"), "review")
	}
	return b.fail(it, trig, why, strings.Join(j.Problems, "\n"), "permanent")
}

// checkRecord is a check's outcome as the iteration's record keeps it.
func checkRecord(res check.Result, d verify.Diff) CheckRecord {
	rec := CheckRecord{
		Name: res.Check.Name, Passed: res.Passed(), ExitCode: res.ExitCode,
		DurationMillis: res.Duration.Milliseconds(), TimedOut: res.TimedOut, Missing: res.Missing,
		FailedAtStart: !res.Passed() && d.Known && !d.PassedBefore, ReportNote: res.ReportNote,
	}
	if d.PerTest {
		rec.Tests = &TestCounts{Fixed: d.Fixed, Broken: d.Broken, StillFailing: d.StillFailing, New: d.New, NewFailing: d.NewFailing, Gone: d.Gone}
	}
	if !res.Passed() {
		rec.Output = check.Tail(res.Output, CheckOutputTail)
	}
	return rec
}

// printCheck shows one check's outcome: what it fixed and broke where it
// reports tests, whether it failed at the start too, and for a failure
// the last lines of its output: "exited with code 1" alone does not say
// what to fix.
func (b *builder) printCheck(res check.Result, d *verify.Diff, baseline bool) {
	ms := res.Duration.Milliseconds()
	data := report.Check{Name: res.Check.Name, Passed: report.Ptr(res.Passed()), DurationMS: &ms,
		Baseline: baseline} // the starting tree, before any agent: no task's attempt
	var parts []string
	if res.Tests != nil {
		data.Tests = &report.TestCounts{Passed: res.Tests.Count(testreport.Pass), Failed: res.Tests.Count(testreport.Fail), Skipped: res.Tests.Count(testreport.Skip)}
		parts = append(parts, testCounts(res.Tests))
	}
	if d != nil && d.PerTest {
		data.TestDiff = &report.TestDiff{Fixed: d.Fixed, Broken: d.Broken, StillFailing: d.StillFailing, New: d.New, Gone: d.Gone}
		for _, p := range []struct {
			list []string
			what string
		}{{d.Fixed, "fixed"}, {d.New, "new"}, {d.StillFailing, "still failing"}, {d.Broken, "broken"}, {d.NewFailing, "new and failing"}, {d.Gone, "gone or skipped"}} {
			if len(p.list) > 0 {
				parts = append(parts, p.what+": "+strings.Join(clipList(p.list, 4), ", "))
			}
		}
	}
	if res.ReportNote != "" {
		data.ReportNote = res.ReportNote
		parts = append(parts, res.ReportNote)
	}
	dur := res.Duration.Round(time.Millisecond)
	suffix := ""
	if len(parts) > 0 {
		suffix = " · " + strings.Join(parts, " · ")
	}
	if res.Passed() {
		b.say(report.KindCheck, fmt.Sprintf("  ✓ check %s (%s)%s\n", res.Check.Name, dur, suffix), data)
		return
	}
	if d != nil && d.Known && !d.PassedBefore && !d.Regressed() {
		data.FailedAtStart = true
		b.say(report.KindCheck, fmt.Sprintf("  ✗ check %s (%s) · it failed at the start too%s\n", res.Check.Name, dur, suffix), data)
		return
	}
	b.say(report.KindCheck, fmt.Sprintf("  ✗ check %s (%s)%s\n", res.Check.Name, dur, suffix), data)
	for _, l := range check.LastLines(res.Output, checkOutputLines) {
		b.sayf(report.KindCheck, "    │ %s\n", l)
	}
}

// testCounts says how a report's tests fared: "12 passed, 1 failed".
func testCounts(r *testreport.Report) string {
	parts := []string{words.Count(r.Count(testreport.Pass), "test passed", "tests passed")}
	if n := r.Count(testreport.Fail); n > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", n))
	}
	if n := r.Count(testreport.Skip); n > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", n))
	}
	if n := len(r.Broken); n > 0 {
		parts = append(parts, words.Count(n, "broken package", "broken packages"))
	}
	return strings.Join(parts, ", ")
}

// storyForJudge is the story as the judgement reads it.
func storyForJudge(s tasks.Story) verify.Story {
	out := verify.Story{ID: s.ID, Title: s.Title, Block: s.Block}
	for _, c := range s.Criteria {
		t := c.Text
		if c.Verify != "" {
			t += " (verify: `" + c.Verify + "`)"
		}
		out.Criteria = append(out.Criteria, t)
	}
	return out
}

// judgeInput assembles what verify.Judge reads of the attempt at story.
func (b *builder) judgeInput(story tasks.Story, ar attemptRun, cmds []verify.CommandRun, reviewer *bool) verify.Input {
	in := verify.Input{Story: storyForJudge(story), Diffs: ar.Diffs, ProtectedChanged: ar.Protected,
		Commands: cmds, Reviewer: reviewer, RequireEvidence: b.opts.RequireEvidence}
	if ar.WithStart != nil {
		in.WithStartTests = ar.WithStartDiffs
	}
	if b.opts.RedGreen {
		in.RedGreen = ar.RedGreen
		if in.RedGreen == nil {
			in.RedGreen = map[string]bool{}
		}
	}
	return in
}

// judgement is VALIDATE's conclusion on the current attempt; an attempt
// VALIDATE did not judge (a resume from a state an older ralph wrote) is
// taken on the agent's word, which is what that ralph did.
func (b *builder) judgement() verify.Judgement {
	if a := b.st.Attempt; a != nil && a.Judgement != nil {
		return *a.Judgement
	}
	return verify.Judgement{Outcome: verify.AgentWord}
}

// acceptedHow says, for progress.md, how ralph accepted the task.
func (b *builder) acceptedHow() string {
	j := b.judgement()
	if j.Outcome == verify.AgentWord {
		return b.agentWordHow()
	}
	return "verified by ralph (" + strings.Join(clipList(j.Evidence, 3), "; ") + ")"
}

// agentWordHow words an acceptance on the agent's word; "checks pass" is
// said only when there are checks, so a repository without any never
// reads as if something had been run.
func (b *builder) agentWordHow() string {
	if len(b.opts.Checks) == 0 {
		return "done on the agent's word (no checks configured; nothing ralph ran proves it)"
	}
	return "done on the agent's word (checks pass; nothing ralph ran proves it)"
}

// checksState is what the checks say about an accepted attempt, for the
// lines that explain an acceptance on the agent's word.
func (b *builder) checksState() string {
	if len(b.opts.Checks) == 0 {
		return "no checks are configured"
	}
	return "every check passes"
}

// moveBaseline makes the accepted attempt's tree, now committed at head,
// the start of the next task: its checks have just run on it in TEST, so
// nothing runs again.
func (b *builder) moveBaseline(head string) {
	ar, ok := b.loadAttemptRun()
	if !ok || !ar.Complete || b.st.Baseline == nil {
		return
	}
	if b.st.NoCommit {
		head = b.st.Baseline.Head // nothing was committed: the start's files are still at its HEAD
	}
	if err := b.setBaseline(head, ar.Now); err != nil {
		b.logError("could not keep the checks' results for the next task: %v", err)
	}
}

// setAsideBlocked keeps a blocked task's work at its attempt ref and
// leaves the branch where the task started: what the agent left in the
// tree, and the commits it made itself, which no check passed. The run's
// output says where they are and how to bring them back.
func (b *builder) setAsideBlocked(ctx context.Context, id string, bl *BlockerRecord) {
	ref := AttemptRef(b.id, id)
	snap, err := b.git.Snapshot(ctx)
	if err != nil {
		b.logError("could not set the blocked attempt at %s aside: %v", id, err)
		return
	}
	if len(snap.Dirty) > 0 {
		commit, err := b.setAside(ctx, ref, fmt.Sprintf("ralph: blocked attempt at %s (run %s)", id, b.id))
		if err != nil {
			b.logError("could not set the blocked attempt at %s aside: %v", id, err)
			return
		}
		if commit != "" {
			bl.Ref, bl.Base = ref, snap.Head
		}
	}
	base := b.st.TaskBase
	if b.st.TaskBaseFor != id || base == "" || snap.Head == base {
		return
	}
	commits, err := b.git.CommitsBetween(ctx, base, snap.Head)
	if err != nil {
		b.logError("could not read the commits made while working on %s: %v", id, err)
		return
	}
	if bl.Ref == "" {
		if err := b.git.UpdateRef(ctx, ref, snap.Head); err != nil {
			b.logError("could not keep the commits made while working on %s at %s: %v", id, ref, err)
			return
		}
		bl.Ref = ref
	}
	bl.Base = base
	if err := b.git.MoveBranchBack(ctx, base, workspace.DirName, b.ws.Rel(b.src.Path()), b.ws.Rel(b.opts.PlanPath)); err != nil {
		b.logError("could not move the branch back to %s after %s was blocked: %v", short(base), id, err)
		return
	}
	bl.MovedBack = len(commits)
	msg := fmt.Sprintf("%s made while working on %s passed no check: the branch is back at %s, and they are kept at %s (see them: git log %s; bring them back: git merge --ff-only %s)",
		words.Count(len(commits), "commit", "commits"), id, short(base), ref, ref, ref)
	b.logError("%s", msg)
	b.say(report.KindBlocker, "  ↩ "+msg+"\n", report.Blocker{MovedBack: len(commits), Ref: ref, Base: base})
}

// Tally counts the board's done stories by how they were accepted.
type Tally struct {
	// Verified stories were accepted on evidence ralph produced.
	Verified int
	// AgentWord stories were accepted on the agent's word: their checks
	// pass and nothing proves them.
	AgentWord int
	// Before were done before ralph recorded how (by hand, by an older
	// ralph, or in the task file as it came).
	Before int
}

// String is the tally for the summary line: " (2 verified, 1 on the
// agent's word)"; "" when every story is verified or there is none.
func (t Tally) String() string {
	if t.AgentWord == 0 && t.Before == 0 {
		return ""
	}
	parts := []string{fmt.Sprintf("%d verified", t.Verified)}
	if t.AgentWord > 0 {
		parts = append(parts, fmt.Sprintf("%d on the agent's word", t.AgentWord))
	}
	if t.Before > 0 {
		parts = append(parts, fmt.Sprintf("%d done before ralph verified them", t.Before))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// TallyOf counts board's done stories by the acceptances st records.
func TallyOf(board *tasks.Board, st *LoopState) Tally {
	var t Tally
	if board == nil {
		return t
	}
	for _, s := range board.Stories {
		if s.Status != tasks.StatusComplete {
			continue
		}
		var d *DoneRecord
		if st != nil {
			if r := st.Tasks[s.ID]; r != nil {
				d = r.Done
			}
		}
		switch {
		case d == nil:
			t.Before++
		case d.Outcome == verify.AgentWord:
			t.AgentWord++
		default:
			t.Verified++
		}
	}
	return t
}

func quoteChecks(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("check %q", n)
	}
	return out
}

// withQualityGates adds prd.json's qualityGates (snarktank's format) to
// the checks: a gate is a check like any other, run by ralph and shown in
// the prompt, not text the agent may ignore. A gate that a configured
// check already runs is not run twice.
func withQualityGates(checks []check.Check, gates []string) []check.Check {
	if len(gates) == 0 {
		return checks
	}
	out := slices.Clone(checks)
	for _, g := range gates {
		g = strings.TrimSpace(g)
		if g == "" || slices.ContainsFunc(out, func(c check.Check) bool { return c.Run == g }) {
			continue
		}
		out = append(out, check.Check{Name: g, Kind: check.KindTest, Run: g})
	}
	check.Sort(out)
	return out
}
