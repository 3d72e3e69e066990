package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// SetupError is a missing prerequisite that a named command fixes. Nothing
// has been changed when it is returned.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// SetupRequiredError is seed 000's ERROR state: progress.txt is missing in
// BMAD mode. Its message carries the SETUP_REQUIRED tag and the template.
type SetupRequiredError struct {
	Path     string
	Template string
}

func (e *SetupRequiredError) Error() string {
	return fmt.Sprintf("<promise>SETUP_REQUIRED</promise>\nExplanation: %s not found. Create it with `ralph init --bmad`, or from this template:\n\n%s", e.Path, e.Template)
}

// ErrNeedsHuman is returned when only blocked tasks are left.
var ErrNeedsHuman = errors.New("only blocked tasks are left: a person must decide")

// LoadPRD reads and parses the PRD. A missing file is a *SetupError that
// names the command which writes one.
func LoadPRD(ws *workspace.Workspace, path string) (*tasks.PRD, error) {
	prd, err := ReadPRD(ws, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &SetupError{Msg: fmt.Sprintf("no PRD at %s: run `ralph prd \"what you want built\"` to write one, or pass --prd PATH", ws.Rel(path))}
	}
	return prd, err
}

// ReadPRD parses the PRD at path; errors name it relative to the
// repository, as the user would type it.
func ReadPRD(ws *workspace.Workspace, path string) (*tasks.PRD, error) {
	b, err := inputlimit.ReadFile(path)
	if err != nil {
		return nil, err
	}
	prd, err := tasks.ParseMarkdown(ws.Rel(path), b)
	if prd != nil {
		prd.Path = path
	}
	return prd, err
}

// agentInstalled fails before anything is written when the agent's
// program is missing.
func agentInstalled(s agent.Spec) error {
	argv, _ := agent.Argv(s.Headless, "prompt.md")
	return agent.CheckInstalled(s, argv)
}

// builder is one build run: the loop machine's runner.
type builder struct {
	*run
	// notesWritten says this run appended to progress.md: EXIT commits
	// what no task's commit took along (a blocker noted last).
	notesWritten bool
	src          tasks.Source
	board        *tasks.Board
	st           *LoopState
	tpl          prompt.Template
	mem          memory.Store
	sel          tasks.Selection
	rec          *IterationRecord
	snap         gitx.Snapshot
	memText      string
	// stoppedFirst is what Build stopped of a killed run's agent before
	// it read anything (stopLeftoversFirst).
	stoppedFirst proc.Stopped
	// failure describes the current failed attempt for BLOCKER and the
	// next prompt.
	failure, failureOutput, blockerType string
	// projectNotes are agent instruction files found in the repository.
	projectNotes []string
	// descent is a pair of commits (from, to) that this iteration's git
	// log showed to descend one from the other: checkHistory need not ask
	// again.
	descent [2]string
	// fresh is the tree as COMMIT left it, the snapshot the next
	// IMPLEMENT starts from unless something may have changed the tree
	// since (see freshSnapshot): one git status fewer per iteration.
	fresh *freshSnap
	// freshToken is the commit token this process made with the
	// transition into TEST and has not committed with: no commit carries
	// it, so COMMIT need not look for one. savedToken is the token in the
	// state as last saved.
	freshToken, savedToken string
	// deltaIter is the iteration whose record holds the agent's commits
	// and files as this process read them after the agent: COMMIT adds
	// its own to them instead of asking git again.
	deltaIter int
	// own are the copies of ralph's own files this process made before
	// its last agent (saveOwnFiles).
	own *ownCopies
	// resumedFrom is the interrupted attempt a resumed IMPLEMENT continues:
	// its starting point is the baseline for "did the agent change
	// anything".
	resumedFrom *Attempt
}

// pendingEvent is an event that waits for the next save of the state: a
// transition (t set) or a line said after one.
type pendingEvent struct {
	ev report.Event
	t  *pendingTransition
}

// pendingTransition is what the run's log says of a transition once it
// is saved.
type pendingTransition struct {
	from, to Machine
	trigger  Trigger
	taskID   string
}

// Build runs the loop machine until every task is done and verified, only
// blocked tasks are left, the iteration limit is reached, or ctx is
// cancelled. A run that was interrupted or killed resumes where it stopped.
func Build(ctx context.Context, ws *workspace.Workspace, opts Options) (rep Report, err error) {
	src := opts.Source
	if src == nil {
		src = tasks.Open(tasks.KindMarkdown, opts.PRDPath)
	}
	// An agent a kill of ralph left running goes first, whatever fails
	// next: it may be rewriting the very files read below.
	stoppedFirst := stopLeftoversFirst(homeFor(ws, opts))
	// INIT: verify the prerequisites before anything is written, so bad
	// input changes nothing.
	board, err := src.Load()
	if errors.Is(err, fs.ErrNotExist) {
		if t, ok := src.(tasks.SetupTemplater); ok {
			return rep, &SetupRequiredError{Path: ws.Rel(src.Path()), Template: t.SetupTemplate()}
		}
		if c, ok := src.(tasks.Creatable); ok {
			return rep, &SetupError{Msg: fmt.Sprintf("no %s at %s: run `%s` to create one, or pass --tasks PATH for another task file", c.Noun(), ws.Rel(src.Path()), c.CreateCommand())}
		}
		return rep, &SetupError{Msg: fmt.Sprintf("no task file at %s: create it or pass --tasks PATH", ws.Rel(src.Path()))}
	}
	if err != nil {
		// Name files as the user types them, relative to the repository.
		return rep, errors.New(strings.ReplaceAll(err.Error(), ws.Root+string(filepath.Separator), ""))
	}
	if _, planned := src.(tasks.Planned); planned && opts.RequirePlan {
		if _, err := os.Stat(opts.PlanPath); errors.Is(err, fs.ErrNotExist) {
			return rep, &SetupError{Msg: fmt.Sprintf("no plan at %s: run `ralph plan` first, or set require_plan = false under [build] in .ralph/config.toml", ws.Rel(opts.PlanPath))}
		}
	}
	tpl, err := prompt.Load(prompt.Build, ws.PromptsDir())
	if err != nil {
		return rep, err
	}
	if err := checkContextSize(ws); err != nil {
		return rep, err
	}
	if err := agentInstalled(opts.Agent); err != nil {
		return rep, err
	}
	prior, err := homeFor(ws, opts).Load()
	if err != nil {
		return rep, err
	}
	if prior != nil && prior.RunID != "" {
		// A kill during an extra run of the checks left the start's
		// versions of some files in place of the work: put the work back
		// before anything reads the tree.
		if err := restoreOverlay(ws, filepath.Join(homeFor(ws, opts).RunsDir(), prior.RunID)); err != nil {
			return rep, err
		}
	}
	opts.Checks = withQualityGates(opts.Checks, board.QualityGates)
	resume := prior != nil && !prior.Finished && prior.TaskFile == ws.Rel(src.Path())
	if resume {
		if err := resumable(ctx, opts.gitPort(ws.Repo), prior); err != nil {
			return rep, err
		}
	}
	if !resume && !opts.NoCommit {
		if err := checkCleanTree(ctx, ws, opts.gitPort(ws.Repo), src.Path(), opts.PlanPath); err != nil {
			return rep, err
		}
	}
	if prior != nil && prior.Finished {
		closeRunRecord(homeFor(ws, opts), prior)
	}
	resumeID := ""
	if resume {
		resumeID = prior.RunID
		// A resumed run keeps its limit, unless N was given now: then N
		// more iterations may run, and a limit is never lowered by it.
		limit := prior.MaxIterations
		if opts.IterationsGiven {
			used := prior.Machine.Iteration
			if a := prior.Attempt; prior.Machine.Resumes() == StateImplement && (a == nil || a.Iteration != used) {
				used-- // entered IMPLEMENT, but its agent never started
			}
			limit = max(limit, used+opts.MaxIterations)
		}
		opts.MaxIterations = limit
	}
	r, err := begin(ctx, ws, "build", opts, resumeID)
	if err != nil {
		return rep, err
	}
	if !resume && !opts.NoCommit {
		if err := commitSetup(ctx, ws, r.git, src.Path(), opts.PlanPath, r.say); err != nil {
			return rep, err
		}
	}
	if opts.OnlyStory != "" {
		board.Stories = onlyStory(board.Stories, opts.OnlyStory)
	}
	b := &builder{run: r, src: src, board: board, tpl: tpl, mem: opts.Memory, stoppedFirst: stoppedFirst}
	if b.mem == nil {
		b.mem = &memory.FileStore{Path: ws.Path("memory.jsonl"), Now: opts.Now}
	}
	reason := ""
	defer func() {
		b.flushAtExit()
		os.Remove(b.commitTracePath()) // scratch: git's trace of the last commit
		rep.StoriesLeft, rep.StoriesDone = b.board.Remaining(), len(b.board.Stories)-b.board.Remaining()
		r.finish(&rep, reason)
	}()
	now := opts.now()
	if resume {
		b.st = prior
		if err := b.repairJournal(b.home.EventsPath(), b.home.StatePath()); err != nil {
			return rep, err
		}
		b.sayf(report.KindRun, "ralph: resuming run %s in %s (iteration %d, task %s)\n", r.id, b.st.Machine.Resumes(), b.st.Machine.Iteration, orNone(b.st.Machine.TaskID))
		if opts.MaxIterations != b.st.MaxIterations {
			from := opts.IterationsFrom
			if from == "" {
				from = "as given on the command line"
			}
			b.sayf(report.KindRun, "ralph: iteration limit raised from %d to %d, %s\n", b.st.MaxIterations, opts.MaxIterations, from)
			b.st.MaxIterations = opts.MaxIterations
		}
		// A run that stopped on an edge goes back where it was; one that
		// crashed (or was written by an older ralph) is still there.
		if b.st.Machine.State == StateStopped {
			if err := b.transition(Event{Trigger: TrigResumed}); err != nil {
				return rep, err
			}
		}
		r.event("run %s resumed in %s", r.id, b.st.Machine.State)
		b.resumeInterrupted()
	} else {
		b.st = &LoopState{
			SchemaVersion: StateSchemaVersion, RunID: r.id, TaskSource: string(src.Kind()), TaskFile: ws.Rel(src.Path()),
			Machine:       Machine{State: StateInit, MaxRetries: opts.MaxRetries},
			MaxIterations: opts.MaxIterations, NoCommit: opts.NoCommit, StartedAt: now.UTC(), EnteredAt: now.UTC(),
			Tasks: map[string]*TaskRecord{}, Feedback: map[string]string{}, Metrics: Metrics{StateMillis: map[State]int64{}},
		}
		if snap, err := r.git.Snapshot(ctx); err == nil {
			b.st.Branch = snap.Branch
		}
		// Counters of tasks outlive runs: a task blocked yesterday is
		// still blocked, and its retry count still counts.
		b.st.Budget = opts.Budget
		if prior != nil {
			b.st.Tasks = prior.Tasks
			b.st.Feedback = prior.Feedback
			b.st.Breaker = prior.Breaker
			if b.st.Tasks == nil {
				b.st.Tasks = map[string]*TaskRecord{}
			}
			if b.st.Feedback == nil {
				b.st.Feedback = map[string]string{}
			}
		}
		if opts.OnlyStory != "" && opts.Feedback != "" && b.st.Feedback[opts.OnlyStory] == "" {
			b.st.Feedback[opts.OnlyStory] = opts.Feedback
		}
		if err := b.takeBaseline(ctx); err != nil {
			rep.Outcome, reason = OutcomeError, err.Error()
			if errors.Is(err, ErrInterrupted) {
				rep.Outcome, reason = OutcomeInterrupted, "interrupted while running the checks on the starting tree"
			}
			return rep, err
		}
		if err := b.home.save(b.st); err != nil {
			return rep, err
		}
	}
	r.record.HeadBefore = b.headNow()

	for !b.st.Machine.State.Ends() {
		if err := b.steer(ctx); err != nil {
			m := b.st.Machine
			rep.Iterations = m.Iteration
			rep.Outcome, reason = OutcomeError, err.Error()
			if errors.Is(err, ErrInterrupted) {
				how := stopMessage(ctx)
				rep.Outcome, reason = OutcomeInterrupted, fmt.Sprintf("%s while paused in %s", how, m.State)
				b.sayLimit(fmt.Sprintf("■ %s while paused: run `ralph build` again to resume\n", how), OutcomeInterrupted, reason)
				return rep, b.stop(TrigInterrupted, reason, err)
			}
			r.logError("%s: %v", m.State, err)
			return rep, b.stop(TrigError, reason, err)
		}
		m := b.st.Machine
		if m.State == StateImplement && (m.Iteration > b.st.MaxIterations || !b.takeSharedRun()) {
			// The limit also bounds retries, which never pass through
			// STORY_SELECT. The run ends; the task keeps its counts for
			// the next run.
			b.st.Finished, b.st.Outcome = true, OutcomeMaxIterations
			b.st.Reason = fmt.Sprintf("reached %s with %s left", words.Count(b.st.MaxIterations, "iteration", "iterations"), words.Count(b.board.Remaining(), "story", "stories"))
			if m.Iteration <= b.st.MaxIterations {
				b.st.Reason = fmt.Sprintf("the run's %s are used up by its workers", words.Count(b.opts.Ledger.MaxRuns, "iteration", "iterations"))
			}
			b.st.Machine.Iteration = min(m.Iteration-1, b.st.MaxIterations)
			rep.Iterations, rep.Outcome, reason = b.st.Machine.Iteration, OutcomeMaxIterations, b.st.Reason
			b.sayLimit("■ "+reason+"\n", OutcomeMaxIterations, reason)
			return rep, b.transition(Event{Trigger: TrigIterationLimit, Detail: reason})
		}
		if m.State == StateImplement {
			if why := b.budgetExceeded(); why != "" {
				b.st.Finished, b.st.Outcome = true, OutcomeBudget
				b.st.Reason = "budget reached: " + why
				rep.Iterations, rep.Outcome, reason = m.Iteration-1, OutcomeBudget, b.st.Reason
				b.sayLimit("■ "+reason+"\n", OutcomeBudget, reason)
				return rep, b.transition(Event{Trigger: TrigBudgetExhausted, Detail: reason})
			}
			if err := b.breakerGate(ctx); err != nil {
				rep.Outcome, reason = OutcomeInterrupted, "interrupted while the circuit breaker was open"
				rep.Iterations = m.Iteration
				return rep, b.stop(TrigInterrupted, reason, err)
			}
		}
		ev, err := b.perform(ctx, m.State)
		if err != nil {
			trig := TrigError
			rep.Outcome, reason = OutcomeError, err.Error()
			rep.Iterations = b.st.Machine.Iteration
			var envErr *agent.EnvError
			var histErr *HistoryError
			switch {
			case errors.Is(err, ErrInterrupted):
				how := stopMessage(ctx)
				trig, rep.Outcome, reason = TrigInterrupted, OutcomeInterrupted, fmt.Sprintf("%s in %s during iteration %d", how, m.State, m.Iteration)
				b.sayLimit(fmt.Sprintf("■ %s: iteration %d recorded as interrupted; run `ralph build` again to resume\n", how, m.Iteration), OutcomeInterrupted, reason)
			case errors.Is(err, ErrAllLimited):
				trig, rep.Outcome = TrigAllLimited, OutcomeInterrupted
			case errors.As(err, &envErr):
				trig = TrigAgentCannotRun
			case errors.As(err, &histErr):
				trig = TrigHistoryChanged
			}
			if trig != TrigInterrupted && trig != TrigAllLimited {
				r.logError("%s: %v", m.State, err)
			}
			return rep, b.stop(trig, reason, err)
		}
		if err := b.transition(ev); err != nil {
			rep.Outcome, reason = OutcomeError, err.Error()
			return rep, err
		}
	}
	rep.Iterations = b.st.Machine.Iteration
	rep.Outcome, reason = b.st.Outcome, b.st.Reason
	switch b.st.Outcome {
	case OutcomeNeedsHuman:
		rep.Blockers = map[string]string{}
		for id, t := range b.st.Tasks {
			if t.Blocker != nil {
				rep.Blockers[id] = t.Blocker.Reason
			}
		}
		return rep, ErrNeedsHuman
	}
	return rep, nil
}

// OutcomeNeedsHuman ends a run whose remaining tasks are all blocked.
const OutcomeNeedsHuman Outcome = "needs_human"

// stop ends the run on err by the edge trig into STOPPED, so that the
// journal and state.json say why it stopped and the next `ralph build`
// resumes where it was. It returns err, which is what the user is told.
func (b *builder) stop(trig Trigger, why string, err error) error {
	if terr := b.transition(Event{Trigger: trig, Detail: why}); terr != nil && !errors.Is(terr, ErrNoTransition) {
		// The stop could not be recorded; the state on disk is still the
		// one before it, which resumes just the same.
		return errors.Join(err, terr)
	}
	return err
}

// transition applies the pure machine to an event, performs the
// transition's own actions, and persists the new state and the event line
// before the next state's entry action runs, unless that action is one a
// kill may simply have done again (waitsForSave): then the transition
// waits in memory for the next save of the state, which records it with
// the others that waited, in one atomic write where there were several.
func (b *builder) transition(ev Event) error {
	m := b.st.Machine
	next, actions, err := Next(m, ev)
	if err != nil {
		return err
	}
	now := b.opts.now()
	if b.st.Metrics.StateMillis == nil {
		b.st.Metrics.StateMillis = map[State]int64{}
	}
	if m.State != StateStopped {
		// Time between a stop and the resume is no time of the run.
		b.st.Metrics.StateMillis[m.State] += now.Sub(b.st.EnteredAt).Milliseconds()
	}
	for _, a := range actions[:len(actions)-1] {
		b.transitionAction(a, m, next)
	}
	if m.State == StateCommit && next.State != StateStopped {
		// The next COMMIT makes its own; a stopped one resumes with its
		// token, which recognises a commit it already made.
		b.st.CommitToken = ""
	}
	if m.State == StateImplement && next.State == StateTest {
		// The commit token goes to disk with this transition, which is
		// saved before the checks run, and not with a save of its own
		// just before the commit. The agent has ended: it never sees it.
		b.st.CommitToken = gitx.NewCommitToken()
		b.freshToken = b.st.CommitToken
	}
	b.st.Machine = next
	b.st.EnteredAt = now.UTC()
	b.st.UpdatedAt = now.UTC()
	b.st.Metrics.Iterations = next.Iteration
	b.st.Metrics.TotalMillis = 0
	for _, ms := range b.st.Metrics.StateMillis {
		b.st.Metrics.TotalMillis += ms
	}
	for _, ms := range b.st.Metrics.WaitMillis {
		b.st.Metrics.TotalMillis += ms // the run's wall time includes its waits
	}
	detail := ""
	if ev.Trigger == TrigImplementFailed || ev.Trigger == TrigTestsFailed || ev.Trigger == TrigACsFailed || next.State == StateBlocker {
		detail = b.failure
	}
	if ev.Detail != "" {
		detail = ev.Detail
	}
	taskID := m.TaskID
	if taskID == "" {
		taskID = next.TaskID
	}
	e := report.Event{Kind: report.KindTransition, Time: now.UTC(), From: string(m.State), To: string(next.State), Trigger: string(ev.Trigger), Task: taskID}
	if taskID != "" {
		e.Attempt = m.RetryCount + 1
	}
	if d := clip(detail, 300); d != "" {
		e.Data = map[string]any{"detail": d}
	}
	b.pending = append(b.pending, pendingEvent{ev: e, t: &pendingTransition{from: m, to: next, trigger: ev.Trigger, taskID: taskID}})
	if b.waitsForSave(m, next) {
		return nil
	}
	return b.saveState()
}

// waitsForSave reports whether the transition from m into next may wait
// in memory for the next save of the state. It may when what next does
// before that save is quick work of ralph's own, with no agent, check or
// wait in it, that a kill before the save simply has done again from the
// state on disk, as after a kill during the previous state's action: the
// journal never holds an event the state does not. IMPLEMENT saves its
// attempt before the agent starts; COMMIT commits with the token saved
// with the transition into TEST, and a kill after its commit resumes
// before it and finds that commit by the token; MEMORY_LOAD and
// STORY_SELECT read and choose; VALIDATE without a reviewer or a
// criterion's command reads the task file. Transitions into every other
// state, and out of STOPPED, are saved at once.
func (b *builder) waitsForSave(m, next Machine) bool {
	if m.State == StateStopped {
		return false
	}
	switch next.State {
	case StateImplement, StateCommit, StateMemoryLoad, StateStorySelect:
		return true
	case StateValidate:
		return b.opts.Reviewer == nil && !b.criteriaRunCommands()
	}
	return false
}

// criteriaRunCommands reports whether VALIDATE runs a command for one of
// the selected story's criteria.
func (b *builder) criteriaRunCommands() bool {
	for _, c := range b.sel.Story.Criteria {
		if c.Verify != "" {
			return true
		}
	}
	return false
}

// persist saves the state with batch's transitions as its last events and
// then journals the batch: the state records the transitions before the
// journal gets them, so that a kill between the two is repaired on resume
// (repairJournal).
func (b *builder) persist(batch []pendingEvent) error {
	evs := make([]report.Event, len(batch))
	for i, p := range batch {
		evs[i] = p.ev
	}
	if _, err := b.em.EmitAllAfter(evs, func(stamped []report.Event) error {
		var ts []report.Event
		for i, e := range stamped {
			if batch[i].t != nil {
				ts = append(ts, e)
			}
		}
		if n := len(ts); n > 0 {
			b.st.LastEvent, b.st.EarlierEvents = &ts[n-1], ts[:n-1]
		}
		if err := b.home.save(b.st); err != nil {
			return err
		}
		CrashPoint("state-saved")
		return nil
	}); err != nil {
		return err
	}
	if err := b.journal.Err(); err != nil {
		return err
	}
	for _, p := range batch {
		if t := p.t; t != nil {
			b.log.Info("transition", "from", t.from.State, "to", t.to.State, "trigger", t.trigger, "task", t.taskID, "retry", t.to.RetryCount)
			CrashHook()
		}
	}
	return nil
}

// flushAtExit saves what still waits for a save when the run returns
// without a last transition (an error on the way): the lines said are
// shown even when the save fails, and the state on disk is then the one
// before those transitions, which resumes just the same.
func (b *builder) flushAtExit() {
	batch := b.pending
	if len(batch) == 0 || b.saveState() == nil {
		return
	}
	for _, p := range batch {
		if p.t == nil {
			b.em.Emit(p.ev)
		}
	}
}

// flush saves the transitions that wait in memory, if any.
func (b *builder) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	return b.saveState()
}

// saveState saves the run's state: with the transitions that wait in
// memory, if any, and the lines said since, else on its own. Every save
// of a build's state goes through it, so that no save writes a state
// whose transitions the journal lacks.
func (b *builder) saveState() error {
	var err error
	if batch := b.pending; len(batch) > 0 {
		b.pending = nil
		err = b.persist(batch)
	} else {
		err = b.home.save(b.st)
	}
	if err == nil {
		b.savedToken = b.st.CommitToken
	}
	return err
}

func (b *builder) transitionAction(a Action, from, to Machine) {
	if p := b.transitionPerformers()[a]; p != nil {
		p(from, to)
	}
}

// transitionPerformers perform the actions a transition itself returns,
// before the next state's entry action. Every action Next can return has a
// performer here or in entryPerformers (TestEveryActionHasAPerformer).
func (b *builder) transitionPerformers() map[Action]func(from, to Machine) {
	return map[Action]func(from, to Machine){
		ActRecordFailure: func(from, to Machine) {
			t := b.st.task(from.TaskID)
			t.Failures++
			t.RetryCount = to.RetryCount
			b.st.Metrics.TaskFailures++
		},
		ActRecordFeedback: func(from, to Machine) {
			b.st.Feedback[from.TaskID] = b.feedbackText(from.TaskID)
			b.st.Metrics.Reworks++
		},
		ActMarkBlocked: b.markBlocked,
		ActResetRetries: func(from, to Machine) {
			t := b.st.task(from.TaskID)
			t.RetryCount, t.Blocker = 0, nil
			t.Successes++
			delete(b.st.Feedback, from.TaskID)
			b.st.Metrics.TaskSuccesses++
		},
		// The machine itself carries the decision (Machine.Partial): COMMIT
		// then commits the work without marking the task done.
		ActCommitPartial: func(from, to Machine) {},
	}
}

// perform runs the entry action of state s and returns what happened.
func (b *builder) perform(ctx context.Context, s State) (Event, error) {
	if p := b.entryPerformers()[EntryAction(s)]; p != nil {
		return p(ctx)
	}
	return Event{}, fmt.Errorf("no action for state %s", s)
}

// entryPerformers perform the entry action of each state and turn its
// outcome into the next event.
func (b *builder) entryPerformers() map[Action]func(context.Context) (Event, error) {
	return map[Action]func(context.Context) (Event, error){
		// INIT's prerequisites (task file, plan, agent, clean tree) are
		// verified by Build before anything is written; reaching INIT means
		// they hold.
		ActVerifyInit: func(context.Context) (Event, error) { return Event{Trigger: TrigProgressFound}, nil },
		ActLoadMemory: b.memoryLoad,
		ActLoadFiles: func(context.Context) (Event, error) {
			b.say(report.KindWarning, "  ! memory unavailable, using file-only context\n", nil)
			b.logError("memory (%s) unavailable, using file-only context", b.mem.Name())
			return Event{Trigger: TrigFilesLoaded}, nil
		},
		ActSelectTask: func(context.Context) (Event, error) { return b.selectTask() },
		ActRunAgent:   b.implement,
		ActRunChecks:  b.test,
		ActValidate:   b.validate,
		ActCommit:     b.commit,
		ActLogBlocker: func(ctx context.Context) (Event, error) { return Event{Trigger: TrigBlockerLogged}, b.logBlocker(ctx) },
		// The terminal states' actions run ahead of the transition into
		// them: STORY_SELECT calls exit (the summary) so that it shows the
		// final state, and a missing progress file is refused by Build as
		// a SetupRequiredError before the run starts. No event follows.
		ActSummarize:     func(context.Context) (Event, error) { return Event{}, nil },
		ActSetupRequired: func(context.Context) (Event, error) { return Event{}, nil },
		// The run ends in STOPPED; Build has told the user why, and the
		// next run takes the resumed edge out of it.
		ActStop: func(context.Context) (Event, error) { return Event{}, nil },
	}
}

// memoryLoad reads the file memory (progress, task file, agent notes) and
// queries the memory store: one retry after a pause, then the fallback.
func (b *builder) memoryLoad(ctx context.Context) (Event, error) {
	primed := b.prime(ctx) // sources with workflow context (bd prime) go first
	defer func() { b.memText = withPrime(b.memText, primed) }()
	if err := b.reloadBoard(); err != nil {
		return Event{}, err
	}
	var notes []string
	for _, f := range []string{".claude/CLAUDE.md", "AGENTS.md", "CLAUDE.md"} {
		if _, err := os.Stat(filepath.Join(b.ws.Root, f)); err == nil {
			notes = append(notes, f)
		}
	}
	b.projectNotes = notes
	delay := b.opts.MemoryRetryDelay
	if delay == 0 {
		delay = 3 * time.Second
	}
	var agentCtx, issues []memory.Node
	var err error
	for try := 0; try < 2; try++ {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		agentCtx, issues, err = memory.Load(qctx, b.mem)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		if try == 0 {
			b.log.Warn("memory query failed, retrying", "err", err, "delay", delay.String())
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
		}
	}
	if ctx.Err() != nil {
		return Event{}, ErrInterrupted
	}
	b.st.MemoryStore = b.mem.Name()
	// neo4j_connected, the seed's name, says Neo4j answered; with another
	// store only memory_connected is true (see LoopState).
	b.st.MemoryConnected = err == nil
	b.st.Neo4jConnected = err == nil && b.st.MemoryStore == "neo4j"
	if err != nil {
		b.memText = "Memory is unavailable for this iteration."
		return Event{Trigger: TrigMemoryUnavailable}, nil
	}
	b.memText = renderMemory(agentCtx, b.resolveDone(ctx, issues))
	return Event{Trigger: TrigMemoryLoaded}, nil
}

// resolveDone marks the blockers among issues whose task is done on the
// board resolved, and returns the other issues. COMMIT and `ralph unblock`
// resolve a task's blockers as they happen; this catches the ones written
// before ralph did that, and tasks marked done by hand or by a commit that
// a crash cut short, so that a done task's blocker is never shown as a
// known issue.
func (b *builder) resolveDone(ctx context.Context, issues []memory.Node) []memory.Node {
	var open []memory.Node
	for _, n := range issues {
		task := n.Props[memory.PropTask]
		if n.MemoryType != memory.TypeBlocker || task == "" || !b.taskDone(task) {
			open = append(open, n)
			continue
		}
		if err := b.mem.Resolve(context.WithoutCancel(ctx), task, b.opts.now()); err != nil {
			b.log.Warn("memory blockers not resolved", "task", task, "err", err)
		}
	}
	return open
}

// taskDone reports whether the board says task (a story, or a story's
// subtask) is done; a task the board does not know is not.
func (b *builder) taskDone(task string) bool {
	storyID, subID := tasks.ParseTaskID(task)
	story, ok := b.board.Find(storyID)
	if !ok {
		return false
	}
	if story.Status == tasks.StatusComplete || subID == "" {
		return story.Status == tasks.StatusComplete
	}
	for _, st := range story.Subtasks {
		if st.ID == subID {
			return st.Done
		}
	}
	return false
}

func renderMemory(agentCtx, issues []memory.Node) string {
	if len(agentCtx) == 0 && len(issues) == 0 {
		return "Nothing recorded yet."
	}
	var sb strings.Builder
	for _, n := range agentCtx {
		fmt.Fprintf(&sb, "- context: %s%s\n", n.Name, suffix(n.Text))
	}
	for _, n := range issues {
		fmt.Fprintf(&sb, "- %s (%s): %s%s\n", n.MemoryType, n.Date.Format("2006-01-02"), n.Name, suffix(n.Text))
	}
	return strings.TrimRight(sb.String(), "\n")
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + clip(strings.Join(strings.Fields(s), " "), 200)
}

// reloadBoard reads the task file again and lays ralph's own records over
// it: blocked tasks of formats that cannot say "blocked" stay blocked, and
// a blocker a person cleared in the file is cleared here too.
func (b *builder) reloadBoard() error {
	board, err := b.src.Load()
	if err != nil {
		return err
	}
	if only := b.opts.OnlyStory; only != "" {
		board.Stories = onlyStory(board.Stories, only)
	}
	held := b.held()
	for i := range board.Stories {
		s := &board.Stories[i]
		for _, id := range storyTaskIDs(*s) {
			t := b.st.Tasks[id]
			if c, ok := held[id]; ok && s.Status != tasks.StatusComplete && !s.Done {
				t = b.holdTask(id, c)
			}
			if t == nil || t.Blocker == nil {
				continue
			}
			if s.Status == tasks.StatusComplete {
				t.Blocker = nil
				continue
			}
			if t.Blocker.ByPerson {
				if _, ok := held[id]; !ok && !b.opts.ControlPauseOnly && b.opts.OnlyStory == "" {
					if err := b.dropReleased(s, id, t); err != nil {
						return err
					}
					continue
				}
			} else if t.Blocker.InFile && s.Status != tasks.StatusBlocked {
				// The file could say blocked and now does not: a person
				// unblocked it by editing the file, as seed 000 describes.
				t.Blocker, t.RetryCount = nil, 0
				delete(b.st.Feedback, id)
				continue
			}
			s.Status = tasks.StatusBlocked
			s.Done = false
		}
		if s.Status != tasks.StatusBlocked {
			if t := b.st.Tasks[s.ID]; t != nil {
				s.RetryCount = t.RetryCount
			}
		}
	}
	b.board = board
	return nil
}

// takeSharedRun counts the iteration about to start in the ledger a
// parallel build's workers share; false when the run's iterations are
// used up by them all. Without a ledger every iteration may start.
func (b *builder) takeSharedRun() bool {
	return b.opts.Ledger == nil || b.opts.Ledger.TakeRun()
}

// onlyStory keeps story id of stories, alone: a parallel worker's loop
// works that one task. Its dependencies are the scheduler's to honour (it
// hands out only ready tasks), and they are not on the shortened board.
func onlyStory(stories []tasks.Story, id string) []tasks.Story {
	for _, s := range stories {
		if s.ID == id {
			s.DependsOn = nil
			return []tasks.Story{s}
		}
	}
	return nil
}

// storyTaskIDs lists the task ids a story can have: itself and each
// subtask.
func storyTaskIDs(s tasks.Story) []string {
	ids := []string{s.ID}
	for _, st := range s.Subtasks {
		ids = append(ids, (tasks.Selection{Story: s, Subtask: &st}).TaskID())
	}
	return ids
}

func (b *builder) selectTask() (Event, error) {
	if err := b.reloadBoard(); err != nil {
		return Event{}, err
	}
	b.reviveTransient()
	sel, finished, ok, why := b.board.Select()
	for _, id := range finished {
		if err := b.src.MarkDone(id, "", b.opts.now()); err != nil {
			return Event{}, err
		}
		b.event("story %s complete: all its subtasks are done", id)
	}
	if len(finished) > 0 {
		if err := b.reloadBoard(); err != nil {
			return Event{}, err
		}
		sel, _, ok, why = b.board.Select()
	}
	if !ok && b.board.Remaining() > 0 {
		// With nothing else left, no iterations pass for a transient
		// blocker to wait out: its one retry comes now, within the limit.
		if id := b.lastTransient(); id != "" {
			if b.st.Machine.Iteration >= b.st.MaxIterations {
				return b.limitReached()
			}
			// A person's skip is no failure: the line says who set it aside.
			why, again := "blocked by a transient failure", "retrying it now"
			if by := b.st.task(id).Blocker.SkippedBy; by != "" {
				why, again = "skipped by "+by, "taking it up again now"
			}
			if b.board.Remaining() == 1 {
				b.sayf(report.KindBlocker, "  ↻ only %s is left, %s: %s\n", id, why, again)
			} else {
				b.sayf(report.KindBlocker, "  ↻ only blocked or skipped tasks are left; %s was %s: %s\n", id, why, again)
			}
			b.revive(id, "now, as nothing else is left")
			if err := b.reloadBoard(); err != nil {
				return Event{}, err
			}
			sel, _, ok, why = b.board.Select()
		}
	}
	if !ok {
		if b.board.Remaining() == 0 {
			// A run never ends complete while a check fails, whoever
			// said the stories were done.
			if failing := b.st.Baseline.Failing(); len(failing) > 0 {
				b.st.Outcome = OutcomeChecksFailing
				b.st.Reason = fmt.Sprintf("every story is done, but %s %s on the final tree", strings.Join(quoteChecks(failing), ", "), words.Plural(len(failing), "fails", "fail"))
				b.sayLimit("■ "+b.st.Reason+"\n", OutcomeChecksFailing, b.st.Reason)
				return Event{Trigger: TrigAllComplete}, b.exit(false)
			}
			b.st.Outcome, b.st.Reason = OutcomeComplete, "all stories complete"
			return Event{Trigger: TrigAllComplete}, b.exit(true)
		}
		b.st.Outcome, b.st.Reason = OutcomeNeedsHuman, why
		return Event{Trigger: TrigNoneSelectable}, b.exit(false)
	}
	if why := b.budgetExceeded(); why != "" {
		b.st.Outcome, b.st.Reason = OutcomeBudget, "budget reached: "+why
		b.sayLimit("■ "+b.st.Reason+"\n", OutcomeBudget, b.st.Reason)
		return Event{Trigger: TrigBudgetExhausted}, b.exit(false)
	}
	if b.st.Machine.Iteration >= b.st.MaxIterations {
		return b.limitReached()
	}
	sel = b.pick(sel)
	b.sel = sel
	id := sel.TaskID()
	b.claim(context.Background(), id) // sources that track assignees (bd update --claim)
	return Event{Trigger: TrigTaskSelected, TaskID: id, RetryCount: b.st.task(id).RetryCount}, nil
}

func (b *builder) limitReached() (Event, error) {
	b.st.Outcome = OutcomeMaxIterations
	b.st.Reason = fmt.Sprintf("reached %s with %s left", words.Count(b.st.MaxIterations, "iteration", "iterations"), words.Count(b.board.Remaining(), "story", "stories"))
	b.sayLimit("■ "+b.st.Reason+"\n", OutcomeMaxIterations, b.st.Reason)
	// The table's edge out of STORY_SELECT at the limit is the seed's
	// budget_exhausted; the line's data says it is the iteration limit.
	return Event{Trigger: TrigBudgetExhausted}, b.exit(false)
}

// sayLimit says why the run ends at a limit or an interrupt (the "■"
// line); its data carries the run's outcome and reason, so that programs
// need not read the line, nor guess from the trigger, which at
// STORY_SELECT is budget_exhausted for the iteration limit too.
func (b *builder) sayLimit(text string, outcome Outcome, reason string) {
	b.say(report.KindLimit, text, map[string]any{"outcome": string(outcome), "reason": reason})
}

// reviveTransient gives a transiently blocked task its one automatic
// retry once three iterations have passed since it was blocked (seed 000).
func (b *builder) reviveTransient() {
	for id, t := range b.st.Tasks {
		bl := t.Blocker
		if bl == nil || bl.Type != string(tasks.BlockerTransient) || t.AutoRetried || b.st.Machine.Iteration-bl.Iteration < 3 {
			continue
		}
		if b.revive(id, "after 3 iterations") {
			b.sayf(report.KindBlocker, "  ↻ %s: transient blocker, retrying once automatically\n", id)
		}
	}
	if err := b.reloadBoard(); err != nil {
		b.logError("reload after revival: %v", err)
	}
}

// lastTransient returns the first transiently blocked task (by id) that
// has not had its automatic retry, "" when there is none.
func (b *builder) lastTransient() string {
	var ids []string
	for id, t := range b.st.Tasks {
		if bl := t.Blocker; bl != nil && bl.Type == string(tasks.BlockerTransient) && !t.AutoRetried {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// revive clears a transient blocker for its one automatic retry.
func (b *builder) revive(id, why string) bool {
	t := b.st.task(id)
	storyID, _, _ := strings.Cut(id, "/")
	if err := b.src.SetState(storyID, tasks.StatusInProgress, 0, nil, b.opts.now()); err != nil {
		b.logError("could not revive %s: %v", id, err)
		return false
	}
	t.Blocker = nil
	t.RetryCount = 0
	t.AutoRetried = true
	b.event("task %s: transient blocker retried automatically %s", id, why)
	return true
}

// findSelection rebuilds the selection of a task id after a resume.
func (b *builder) findSelection(id string) (tasks.Selection, bool) {
	for _, s := range b.board.Stories {
		if s.ID == id {
			return tasks.Selection{Story: s}, true
		}
		for i := range s.Subtasks {
			sel := tasks.Selection{Story: s, Subtask: &s.Subtasks[i]}
			if sel.TaskID() == id {
				return sel, true
			}
		}
	}
	return tasks.Selection{}, false
}

func (b *builder) ensureSelection() error {
	id := b.st.Machine.TaskID
	if b.sel.Story.ID != "" && b.sel.TaskID() == id {
		return nil
	}
	if err := b.reloadBoard(); err != nil {
		return err
	}
	sel, ok := b.findSelection(id)
	if !ok {
		return fmt.Errorf("task %s is no longer in %s", id, b.ws.Rel(b.src.Path()))
	}
	b.sel = sel
	return nil
}

func (b *builder) implement(ctx context.Context) (Event, error) {
	if err := b.ensureSelection(); err != nil {
		return Event{}, err
	}
	m := b.st.Machine
	n := m.Iteration
	story := b.sel.Story
	taskID := b.sel.TaskID()
	vars := b.vars(n, taskID)
	hints, err := b.consumeContext(taskID)
	if err != nil {
		return Event{}, err
	}
	if hints != "" {
		vars["CONTEXT_HINTS"] = hints
	}
	text, err := b.tpl.Render(vars)
	if err != nil {
		return Event{}, err
	}
	before, err := b.snapshotBefore(context.WithoutCancel(ctx), n)
	if err != nil {
		return Event{Trigger: TrigUnresolvable}, b.fail("git: "+err.Error(), "", "permanent")
	}
	b.snap = before
	b.descent, b.deltaIter = [2]string{}, 0
	treeBefore := worktreeDigest(b.ws.Root, before)
	headBefore := before.Head
	if r := b.resumedFrom; r != nil && r.TaskID == taskID && r.TreeBefore != "" {
		treeBefore, headBefore = r.TreeBefore, r.HeadBefore
		before.Head = r.HeadBefore
	}
	b.resumedFrom = nil
	if b.st.TaskBaseFor != taskID {
		b.st.TaskBase, b.st.TaskBaseFor = headBefore, taskID
	}
	own, err := b.saveOwnFiles(n)
	if err != nil {
		return Event{}, fmt.Errorf("copying ralph's own files before the agent: %w", err)
	}
	// A task store outside the tree (beads) has no file to put back: its
	// statuses are read before the agent and set back after it.
	statuses := b.storeStatuses(taskID)
	started := b.opts.now()
	b.st.Attempt = &Attempt{Iteration: n, TaskID: taskID, StartedAt: started.UTC(), HeadBefore: headBefore, TreeBefore: treeBefore, Own: own}
	// The attempt, and with it the token that tags the agent's processes,
	// is on disk before the agent starts, so that a crash at any instant
	// leaves what finds and stops the agent. The transition into
	// IMPLEMENT, when it is still in memory, is saved with it and
	// journaled before the iteration's heading, as it always was.
	if err := b.saveState(); err != nil {
		return Event{}, err
	}
	attempt := fmt.Sprintf("attempt %d/%d", m.RetryCount+1, b.maxRetries())
	b.say(report.KindIteration, fmt.Sprintf("\n── iteration %d/%d · %s: %s · %s · agent %s ──\n", n, b.st.MaxIterations, taskID, story.Title, attempt, b.opts.Agent.Name),
		map[string]any{"iteration": n, "task": taskID, "agent": b.opts.Agent.Name})
	b.event("iteration %d started: %s (%s) with agent %s", n, taskID, attempt, b.opts.Agent.Name)
	b.agentToken = attemptToken(b.id, b.st.Attempt)
	b.onAgentStart = func(pgid int) {
		// A crash here, with the agent running and its group not yet
		// recorded, must still find the agent on resume (by its token).
		CrashPoint("agent-started")
		b.st.Attempt.PGID = pgid
		if p, ok := proc.Lookup(pgid); ok {
			b.st.Attempt.PGIDStart = p.Start
		}
		b.home.save(b.st)
	}
	var waits []LimitWait
	var res runkit.Result
	var runErr error
	var spec agent.Spec
	var tree func() treeRead
	for {
		// Pick an agent that is not cooling down after a usage limit; when
		// every configured agent is, wait for the first to be free.
		var ok bool
		var until time.Time
		var err error
		spec, ok, until, err = b.availableAgent(b.opts.now())
		if err != nil {
			return Event{}, err
		}
		if !ok && b.opts.MaxLimitWait > 0 && until.Sub(b.opts.now()) > b.opts.MaxLimitWait {
			err := fmt.Errorf("%w: every agent is cooling down after a usage limit (%s)", ErrAllLimited, b.cooldownSummary())
			b.sayf(report.KindLimit, "  ⏸ %v; not waiting longer than %s\n", err, b.opts.MaxLimitWait)
			b.event("%v", err)
			return Event{}, err
		}
		if !ok {
			msg := "all agents are limited (" + b.cooldownSummary() + "); waiting for the earliest reset"
			b.say(report.KindWait, "  ⏸ "+msg+"\n", map[string]any{"wait": "limit", "state": "started",
				"until": until.UTC().Format(time.RFC3339), "agent": b.firstFree(until)})
			b.event("%s", msg)
			waitStart := b.opts.now()
			if err := b.waitUntil(ctx, until, WaitLimit, "waiting for a usage limit to reset"); err != nil {
				return Event{}, err
			}
			waited := b.opts.now().Sub(waitStart)
			b.say(report.KindWait, fmt.Sprintf("  ▶ the usage-limit wait is over after %s: going on\n", waited.Round(time.Second)),
				map[string]any{"wait": "limit", "state": "ended", "waited_ms": waited.Milliseconds()})
			if len(waits) > 0 {
				waits[len(waits)-1].WaitedMillis += b.opts.now().Sub(waitStart).Milliseconds()
			}
			continue
		}
		if spec.Name != b.opts.Agent.Name {
			b.sayf(report.KindLimit, "  ↻ %s is cooling down; using %s for this iteration\n", b.opts.Agent.Name, spec.Name)
		}
		tree = b.treeAfterAgent(context.WithoutCancel(ctx))
		res, runErr = b.agents.RunAgent(ctx, spec, n, text)
		// The agent may have changed the tasks (bd close, bd create):
		// what the source kept from before is old.
		if f, ok := b.src.(tasks.Forgetter); ok {
			f.Forget()
		}
		b.countUsage(res.Outcome)
		if res.Limit == nil {
			break
		}
		// The same task runs again: no status of this run may still
		// read the tree (or hold git's index lock) when the next starts.
		tree()
		wait, err := b.coolDown(spec, res.Limit, res.LimitSource, b.opts.now())
		if err != nil {
			return Event{}, err
		}
		waits = append(waits, wait)
		b.event("iteration %d: %s hit a usage limit; the same task runs again", n, spec.Name)
	}
	// Read beside agent.Run's scan for processes that left the group;
	// nothing below may run while that status still reads.
	afterAgent := tree()
	CrashPoint("agent-exited")
	b.agentToken = ""
	out, promptFile, logFile := res.Outcome, res.PromptFile, res.LogFile
	for _, p := range out.Strays {
		b.sayf(report.KindRun, "  ! stopped %s: the agent started it outside its process group and it was still running\n", p)
		b.logError("iteration %d (%s): stopped %s, which the agent had started outside its process group", n, taskID, p)
	}
	if envErr := res.EnvFailure; envErr != nil {
		// The agent could not run at all: every task would fail the same
		// way, so none is charged (no attempt, retry, blocker or breaker
		// trip). The iteration is recorded and the attempt dropped; the
		// machine stays in IMPLEMENT, so the next build runs it again.
		rec := b.newRecord(n, started, out, promptFile, logFile)
		rec.StoryID, rec.StoryTitle, rec.TaskID, rec.Agent = story.ID, story.Title, taskID, spec.Name
		rec.Status, rec.Reason = StatusAgentError, envErr.Error()
		b.saveIteration(rec)
		b.st.Attempt = nil
		if err := b.saveState(); err != nil {
			return Event{}, err
		}
		return Event{}, envErr
	}
	b.st.Attempt.AgentDone, b.st.Attempt.ExitCode, b.st.Attempt.Millis = true, out.ExitCode, out.Duration.Milliseconds()
	b.st.Attempt.PGID = 0
	b.st.Attempt.Prompt, b.st.Attempt.Log = b.ws.Rel(promptFile), b.ws.Rel(logFile)
	rec := b.newRecord(n, started, out, promptFile, logFile)
	rec.StoryID, rec.StoryTitle, rec.TaskID = story.ID, story.Title, taskID
	rec.Agent, rec.LimitWaits = spec.Name, waits
	rec.MemoryConnected, rec.Neo4jConnected = b.st.MemoryConnected, b.st.Neo4jConnected
	b.rec = rec
	if runErr != nil && !out.Interrupted {
		rec.Status, rec.Reason = StatusAgentError, runErr.Error()
		b.saveIteration(rec)
		return Event{}, runErr
	}
	bg := context.WithoutCancel(ctx)
	after, rg, gerr := b.gitDelta(bg, rec, before, afterAgent.read(bg, b.git))
	if gerr == nil {
		b.snap = after
		b.deltaIter = n
		if rg.Descends {
			b.descent = [2]string{before.Head, after.Head}
		}
	}
	if out.Interrupted {
		rec.Status, rec.Reason = StatusInterrupted, "interrupted by the user"
		b.failure = "interrupted before verification"
		b.reopenClaim()
		b.saveIteration(rec)
		return Event{}, ErrInterrupted
	}
	if gerr == nil {
		if err := b.checkHistory(bg, headBefore, after); err != nil {
			rec.Status, rec.Reason = StatusFailed, err.Error()
			b.saveIteration(rec)
			b.logError("iteration %d (%s): %v", n, taskID, err)
			if serr := b.saveState(); serr != nil {
				return Event{}, serr
			}
			return Event{}, err
		}
	}
	claim, err := b.putBackOwnFiles(own, story.ID)
	if err != nil {
		return Event{}, err
	}
	b.putBackStoreStatuses(statuses, taskID)
	b.st.Attempt.Claim = claim
	if len(after.Dirty) > 0 {
		// What ralph put back is no change of the agent's.
		after = b.withoutRestored(after, before, own)
		b.snap = after
	}
	changed := after.Head != headBefore || worktreeDigest(b.ws.Root, after) != treeBefore
	rec.Progress = changed
	if len(after.Unmerged) > 0 {
		// A merge conflict is not something another attempt fixes.
		rec.Status = StatusFailed
		return Event{Trigger: TrigUnresolvable}, b.fail("merge conflict in "+strings.Join(clipList(after.Unmerged, 5), ", "), "", "permanent")
	}
	if status, why := b.agentStatus(out); status != "" {
		rec.Status = status
		// What the agent printed last says whether a retry may help: a
		// refused connection heals, a syntax error does not.
		tail := tailOfFile(logFile, 4<<10) + "\n" + strings.Join(out.Result.Errors, "\n")
		return Event{Trigger: TrigImplementFailed}, b.fail(why, tail, classify(why+"\n"+tail, out.TimedOut))
	}
	if pct := rec.ContextPercent; pct >= 0 {
		hard := b.opts.ContextHard
		if hard == 0 {
			hard = 80
		}
		if pct >= hard {
			b.logError("iteration %d (%s): the agent ended with %d%% of its context window in use (hard limit %d%%)", n, taskID, pct, hard)
		}
	}
	if hasSignal(rec.Signals, "CONTEXT_EXHAUSTED") {
		rec.Status, rec.Reason = StatusPartial, "context exhausted: partial work is committed and a fresh agent continues"
		return Event{Trigger: TrigContextExhausted}, nil
	}
	if !changed {
		rec.Status = StatusNoChanges
		return Event{Trigger: TrigImplementFailed}, b.fail("the agent made no changes", clip(out.Result.FinalMessage, 2000), "permanent")
	}
	return Event{Trigger: TrigCodeWritten}, nil
}

// fail records why the current attempt failed; the machine decides
// whether that means a retry or a blocker.
func (b *builder) fail(reason, output, typ string) error {
	if strings.TrimSpace(output) != "" {
		output = check.Excerpt(output)
	}
	return b.failWith(reason, output, typ)
}

// failWith is fail with what the next prompt gets already in the one
// feedback format (check.Feedback for a failed check).
func (b *builder) failWith(reason, feedback, typ string) error {
	b.failure, b.failureOutput, b.blockerType = reason, feedback, typ
	if b.rec != nil {
		b.rec.Reason = reason
		if b.rec.Status == "" {
			b.rec.Status = StatusFailed
		}
	}
	b.logError("iteration %d (%s): %s", b.st.Machine.Iteration, b.st.Machine.TaskID, reason)
	b.reopenClaim()
	if b.rec != nil {
		b.closeIteration()
	}
	return nil
}

// agentTicks reports whether the agent ticks the task file's checkboxes
// itself, so that its ticks are its claim.
func agentTicks(src tasks.Source) bool {
	_, ok := src.(tasks.AgentTicked)
	return ok
}

// reopenClaim unchecks a markdown story the agent checked but ralph did not
// accept, criteria included: the PRD must never show a story done that was
// not verified, and marks from a rejected attempt must not count as the next
// attempt's claim.
func (b *builder) reopenClaim() {
	if !agentTicks(b.src) || b.sel.Story.ID == "" {
		return
	}
	id := b.sel.Story.ID
	data, err := inputlimit.ReadFile(b.src.Path())
	if err != nil {
		return
	}
	out, err := tasks.SetStoryDone(data, id, false)
	if err == nil {
		out, err = tasks.UncheckCriteria(out, id)
	}
	if err != nil || string(out) == string(data) {
		return
	}
	if err := store.WriteFileAtomic(b.src.Path(), out, 0o644); err == nil {
		b.event("story %s reopened: %s", id, b.failure)
		b.sayf(report.KindBlocker, "  ↺ %s reopened: %s\n", id, b.failure)
	}
}

func (b *builder) feedbackText(taskID string) string {
	msg := fmt.Sprintf("Your previous attempt at %s was sent back: %s.", taskID, b.failure)
	if b.failureOutput != "" {
		msg += "\n\n" + strings.TrimSuffix(b.failureOutput, "\n")
	}
	return msg + "\nFix the cause; the earlier attempt's changes are still in the working tree."
}

// classify decides whether a failure may heal by itself (network,
// database, external service: transient) or needs a person (permanent).
func classify(text string, timedOut bool) string {
	if timedOut {
		return "transient"
	}
	l := strings.ToLower(text)
	for _, p := range []string{"timed out", "timeout", "connection refused", "connection reset", "econnrefused", "etimedout",
		"network", "could not resolve host", "temporarily unavailable", "service unavailable", "503", "502 bad gateway",
		"database is locked", "could not connect", "external service"} {
		if strings.Contains(l, p) {
			return "transient"
		}
	}
	return "permanent"
}

func (b *builder) commit(ctx context.Context) (Event, error) {
	if err := b.ensureSelection(); err != nil {
		return Event{}, err
	}
	b.ensureRecord()
	bg := context.WithoutCancel(ctx)
	m := b.st.Machine
	story := b.sel.Story
	taskID := b.sel.TaskID()
	now := b.opts.now()
	subtaskID := ""
	if b.sel.Subtask != nil {
		subtaskID = b.sel.Subtask.ID
	}
	// COMMIT may run again after a crash: every step below is idempotent,
	// and a commit that already landed for this iteration is recognised by
	// the token saved before it was made, never by the task and run
	// trailers, which are in the agent's prompt and which an agent can copy
	// into a commit of its own.
	// A token this process made and has not committed with yet is on no
	// commit: only a resumed COMMIT looks for its commit.
	var hash string
	committed := false
	if b.st.CommitToken != b.freshToken {
		hash, committed = runkit.Committed(bg, b.git, b.st.CommitToken)
	}
	if committed {
		// A crash may have come between the commit and the audit note.
		if a, ok := b.src.(Auditor); ok && !m.Partial {
			b.audit(bg, a, story.ID, hash)
		}
		b.rec.Status, b.rec.Progress = StatusDone, true // a commit is progress, whichever run made it
		if m.Partial {
			b.rec.Status = StatusPartial
		}
		b.say(report.KindCommit, fmt.Sprintf("✓ iteration %d: %s was committed before the restart · commit %s\n", m.Iteration, taskID, short(hash)),
			map[string]any{"iteration": m.Iteration, "commit": hash, "status": b.rec.Status, "before_restart": true})
		b.closeIteration()
		return Event{Trigger: TrigCommitted}, nil
	}
	eventID := ""
	// The task file as it was before ralph marks the task done: a commit
	// that fails puts it back, so a blocked task never reads as done.
	taskBytes, _ := inputlimit.ReadFile(b.src.Path())
	if !m.Partial {
		if err := b.src.MarkDone(story.ID, subtaskID, now); err != nil {
			return Event{Trigger: TrigCommitFailed}, b.fail("could not mark the task done: "+err.Error(), "", "permanent")
		}
		id, err := b.mem.Add(bg, memory.Node{ID: fmt.Sprintf("evt-%s-%d", b.id, m.Iteration), Name: taskID + " complete: " + story.Title, MemoryType: memory.TypeEvent,
			Props: map[string]string{"event": memory.EventTaskComplete, "task": taskID, "run": b.id}})
		if err == nil {
			eventID = id
		} else {
			b.log.Warn("memory event not logged", "err", err)
		}
	}
	if !m.Partial {
		b.appendProgress(fmt.Sprintf("%s: %s %s (run %s, iteration %d)", taskID, story.Title, b.acceptedHow(), b.id, m.Iteration))
	}
	// This commit takes progress.md along, with the notes of blockers
	// before it: none is left for EXIT to commit.
	b.notesWritten = false
	hash = ""
	// after is the tree once the work is committed, read by the commit
	// itself; made is the commit ralph made, nil when there was nothing to
	// commit.
	var pre, after gitx.Snapshot
	var made *gitx.Commit
	if !b.st.NoCommit {
		snap, known, err := b.treeBeforeCommit(bg)
		if err != nil {
			return Event{Trigger: TrigCommitFailed}, b.fail("git: "+err.Error(), "", "permanent")
		}
		pre = snap
		if err := b.checkHistory(bg, b.attemptHead(), snap); err != nil {
			// Never commit on another branch, or over lost commits.
			return Event{}, err
		}
		after = snap // nothing to commit: the tree is as it was
		if known || len(snap.Dirty) > 0 {
			var saved bool
			var saveErr error
			var staged []string
			msg := b.commitMessage(taskID, story, m.Partial, eventID)
			msg.Token = b.freshToken
			b.freshToken = "" // a COMMIT entered again looks for this commit
			after, staged, err = runkit.CommitListed(bg, b.git, msg, func(token string) error {
				if token == b.savedToken {
					// On disk since the transition into TEST. The
					// transitions since wait for the next save: a kill
					// before it resumes in TEST, and the COMMIT after the
					// checks finds this commit by its token.
					saved = true
					return nil
				}
				b.st.CommitToken = token
				saveErr = b.saveState()
				saved = saveErr == nil
				return saveErr
			}, b.commitTrace(snap))
			// What the checks and ralph changed since the agent is what
			// the staging took in.
			pre.Dirty = slices.Compact(slices.Sorted(slices.Values(append(pre.Dirty, staged...))))
			switch {
			case saveErr != nil:
				// Nothing was committed: a commit whose token is not on
				// disk would be made again after a crash.
				return Event{}, saveErr
			case err != nil && !saved:
				return Event{Trigger: TrigCommitFailed}, b.commitFailed(taskBytes, "git add failed (a lock in .git may have refused it)", err)
			case err != nil && !errors.Is(err, gitx.ErrNothingToCommit):
				return Event{Trigger: TrigCommitFailed}, b.commitFailed(taskBytes, "git commit failed (a pre-commit hook or a lock in .git refused it)", err)
			case err != nil && known:
				// Nothing to commit after all: the tree is not the one
				// read after the agent (a check put files back).
				if after, err = b.git.Snapshot(bg); err != nil {
					return Event{Trigger: TrigCommitFailed}, b.fail("git: "+err.Error(), "", "permanent")
				}
				pre = after
			case err != nil:
				after = snap
			default:
				made = &gitx.Commit{Hash: after.Head, Subject: strings.TrimSpace(msg.Subject)}
			}
		}
		hash = after.Head
		if eventID != "" && hash != "" {
			b.mem.Link(bg, eventID, "commit", hash)
		}
	}
	CrashPoint("after-commit")
	if !m.Partial {
		// The task is done: its old blockers leave the next prompts'
		// known issues (they stay in memory, marked resolved).
		if err := b.mem.Resolve(bg, taskID, now); err != nil {
			b.log.Warn("memory blockers not resolved", "task", taskID, "err", err)
		}
	}
	if a, ok := b.src.(Auditor); ok && !m.Partial {
		b.audit(bg, a, story.ID, hash)
		// The note may have changed files of the tree (bd's own): the
		// tree the commit left is no longer the tree.
		if now, err := b.git.Snapshot(bg); err == nil {
			after = now
		}
	}
	if after, err := b.commitDelta(bg, pre, after, made); err == nil {
		b.snap = after
		b.keepFresh(after)
	}
	if hash != "" && hash != b.attemptHead() {
		b.rec.Progress = true
	}
	if m.Partial {
		b.rec.Status = StatusPartial
		b.say(report.KindCommit, fmt.Sprintf("◐ iteration %d: %s partial work committed (%s); a fresh agent continues\n", m.Iteration, taskID, short(hash)),
			map[string]any{"iteration": m.Iteration, "commit": hash, "status": StatusPartial})
	} else {
		b.rec.Status = StatusDone
		j := b.judgement()
		b.rec.Verdict, b.rec.Evidence = string(j.Outcome), j.Evidence
		b.st.task(taskID).Done = &DoneRecord{Outcome: j.Outcome, Evidence: j.Evidence, Commit: hash, Run: b.id}
		b.moveBaseline(hash)
		how := "done and verified"
		if j.Outcome == verify.AgentWord {
			how = "done, agent's word"
		}
		b.say(report.KindCommit, fmt.Sprintf("✓ iteration %d: %s %s · commit %s\n", m.Iteration, taskID, how, short(hash)),
			map[string]any{"iteration": m.Iteration, "commit": hash, "status": StatusDone, "verdict": string(j.Outcome), "evidence": j.Evidence, "failing": j.Failing})
	}
	b.st.TaskBase, b.st.TaskBaseFor = "", ""
	b.closeIteration()
	return Event{Trigger: TrigCommitted}, nil
}

// treeBeforeCommit is the tree COMMIT starts from. When this process read
// the tree after the agent (gitDelta) and HEAD and the branch are still
// what it read then (from git's files: no process), it is that tree, and
// known is true: what the checks and ralph (the task file, progress.md)
// changed since is what the commit's staging names, so the commit is
// tried even with nothing dirty then. Otherwise (a resume, a check that
// committed or switched branches, a layout only git reads) it is git's
// status.
func (b *builder) treeBeforeCommit(ctx context.Context) (snap gitx.Snapshot, known bool, err error) {
	if b.deltaIter == b.st.Machine.Iteration && b.deltaIter != 0 {
		if head, branch, ok := b.git.HeadFiles(); ok && head == b.snap.Head && branch == b.snap.Branch && head != "" {
			snap = b.snap
			snap.Dirty = slices.Clone(snap.Dirty)
			return snap, true, nil
		}
	}
	snap, err = b.git.Snapshot(ctx)
	return snap, false, err
}

// commitTrace is where COMMIT's git traces what it runs, so that a
// commit that ran no hook needs no git status after it
// (runkit.CommitListed): a scratch file of the run's folder, which no
// status lists, emptied before each commit and removed when the run
// returns. A tree holding a repository of its own (a submodule, an
// embedded repository) gets none: what changed inside it stays dirty
// whatever ralph stages, so only a status tells the tree after.
func (b *builder) commitTrace(pre gitx.Snapshot) string {
	if len(pre.Nested) > 0 {
		return ""
	}
	return b.commitTracePath()
}

// commitTracePath is the run's scratch file for git's trace of a commit,
// absolute as git wants it; "" when the folder has no absolute path.
func (b *builder) commitTracePath() string {
	p, err := filepath.Abs(filepath.Join(b.dir, "commit.trace"))
	if err != nil {
		return ""
	}
	return p
}

// commitDelta fills the git part of the iteration's record once COMMIT is
// done and returns the tree as it is now. pre is the tree COMMIT found,
// after the tree its commit left (made, nil when there was nothing to
// commit). When this process read the agent's commits after the agent
// (gitDelta) and HEAD has not moved since but for ralph's commit, the
// record is that plus ralph's commit and the files it took in (dirty
// before it, clean after): no git process. Otherwise (a resume, a check
// that committed, --no-commit) git is asked.
func (b *builder) commitDelta(ctx context.Context, pre, after gitx.Snapshot, made *gitx.Commit) (gitx.Snapshot, error) {
	rec := b.rec
	if b.st.NoCommit {
		var err error
		if after, err = b.git.Snapshot(ctx); err != nil {
			return after, err
		}
	}
	if b.st.NoCommit || b.deltaIter != rec.Iteration || pre.Head != rec.HeadAfter || pre.Head == "" {
		_, err := b.rangeInto(ctx, rec, b.attemptHead(), after)
		return after, err
	}
	rec.HeadAfter, rec.UncommittedFiles = after.Head, after.Dirty
	if made == nil {
		return after, nil
	}
	rec.Commits = append(rec.Commits, *made)
	left := map[string]bool{}
	for _, f := range after.Dirty {
		left[f] = true
	}
	for _, f := range pre.Dirty {
		if !left[f] {
			rec.ChangedFiles = append(rec.ChangedFiles, f)
		}
	}
	slices.Sort(rec.ChangedFiles)
	rec.ChangedFiles = slices.Compact(rec.ChangedFiles)
	return after, nil
}

// freshSnap is a snapshot COMMIT took, kept for the next IMPLEMENT.
type freshSnap struct {
	snap      gitx.Snapshot
	iteration int
	// taskFile is the task file's content when the snapshot was taken:
	// STORY_SELECT, `ralph skip` and the like write it between COMMIT
	// and IMPLEMENT, and then the snapshot is no longer the tree.
	taskFile []byte
}

// keepFresh keeps the tree COMMIT left for the next IMPLEMENT, which
// otherwise asks git for the same status again. Sources that write
// outside the task file on the way (bd's claim and audit note) keep none.
func (b *builder) keepFresh(after gitx.Snapshot) {
	b.fresh = nil
	if _, claims := b.src.(Claimer); claims || b.st.NoCommit {
		return
	}
	if _, audits := b.src.(Auditor); audits {
		return
	}
	data, err := inputlimit.ReadFile(b.src.Path())
	if err != nil {
		return
	}
	b.fresh = &freshSnap{snap: after, iteration: b.st.Machine.Iteration, taskFile: data}
}

// snapshotBefore is the tree before iteration n's agent: the one the
// previous iteration's COMMIT left, when nothing ralph knows of can have
// changed it since (the next iteration, the same task file, no pause in
// between, which a person may have used to edit files), or git's status.
func (b *builder) snapshotBefore(ctx context.Context, n int) (gitx.Snapshot, error) {
	f := b.fresh
	b.fresh = nil
	if f != nil && f.iteration == n-1 {
		if data, err := inputlimit.ReadFile(b.src.Path()); err == nil && bytes.Equal(data, f.taskFile) {
			return f.snap, nil
		}
	}
	return b.git.Snapshot(ctx)
}

// commitFailed records a commit git refused (a pre-commit hook, an
// index.lock an agent left behind), or the staging before it, as the
// task's failure: the task file loses the done mark ralph had just set,
// and the reason says what failed (what) and what git and the hook said,
// so the person who unblocks the task knows what to fix.
func (b *builder) commitFailed(taskBytes []byte, what string, err error) error {
	if taskBytes != nil {
		if werr := store.WriteFileAtomic(b.src.Path(), taskBytes, 0o644); werr != nil {
			b.logError("could not put back %s after the failed commit: %v", b.ws.Rel(b.src.Path()), werr)
		}
	}
	said := err.Error()
	var ee *gitx.ExitError
	if errors.As(err, &ee) && ee.Stderr != "" {
		said = ee.Stderr
	}
	b.git.Unstage(context.Background()) // unstage; the work stays in the tree
	return b.fail(what+": "+clip(strings.Join(strings.Fields(said), " "), 200), said, "permanent")
}

// commitMessage is the message of a task's commit: the subject, the
// acceptance criteria report, and the trailers that tie the commit to
// ralph's records. runkit.Commit adds the Ralph-Commit token last.
func (b *builder) commitMessage(taskID string, story tasks.Story, partial bool, eventID string) runkit.Message {
	m := runkit.Message{Subject: taskID + ": " + story.Title}
	if b.sel.Subtask != nil {
		m.Subject = taskID + ": " + b.sel.Subtask.Title
	}
	if partial {
		m.Subject = taskID + ": partial work (context exhausted)"
	}
	if b.rec != nil && b.rec.ACReport != "" {
		m.Body = "Acceptance criteria:\n" + b.rec.ACReport
	}
	if !partial {
		j := b.judgement()
		var how strings.Builder
		if j.Outcome == verify.AgentWord {
			how.WriteString("Done on the agent's word: " + b.checksState() + ", but nothing ralph ran shows it done.")
		} else {
			how.WriteString("Verified by ralph:")
			for _, e := range j.Evidence {
				how.WriteString("\n- " + e)
			}
		}
		if len(j.Failing) > 0 {
			how.WriteString("\nStill failing, as before this work: " + strings.Join(j.Failing, ", "))
		}
		m.Body = strings.TrimSpace(strings.TrimSpace(m.Body) + "\n\n" + how.String())
	}
	m.Trailers = []runkit.Trailer{{Key: "Ralph-Task", Value: taskID}, {Key: "Ralph-Story", Value: story.ID},
		{Key: "Ralph-Run", Value: b.id}, {Key: "Ralph-Iteration", Value: strconv.Itoa(b.st.Machine.Iteration)}}
	if eventID != "" {
		m.Trailers = append(m.Trailers, runkit.Trailer{Key: "Ralph-Memory-Event", Value: eventID})
	}
	return m
}

func (b *builder) attemptHead() string {
	if b.st.Attempt != nil {
		return b.st.Attempt.HeadBefore
	}
	return b.snap.Head
}

// markBlocked runs on the transition into BLOCKER: it records the blocker
// in ralph's state; BLOCKER's entry action then writes the task file.
func (b *builder) markBlocked(from, to Machine) {
	id := from.TaskID
	t := b.st.task(id)
	t.RetryCount = to.RetryCount
	typ := b.blockerType
	review := typ == "review"
	if typ == "" || review {
		typ = "permanent"
	}
	if t.AutoRetried {
		typ = "permanent" // the one automatic retry of a transient blocker failed
	}
	fixes := []string{}
	if t.Blocker != nil {
		fixes = t.Blocker.AttemptedFixes
	}
	fixes = append(fixes, fmt.Sprintf("iteration %d: %s", from.Iteration, b.failure))
	t.Blocker = &BlockerRecord{Reason: b.failure, Type: typ, RequiresHuman: typ == "permanent", AttemptedFixes: fixes, Iteration: from.Iteration, Review: review}
	b.st.Metrics.Blocked++
	delete(b.st.Feedback, id)
}

func (b *builder) logBlocker(ctx context.Context) error {
	id := b.st.Machine.TaskID
	t := b.st.task(id)
	bl := t.Blocker
	if bl == nil {
		bl = &BlockerRecord{Reason: b.failure, Type: "permanent", RequiresHuman: true}
		t.Blocker = bl
	}
	storyID, _, _ := strings.Cut(id, "/")
	now := b.opts.now()
	err := b.src.SetState(storyID, tasks.StatusBlocked, t.RetryCount, &tasks.Blocker{
		Reason: bl.Reason, Type: tasks.BlockerType(bl.Type), RequiresHuman: bl.RequiresHuman, AttemptedFixes: bl.AttemptedFixes,
	}, now)
	if err != nil {
		b.logError("could not mark %s blocked in %s: %v", id, b.ws.Rel(b.src.Path()), err)
	}
	if board, lerr := b.src.Load(); lerr == nil {
		for _, s := range board.Stories {
			if s.ID == storyID && s.Status == tasks.StatusBlocked {
				bl.InFile = true
			}
		}
	}
	// Set the failed attempt's work aside so that the next task starts
	// from a clean tree; a ref of the run's own keeps it for the person
	// who unblocks.
	bg := context.WithoutCancel(ctx)
	if !b.st.NoCommit {
		b.setAsideBlocked(bg, id, bl)
	}
	b.mem.Add(bg, memory.Node{ID: fmt.Sprintf("blk-%s-%d", b.id, b.st.Machine.Iteration), Name: id + " blocked: " + bl.Reason, MemoryType: memory.TypeBlocker, Text: strings.Join(bl.AttemptedFixes, "; "),
		Props: map[string]string{"event": memory.EventTaskBlocker, "task": id, "blocker_type": bl.Type, "run": b.id, "fix_sources_tried": "checks, acceptance criteria"}})
	b.logError("task %s blocked (%s): %s", id, bl.Type, bl.Reason)
	b.appendProgress(fmt.Sprintf("%s BLOCKED (%s, requires_human=%v): %s", id, bl.Type, bl.RequiresHuman, bl.Reason))
	b.say(report.KindBlocker, fmt.Sprintf("⛔ %s blocked (%s): %s\n", id, bl.Type, bl.Reason),
		map[string]any{"state": "blocked", "type": bl.Type, "reason": bl.Reason, "requires_human": bl.RequiresHuman})
	switch {
	case bl.Review:
		b.sayf(report.KindBlocker, "   a person must decide: read the test change (git diff %s^ %s), then `ralph approve %s` to accept it, or `ralph unblock %s` to have it done again\n", bl.Ref, bl.Ref, id, id)
	case bl.Type == "permanent":
		hint := b.opts.UnblockHint
		if hint == "" {
			hint = "ralph unblock " + id
		}
		b.sayf(report.KindBlocker, "   a person must decide: fix it, then `%s`\n", hint)
	}
	b.st.TaskBase, b.st.TaskBaseFor = "", ""
	return b.saveState()
}

// setAside keeps the attempt's work in a commit at ref and puts the files
// it touched back as they are at HEAD. Not git stash: refs/stash is shared
// by every worktree of the repository, so two runs in two worktrees would
// take each other's work (and the user's). ralph's own files (its folder,
// the task file, the plan) stay: they hold the blocker just written and
// the records of the run. It returns "" when the attempt left nothing
// outside those files.
func (b *builder) setAside(ctx context.Context, ref, msg string) (string, error) {
	return b.git.SetAside(ctx, ref, msg, workspace.DirName, b.ws.Rel(b.src.Path()), b.ws.Rel(b.opts.PlanPath))
}

// AttemptRef is the ref that keeps run's blocked attempt at task: one per
// run and task, so that no two runs, in this worktree or another, share it.
func AttemptRef(run, task string) string {
	return "refs/ralph/attempts/" + refPart(run) + "/" + refPart(task)
}

// refPart makes s safe as part of a ref name: task ids come from task
// files, and git refuses spaces, "..", a leading dot and such.
func refPart(s string) string {
	var sb strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '/':
			sb.WriteRune(c)
		default:
			sb.WriteByte('_')
		}
	}
	parts := strings.Split(sb.String(), "/")
	for i, p := range parts {
		if p == "" {
			parts[i] = "_"
		}
	}
	return strings.Join(parts, "/")
}

func (b *builder) headNow() string {
	h, _ := b.git.Head(context.Background())
	return h
}

// resumeInterrupted records the iteration a crash or interrupt cut short.
func (b *builder) resumeInterrupted() {
	a := b.st.Attempt
	if a != nil {
		// A crash of ralph does not stop the agent's processes; an agent
		// still editing the tree would race the resumed run, and what it
		// writes would land in the next story's commit.
		b.stopLeftoverAgent(a)
	}
	if a == nil || b.st.Machine.State != StateImplement {
		return
	}
	b.restoreOwnFilesAfterCrash(a)
	if a.Iteration == b.st.Machine.Iteration-1 && a.TaskID == b.st.Machine.TaskID {
		// A second crash came after the cut-short iteration was recorded
		// but before the rerun's own attempt was: the rerun still
		// continues it, so that work the first agent left (it may have
		// outlived ralph) counts as this attempt's, not as the tree the
		// rerun started from.
		b.resumedFrom = a
		return
	}
	if a.Iteration != b.st.Machine.Iteration {
		return
	}
	b.resumedFrom = a
	rec := &IterationRecord{SchemaVersion: 1, RunID: b.id, Iteration: a.Iteration, Kind: "build", TaskID: a.TaskID,
		Agent: b.opts.Agent.Name, StartedAt: a.StartedAt, HeadBefore: a.HeadBefore, Status: StatusInterrupted,
		Reason: "ralph stopped during this iteration; it is run again", ExitCode: -1, PromptFile: a.Prompt, LogFile: a.Log}
	rec.StoryID, _, _ = strings.Cut(a.TaskID, "/")
	b.saveIteration(rec)
	// Re-entering IMPLEMENT runs the agent again as a new iteration; the
	// cut-short one keeps its number in the records.
	b.st.Machine.Iteration++
	b.st.Metrics.Iterations = b.st.Machine.Iteration
	b.saveState()
	CrashPoint("interrupted-recorded")
}

func (b *builder) breakerCooldown() time.Duration {
	if d := b.opts.Breaker.Cooldown; d > 0 {
		return d
	}
	return 5 * time.Minute
}

// breakerGate holds the loop while the circuit breaker is open, then lets
// one iteration through half-open. It never needs a person to reset it.
func (b *builder) breakerGate(ctx context.Context) error {
	br := &b.st.Breaker
	if br.State != BreakerOpen {
		return nil
	}
	// The transition into IMPLEMENT reaches the disk and the journal
	// before a wait that may last minutes.
	if err := b.flush(); err != nil {
		return err
	}
	until := br.OpenedAt.Add(b.breakerCooldown())
	// The breaker opened earlier ({"breaker":"open"}); this is the wait
	// it imposes, which may start in a later run.
	b.say(report.KindWait, fmt.Sprintf("  ⚡ circuit breaker open (%s)\n", br.Reason),
		map[string]any{"wait": "breaker", "state": "started", "until": until.UTC().Format(time.RFC3339), "reason": br.Reason})
	if err := b.waitUntil(ctx, until, WaitBreaker, "circuit breaker cooling down"); err != nil {
		return err
	}
	br.State = BreakerHalfOpen
	b.event("circuit breaker HALF_OPEN: one iteration may try")
	b.say(report.KindWait, "  ⚡ circuit breaker half-open: one iteration may try\n", map[string]any{"breaker": "half_open"})
	return b.saveState()
}

// closeRunRecord completes the record of a finished run whose process died
// between its last transition and writing run.json.
func closeRunRecord(home *Home, st *LoopState) {
	p := filepath.Join(home.RunsDir(), st.RunID, "run.json")
	var rec RunRecord
	if _, err := store.ReadJSON(p, 1, &rec); err != nil || rec.Outcome != "" {
		return
	}
	rec.Outcome, rec.Reason, rec.EndedAt = st.Outcome, st.Reason, st.UpdatedAt
	rec.Iterations = st.Machine.Iteration
	store.WriteJSONRecord(p, rec)
}

// ensureRecord rebuilds the iteration record after a resume into TEST,
// VALIDATE or COMMIT.
func (b *builder) ensureRecord() {
	if b.rec != nil && b.rec.Iteration == b.st.Machine.Iteration {
		return
	}
	a := b.st.Attempt
	rec := &IterationRecord{SchemaVersion: 1, RunID: b.id, Iteration: b.st.Machine.Iteration, Kind: "build",
		TaskID: b.st.Machine.TaskID, Agent: b.opts.Agent.Name, StartedAt: b.opts.now().UTC()}
	if a != nil {
		rec.StartedAt, rec.HeadBefore, rec.ExitCode, rec.DurationMillis, rec.PromptFile, rec.LogFile = a.StartedAt, a.HeadBefore, a.ExitCode, a.Millis, a.Prompt, a.Log
		// The rebuilt record keeps the progress the attempt made before
		// the kill; otherwise every resume would count as an iteration
		// without progress and kills alone could open the breaker.
		if snap, err := b.git.Snapshot(context.Background()); err == nil {
			rec.Progress = snap.Head != a.HeadBefore || (a.TreeBefore != "" && worktreeDigest(b.ws.Root, snap) != a.TreeBefore)
		}
	}
	rec.StoryID, rec.StoryTitle = b.sel.Story.ID, b.sel.Story.Title
	b.rec = rec
}

// closeIteration writes the iteration's record once its outcome is known.
func (b *builder) closeIteration() {
	if b.rec == nil {
		return
	}
	if b.rec.Status == "" {
		b.rec.Status = StatusFailed
	}
	b.rec.UncommittedFiles = b.snap.Dirty
	if b.rec.UncommittedFiles == nil {
		b.rec.UncommittedFiles = []string{}
	}
	// The completion signal is a claim; the task file is the truth.
	if hasSignal(b.rec.Signals, "COMPLETE") {
		if err := b.reloadBoard(); err == nil && b.board.Remaining() == 0 {
			b.rec.SignalAccepted = true
		} else {
			msg := fmt.Sprintf("signal rejected: the agent said COMPLETE but %s not done", words.Count(b.board.Remaining(), "story is", "stories are"))
			b.logError("iteration %d (%s): %s", b.rec.Iteration, b.rec.TaskID, msg)
			b.event("iteration %d: %s", b.rec.Iteration, msg)
			b.sayf(report.KindWarning, "  ! %s\n", msg)
		}
	}
	if b.st.Breaker.observe(b.opts.Breaker, b.rec, b.opts.now()) {
		msg := fmt.Sprintf("circuit breaker OPEN: %s; it lets one iteration try again after %s", b.st.Breaker.Reason, b.breakerCooldown())
		b.logError("%s", msg)
		b.event("%s", msg)
		b.say(report.KindWait, "  ⚡ "+msg+"\n", map[string]any{"breaker": "open", "reason": b.st.Breaker.Reason,
			"cooldown_ms": b.breakerCooldown().Milliseconds()})
	}
	b.saveIteration(b.rec)
	if b.rec.Status != StatusDone && b.rec.Status != StatusPartial {
		b.printIteration(b.rec, b.rec.Reason)
	} else {
		// The commit line told the person; programs still get the one
		// closing event every iteration has, with no text of its own.
		id := b.rec.TaskID
		if id == "" {
			id = b.rec.StoryID
		}
		b.say(report.KindIteration, "", iterationEnd(b.rec, id, b.rec.Reason))
	}
	b.rec = nil
}

func (b *builder) maxRetries() int {
	if b.st.Machine.MaxRetries > 0 {
		return b.st.Machine.MaxRetries
	}
	return DefaultMaxRetries
}

func (b *builder) appendProgress(line string) {
	// After a crash the same step may run twice; the line is written once.
	if data, err := os.ReadFile(b.ws.ProgressPath()); err == nil && strings.Contains(string(data), "- "+line+"\n") {
		return
	}
	entry := fmt.Sprintf("\n## %s (ralph)\n- %s\n---\n", b.opts.now().Format("2006-01-02 15:04:05"), line)
	if err := store.AppendFile(b.ws.ProgressPath(), []byte(entry)); err != nil {
		b.logError("could not append to progress.md: %v", err)
		return
	}
	b.notesWritten = true
}

// worktreeDigest fingerprints the work: HEAD plus the content of every
// dirty file. Comparing names alone would miss a retry that rewrites the
// files an earlier attempt already changed.
func worktreeDigest(root string, snap gitx.Snapshot) string {
	h := sha256.New()
	io.WriteString(h, snap.Head+"\n")
	for _, f := range snap.Dirty {
		io.WriteString(h, f+"\x00")
		p := filepath.Join(root, f)
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			io.WriteString(h, "missing")
		case !fi.Mode().IsRegular() || fi.Size() > 16<<20:
			fmt.Fprintf(h, "%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		default:
			if fh, err := os.Open(p); err == nil {
				io.Copy(h, fh)
				fh.Close()
			}
		}
		io.WriteString(h, "\x00")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// tailOfFile returns the last n bytes of a file, "" when unreadable.
func tailOfFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

// checkContextSize refuses queued hints beyond inputlimit.MaxContextBytes,
// without reading them: they go whole into the prompt.
func checkContextSize(ws *workspace.Workspace) error {
	info, err := os.Stat(ws.Path("context.md"))
	if err != nil {
		return nil
	}
	return inputlimit.CheckContextSize(ws.Rel(ws.Path("context.md")), info.Size())
}

// consumeContext returns the hints queued by `ralph add-context` and
// removes them: each hint reaches exactly one prompt. Hints beyond
// inputlimit.MaxContextBytes (a file written there by hand while the run
// went on) are an error that leaves them where they are.
func (b *builder) consumeContext(taskID string) (string, error) {
	p := b.ws.Path("context.md")
	if err := checkContextSize(b.ws); err != nil {
		return "", err
	}
	// A named pipe put there would hang the run: it is refused, and
	// left alone.
	data, err := inputlimit.ReadFile(p)
	if inputlimit.IsRefusal(err) {
		b.sayf(report.KindRun, "ralph: %s; the hints in it are not used\n", strings.Replace(err.Error(), p, b.ws.Rel(p), 1))
		return "", nil
	}
	if err != nil || strings.TrimSpace(string(data)) == "" {
		return "", nil
	}
	if err := os.Remove(p); err != nil {
		return "", nil
	}
	b.event("context hints used in iteration %d (%s)", b.st.Machine.Iteration, taskID)
	// A note, not a transition: using hints is no step of the machine.
	b.emit(report.Event{Kind: report.KindNote, Task: taskID, Attempt: b.st.Machine.RetryCount + 1,
		Data: map[string]any{"context_used": clip(strings.TrimSpace(string(data)), 300)}})
	return strings.TrimSpace(string(data)), nil
}

func (b *builder) vars(n int, taskID string) map[string]string {
	ws, o := b.ws, b.opts
	story := b.sel.Story
	subtask := ""
	if b.sel.Subtask != nil {
		subtask = fmt.Sprintf("Subtask: %s: %s (only this subtask; the story's other subtasks come later)", b.sel.Subtask.ID, b.sel.Subtask.Title)
	}
	feedback := b.st.Feedback[taskID]
	if feedback == "" {
		feedback = "Nothing: this is the first attempt at this task."
	}
	status := fmt.Sprintf("Do not edit task status in %s (status, passes, checkboxes of other tasks, retry counts, blocker fields): ralph owns them, marks %s done after verifying it, and restores any change.", ws.Rel(b.src.Path()), taskID)
	if agentTicks(b.src) {
		status = fmt.Sprintf("Update the PRD: change `- [ ]` to `- [x]` for each acceptance criterion of %s that now holds. Only when all of them hold, change the story heading from `### [ ] %s:` to `### [x] %s:`. Never check a criterion you did not verify; ralph runs the checks itself and reopens the story if they fail.", story.ID, story.ID, story.ID)
	}
	notes := ""
	if len(b.projectNotes) > 0 {
		notes = "- Project notes for agents: " + strings.Join(b.projectNotes, ", ") + "\n"
	}
	soft, hard := o.ContextSoft, o.ContextHard
	if soft == 0 {
		soft = 70
	}
	if hard == 0 {
		hard = 80
	}
	return map[string]string{
		"REPO_ROOT":         ws.Root,
		"PRD_PATH":          ws.Rel(b.src.Path()),
		"PLAN_PATH":         ws.Rel(o.PlanPath),
		"PROGRESS_PATH":     ws.Rel(ws.ProgressPath()),
		"GUARDRAILS_PATH":   ws.Rel(ws.GuardrailsPath()),
		"ERRORS_LOG_PATH":   ws.Rel(ws.ErrorsLogPath()),
		"ACTIVITY_LOG_PATH": ws.Rel(ws.ActivityLogPath()),
		"TASK_ID":           taskID,
		"STORY_ID":          story.ID,
		"STORY_TITLE":       story.Title,
		"STORY_BLOCK":       story.Block,
		"SUBTASK":           subtask,
		"RUN_ID":            b.id,
		"ITERATION":         strconv.Itoa(n),
		"MAX_ITERATIONS":    strconv.Itoa(b.st.MaxIterations),
		"NO_COMMIT":         strconv.FormatBool(b.st.NoCommit),
		"QUALITY_GATES":     check.Gates(o.Checks),
		"VERIFY_FEEDBACK":   feedback,
		"STATUS_RULES":      status,
		"CONTEXT_HINTS":     "None.",
		"MEMORY":            orDefault(b.memText, "Nothing recorded yet."),
		"PROJECT_NOTES":     notes,
		"CONTEXT_SOFT":      strconv.Itoa(soft),
		"CONTEXT_HARD":      strconv.Itoa(hard),
	}
}

func describeFailure(res check.Result) string {
	switch {
	case res.Missing:
		return fmt.Sprintf("check %q could not run: its program is not installed", res.Check.Name)
	case res.TimedOut:
		return fmt.Sprintf("check %q timed out after %s", res.Check.Name, res.Duration.Round(time.Second))
	default:
		return fmt.Sprintf("check %q exited with code %d", res.Check.Name, res.ExitCode)
	}
}

func (r *run) printIteration(rec *IterationRecord, why string) {
	mark := map[string]string{StatusDone: "✓", StatusPlanned: "✓", StatusOpen: "·", StatusInterrupted: "■", StatusPartial: "◐"}[rec.Status]
	if mark == "" {
		mark = "✗"
	}
	id := rec.TaskID
	if id == "" {
		id = rec.StoryID
	}
	what := rec.Status
	if id != "" { // planning iterations have no task
		what = id + " " + what
	}
	line := fmt.Sprintf("%s iteration %d: %s · %s · %s", mark, rec.Iteration, what,
		(time.Duration(rec.DurationMillis) * time.Millisecond).Round(10*time.Millisecond), words.Count(len(rec.Commits), "commit", "commits"))
	if why != "" {
		line += " · " + why
	}
	r.say(report.KindIteration, line+"\n", iterationEnd(rec, id, why))
}

// iterationEnd is the data of the event that closes an iteration, whatever
// its status: one shape for programs (notifications, receipts) to read,
// where the text differs with the outcome.
func iterationEnd(rec *IterationRecord, task, why string) map[string]any {
	data := map[string]any{"iteration_end": true, "iteration": rec.Iteration, "task": task, "status": rec.Status,
		"duration_ms": rec.DurationMillis, "tokens": rec.Tokens, "cost_usd_estimate": rec.CostUSD, "commits": rec.Commits, "reason": why}
	if rec.Verdict != "" {
		// How ralph accepted the task: verified on its evidence, or on
		// the agent's word; programs need not read it from the text.
		data["verdict"], data["evidence"] = rec.Verdict, rec.Evidence
	}
	var failing, atStart []string
	for _, c := range rec.Checks {
		if !c.Passed {
			failing = append(failing, c.Name)
			if c.FailedAtStart {
				atStart = append(atStart, c.Name)
			}
		}
	}
	if len(failing) > 0 {
		data["failing_checks"], data["failed_at_start_too"] = failing, atStart
	}
	return data
}

func hasSignal(signals []string, name string) bool {
	for _, s := range signals {
		if s == name {
			return true
		}
	}
	return false
}

// The string helpers every package shares live in internal/text; these
// names keep the loop's many call sites short.
var clip, clipList = text.Clip, text.ClipList

// short is a commit as git shows it, "(none)" before the first.
func short(hash string) string { return text.OrNone(text.ShortHash(hash), "(none)") }

func orNone(s string) string { return text.OrNone(s, "none") }

func orDefault(s, d string) string { return text.OrNone(s, d) }

func indentLines(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix)
}
