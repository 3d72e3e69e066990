package thread

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/text"
)

// transition is one step being taken: the event, the thread before it and
// the thread it makes, which the actions ahead of the save may still fill
// in (the spec version, what a stuck attempt left).
type transition = runkit.Step[Thread, Event, Action]

// performer is how the runner performs one action of the table. Each part
// is optional; an action whose performer has none is only a name for a
// step that needs nothing of the runner.
type performer struct {
	// before runs ahead of the save: an error leaves the old thread on
	// disk and the thread where it was.
	before func(r *Runner, tr *transition) error
	// after tells the person what the new phase means, once it is saved,
	// so that it describes the thread as it is on disk.
	after func(r *Runner, tr *transition)
	// work, on an entry action, is ralph's own work in the phase entered.
	// Its outcome is the thread's next event; the zero Event means the
	// phase waits for a person (drive).
	work func(r *Runner) (Event, error)
}

// performers has exactly one performer for every action of the table
// (TestEveryActionHasAPerformer). It is filled in init because the
// performers call back into the runner that looks them up.
var performers map[Action]performer

func init() {
	performers = map[Action]performer{
		// The work in progress is stopped before the transition: Ctrl+C
		// stopped this ralph's loop, and pause and abandon interrupt the
		// ralph that holds the thread (interruptHolder) before they take it.
		ActStopWork:        {},
		ActResetWorkspace:  {before: func(r *Runner, tr *transition) error { return r.resetWorkspace(tr.From) }},
		ActCaptureBaseline: {before: func(r *Runner, tr *transition) error { return r.createBranch(&tr.To) }},
		// The spec conversation is the draft and spec commands' work in
		// Drafting, not ralph's: entering it only says what comes next.
		ActDraftSpec: {after: func(r *Runner, _ *transition) {
			r.note("next: ralph thread draft \"...\" / spec FILE, then finalize (or assess first)")
		}},
		ActAssessSpec: {work: (*Runner).assess},
		ActFreezeSpec: {before: (*Runner).freezeSpec, after: (*Runner).reportFrozen,
			work: func(r *Runner) (Event, error) {
				// Quick mode begins implementation at once.
				ev, ok := AutoEvent(r.t.Phase.Type, r.t.Mode)
				if !ok {
					return Event{}, nil
				}
				return r.implementEvent(ev.Source), nil
			}},
		ActRunPreflight: {work: (*Runner).preflight},
		ActReportPreflight: {after: func(r *Runner, _ *transition) {
			for _, f := range r.t.Phase.Failures {
				r.note("  ✗ %s", f)
			}
		}},
		// Methodical mode waits for the person's choices (`ralph thread
		// start --agent ...`); quick mode saves the defaults and starts.
		ActConfigure: {work: func(r *Runner) (Event, error) {
			ev, ok := AutoEvent(r.t.Phase.Type, r.t.Mode)
			if !ok {
				return Event{}, nil
			}
			if err := r.configure(); err != nil {
				return Event{}, err
			}
			return ev, nil
		}},
		ActRunLoop: {work: (*Runner).runLoop},
		ActAwaitHuman: {after: func(r *Runner, tr *transition) {
			r.ReportPaused()
			if tr.Event.Reason != "" {
				r.note("why: %s", tr.Event.Reason)
			}
		}},
		ActVerify:      {work: (*Runner).verify},
		ActRecordStuck: {before: (*Runner).recordStuck, after: func(r *Runner, _ *transition) { r.ReportStuck() }},
		ActOfferPolish: {after: func(r *Runner, _ *transition) {
			if r.t.Mode == ModeMethodical {
				r.note("implemented and verified: next: ralph thread polish (docs/tests) or ralph thread review")
			}
		}, work: (*Runner).autoStep},
		ActPolish:         {work: (*Runner).polish},
		ActRequestReview:  {after: func(r *Runner, _ *transition) { r.printReview() }},
		ActRecordApproval: {work: (*Runner).autoStep},
		ActPrepareCommit: {
			before: func(r *Runner, _ *transition) error {
				return os.WriteFile(r.path("commit_msg.txt"), []byte(r.commitMessage()), 0o644)
			},
			after: (*Runner).reportCommitMessage},
		// A thread's worktree goes with the thread, once its work is safe
		// on the branch (dropWorktree).
		ActCommit: {before: func(r *Runner, _ *transition) error { return r.commitWork() },
			after: func(r *Runner, tr *transition) { r.reportDone(tr); r.dropWorktree() }},
		ActArchive: {after: func(r *Runner, _ *transition) {
			if t := r.t; t.Phase.Type == PhaseAbandoned && t.Branch != "" {
				r.note("abandoned; branch %s is kept: delete it with git branch -D %s when you no longer need it", t.Branch, t.Branch)
			}
			r.dropWorktree()
		}},
	}
}

// freezeSpec makes the draft the next immutable spec version.
func (r *Runner) freezeSpec(tr *transition) error {
	old, n := tr.From, &tr.To
	draft, err := os.ReadFile(r.draftPath())
	if errors.Is(err, os.ErrNotExist) || (err == nil && strings.TrimSpace(string(draft)) == "") {
		return fmt.Errorf("thread %s has no draft spec to finalize: write one with `ralph thread draft \"...\"` or `ralph thread spec FILE`", old.ID)
	}
	if err != nil {
		return err
	}
	// A finalize cut short after writing the version reuses it.
	vs, _ := SpecVersions(r.dir, old.ID)
	if len(vs) > 0 && vs[len(vs)-1] > old.SpecVersion {
		if b, err := ReadSpec(r.dir, old.ID, vs[len(vs)-1]); err == nil && string(b) == string(draft) {
			n.SpecVersion = vs[len(vs)-1]
			return nil
		}
	}
	v, err := AddSpec(r.dir, old.ID, draft)
	if err != nil {
		return err
	}
	n.SpecVersion = v
	AppendMessage(r.dir, old.ID, Message{Role: "user", Content: fmt.Sprintf("finalized the draft as spec v%d", v), At: r.now().UTC(), SpecVersion: v})
	return nil
}

func (r *Runner) reportFrozen(*transition) {
	t := r.t
	r.note("spec v%d frozen: %s", t.SpecVersion, r.ws.Rel(SpecPath(r.dir, t.ID, t.SpecVersion)))
	if t.Mode == ModeMethodical {
		r.note("next: ralph thread start (or ralph thread reopen)")
	}
}

// recordStuck keeps what the failed attempt leaves for the person who
// handles it: why (the event's reason), the output that came closest and
// the diff from the baseline, next to the criteria the event carries.
func (r *Runner) recordStuck(tr *transition) error {
	reason := tr.Event.Reason
	r.note("stuck: %s", reason)
	if s := tr.To.Stuck; s != nil {
		if out := r.closestOutput(); out != "" {
			s.ClosestOutput = r.ws.Rel(out)
		}
		if b := tr.From.Baseline; b != nil {
			diff, _ := r.git("diff", b.CommitSHA, "--", ".", ":(exclude).ralph")
			if untracked, _ := r.git("ls-files", "--others", "--exclude-standard", "--", ".", ":(exclude).ralph"); untracked != "" {
				diff += "\n# untracked files (not in the diff above):\n# " + strings.ReplaceAll(untracked, "\n", "\n# ")
			}
			p := r.path("stuck.diff")
			if err := store.WriteFileAtomic(p, []byte(diff+"\n"), 0o644); err == nil {
				s.DiffPath = r.ws.Rel(p)
			}
		}
	}
	store.WriteFileAtomic(r.path("stuck_reason.txt"), []byte(reason+"\n"), 0o644)
	return nil
}

func (r *Runner) reportCommitMessage(*transition) {
	r.note("proposed commit message (%s):", r.ws.Rel(r.path("commit_msg.txt")))
	for _, l := range strings.Split(strings.TrimRight(r.commitMessage(), "\n"), "\n") {
		r.note("    %s", l)
	}
	r.note("next: ralph thread commit: the thread's work becomes one commit with this message (you commit; ralph never pushes or merges)")
}

func (r *Runner) reportDone(*transition) {
	t := r.t
	conf := r.loadConf()
	what := "nothing left to commit"
	if conf.CommitSHA != "" {
		what = "committed " + text.ShortHash(conf.CommitSHA)
	}
	base := "your branch"
	if t.Baseline != nil && t.Baseline.Branch != "" {
		base = t.Baseline.Branch
	}
	r.note("done: %s; the work is on branch %s. Merge it yourself, e.g. git checkout %s && git merge %s",
		what, BranchName(t.ID), base, BranchName(t.ID))
	if conf.CommitSHA != "" {
		r.note("the per-story commits are kept at %s (git log %s)", StoriesRef(t.ID), StoriesRef(t.ID))
	}
}
