package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/testreport"
)

// FromResult is a check's result as the judgement reads it. The failing
// tests' output is dropped: it went to the prompt and the logs already,
// and a run kept on disk stays small.
func FromResult(res check.Result) CheckRun {
	return CheckRun{Name: res.Check.Name, Run: res.Check.Run, Passed: res.Passed(), Missing: res.Missing,
		Tests: slim(res.Tests), Note: res.ReportNote}
}

func slim(r *testreport.Report) *testreport.Report {
	if r == nil {
		return nil
	}
	out := &testreport.Report{Format: r.Format, Broken: r.Broken, Tests: make([]testreport.Test, len(r.Tests))}
	for i, t := range r.Tests {
		t.Output = ""
		out.Tests[i] = t
	}
	return testreport.Merge(out)
}

// Tip is what the merge queue knows of the target branch's tip: the
// checks' results on it, test by test. A landing is judged against it,
// exactly as an attempt is judged against its start: it may break
// nothing, while a check that already failed on the tip does not hold
// every landing back. Each landing's own results become the next tip's,
// so the checks run once per landing.
type Tip struct {
	SchemaVersion int        `json:"schema_version"`
	Commit        string     `json:"commit"`
	Runs          []CheckRun `json:"runs"`
}

// LoadTip reads the tip's results from path; nil when there are none.
func LoadTip(path string) *Tip {
	var t Tip
	if _, err := store.ReadJSON(path, 1, &t); err != nil {
		return nil
	}
	for i := range t.Runs {
		if t.Runs[i].Tests != nil {
			t.Runs[i].Tests = testreport.Merge(t.Runs[i].Tests) // sorted, for Find
		}
	}
	return &t
}

// SaveTip records the checks' results on commit.
func SaveTip(path, commit string, runs []CheckRun) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return store.WriteJSONRecord(path, Tip{SchemaVersion: 1, Commit: commit, Runs: runs})
}

// Failing names the checks that fail on the tip.
func (t *Tip) Failing() []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, r := range t.Runs {
		if !r.Passed {
			out = append(out, r.Name)
		}
	}
	return out
}

// run finds the tip's run of c.
func (t *Tip) run(c check.Check) *CheckRun {
	if t == nil {
		return nil
	}
	for i := range t.Runs {
		if t.Runs[i].Name == c.Name && t.Runs[i].Run == c.Run {
			return &t.Runs[i]
		}
	}
	return nil
}

// Runner runs one check in a folder: check.Run, or a test's stand-in.
type Runner func(ctx context.Context, dir string, c check.Check) check.Result

// RunOnTip runs the checks on the tip in dir (a tree at the tip) when the
// results on record are not the tip's, and records them at path.
func RunOnTip(ctx context.Context, run Runner, dir, path, commit string, checks []check.Check) (*Tip, error) {
	if t := LoadTip(path); t != nil && t.Commit == commit {
		return t, nil
	}
	t := &Tip{SchemaVersion: 1, Commit: commit}
	for _, c := range checks {
		res := run(ctx, dir, c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t.Runs = append(t.Runs, FromResult(res))
	}
	if err := SaveTip(path, commit, t.Runs); err != nil {
		return nil, err
	}
	return t, nil
}

// Landing is the judgement of an integrated tree against the tip.
type Landing struct {
	// Runs are the checks on the integrated tree, in order; the run of
	// checks stops at the first that broke something.
	Runs []CheckRun
	// Regressions say what the integration broke; empty means it lands.
	Regressions []string
	// Failed is the result of the check that broke something, for the
	// reason sent back to the worker.
	Failed *check.Result
}

// JudgeLanding runs the checks on the integrated tree in dir and judges
// each against its run on the tip: a test that passed there must pass,
// test by test where the runner reports tests; a check that failed on
// the tip and still fails, breaking nothing more, does not hold the
// landing back (the worker's loop already asked the story for evidence).
func JudgeLanding(ctx context.Context, run Runner, dir string, tip *Tip, checks []check.Check) Landing {
	var l Landing
	for _, c := range checks {
		res := run(ctx, dir, c)
		if ctx.Err() != nil {
			return l
		}
		r := FromResult(res)
		l.Runs = append(l.Runs, r)
		d := Compare(tip.run(c), r)
		if d.Regressed() || res.Missing {
			l.Regressions = d.Regressions()
			if res.Missing {
				l.Regressions = append(l.Regressions, "check "+c.Name+" could not run: its program is not installed")
			}
			l.Failed = &res
			return l
		}
	}
	return l
}

// Reason says in one line why a landing whose check failed is sent back:
// the check and what the integration broke. Both engines' merge queues
// print it and record it; the next attempt gets Feedback too.
func (l Landing) Reason(target string) string {
	if l.Failed == nil {
		return ""
	}
	return fmt.Sprintf("check %q failed after integration on %s (%s)", l.Failed.Check.Name, target, l.Why())
}

// Feedback is what the next attempt's prompt is told of the failed
// check, in the one feedback format (check.Feedback).
func (l Landing) Feedback() string {
	if l.Failed == nil {
		return ""
	}
	return check.Feedback(*l.Failed)
}

// SentBack is what a task's next attempt is told when its landing was
// sent back, by either engine: why in one line, the failed check's
// feedback when a check failed, and that the branch starts again from
// the target's tip.
func SentBack(task, target, reason, feedback string) string {
	msg := "An earlier attempt at " + task + " was verified on its own branch but could not land on " + target + ": " + reason
	if feedback != "" {
		msg += ".\n\n" + strings.TrimSuffix(feedback, "\n")
	}
	return msg + "\nYour branch starts from the current tip of " + target + ", which has the other tasks' work: redo the task on top of it."
}

// Why says what the integration broke, in words: "TestA passed at the
// start and fails now" names the tip as the start.
func (l Landing) Why() string {
	out := make([]string, len(l.Regressions))
	for i, r := range l.Regressions {
		out[i] = strings.ReplaceAll(r, "at the start", "on the tip")
	}
	return strings.Join(out, "; ")
}
