// Package engine runs a build with several workers at once: a scheduler
// hands ready tasks to workers, each running the loop machine for its one
// task in its own git worktree on its own branch, and a merge queue lands
// verified work on the target branch one task at a time, in a worktree of
// its own, only when the configured checks pass on the integrated result.
//
// A task is done only when its commit is on the target branch. The
// workers never touch the person's checkout, the task file or progress.md
// of the target: the merge queue writes those once per landed task, in the
// task's one commit.
package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
)

// MachineName is the envelope's machine for the engine's own events (a
// worker started, a task landed); the workers' events keep "loop".
const MachineName = "engine"

// DefaultRetryLimit is how many attempts a task gets at landing: each
// time the merge queue cannot integrate it (a conflict, a check that fails
// only after integration) it is sent back to a worker on the new tip,
// until the limit, when it needs review.
const DefaultRetryLimit = 3

// DefaultMinFreeDisk is the least free space a parallel run starts with:
// every worktree is a full checkout.
const DefaultMinFreeDisk = 500 << 20

// Options configures a parallel build.
type Options struct {
	// Workers is how many tasks are worked at once (at least 1).
	Workers int
	// WS is the person's checkout; its .ralph is the run's state home.
	WS *workspace.Workspace
	// Source is the task file in the person's checkout. Its path below
	// the repository is opened in every worktree.
	Source tasks.Source
	// Checks run on the integrated result before the target moves;
	// CheckTimeout bounds each (0: none beyond the check's own).
	Checks []check.Check
	// Checker runs them in the integration worktree (nil: as the user).
	Checker runkit.CheckPort
	// WorktreeRoot holds the worktrees; "" is worktree.DefaultRoot.
	WorktreeRoot string
	// RetryLimit is how many attempts a task gets at landing (0:
	// DefaultRetryLimit; 1: a task that cannot be integrated needs
	// review at once).
	RetryLimit int
	// MaxBatch bounds how many verified tasks the merge queue lands
	// together, checked once (0 or 1: one at a time). The batch starts
	// at 2 and adapts: doubled after a batch that landed whole, halved
	// after one that sent a task back.
	MaxBatch int
	// MaxIterations bounds the agent runs of all workers together.
	MaxIterations int
	// MaxRetries is the loop's failed attempts that block a task; each
	// worker's loop gets at most MaxRetries+1 iterations.
	MaxRetries int
	// PlanPath is the implementation plan, committed with the workspace
	// setup when ralph created it; "" for none.
	PlanPath string
	// MinFreeDisk refuses a start with less free space (0: the default).
	MinFreeDisk int64
	// LoopOptions returns the loop options for one worker: the command
	// line's wiring of agents, checks and limits for a loop over src in
	// ws. The engine sets Home, OnlyStory, the iteration bound and the
	// sink itself.
	LoopOptions func(ws *workspace.Workspace, src tasks.Source) loop.Options
	// Build runs one worker's loop; nil is loop.Build (tests put a fake).
	Build func(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error)
	// Memory is the checkout's memory store: the merge queue records each
	// landed task there once (a task-complete event with its commit) and
	// resolves its blockers. Nil records nothing.
	Memory memory.Store
	// Control is the run's hold on the control folder: the scheduler
	// takes the skip, block and unblock commands for every worker. The
	// workers' loops heed its pause (LoopOptions gives it to them).
	Control *control.Attachment
	// Attach, when set, is called once the run has begun (preflight
	// passed) and returns the attachment that becomes Control, so that
	// a refused run leaves no control record.
	Attach func(runID string) *control.Attachment
	// Sink receives every event: the engine's and, marked with their
	// worker, the workers' loops'.
	Sink report.Sink
	Now  func() time.Time
}

// Report is how a parallel build ended.
type Report struct {
	RunID       string
	Outcome     loop.Outcome
	Reason      string
	Landed      int
	NeedsReview []string
	Blocked     []string
	Left        int
	Iterations  int
	Elapsed     time.Duration
}

// ErrInsideWorktree refuses a parallel build started from one of ralph's
// own worktrees: its worktrees would nest inside another run's.
var ErrInsideWorktree = errors.New("this folder is one of ralph's worktrees")

type engine struct {
	o       Options
	repo    *gitx.Repo
	home    string
	reg     *Registry
	em      *report.Emitter
	journal *report.Journal
	prdRel  string
	integ   *gitx.Repo
	used    int // iterations of every worker so far
	// ledger is what every worker's loop spends, shared: the budget and
	// the iteration limit are the run's, the sum over its workers.
	ledger *runkit.Ledger
	// taken are tasks another ralph claimed in a shared store.
	taken map[string]bool
	// skipped are tasks a skip set aside: workers take them only when
	// nothing else is ready. held are blocks given while their task was
	// in flight, applied when its worker comes back (reason by task).
	skipped map[string]bool
	held    map[string]string
	// ran are the tasks whose agents ran since the checkout was last
	// looked at; strays the paths changed in it outside ralph, reported.
	ran    map[string]bool
	strays map[string]bool
	// idle are the worktrees of tasks whose workers came back, by task:
	// the paths that differed from their branch then, so that only what
	// changed since (a sibling's writes) is reported.
	idle map[string]map[string]bool
	// early holds what was said before the emitter existed.
	early []report.Event
	start time.Time
	// batch is how many waiting tasks the merge queue lands together
	// next (see adapt).
	batch int
}

// result is what a worker hands back to the scheduler.
type result struct {
	id  string
	rep loop.Report
	err error
}

// Run runs a parallel build until every task landed, or nothing more can
// be done (blocked tasks, tasks that need review, the iteration limit),
// or ctx is cancelled.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Workers < 1 {
		return Report{}, errs.Usagef("--workers must be at least 1, got %d", o.Workers)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Build == nil {
		o.Build = loop.Build
	}
	if o.RetryLimit <= 0 {
		o.RetryLimit = DefaultRetryLimit
	}
	if o.MinFreeDisk <= 0 {
		o.MinFreeDisk = DefaultMinFreeDisk
	}
	e := &engine{o: o, batch: min(2, max(1, o.MaxBatch)), repo: o.WS.Repo, home: o.WS.Dir(), start: o.Now(), ledger: &runkit.Ledger{MaxRuns: o.MaxIterations}, taken: map[string]bool{},
		skipped: map[string]bool{}, held: map[string]string{}, ran: map[string]bool{}, strays: map[string]bool{},
		idle: map[string]map[string]bool{}}
	rel, err := filepath.Rel(o.WS.Root, o.Source.Path())
	if err != nil || strings.HasPrefix(rel, "..") {
		return Report{}, errs.Usagef("the task file %s is outside the repository: a parallel build opens it in every worktree, so it must be committed in the repository", o.Source.Path())
	}
	e.prdRel = filepath.ToSlash(rel)
	lock, err := store.TryLock(o.WS.LockPath(), fmt.Sprintf("ralph build --workers %d", o.Workers))
	if err != nil {
		return Report{}, err
	}
	defer lock.Unlock()
	if err := finishFastForward(ctx, e.repo, e.home); err != nil {
		return Report{}, fmt.Errorf("finishing the landing a kill interrupted: %w", err)
	}
	if err := e.preflight(ctx); err != nil {
		return Report{}, err
	}
	if err := e.open(ctx); err != nil {
		return Report{}, err
	}
	if bs, ok := o.Source.(*tasks.BeadsSource); ok {
		// Claims are per run: bd refuses a task another actor claimed,
		// so two ralphs on one database never work the same task.
		bs.Client().Actor = "ralph-" + e.reg.RunID
		// Workers, the merge queue and other ralphs change bd at any
		// moment: every read asks bd.
		bs.KeepNothing()
	}
	rep, err := e.schedule(ctx)
	rep.RunID, rep.Elapsed = e.reg.RunID, o.Now().Sub(e.start)
	return rep, err
}

// preflight refuses what a parallel build cannot start from, changing
// nothing.
func (e *engine) preflight(ctx context.Context) error {
	if worktree.IsInside(e.o.WS.Root) {
		return errs.Usagef("%s: %w; run ralph from the repository's own checkout", e.o.WS.Root, ErrInsideWorktree)
	}
	snap, err := e.repo.Snapshot(ctx)
	if err != nil {
		return err
	}
	switch {
	case snap.Branch == "":
		return errs.Usagef("HEAD is detached: check out the branch the tasks should land on (git checkout BRANCH), then run again")
	case len(snap.Unmerged) > 0:
		return errs.Usagef("a merge or rebase is in progress (%s): finish or abort it first", strings.Join(text.ClipList(snap.Unmerged, 3), ", "))
	}
	for _, p := range []string{"MERGE_HEAD", "rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD"} {
		if gp, err := e.repo.GitPath(ctx, p); err == nil {
			if _, err := os.Stat(gp); err == nil {
				return errs.Usagef("a git operation is in progress (%s exists): finish or abort it first", p)
			}
		}
	}
	if _, err := e.o.Source.Load(); err != nil {
		return fmt.Errorf("cannot read the task file: %w", err)
	}
	// The same refusals and setup commit as a one-at-a-time build: the
	// workers branch from the last commit, which must hold ralph's files.
	// Attached before the setup commit, which then holds the ignore
	// line that keeps the control folder out of git.
	if e.o.Attach != nil {
		e.o.Control = e.o.Attach("") // the run's id comes with its registry, later
	}
	if err := loop.PrepareCheckout(ctx, e.o.WS, e.o.Source.Path(), e.o.PlanPath, e.setupSay); err != nil {
		return err
	}
	root := e.worktreeBase()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("cannot create the worktree folder %s: %w", root, err)
	}
	if free, err := store.FreeBytes(root); err == nil && int64(free) < e.o.MinFreeDisk {
		return fmt.Errorf("only %d MB free on the disk of %s; a parallel build needs at least %d MB ([build] min_free_disk): free some space or lower the limit",
			free>>20, root, e.o.MinFreeDisk>>20)
	}
	return nil
}

// setupSay keeps what preflight's setup commit says until the run's
// emitter exists (open), which numbers and journals it first.
func (e *engine) setupSay(kind report.Kind, text string, data report.Payload) {
	e.early = append(e.early, report.Event{Kind: kind, Text: text, Data: data})
}

func (e *engine) worktreeBase() string { return worktree.Root(e.o.WS.Root, e.o.WorktreeRoot) }

// open loads the unfinished run to resume, or starts a new one, and
// starts the event journal.
func (e *engine) open(ctx context.Context) error {
	snap, _ := e.repo.Snapshot(ctx)
	reg, ok, err := LoadRegistry(e.home)
	if err != nil {
		return err
	}
	resumed := ok && !reg.Finished && reg.Target == snap.Branch
	if !resumed {
		reg = &Registry{RunID: newRunID(e.o.Now()), Target: snap.Branch, Start: snap.Head, Checkout: snap.Head,
			Workers: e.o.Workers, Tasks: map[string]*TaskRecord{}, StartedAt: e.o.Now().UTC()}
		reg.WorktreeRoot = filepath.Join(e.worktreeBase(), reg.RunID)
	}
	reg.Workers = e.o.Workers
	e.reg = reg
	last, _ := report.LastSeq(filepath.Join(e.home, "events.jsonl"))
	e.journal = &report.Journal{Path: filepath.Join(e.home, "events.jsonl")}
	e.em = report.NewEmitter(MachineName, reg.RunID, last, e.o.Now, e.o.Sink, e.journal)
	for _, ev := range e.early {
		e.em.Emit(ev)
	}
	e.early = nil
	if err := reg.save(e.home); err != nil {
		return err
	}
	if resumed {
		e.say(report.KindRun, nil, "ralph: resuming parallel run %s on %s (%s landed so far)", reg.RunID, reg.Target, words.Count(reg.Count(landing.Landed), "task", "tasks"))
		return e.reconcile(ctx)
	}
	e.em.Emit(report.Event{Data: report.Run{Workers: e.o.Workers, Target: reg.Target, Worktrees: reg.WorktreeRoot}})
	return nil
}

func newRunID(now time.Time) string {
	return now.UTC().Format("20060102-150405") + "-" + gitx.NewCommitToken()[:6]
}

// say emits one line of the engine's own narration.
func (e *engine) say(kind report.Kind, data report.Payload, format string, args ...any) {
	e.em.Emit(report.Event{Kind: kind, Data: data, Text: fmt.Sprintf(format, args...) + "\n"})
}

// sayTask emits a line about one task, marked with its worker.
func (e *engine) sayTask(t *TaskRecord, kind report.Kind, data report.Payload, format string, args ...any) {
	e.em.Emit(report.Event{Kind: kind, Worker: t.Worker, Task: t.ID, Attempt: t.Attempt, Data: data,
		Text: fmt.Sprintf(format, args...) + "\n"})
}

// tell emits a fact about one task whose payload words its line.
func (e *engine) tell(t *TaskRecord, data report.Payload) {
	e.em.Emit(report.Event{Worker: t.Worker, Task: t.ID, Attempt: t.Attempt, Data: data})
}

// save writes the registry; a failure to record is fatal for the run,
// since a crash after it would lose track of work.
func (e *engine) save() error { return e.reg.save(e.home) }

// schedule keeps up to Workers tasks in flight and lands each verified
// one, until nothing is left to start or land.
func (e *engine) schedule(ctx context.Context) (Report, error) {
	results := make(chan result)
	active := map[string]bool{}
	slots := make([]string, e.o.Workers) // slot i works slots[i]; "" is free
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Work a crash left verified but not landed lands first; tasks it
	// left in a worker's hands go first to the workers, which resume
	// their loops.
	var pending []*TaskRecord
	// queue holds the verified tasks waiting to land, in the order their
	// workers finished.
	var queue []*TaskRecord
	for _, t := range e.reg.Sorted() {
		switch t.State {
		case landing.Queued:
			queue = append(queue, t)
		case landing.Working:
			pending = append(pending, t)
		}
	}
	var runErr error
	stopping := false
	// back takes a worker's result: its slot freed, its task queued to
	// land when its loop verified it.
	back := func(res result) {
		t := e.reg.Tasks[res.id]
		for i, id := range slots {
			if id == res.id {
				slots[i] = ""
			}
		}
		delete(active, res.id)
		e.checkCheckout(ctx, active)
		e.used += res.rep.Iterations
		t.Iterations += res.rep.Iterations
		if err := e.finishWork(ctx, t, res); err != nil && runErr == nil {
			runErr = err
			stopping = true
			cancel()
		}
		e.heldBlock(t)
		e.markIdle(ctx, t)
		if t.State == landing.Queued {
			queue = append(queue, t)
		}
		if ctx.Err() != nil {
			stopping = true
		}
		if err := e.save(); err != nil && runErr == nil {
			runErr, stopping = err, true
			cancel()
		}
	}
	for {
		if !stopping && runErr == nil {
			// Workers' agents and the merge queue changed the store
			// since the last round: a source that keeps what it read
			// (beads) reads it all again.
			if r, ok := e.o.Source.(tasks.Resetter); ok {
				r.Reset()
			}
			board, err := e.o.Source.Load()
			if err != nil {
				runErr = fmt.Errorf("cannot read the task file: %w", err)
				stopping = true
			} else {
				e.steer(board, active)
				e.applyHolds(board, active)
				for free := freeSlot(slots); free >= 0; free = freeSlot(slots) {
					t, err := e.next(ctx, board, active, &pending)
					if err != nil {
						runErr, stopping = err, true
						break
					}
					if t == nil {
						break
					}
					if e.o.MaxIterations > 0 && e.ledger.Runs() >= e.o.MaxIterations {
						break
					}
					t.Worker = fmt.Sprintf("w%d", free+1)
					slots[free] = t.ID
					active[t.ID] = true
					e.ran[t.ID] = true
					ws, opts, err := e.prepare(ctx, t)
					if err != nil {
						slots[free] = ""
						delete(active, t.ID)
						t.State, t.Reason = landing.Blocked, "its worktree could not be made: "+err.Error()
						e.tell(t, report.Blocker{State: "blocked", Reason: t.Reason})
						_ = e.save()
						continue
					}
					go func(t TaskRecord, opts loop.Options, ws *workspace.Workspace) {
						rep, err := e.o.Build(wctx, ws, opts)
						results <- result{id: t.ID, rep: rep, err: err}
					}(*t, opts, ws)
				}
			}
		}
		// A worker that finished has its slot refilled above before its
		// task lands: landing runs the checks, and no slot should idle
		// meanwhile. One landing at a time; after each, dependents may be
		// ready, so the slots are filled again first. Several verified
		// tasks waiting land together, as one batch; a single one lands
		// at once, never held back to fill a batch.
		if len(queue) > 0 && !stopping && runErr == nil {
			// Workers that finished during the last landing wait to hand
			// over their results: taken now (their slots refilled first),
			// their tasks join this batch.
			took := false
			for drained := false; !drained; {
				select {
				case res := <-results:
					back(res)
					took = true
				default:
					drained = true
				}
			}
			if took {
				continue
			}
			var batch []*TaskRecord
			for len(queue) > 0 && len(batch) < e.batch {
				if t := queue[0]; t.State == landing.Queued { // else blocked by a person while it waited
					batch = append(batch, t)
				}
				queue = queue[1:]
			}
			if len(batch) == 0 {
				continue
			}
			if err := e.land(ctx, batch); err != nil {
				runErr, stopping = err, true
				cancel()
			}
			continue
		}
		if len(active) == 0 {
			break
		}
		var res result
		select {
		case res = <-results:
		case <-ctx.Done():
			stopping = true
			cancel()
			res = <-results
		}
		back(res)
	}
	return e.end(ctx, runErr)
}

func freeSlot(slots []string) int {
	for i, s := range slots {
		if s == "" {
			return i
		}
	}
	return -1
}

// next returns the task a free worker takes: one a crash left in flight
// first, then the first ready story of the board that no worker has and
// that has not landed, been blocked or been set aside for review.
func (e *engine) next(ctx context.Context, board *tasks.Board, active map[string]bool, pending *[]*TaskRecord) (*TaskRecord, error) {
	for len(*pending) > 0 {
		t := (*pending)[0]
		*pending = (*pending)[1:]
		if !active[t.ID] && t.State == landing.Working {
			return t, nil // unless a person blocked it since the crash
		}
	}
	skip := map[string]bool{}
	for id := range active {
		skip[id] = true
	}
	for id, t := range e.reg.Tasks {
		if t.State != landing.SentBack && t.State != landing.Working {
			skip[id] = true
		}
	}
	for id := range e.taken {
		skip[id] = true
	}
	ready := tasks.ReadyStories(*board, withSkipped(skip, e.skipped))
	if len(ready) == 0 && len(active) == 0 && len(e.skipped) > 0 {
		// Nothing else is left: the skipped tasks' turn.
		clear(e.skipped)
		ready = tasks.ReadyStories(*board, skip)
	}
	for _, s := range ready {
		t := e.reg.Tasks[s.ID]
		if t == nil {
			taken, err := e.claim(ctx, s.ID)
			if err != nil {
				return nil, fmt.Errorf("claiming %s: %w", s.ID, err)
			}
			if taken {
				e.taken[s.ID] = true
				e.em.Emit(report.Event{Data: report.Note{Task: s.ID}})
				continue
			}
			t = &TaskRecord{ID: s.ID, Title: s.Title, Branch: landing.Branch(e.reg.RunID, s.ID)}
			e.reg.Tasks[s.ID] = t
		}
		return t, nil
	}
	return nil, nil
}

// finishWork records what a worker's loop ended with, and lands the task
// when its loop verified and committed it.
func (e *engine) finishWork(ctx context.Context, t *TaskRecord, res result) error {
	switch {
	case errors.Is(res.err, errs.ErrInterrupted) || ctx.Err() != nil:
		// The worker's loop saved its state; the next start resumes it.
		t.State = landing.Working
		return nil
	case res.err != nil && !errors.Is(res.err, loop.ErrNeedsHuman):
		t.State, t.Reason = landing.Blocked, text.OneLine(res.err.Error())
		e.tell(t, report.Blocker{State: "blocked", Reason: t.Reason, Error: res.err.Error()})
		return nil
	case !res.rep.Accepted():
		t.State, t.Reason = landing.Blocked, blockerReason(t.ID, res.rep)
		if t.Reason == "" {
			t.Reason = string(res.rep.Outcome)
		}
		e.tell(t, report.Blocker{State: "blocked", Reason: t.Reason, Outcome: string(res.rep.Outcome), Branch: t.Branch})
		return nil
	}
	t.State = landing.Queued
	return e.save()
}

// blockerReason is why a worker's loop left its story blocked: the
// blocker of the story (or of its subtasks), which says what failed, over
// the loop's reason for ending, which for a loop of one story is only
// that nothing else is left.
func blockerReason(id string, rep loop.Report) string {
	var why []string
	for tid, r := range rep.Blockers {
		if r != "" && (tid == id || strings.HasPrefix(tid, id+"/")) {
			why = append(why, r)
		}
	}
	if len(why) == 0 {
		return rep.Reason
	}
	sort.Strings(why)
	return strings.Join(slices.Compact(why), "; ")
}

// end closes the run: the report, the registry's outcome and the
// journal's summary.
func (e *engine) end(ctx context.Context, runErr error) (Report, error) {
	rep := Report{Iterations: e.used}
	for _, t := range e.reg.Sorted() {
		switch t.State {
		case landing.Landed:
			rep.Landed++
		case landing.NeedsReview:
			rep.NeedsReview = append(rep.NeedsReview, t.ID)
		case landing.Blocked:
			rep.Blocked = append(rep.Blocked, t.ID)
		}
	}
	if r, ok := e.o.Source.(tasks.Resetter); ok {
		r.Reset()
	}
	// What landed is what the target holds, not what the person's
	// checkout shows: an agent may have switched it to another branch.
	if board, err := e.targetBoard(ctx); err == nil {
		rep.Left = board.Remaining()
	} else if board, err := e.o.Source.Load(); err == nil {
		rep.Left = board.Remaining()
	}
	e.sayCheckout(ctx)
	switch {
	case ctx.Err() != nil:
		rep.Outcome, rep.Reason = loop.OutcomeInterrupted, "interrupted"
		runErr = errs.ErrInterrupted
	case runErr != nil:
		rep.Outcome, rep.Reason = loop.OutcomeError, runErr.Error()
	case rep.Left == 0 && len(verify.LoadTip(landing.TipChecks(e.records())).Failing()) > 0:
		// Never complete while a check fails on the target.
		failing := verify.LoadTip(landing.TipChecks(e.records())).Failing()
		rep.Outcome = loop.OutcomeChecksFailing
		rep.Reason = fmt.Sprintf("every task landed, but %s %s on %s", strings.Join(failing, ", "), words.Plural(len(failing), "fails", "fail"), e.reg.Target)
	case rep.Left == 0:
		rep.Outcome, rep.Reason = loop.OutcomeComplete, "every task landed"
	case len(rep.NeedsReview) > 0 || len(rep.Blocked) > 0:
		rep.Outcome = loop.OutcomeNeedsHuman
		rep.Reason = fmt.Sprintf("%s left: %s", words.Count(rep.Left, "task", "tasks"), e.stuckText(rep))
	case e.o.MaxIterations > 0 && e.ledger.Runs() >= e.o.MaxIterations:
		rep.Outcome = loop.OutcomeMaxIterations
		rep.Reason = fmt.Sprintf("reached %s with %s left", words.Count(e.o.MaxIterations, "iteration", "iterations"), words.Count(rep.Left, "task", "tasks"))
	default:
		rep.Outcome = loop.OutcomeNeedsHuman
		rep.Reason = fmt.Sprintf("%s left that no worker can start (their dependencies are not done)", words.Count(rep.Left, "task", "tasks"))
	}
	if rep.Outcome != loop.OutcomeInterrupted && rep.Outcome != loop.OutcomeError {
		e.reg.Finished = true
		e.removeIntegration(context.WithoutCancel(ctx))
	}
	e.reg.Outcome, e.reg.Reason = string(rep.Outcome), rep.Reason
	if err := e.save(); err != nil && runErr == nil {
		runErr = err
	}
	e.em.Emit(report.Event{Kind: report.KindSummary, Data: report.Summary{Outcome: string(rep.Outcome), Iterations: report.Ptr(rep.Iterations), Blocked: report.Ptr(rep.Blocked),
		Landings: &report.Landings{Landed: rep.Landed, NeedsReview: rep.NeedsReview, Left: rep.Left}},
		Text: fmt.Sprintf("ralph: %s: %s landed, %s left (%s)\n", rep.Outcome, words.Count(rep.Landed, "task", "tasks"), words.Count(rep.Left, "task", "tasks"), rep.Reason)})
	return rep, runErr
}

func (e *engine) stuckText(rep Report) string {
	var parts []string
	if len(rep.NeedsReview) > 0 {
		parts = append(parts, "needs review: "+strings.Join(rep.NeedsReview, ", "))
	}
	if len(rep.Blocked) > 0 {
		parts = append(parts, "blocked: "+strings.Join(rep.Blocked, ", "))
	}
	return strings.Join(parts, "; ") + " (ralph status shows why)"
}

// withSkipped is skip with the skipped tasks added.
func withSkipped(skip, skipped map[string]bool) map[string]bool {
	if len(skipped) == 0 {
		return skip
	}
	out := make(map[string]bool, len(skip)+len(skipped))
	for id := range skip {
		out[id] = true
	}
	for id := range skipped {
		out[id] = true
	}
	return out
}
