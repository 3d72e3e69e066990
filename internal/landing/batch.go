package landing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Land integrates j's branch on the target's tip in the integration
// worktree, judges the result against the tip's checks, commits it with
// ralph's record of the task, and moves the target to it: a batch of one.
func (q *Queue) Land(ctx context.Context, j Job) (Outcome, error) {
	outs, err := q.LandBatch(ctx, []Job{j})
	return outs[0], err
}

// LandBatch lands jobs together: each one's changes applied in turn on
// the target's tip and committed with ralph's record of its task (one
// commit per task, as a landing alone makes), the checks run once on the
// chain's head and judged against the tip's, and the target moved once,
// to the head. The target only ever moves to a commit whose checks
// passed. A job whose changes conflict is sent back (Outcome.Reason) and
// the chain goes on without it. When the checks fail, the batch is split
// in halves, each landed in turn the same way, so that a task that fails
// alone on the tip is sent back with the check's feedback and one task's
// failure never sends back those that land without it.
// A target moved outside ralph to a failing commit is a
// *verify.MovedError; one moved during the integration is integrated on
// again. On an error, the outcomes hold what was decided before it (a
// first half landed, say) and the zero Outcome for the others; an
// interrupted landing returns ctx's error with nothing more moved.
func (q *Queue) LandBatch(ctx context.Context, jobs []Job) ([]Outcome, error) {
	outs := make([]Outcome, len(jobs))
	members := make([]int, len(jobs))
	for i := range members {
		members[i] = i
	}
	return outs, q.landPart(ctx, jobs, members, outs)
}

// landPart lands jobs[members] as one batch, bisecting it while its
// checks fail; a member alone whose checks fail is sent back.
func (q *Queue) landPart(ctx context.Context, jobs []Job, members []int, outs []Outcome) error {
	failed, err := q.try(ctx, jobs, members, outs)
	if err != nil || failed == nil {
		return err
	}
	if len(members) == 1 {
		outs[members[0]] = *failed
		return nil
	}
	// Every member is tried again: a conflict with a member that does not
	// land is no reason to send a task back.
	for _, i := range members {
		outs[i] = Outcome{}
	}
	half := len(members) / 2
	runkit.CrashPoint("bisect-split")
	q.Say(report.KindCheck, nil, fmt.Sprintf("the checks fail with %s together: trying %s first, then %s",
		names(jobs, members), names(jobs, members[:half]), names(jobs, members[half:])))
	if err := q.landPart(ctx, jobs, members[:half], outs); err != nil {
		return err
	}
	return q.landPart(ctx, jobs, members[half:], outs)
}

// try integrates jobs[members] on the tip as a chain of landing commits,
// checks its head once and moves the target there when they pass: the
// members are landed, or sent back for a conflict. failed is the send-back
// of the chain as a whole when its checks fail (nothing moved).
func (q *Queue) try(ctx context.Context, jobs []Job, members []int, outs []Outcome) (failed *Outcome, err error) {
	bg := context.WithoutCancel(ctx)
	batch := len(members) > 1
	for range maxTargetMoves {
		tip, err := q.Target.Tip(bg)
		if err != nil {
			return nil, err
		}
		if err := q.Integ.DetachAt(bg, tip); err != nil {
			return nil, err
		}
		tipChecks, err := q.tipChecks(ctx, tip)
		if err != nil {
			return nil, err
		}
		head, chain, commits := tip, []int(nil), map[int]string{}
		for _, i := range members {
			j := jobs[i]
			// ralph's own files, which every worker changes (progress.md,
			// the loop's records), stay out of the patch: they would make
			// every two tasks conflict. The landing writes them, once per
			// task.
			patch, err := q.Repo.SquashDiff(bg, j.Base, j.Head, workspace.DirName, j.PRD)
			if err != nil {
				return nil, err
			}
			if err := q.Integ.ApplyThreeWay(bg, patch); err != nil {
				var c *gitx.ApplyConflict
				if !errors.As(err, &c) {
					return nil, err
				}
				reason := fmt.Sprintf("its changes conflict with work landed on %s meanwhile, in %s", q.Name, strings.Join(c.Files, ", "))
				outs[i] = SendBack(reason, "", c.Files)
				if err := q.Integ.DetachAt(bg, head); err != nil {
					return nil, err
				}
				continue
			}
			runkit.CrashPoint("land-applied")
			if err := q.bookkeeping(j); err != nil {
				return nil, err
			}
			hash, err := runkit.Commit(bg, q.Integ, Message(j), j.Committing)
			if err != nil {
				_ = q.Integ.DetachAt(bg, tip)
				return nil, fmt.Errorf("committing %s on the integration worktree: %w", j.Task, err)
			}
			// Every landing commit is on record before the target moves,
			// so a kill in the middle of the move can be finished.
			if j.Committed != nil {
				if err := j.Committed(hash); err != nil {
					return nil, err
				}
			}
			runkit.CrashPoint("land-committed")
			head, chain, commits[i] = hash, append(chain, i), hash
		}
		if len(chain) == 0 {
			return nil, nil // every member conflicted: sent back
		}
		if batch {
			runkit.CrashPoint("batch-committed")
		}
		q.Say(report.KindCheck, nil, fmt.Sprintf("checking %s integrated on %s", names(jobs, chain), text.ShortHash(tip)))
		landing := verify.JudgeLanding(ctx, q.runner(), q.Integ.Dir, tipChecks, q.Checks)
		if ctx.Err() != nil {
			_ = q.Integ.DetachAt(bg, tip)
			return nil, ctx.Err()
		}
		if landing.Failed != nil {
			out := SendBack(landing.Reason(q.Name), landing.Feedback(), nil)
			return &out, q.Integ.DetachAt(bg, tip)
		}
		// The integrated tree is the next tip: its checks have run.
		if err := verify.SaveTip(TipChecks(q.Records), head, landing.Runs); err != nil {
			return nil, err
		}
		runkit.CrashPoint("land-checked")
		if batch {
			runkit.CrashPoint("batch-checked")
		}
		if err := q.Target.Move(bg, tip, head); err != nil {
			if errors.Is(err, gitx.ErrBranchMoved) {
				q.Say(report.KindWarning, nil, fmt.Sprintf("%s moved outside ralph while %s %s integrated: integrating again on the new tip", q.Name, names(jobs, chain), words.Plural(len(chain), "was", "were")))
				for _, i := range members {
					outs[i] = Outcome{}
				}
				continue
			}
			return nil, err
		}
		runkit.CrashPoint("land-moved")
		if batch {
			runkit.CrashPoint("batch-moved")
		}
		q.Left = head
		failing := (&verify.Tip{Runs: landing.Runs}).Failing()
		for _, i := range chain {
			outs[i] = Outcome{Landed: true, Commit: commits[i], Failing: failing}
		}
		return nil, nil
	}
	n := len(members)
	return nil, fmt.Errorf("%s kept moving outside ralph while %s %s integrated; the %s queued: run again once nobody else commits to it",
		q.Name, names(jobs, members), words.Plural(n, "was", "were"), words.Plural(n, "task stays", "tasks stay"))
}

// names are the tasks of jobs[members], as a landing's lines name them.
func names(jobs []Job, members []int) string {
	ids := make([]string, len(members))
	for k, i := range members {
		ids[k] = jobs[i].Task
	}
	return strings.Join(ids, ", ")
}
