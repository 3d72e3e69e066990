package landing

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Target is the branch a merge queue lands on, as one executor moves it:
// a branch of the person's repository (the local engine) or the run's tip
// branch on the exchange remote (the Temporal engine).
type Target interface {
	// Tip is the target's commit now.
	Tip(ctx context.Context) (string, error)
	// Move moves the target from tip to commit; an error matching
	// gitx.ErrBranchMoved when it no longer is at tip.
	Move(ctx context.Context, tip, commit string) error
	// Moved is the error that stops the run when the target moved
	// outside ralph from where ralph left it to a commit where failing
	// checks fail that passed there: it names the target as the person
	// knows it and says how to put it back.
	Moved(from, to string, failing []string) *verify.MovedError
}

// Queue is one merge queue: where it integrates, what it lands on and
// what it checks there.
type Queue struct {
	// Repo holds the task branches (the person's checkout, or a host's
	// clone); Integ is the merge queue's worktree of it.
	Repo, Integ *gitx.Repo
	Target      Target
	// Name is the target's branch as the reasons of a send-back name it.
	Name   string
	Checks []check.Check
	// Checker runs the checks in Integ (nil: runkit.ExecChecks{}, as the
	// user); the agents' sandbox when [sandbox] checks is on.
	Checker runkit.CheckPort
	// Records is the run's folder: the checks' results on the tip
	// (tip-checks.json) and on a moved target are kept there.
	Records string
	// Left is the commit ralph left the target at (its run's start or
	// last landing); "" takes the commit of the tip's checks on record.
	// Land updates it: to a move outside ralph it accepted, to its own.
	Left string
	// Say tells one line of the landing, without the executor's prefix.
	Say func(kind report.Kind, data report.Payload, line string)
	Now func() time.Time
}

// Job is one task to land.
type Job struct {
	Run, Task, Title string
	// Worker is who worked it: a worker slot ("w1") or a host.
	Worker  string
	Attempt int
	// Base is the commit its branch was cut from; Head its branch's.
	Base, Head string
	// PRD is the task file's path in the repository; Kind its source.
	PRD  string
	Kind tasks.Kind
	// Token marks the landing commit ("" makes a fresh one); Committing
	// gets it before the commit is made and Committed the commit, so
	// that a crash after either is recognised and nothing lands twice.
	Token      string
	Committing func(token string) error
	Committed  func(hash string) error
}

// Outcome is how a landing ended: landed at Commit, or sent back for
// Reason. It is the Temporal engine's Land activity result too, so its
// JSON is part of recorded histories.
type Outcome struct {
	Landed bool   `json:"landed"`
	Commit string `json:"commit,omitempty"`
	// Failing are the checks that fail on the new tip (as they failed on
	// the tip before: a landing breaks nothing).
	Failing   []string `json:"failing,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	// Feedback is what the next attempt is told of the check that sent
	// the landing back, in check.Feedback's format; Reason is its one
	// line for the terminal.
	Feedback string `json:"feedback,omitempty"`
}

// SendBack is the outcome of a landing sent back for reason.
func SendBack(reason, feedback string, conflicts []string) Outcome {
	return Outcome{Reason: reason, Feedback: feedback, Conflicts: conflicts}
}

// Event is the task machine's event for o at a task's attempt, with
// limit landing attempts: Integrated, or sent back, Conflicted while
// attempts are left and Exhausted (needs review) after the last.
func (o Outcome) Event(attempt, limit int) TaskEvent {
	switch {
	case o.Landed:
		return Integrated
	case attempt >= limit:
		return Exhausted
	}
	return Conflicted
}

// maxTargetMoves bounds how often one landing starts over because the
// target moved outside ralph while it was being integrated.
const maxTargetMoves = 5

// TipChecks is where a run keeps the checks' results on its target's tip.
func TipChecks(records string) string { return filepath.Join(records, "tip-checks.json") }

// runner runs one check in the integration worktree through Checker.
func (q *Queue) runner() verify.Runner {
	if q.Checker == nil {
		return runkit.ExecChecks{}.RunCheck
	}
	return q.Checker.RunCheck
}

// tipChecks are what the checks say of the target's tip, run once per
// tip: the landing is judged against them. A tip that is not where ralph
// left the target (nor, on the exchange, the parent of a landing whose
// move did not go out) was moved outside ralph, by an agent or a person.
// A move to a commit where a check fails that passed where ralph left it
// stops the run (every landing would be sent back for it), naming both
// commits and how to put the branch back; any other move is said and
// landings go on from there. The move's checks are kept aside until it is
// accepted, so a restart judges it the same way.
func (q *Queue) tipChecks(ctx context.Context, tip string) (*verify.Tip, error) {
	path := TipChecks(q.Records)
	record := verify.LoadTip(path)
	left := q.Left
	if left == "" && record != nil {
		left = record.Commit
		if ok, err := q.Repo.IsAncestor(ctx, tip, left); err == nil && ok {
			left = tip
		}
	}
	// Where ralph left the target stays so for this landing: a landing
	// integrated again on a moved target has saved its own checks.
	q.Left = left
	if left == "" || left == tip {
		return verify.RunOnTip(ctx, q.runner(), q.Integ.Dir, path, tip, q.Checks)
	}
	now, fresh, err := JudgeMove(ctx, q.runner(), q.Integ, q.Records, q.Checks, left, tip, "moved-checks.json")
	if err != nil {
		return nil, err
	}
	if len(fresh) > 0 {
		return nil, q.Target.Moved(left, tip, fresh)
	}
	q.Say(report.KindWarning, report.Warning{Target: q.Name, From: left, To: tip},
		fmt.Sprintf("%s moved outside ralph from %s to %s; its checks pass as before, so landings go on from there", q.Name, text.ShortHash(left), text.ShortHash(tip)))
	if err := verify.SaveTip(path, tip, now.Runs); err != nil {
		return nil, err
	}
	q.Left = tip
	return now, nil
}

// JudgeMove judges a branch ralph left at from and found at to, with the
// integration worktree integ detached at to: what the checks say of to
// (kept in file under the run's records) and the checks that fail there
// and passed at from, each run by run. What the checks said at from is
// the tip's record when it is from's, else they are run there (integ is
// put back at to).
// Every executor judges a move outside ralph by it: the target's tip, and
// on Temporal the integrating host's own branch too.
func JudgeMove(ctx context.Context, run verify.Runner, integ *gitx.Repo, records string, checks []check.Check, from, to, file string) (now *verify.Tip, fresh []string, err error) {
	now, err = verify.RunOnTip(ctx, run, integ.Dir, filepath.Join(records, file), to, checks)
	if err != nil || len(now.Failing()) == 0 {
		return now, nil, err
	}
	before := verify.LoadTip(TipChecks(records))
	if before == nil || before.Commit != from {
		if err := integ.DetachAt(ctx, from); err != nil {
			return nil, nil, err
		}
		if before, err = verify.RunOnTip(ctx, run, integ.Dir, filepath.Join(records, "known-checks.json"), from, checks); err != nil {
			return nil, nil, err
		}
		if err := integ.DetachAt(ctx, to); err != nil {
			return nil, nil, err
		}
	}
	return now, verify.NewlyFailing(before, now), nil
}

// bookkeeping marks j's task done in the integration worktree's task file
// and adds its line to progress.md: ralph's record of the landed task,
// part of the task's one commit. A store every checkout shares (beads) is
// not in the commit: its executor marks it once the commit landed.
func (q *Queue) bookkeeping(j Job) error {
	dir := q.Integ.Dir
	if j.Kind != tasks.KindBeads {
		src := tasks.Open(j.Kind, filepath.Join(dir, filepath.FromSlash(j.PRD)))
		if err := src.MarkDone(j.Task, "", q.Now()); err != nil {
			return fmt.Errorf("marking %s done in %s: %w", j.Task, j.PRD, err)
		}
	}
	progress := filepath.Join(dir, workspace.DirName, "progress.md")
	if _, err := os.Stat(progress); err != nil {
		return nil
	}
	line := fmt.Sprintf("\n## %s - %s\n- %s landed by ralph's merge queue (run %s, %s, attempt %d): verified on its branch, checks passed on %s\n",
		q.Now().Format("2006-01-02 15:04"), j.Task, j.Title, j.Run, j.Worker, j.Attempt, q.Name)
	return store.AppendFile(progress, []byte(line))
}

// Message is the landing commit's message: the task, and the trailers
// that tie it to the run.
func Message(j Job) runkit.Message {
	return runkit.Message{Subject: j.Task + ": " + text.OneLine(j.Title), Token: j.Token, Trailers: []runkit.Trailer{
		{Key: "Ralph-Task", Value: j.Task}, {Key: "Ralph-Run", Value: j.Run},
		{Key: "Ralph-Worker", Value: j.Worker}, {Key: "Ralph-Attempt", Value: strconv.Itoa(j.Attempt)},
	}}
}

// LandedBefore returns the commit at rev when it is the landing commit
// token marks: a landing a crash cut short after the target moved, which
// must never land twice.
func LandedBefore(ctx context.Context, repo *gitx.Repo, rev, token string) (string, bool) {
	hash, msg, err := repo.CommitMessage(ctx, rev)
	return hash, token != "" && err == nil && gitx.HasCommitToken(msg, token)
}

// LandedIn reports whether commit, recorded as the landing commit token
// marks, is on rev (at it or below it): a member of a batch lands below
// the batch's head, and a landing a crash cut short after the target
// moved must never land twice. A commit of a chain that never reached
// the target is not on it, and lands again.
func LandedIn(ctx context.Context, repo *gitx.Repo, rev, commit, token string) bool {
	if commit == "" || token == "" {
		return false
	}
	if ok, err := repo.IsAncestor(ctx, commit, rev); err != nil || !ok {
		return false
	}
	_, msg, err := repo.CommitMessage(ctx, commit)
	return err == nil && gitx.HasCommitToken(msg, token)
}
