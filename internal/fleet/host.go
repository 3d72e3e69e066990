package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
)

// MachineName is the envelope's machine of the events a host journals
// for the Temporal engine's activities; the task loops keep "loop".
const MachineName = "fleet"

// Host is one machine's part of the Temporal engine: the activities that
// touch the checkouts it holds. `ralph worker` makes one over the clone it
// runs in. The agents' output and every loop event go to this host's
// journal (.ralph/events.jsonl), never into the workflow's history.
type Host struct {
	// Name is the host's id: its task queue is HostQueue(shared, Name).
	Name string
	// WS is the host's clone of the repository.
	WS *workspace.Workspace
	// Exchange is the git remote task branches travel through.
	Exchange string
	// PushTarget also pushes the target branch there after a landing.
	PushTarget bool
	// Checks run on an integrated result before the target moves.
	Checks []check.Check
	// Checker runs them in the integration worktree (nil: as the user).
	Checker runkit.CheckPort
	// WorktreeRoot holds the task worktrees ("" is worktree.DefaultRoot).
	WorktreeRoot string
	// LoopOptions wires a task's loop from the host's config, as `ralph
	// build` does; the host sets the task, home, sink and limits.
	LoopOptions func(ws *workspace.Workspace, src tasks.Source) loop.Options
	// Build runs a task's loop; nil is loop.Build.
	Build func(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error)
	// HeartbeatEvery is how often a running attempt heartbeats (0: 5s).
	HeartbeatEvery time.Duration
	// Sink gets every event besides the journal (the worker's terminal).
	Sink report.Sink
	Now  func() time.Time

	landMu sync.Mutex // one landing at a time on this host
	// refsMu serialises what changes this clone's refs and worktree list
	// (fetches, worktree adds): activities run side by side here, and two
	// gits updating refs at once fail on each other's locks.
	refsMu sync.Mutex
}

// checker is h.Checker, or the checks as the user when it is nil.
func (h *Host) checker() runkit.CheckPort {
	if h.Checker == nil {
		return runkit.ExecChecks{}
	}
	return h.Checker
}

// fetch fetches one exchange branch into this clone, one fetch at a time.
func (h *Host) fetch(ctx context.Context, branch string) (string, error) {
	h.refsMu.Lock()
	defer h.refsMu.Unlock()
	return h.WS.Repo.FetchBranch(ctx, h.Exchange, branch)
}

// TipBranch is the exchange branch holding a run's integrated target: the
// merge queue moves it, and every task branch is cut from it.
func TipBranch(run, target string) string { return "ralph/" + run + "/" + target }

func (h *Host) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

func (h *Host) emitter(run string) *report.Emitter {
	path := filepath.Join(h.WS.Dir(), "events.jsonl")
	last, _ := report.LastSeq(path)
	sinks := []report.Sink{&report.Journal{Path: path}}
	if h.Sink != nil {
		sinks = append(sinks, h.Sink)
	}
	return report.NewEmitter(MachineName, run, last, h.now, sinks...)
}

func (h *Host) say(em *report.Emitter, task string, kind report.Kind, data report.Payload, format string, args ...any) {
	em.Emit(report.Event{Kind: kind, Worker: h.Name, Task: task, Data: data, Text: fmt.Sprintf(format, args...) + "\n"})
}

// tell emits a fact about task whose payload words its line.
func (h *Host) tell(em *report.Emitter, task string, data report.Payload) {
	em.Emit(report.Event{Worker: h.Name, Task: task, Data: data})
}

func (h *Host) worktreeBase() string { return worktree.Root(h.WS.Root, h.WorktreeRoot) }

func (h *Host) taskPath(run, task string) string {
	return worktree.PathUnder(h.worktreeBase(), run, task)
}

// worker is a task's attempt in its worktree on this host, as the
// parallel core prepares it.
func (h *Host) worker(run, task string, attempt int) landing.Worker {
	return landing.Worker{Repo: h.WS.Repo, Root: h.WS.Root, Run: run, Task: task, Attempt: attempt, Path: h.taskPath(run, task), Branch: landing.Branch(run, task)}
}

// Board returns the stories of the task file at the run's integrated tip.
func (h *Host) Board(ctx context.Context, in BoardInput) ([]Story, error) {
	integ, _, err := h.integration(ctx, in.RunID, in.Target)
	if err != nil {
		return nil, err
	}
	board, err := tasks.Open(tasks.KindForPath(in.PRD), filepath.Join(integ.Dir, filepath.FromSlash(in.PRD))).Load()
	if err != nil {
		return nil, usage(fmt.Errorf("cannot read %s at the tip of %s: %w", in.PRD, in.Target, err))
	}
	var out []Story
	holds := control.Folder{Dir: h.WS.Path("control")}
	for _, s := range board.Stories {
		st := Story{ID: s.ID, Title: s.Title, Done: s.Done, DependsOn: s.DependsOn, Priority: s.Priority, Started: s.Status == tasks.StatusInProgress}
		if c := holds.Held(s.ID); c != nil && !s.Done {
			st.Held = control.HeldReason(*c)
		}
		out = append(out, st)
	}
	return out, nil
}

// integration returns the merge queue's worktree, detached at the run's
// tip on the exchange, and that tip.
func (h *Host) integration(ctx context.Context, run, target string) (*gitx.Repo, string, error) {
	tip, err := h.fetch(ctx, TipBranch(run, target))
	if err != nil {
		return nil, "", err
	}
	h.refsMu.Lock()
	w, err := landing.Integration(ctx, h.WS.Repo, filepath.Join(h.worktreeBase(), run), tip, worktree.Marker{Repo: h.WS.Root, Run: run, Task: "integration"})
	h.refsMu.Unlock()
	if err != nil {
		return nil, "", err
	}
	if err := w.DetachAt(ctx, tip); err != nil {
		return nil, "", err
	}
	return w, tip, nil
}

// keepAlive heartbeats an activity until the returned stop is called:
// with a heartbeat timeout, Temporal retries the work of a host that died
// during it after [engine] heartbeat, not after its start-to-close
// timeout (the task would wait that long for nothing). detail, when not
// nil, gives each heartbeat's detail. stop waits for the last heartbeat,
// so that none is recorded after the activity returned.
func (h *Host) keepAlive(ctx context.Context, detail func() any) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	every := h.HeartbeatEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	hctx, cancel := context.WithCancel(ctx)
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if detail != nil {
				activity.RecordHeartbeat(ctx, detail())
			} else {
				activity.RecordHeartbeat(ctx)
			}
			select {
			case <-hctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-beating }
}

// Prepare makes the task's worktree on this host, its branch cut from the
// run's tip on the exchange, and says which host holds it. Work of an
// earlier attempt on this host is kept on a ref first.
func (h *Host) Prepare(ctx context.Context, in PrepareInput) (PrepareResult, error) {
	defer h.keepAlive(ctx, nil)()
	em := h.emitter(in.RunID)
	tip, err := h.fetch(ctx, TipBranch(in.RunID, in.Target))
	if err != nil {
		return PrepareResult{}, err
	}
	w := h.worker(in.RunID, in.Task, in.Attempt)
	h.refsMu.Lock()
	err = w.Cut(ctx, tip)
	h.refsMu.Unlock()
	if err != nil {
		return PrepareResult{}, err
	}
	h.say(em, in.Task, report.KindRun, report.Run{Worktree: w.Path, Branch: w.Branch, Host: h.Name, Attempt: in.Attempt},
		"▶ prepared attempt %d on %s from %s in %s", in.Attempt, w.Branch, text.ShortHash(tip), w.Path)
	return PrepareResult{Host: h.Name, Base: tip}, nil
}

// process tells this process from another of the same host name (a
// worker restarted after a crash): a random token drawn at start.
var process = func() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// identity names this worker process: its host name and process token.
func (h *Host) identity() string { return h.Name + "@" + process }

// Work runs the task's loop in its worktree until the loop verifies and
// commits it, blocks it, or every agent is at a usage limit (the workflow
// then waits on a durable timer, not this host). It heartbeats the offset
// of the agent output it has journaled; a cancellation arrives through
// the heartbeat and stops the agent's process group, the loop saving its
// state. A retry after a crash resumes the loop where it was.
func (h *Host) Work(ctx context.Context, in WorkInput) (WorkResult, error) {
	w := h.worker(in.RunID, in.Task, in.Attempt)
	if _, err := os.Stat(filepath.Join(w.Path, ".git")); err != nil {
		return WorkResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("host %s no longer holds the worktree of %s (%s)", h.Name, in.Task, w.Path), ErrTypeWorktreeGone, nil)
	}
	ws, err := workspace.Open(ctx, w.Path)
	if err != nil {
		return WorkResult{}, err
	}
	em := h.emitter(in.RunID)
	src := tasks.Open(tasks.KindForPath(in.PRD), filepath.Join(w.Path, filepath.FromSlash(in.PRD)))
	home := landing.Home(h.WS.Dir(), in.RunID, in.Task, in.Attempt)
	_, statErr := os.Stat(filepath.Join(home, "state.json"))
	var logBytes, iteration atomic.Int64
	// blocker is the reason of the loop's last blocker of the task: what
	// a blocked story's outcome says, rather than the run's summary.
	var blocker atomic.Value
	opts := w.Loop(h.LoopOptions(ws, src), src, home, h.WS.Dir(), statErr == nil, "the workflow's limit for this task",
		landing.Sink(em, h.Name, in.Task, func(ev report.Event) {
			if b, ok := ev.Data.(report.Blocker); ok && b.State == "blocked" && b.Reason != "" {
				blocker.Store(b.Reason)
			}
			if ev.Kind == report.KindAgentOutput {
				logBytes.Add(int64(len(ev.Text)))
			}
			if it, ok := ev.Data.(report.Iteration); ok && it.End == nil {
				iteration.Add(1) // an iteration's banner, not its closing record
			}
		}))
	opts.PRDPath = src.Path()
	opts.Feedback = in.Feedback
	// A usage limit ends the activity at once: the workflow waits for the
	// reset on a durable timer, so no host sits idle for hours.
	opts.MaxLimitWait = time.Nanosecond
	if in.MaxIterations > 0 {
		opts.MaxIterations = in.MaxIterations
	} else {
		opts.MaxIterations = max(opts.MaxRetries, 0) + 1
	}
	if prev := activity.HasHeartbeatDetails(ctx); prev {
		var hb Heartbeat
		if activity.GetHeartbeatDetails(ctx, &hb) == nil {
			data := report.Run{Retried: &report.Retried{LogBytes: hb.LogBytes, Iteration: hb.Iteration, Retry: activity.GetInfo(ctx).Attempt}}
			if hb.Worker != "" && hb.Worker == h.identity() {
				// This very process ran the last attempt: it is alive,
				// and the attempt ended some other way (its timeout, an
				// error Temporal retries).
				data.WorkerAlive = true
			}
			h.tell(em, in.Task, data)
		}
	}
	stopBeat := h.keepAlive(ctx, func() any {
		return Heartbeat{Iteration: int(iteration.Load()), LogBytes: logBytes.Load(), Worker: h.identity()}
	})
	defer stopBeat()
	build := h.Build
	if build == nil {
		build = loop.Build
	}
	rep, err := build(ctx, ws, opts)
	stopBeat()
	res := WorkResult{Iterations: rep.Iterations}
	var envErr *agent.EnvError
	switch {
	case errors.Is(err, loop.ErrAllLimited):
		res.Outcome = WorkLimited
		res.Until = h.earliestReset()
		res.Reason = err.Error()
		h.say(em, in.Task, report.KindLimit, report.Limit{Until: res.Until.UTC().Format(time.RFC3339)},
			"⏸ every agent is at a usage limit until %s: the run waits on a durable timer", res.Until.Format(time.RFC3339))
		return res, nil
	case ctx.Err() != nil:
		return res, ctx.Err()
	case errors.As(err, &envErr):
		return res, temporal.NewNonRetryableApplicationError(envErr.Error(), ErrTypeAgentCannotRun, err)
	case errors.As(err, new(*errs.UsageError)):
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUsage, err)
	case errors.Is(err, loop.ErrNeedsHuman):
		// The loop's own rules blocked the story (its failed attempts,
		// [loop] max_retries): an outcome, not an error. As an error,
		// Temporal's retry policy would run the loop again and again,
		// holding the slot, and the build would never end.
		res.Outcome, res.Reason = WorkBlocked, rep.Reason
		if r, ok := blocker.Load().(string); ok {
			res.Reason = r
		} else if res.Reason == "" {
			res.Reason = err.Error()
		}
		h.say(em, in.Task, report.KindBlocker, report.Blocker{State: "blocked", Reason: res.Reason, Attempt: in.Attempt},
			"■ blocked after %s: %s", words.Count(rep.Iterations, "iteration", "iterations"), res.Reason)
		return res, nil
	case err != nil:
		return res, err
	case !rep.Accepted():
		res.Outcome, res.Reason = WorkBlocked, rep.Reason
		if r, ok := blocker.Load().(string); ok {
			// The story's own failure says more than the loop's limit
			// reached on it ("reached 3 iterations with 1 story left").
			if res.Reason != "" {
				r += " (" + res.Reason + ")"
			}
			res.Reason = r
		}
		if res.Reason == "" {
			res.Reason = string(rep.Outcome)
		}
		return res, nil
	}
	head, err := ws.Repo.Head(ctx)
	if err != nil {
		return res, err
	}
	if err := ws.Repo.PushBranch(ctx, h.Exchange, landing.Branch(in.RunID, in.Task), head, "", false); err != nil {
		return res, err
	}
	h.tell(em, in.Task, report.Run{Head: head, Branch: landing.Branch(in.RunID, in.Task)})
	res.Outcome, res.Head = WorkVerified, head
	return res, nil
}

// earliestReset is when the first agent of this host is free again.
func (h *Host) earliestReset() time.Time {
	all, _ := runkit.OpenCooldowns(h.WS.Dir()).All(h.now())
	var first time.Time
	for _, r := range all {
		if first.IsZero() || r.Until.Before(first) {
			first = r.Until
		}
	}
	if first.IsZero() {
		first = h.now().Add(time.Minute)
	}
	return first
}

// Land integrates a verified task branch on the run's tip and moves the
// tip on the exchange (and this checkout's target, and with push_target
// the exchange's target) to the result, through the parallel core's one
// landing procedure (landing.Queue.Land). A retry after a crash finds a
// landing that already happened by its token and never lands twice.
func (h *Host) Land(ctx context.Context, in LandInput) (LandResult, error) {
	// Heartbeats let Temporal notice a dead integration host within
	// [engine] heartbeat, not the landing's one-hour timeout.
	defer h.keepAlive(ctx, nil)()
	h.landMu.Lock()
	defer h.landMu.Unlock()
	em := h.emitter(in.RunID)
	say := func(kind report.Kind, data report.Payload, line string) {
		h.say(em, in.Task, kind, data, "queue: %s", line)
	}
	integ, tip, err := h.integration(ctx, in.RunID, in.Target)
	if err != nil {
		return LandResult{}, err
	}
	records := filepath.Join(h.WS.Dir(), "runs", in.RunID)
	if _, ok := landing.LandedBefore(ctx, h.WS.Repo, tip, in.Token); ok {
		h.tell(em, in.Task, report.Commit{Commit: tip, BeforeRestart: true})
		h.catchUp(ctx, em, in, tip)
		// The crash may have come before the task branch was deleted.
		_ = h.WS.Repo.DeleteRemoteBranch(ctx, h.Exchange, landing.Branch(in.RunID, in.Task))
		var failing []string
		if t := verify.LoadTip(landing.TipChecks(records)); t != nil && t.Commit == tip {
			failing = t.Failing()
		}
		return LandResult{Landed: true, Commit: tip, Failing: failing}, nil
	}
	var out LandResult
	var moved *verify.MovedError
	// A moved target ends the run: Temporal must not retry the landing.
	stop := func(target string) error {
		say(report.KindBlocker, report.Blocker{Target: target, From: moved.From, To: moved.To, Failing: report.Ptr(moved.Failing)}, moved.Error())
		return temporal.NewNonRetryableApplicationError(moved.Error(), ErrTypeTargetMoved, moved)
	}
	if err := h.checkoutMoved(ctx, in, integ, tip, records); errors.As(err, &moved) {
		return LandResult{}, stop(in.Target)
	} else if err != nil {
		return LandResult{}, err
	}
	head, err := h.fetch(ctx, landing.Branch(in.RunID, in.Task))
	switch {
	case errors.Is(err, gitx.ErrNoSuchRemoteBranch):
		// Only a branch that is truly gone sends the task back; any
		// other failure of the fetch is retried by Temporal.
		out, err = landing.SendBack("its branch "+landing.Branch(in.RunID, in.Task)+" is gone from the exchange remote (deleted by hand?)", "", nil), nil
	case err != nil:
		return LandResult{}, err
	default:
		q := &landing.Queue{Repo: h.WS.Repo, Integ: integ, Target: &exchangeTarget{h: h, in: in, first: tip}, Name: in.Target,
			Checks: h.Checks, Checker: h.Checker, Records: records, Say: say, Now: h.now}
		out, err = q.Land(ctx, landing.Job{Run: in.RunID, Task: in.Task, Title: in.Title, Worker: in.Host, Attempt: in.Attempt,
			Base: in.Base, Head: head, PRD: in.PRD, Kind: tasks.KindForPath(in.PRD), Token: in.Token})
	}
	switch {
	case errors.As(err, &moved):
		return LandResult{}, stop(TipBranch(in.RunID, in.Target))
	case err != nil:
		return LandResult{}, err
	case !out.Landed:
		h.tell(em, in.Task, report.Blocker{State: "sent_back", Reason: out.Reason, Conflicts: report.Ptr(out.Conflicts)})
		return out, nil
	}
	h.catchUp(ctx, em, in, out.Commit)
	// The task's work is on the tip now, in its one commit.
	_ = h.WS.Repo.DeleteRemoteBranch(ctx, h.Exchange, landing.Branch(in.RunID, in.Task))
	h.tell(em, in.Task, report.Commit{State: "landed", Commit: out.Commit, Branch: in.Target})
	return out, nil
}

// exchangeTarget is the run's tip branch on the exchange remote, as the
// integration host moves it: with a lease, so that a move outside ralph
// meanwhile is noticed, never overwritten.
type exchangeTarget struct {
	h  *Host
	in LandInput
	// first is the tip the landing started from, fetched already.
	first string
}

func (x *exchangeTarget) branch() string { return TipBranch(x.in.RunID, x.in.Target) }

func (x *exchangeTarget) Tip(ctx context.Context) (string, error) {
	if tip := x.first; tip != "" {
		x.first = ""
		return tip, nil
	}
	return x.h.fetch(ctx, x.branch())
}

func (x *exchangeTarget) Move(ctx context.Context, tip, commit string) error {
	return x.h.WS.Repo.PushBranch(ctx, x.h.Exchange, x.branch(), commit, tip, false)
}

func (x *exchangeTarget) Moved(from, to string, failing []string) *verify.MovedError {
	return &verify.MovedError{Target: x.branch() + " (the run's " + x.in.Target + " on the exchange remote " + x.h.Exchange + ")", From: from, To: to, Failing: failing,
		PutBack: fmt.Sprintf("`git push --force %s %s:refs/heads/%s`", x.h.Exchange, from, x.branch())}
}

// catchUp moves this checkout's target to the landed commit, as a
// fast-forward that refuses to overwrite a person's changes, and pushes
// the target to the exchange when the person enabled it.
func (h *Host) catchUp(ctx context.Context, em *report.Emitter, in LandInput, hash string) {
	cur, err := h.WS.Repo.RevParse(ctx, in.Target)
	if err != nil {
		return
	}
	if cur != hash {
		if ok, _ := h.WS.Repo.IsAncestor(ctx, cur, hash); !ok {
			h.say(em, in.Task, report.KindWarning, report.Warning{Branch: in.Target}, "queue: %s here has commits the run does not: not moved; the run's work is on %s of the exchange remote", in.Target, TipBranch(in.RunID, in.Target))
			return
		}
		if err := h.WS.Repo.FastForward(ctx, in.Target, cur, hash); err != nil {
			h.say(em, in.Task, report.KindWarning, report.Warning{Error: err.Error()}, "queue: could not move %s here: %v", in.Target, err)
			return
		}
	}
	if h.PushTarget {
		if err := h.WS.Repo.PushBranch(ctx, h.Exchange, in.Target, hash, "", true); err != nil {
			h.say(em, in.Task, report.KindWarning, report.Warning{Error: err.Error()}, "queue: could not push %s to the exchange remote: %v", in.Target, err)
		}
	}
}

func usage(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUsage, err)
}

// CleanupInput names a landed task whose worktree and branch a host
// removes.
type CleanupInput struct {
	RunID, Task string
}

// Cleanup removes a landed task's worktree and local branch from this
// host: its work is on the target, in the task's one commit.
func (h *Host) Cleanup(ctx context.Context, in CleanupInput) error {
	h.refsMu.Lock()
	defer h.refsMu.Unlock()
	path := h.taskPath(in.RunID, in.Task)
	if err := landing.RemoveWork(ctx, h.WS.Repo, path, landing.Branch(in.RunID, in.Task)); err != nil {
		return err
	}
	_ = os.Remove(filepath.Dir(path)) // the run's folder, once its last worktree is gone
	return nil
}

// FinishInput ends a run on the integration host.
type FinishInput struct {
	RunID, Target string
	// Complete is true when every task landed: the run's tip branch on
	// the exchange is then the target's history and is removed.
	Complete bool
}

// Finish removes the run's integration worktree and, when the run is
// complete and this checkout's target holds the tip, the tip branch on
// the exchange.
func (h *Host) Finish(ctx context.Context, in FinishInput) error {
	base := filepath.Join(h.worktreeBase(), in.RunID)
	dir := filepath.Join(base, landing.IntegrationDir)
	if err := h.removeWorktree(ctx, dir); err != nil {
		return err
	}
	_ = os.Remove(base)
	if !in.Complete {
		return nil
	}
	tip, err := h.fetch(ctx, TipBranch(in.RunID, in.Target))
	if err != nil {
		return nil
	}
	if ok, _ := h.WS.Repo.IsAncestor(ctx, tip, in.Target); ok {
		return h.WS.Repo.DeleteRemoteBranch(ctx, h.Exchange, TipBranch(in.RunID, in.Target))
	}
	return nil
}

// removeWorktree removes one of ralph's worktrees from this clone, if it
// is there, while no fetch runs (see refsMu).
func (h *Host) removeWorktree(ctx context.Context, dir string) error {
	h.refsMu.Lock()
	defer h.refsMu.Unlock()
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	return h.WS.Repo.RemoveWorktree(ctx, dir, true)
}
