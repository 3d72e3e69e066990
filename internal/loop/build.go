package loop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
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

// builder is one build run: the loop machine's runner. What it keeps is
// the run's: the saved state (st), the board, the brief; what one step of
// an iteration learns reaches the next as a value (iteration), handed on
// by Build's loop. What it knows of the work tree is the trees'.
type builder struct {
	*run
	trees // embedded for the transition, which sets its commit tokens
	src   tasks.Source
	board *tasks.Board
	st    *LoopState
	mem   memory.Store
	brief brief
	// notesWritten says this run appended to progress.md: EXIT commits
	// what no task's commit took along (a blocker noted last).
	notesWritten bool
}

// brief is what every prompt of the run is made from.
type brief struct {
	tpl     prompt.Template
	memText string
	// projectNotes are agent instruction files found in the repository.
	projectNotes []string
}

// iteration is what one iteration's steps hand on, each to the next,
// through Build's loop: the task STORY_SELECT chose; the record IMPLEMENT
// opens with what the agent did, which TEST, VALIDATE and COMMIT fill in
// and the step that ends the iteration writes; and resumedFrom, the
// interrupted attempt a resumed IMPLEMENT continues, whose start is the
// one "did the agent change anything" compares with. A run resumed after
// IMPLEMENT rebuilds it from the saved state (continued).
type iteration struct {
	sel         tasks.Selection
	rec         *IterationRecord
	resumedFrom *Attempt
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
	var clearedLock string
	if opts.OnlyStory != "" {
		// A parallel worker's worktree is ralph's: with its leftovers
		// stopped, an index.lock there is a killed process's.
		clearedLock = worktree.ClearLeftLock(ws.Root)
	}
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
	b := &builder{run: r, trees: newTrees(r.git, r.dir), src: src, board: board, mem: opts.Memory, brief: brief{tpl: tpl}}
	if b.mem == nil {
		b.mem = &memory.FileStore{Path: ws.Path("memory.jsonl"), Now: opts.Now}
	}
	reason := ""
	defer func() {
		b.flushAtExit()
		os.Remove(b.trees.trace) // scratch: git's trace of the last commit
		rep.StoriesLeft, rep.StoriesDone = b.board.Remaining(), len(b.board.Stories)-b.board.Remaining()
		r.finish(&rep, reason)
	}()
	now := opts.now()
	var it iteration
	if resume {
		b.st = prior
		if err := b.repairJournal(b.home.EventsPath(), b.home.StatePath()); err != nil {
			return rep, err
		}
		b.sayf(report.KindRun, "ralph: resuming run %s in %s (iteration %d, task %s)\n", r.id, b.st.Machine.Resumes(), b.st.Machine.Iteration, text.OrNone(b.st.Machine.TaskID, "none"))
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
		it.resumedFrom = b.resumeInterrupted(stoppedFirst, clearedLock)
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
	r.record.HeadBefore = b.trees.head()

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
			b.sayLimit("", OutcomeMaxIterations, reason)
			return rep, b.transition(Event{Trigger: TrigIterationLimit, Detail: reason})
		}
		if m.State == StateImplement {
			if why := b.budgetExceeded(); why != "" {
				b.st.Finished, b.st.Outcome = true, OutcomeBudget
				b.st.Reason = "budget reached: " + why
				rep.Iterations, rep.Outcome, reason = m.Iteration-1, OutcomeBudget, b.st.Reason
				b.sayLimit("", OutcomeBudget, reason)
				return rep, b.transition(Event{Trigger: TrigBudgetExhausted, Detail: reason})
			}
			if err := b.breakerGate(ctx); err != nil {
				rep.Outcome, reason = OutcomeInterrupted, "interrupted while the circuit breaker was open"
				rep.Iterations = m.Iteration
				return rep, b.stop(TrigInterrupted, reason, err)
			}
		}
		ev, next, err := b.perform(ctx, m.State, it)
		it = next
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
	if b.st.Outcome == OutcomeNeedsHuman {
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

func feedbackText(taskID string, f *Failure) string {
	if f == nil {
		f = &Failure{Reason: "the reason was not recorded"}
	}
	msg := fmt.Sprintf("Your previous attempt at %s was sent back: %s.", taskID, f.Reason)
	if f.Feedback != "" {
		msg += "\n\n" + strings.TrimSuffix(f.Feedback, "\n")
	}
	return msg + "\nFix the cause; the earlier attempt's changes are still in the working tree."
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

// The string helpers every package shares live in internal/text; these
// names keep the loop's many call sites short.
var clip, clipList = text.Clip, text.ClipList

// short is a commit as git shows it, "(none)" before the first.
func short(hash string) string { return text.OrNone(text.ShortHash(hash), "(none)") }
