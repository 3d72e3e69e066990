// Package loop runs the iterations of `ralph build` and `ralph plan`: one
// fresh agent process per iteration, with ralph, not the agent, deciding
// what is done.
//
// A story counts as done only when the agent exited cleanly, the PRD shows it
// checked, and every configured check passes when ralph runs it. The run
// ends successfully only when the PRD itself has no unchecked story left; a
// completion signal with stories left is recorded as rejected and the loop
// goes on.
package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/heartbeat"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Outcome says how a run ended.
type Outcome string

// Run outcomes. Each maps to one exit code in the cli package.
const (
	OutcomeComplete      Outcome = "complete"       // every story done and verified / plan written
	OutcomeMaxIterations Outcome = "max_iterations" // iteration limit reached with work left
	OutcomeInterrupted   Outcome = "interrupted"    // Ctrl+C or SIGTERM
	OutcomeError         Outcome = "error"          // something ralph could not go on from
	OutcomeBudget        Outcome = "budget"         // a token, cost or wall-time budget is used up
	// OutcomeChecksFailing ends a run whose stories are all done while a
	// check still fails on the final tree: never "complete".
	OutcomeChecksFailing Outcome = "checks_failing"
)

// Options configures one run.
type Options struct {
	MaxIterations int
	PRDPath       string // absolute
	PlanPath      string // absolute
	NoCommit      bool
	// RequirePlan refuses a build before the plan exists (seed 001).
	RequirePlan  bool
	Agent        agent.Spec
	AgentTimeout time.Duration
	Checks       []check.Check
	// Source is the task file; nil means the markdown PRD at PRDPath.
	Source tasks.Source
	// Home is the folder that holds the run's state, transition log, lock
	// and run records, apart from the work tree the agent changes (see
	// Home); "" means the work tree's own .ralph.
	Home string
	// SharedHome is the folder whose cooldowns.json the run shares with
	// other runs (a parallel build's workers share the checkout's
	// .ralph); "" is the run's own home.
	SharedHome string
	// OnlyStory limits the run to one story of the task file: a parallel
	// worker's. The run is complete when that story is done.
	OnlyStory string
	// Feedback is put in the prompt of the run's first attempt at
	// OnlyStory: why an earlier attempt elsewhere was sent back (the
	// merge queue's conflict or failed check).
	Feedback string
	// UnblockHint is the command a person runs after fixing a blocked
	// task by hand; "" means `ralph unblock ID`. A thread's loop sets its
	// own, since unblock does not apply there.
	UnblockHint string
	// MaxRetries is the number of failed attempts that blocks a task.
	MaxRetries int
	// Reviewer, when set, judges each story's acceptance criteria.
	Reviewer *agent.Spec
	// Memory is the memory store; nil means the file store in .ralph.
	Memory memory.Store
	// MemoryRetryDelay is the wait before MEMORY_LOAD's one retry (3s).
	MemoryRetryDelay time.Duration
	// ContextSoft and ContextHard are the context-window thresholds in
	// percent that the prompt gives the agent (70 and 80).
	ContextSoft, ContextHard int
	// Fallbacks are the agents rotated to, in order, while the main one
	// is cooling down after a usage limit.
	Fallbacks []agent.Spec
	// LimitCooldown is how long an agent cools down after a limit whose
	// reset time it did not say.
	LimitCooldown time.Duration
	// MaxLimitWait, when set, bounds the wait for a usage limit to reset:
	// when every agent is cooling down for longer, the run stops with
	// ErrAllLimited instead of waiting (threads go to Stuck).
	MaxLimitWait time.Duration
	// LimitPatterns are matched, case-insensitively, against the final
	// message and reported errors only, when the CLI gave no structured
	// limit event.
	LimitPatterns []string
	// Sandbox confines every agent the run starts to the run's work tree
	// (internal/sandbox); nil runs them as the user.
	Sandbox *sandbox.Policy
	// SandboxWarning is said once when the run starts: the sandbox asked
	// for ("auto") cannot start here, so the agents run without it.
	SandboxWarning string
	// IdleTimeout ends an agent run that prints nothing for this long.
	IdleTimeout time.Duration
	// MaxLogBytes bounds each raw agent log (0: agent.DefaultMaxLogBytes).
	MaxLogBytes int64
	// Terminal says Sink shows a terminal: heartbeats of silent agents and
	// checks are then one line updated in place, not a line per interval.
	Terminal bool
	// Budget bounds the run; zero fields are no bound.
	Budget runkit.Budget
	// SpentBefore is what the caller's own agent runs spent before this
	// run (a thread's spec, assessment and polish agents): it counts
	// against Budget with the run's own usage, since every agent run of
	// every machine is paid for.
	SpentBefore runkit.Spent
	// Ledger, when set, is shared with other runs (a parallel build's
	// workers): the budget is judged on what they all spent, and its
	// MaxRuns bounds their iterations together.
	Ledger *runkit.Ledger
	// Breaker configures the circuit breaker.
	Breaker BreakerConfig
	// OnFailingBaseline decides what a check that already fails on the
	// tree a run starts from does: BaselineJudgeNew (the default when
	// empty) or BaselineStop.
	OnFailingBaseline string
	// RequireEvidence sends back a story whose checks pass but that has no
	// evidence of its own ([verify] require_evidence).
	RequireEvidence bool
	// RedGreen counts a new test as evidence only when it fails against
	// the start's code ([verify] red_green).
	RedGreen bool
	// Protected are the user's globs of protected files ([verify]
	// protected).
	Protected []string
	// IterationsGiven says that MaxIterations was given on the command
	// line: at a resume it raises the resumed run's limit, which otherwise
	// stays what the run started with.
	IterationsGiven bool
	// IterationsFrom says, for the line that tells of a raised limit,
	// where the limit came from when it was not the command line (a
	// parallel run's or a workflow's limit); empty: the command line.
	IterationsFrom string
	// Control is the run's hold on the workspace's control folder: at
	// each step boundary the run waits while a pause is in force and,
	// before it selects a task, takes the queued skip, block and unblock
	// commands its attachment names. Nil takes no commands.
	Control *control.Attachment
	// Attach, when set, is called once the run has begun (its lock held,
	// its input accepted) and before it writes anything else: it returns
	// the attachment that becomes Control, so that a run refused on bad
	// input leaves no control record behind. It gets the run's id, which
	// the control folder names the run by.
	Attach func(runID string) *control.Attachment
	// ControlPauseOnly makes the run heed Control's pause and take no
	// queued commands: a parallel build's workers, whose scheduler takes
	// them for every worker.
	ControlPauseOnly bool
	// Sink receives the run's events (progress lines, the agent's display
	// text, the summary) as they happen; nil shows nothing. The journal
	// gets them too, whatever Sink is.
	Sink report.Sink
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Agents runs the agent attempts of a build; nil means agent.Run,
	// with the run's prompt file, log and process-group records.
	Agents AgentPort
	// Git is the repository; nil means the workspace's own (ws.Repo).
	Git GitPort
	// Checker runs ralph's checks; nil means each check's command.
	Checker runkit.CheckPort
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// Report summarises a finished run.
type Report struct {
	RunID   string
	RunDir  string
	Outcome Outcome
	// Reason says why the run ended, in words.
	Reason string
	// Blockers are the blocked tasks' reasons, by task id, when the
	// run ended needing a person: a parallel worker's story is blocked
	// for its own failure, not for "only blocked tasks are left".
	Blockers    map[string]string
	Iterations  int
	StoriesDone int
	StoriesLeft int
	// AgentTime is the sum of the agent processes' wall-clock durations;
	// the rest of the run's time is ralph's own overhead.
	AgentTime time.Duration
	Elapsed   time.Duration
}

// Accepted reports whether a run of one story (a parallel worker's, with
// OnlyStory) ended with its story accepted: complete, or done while a
// check that fails on the tree is left for the merge queue and the run's
// end to judge.
func (r Report) Accepted() bool {
	return r.Outcome == OutcomeComplete || (r.Outcome == OutcomeChecksFailing && r.StoriesLeft == 0)
}

// ErrInterrupted is returned when the run was stopped by the user: the
// one sentinel of package errs, shared with the thread and the session.
var ErrInterrupted = errs.ErrInterrupted

// ErrAllLimited is returned when every agent is cooling down after a usage
// limit for longer than Options.MaxLimitWait. The run stays resumable.
var ErrAllLimited = errors.New("all agents exhausted")

// RunRecord is runs/<run-id>/run.json.
type RunRecord struct {
	SchemaVersion int       `json:"schema_version"`
	ID            string    `json:"id"`
	Kind          string    `json:"kind"`
	Agent         string    `json:"agent"`
	PRD           string    `json:"prd"`
	MaxIterations int       `json:"max_iterations"`
	NoCommit      bool      `json:"no_commit"`
	StartedAt     time.Time `json:"started_at"`
	EndedAt       time.Time `json:"ended_at,omitzero"`
	Iterations    int       `json:"iterations"`
	Outcome       Outcome   `json:"outcome,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	HeadBefore    string    `json:"head_before"`
	HeadAfter     string    `json:"head_after,omitempty"`
	StoriesDone   int       `json:"stories_done"`
	StoriesLeft   int       `json:"stories_left"`
	AgentMillis   int64     `json:"agent_ms"`
	// Resumes counts the restarts of this run after a crash or interrupt.
	Resumes int `json:"resumes,omitempty"`
}

// IterationRecord is runs/<run-id>/iter-N.json: what one iteration did.
type IterationRecord struct {
	SchemaVersion    int           `json:"schema_version"`
	RunID            string        `json:"run_id"`
	Iteration        int           `json:"iteration"`
	Kind             string        `json:"kind"`
	StoryID          string        `json:"story_id,omitempty"`
	TaskID           string        `json:"task_id,omitempty"`
	StoryTitle       string        `json:"story_title,omitempty"`
	Agent            string        `json:"agent"`
	StartedAt        time.Time     `json:"started_at"`
	DurationMillis   int64         `json:"duration_ms"`
	ExitCode         int           `json:"exit_code"`
	Status           string        `json:"status"`
	Reason           string        `json:"reason,omitempty"`
	Signals          []string      `json:"signals,omitempty"`
	SignalAccepted   bool          `json:"signal_accepted,omitempty"`
	HeadBefore       string        `json:"head_before"`
	HeadAfter        string        `json:"head_after"`
	Commits          []gitx.Commit `json:"commits"`
	ChangedFiles     []string      `json:"changed_files"`
	UncommittedFiles []string      `json:"uncommitted_files"`
	Checks           []CheckRecord `json:"checks,omitempty"`
	ACReport         string        `json:"ac_report,omitempty"`
	// Verdict is how ralph accepted the task: "verified" (with Evidence)
	// or "agent_word"; "" when it did not.
	Verdict         string   `json:"verdict,omitempty"`
	Evidence        []string `json:"evidence,omitempty"`
	MemoryConnected bool     `json:"memory_connected"`
	Neo4jConnected  bool     `json:"neo4j_connected"` // seed 000's name: true only with Neo4j (see LoopState)
	// ContextPercent is the share of the context window in use at the end,
	// where the agent reports it; -1 when unknown.
	ContextPercent int `json:"context_percent"`
	// CostUSD is the CLI's cost estimate for the iteration.
	CostUSD float64 `json:"cost_usd_estimate"`
	// LimitWaits are the usage limits hit during the iteration.
	LimitWaits []LimitWait `json:"limit_waits,omitempty"`
	// Progress says whether the iteration committed or changed anything.
	Progress          bool        `json:"progress"`
	PermissionDenials int         `json:"permission_denials,omitempty"`
	Tokens            agent.Usage `json:"tokens"`
	FinalMessage      string      `json:"final_message,omitempty"`
	OutputBytes       int64       `json:"output_bytes"`
	// LogCutBytes is how much of the output the raw log (LogFile) left
	// out to stay within [agent] max_log_bytes.
	LogCutBytes int64  `json:"log_cut_bytes,omitempty"`
	PromptFile  string `json:"prompt_file"`
	LogFile     string `json:"log_file"`
	// Denied are the connections the sandbox's allow-list proxy refused
	// the agent (network "proxy").
	Denied []sandbox.Denied `json:"denied,omitempty"`
}

// CheckRecord is the outcome of one check in an iteration.
type CheckRecord struct {
	Name           string `json:"name"`
	Passed         bool   `json:"passed"`
	ExitCode       int    `json:"exit_code"`
	DurationMillis int64  `json:"duration_ms"`
	TimedOut       bool   `json:"timed_out,omitempty"`
	Missing        bool   `json:"missing,omitempty"`
	// Output is the end of a failing check's output (CheckOutputTail
	// bytes): the evidence of what failed, kept for the attempt that
	// blocks a story too.
	Output string `json:"output,omitempty"`
	// FailedAtStart marks a check that failed on the tree the task
	// started from too. It is no excuse: while it fails, the story needs
	// evidence of its own, and the run is not complete.
	FailedAtStart bool `json:"failed_at_start,omitempty"`
	// Tests says, where the runner reported tests one by one, what the
	// attempt fixed and broke.
	Tests *TestCounts `json:"tests,omitempty"`
	// ReportNote says why the runner's per-test report was not used.
	ReportNote string `json:"report_note,omitempty"`
}

// TestCounts are a check's tests compared with the start, by name.
type TestCounts struct {
	Fixed        []string `json:"fixed,omitempty"`
	Broken       []string `json:"broken,omitempty"`
	StillFailing []string `json:"still_failing,omitempty"`
	New          []string `json:"new,omitempty"`
	NewFailing   []string `json:"new_failing,omitempty"`
	Gone         []string `json:"gone,omitempty"`
}

// CheckOutputTail is how much of a failing check's output the iteration
// record and errors.log keep; checkOutputLines is how many of its last lines
// the terminal shows.
const (
	CheckOutputTail  = 4 << 10
	checkOutputLines = 10
)

// Iteration statuses.
const (
	StatusDone         = "done"            // story verified and accepted
	StatusOpen         = "open"            // agent ran cleanly, story not checked yet
	StatusVerifyFailed = "verify_failed"   // story checked by the agent, checks failed: reopened
	StatusAgentError   = "agent_error"     // non-zero exit
	StatusTimeout      = "timeout"         // killed by ralph after the iteration timeout
	StatusInterrupted  = "interrupted"     // killed because the user interrupted ralph
	StatusPlanned      = "planned"         // planning iteration that touched only the plan
	StatusPartial      = "partial"         // context exhausted: partial work committed
	StatusNoChanges    = "no_changes"      // agent exited cleanly without changing anything
	StatusTestsFailed  = "tests_failed"    // ralph's checks failed
	StatusACsFailed    = "acs_failed"      // acceptance criteria not met, or no evidence
	StatusNeedsReview  = "needs_review"    // tests changed as the story asks: a person approves
	StatusAgentWord    = "done_agent_word" // accepted on the agent's word: checks pass, no evidence
	StatusFailed       = "failed"          // another failure, see the reason
	StatusPlanError    = "plan_error"      // planning iteration that touched other files
)

// run is the state shared by build and plan runs.
type run struct {
	ws     *workspace.Workspace
	home   *Home
	opts   Options
	kind   string
	id     string
	dir    string
	record RunRecord
	// recordWrite is the background write of run.json in flight, if any.
	recordWrite sync.WaitGroup
	lock        *store.Lock
	start       time.Time
	agentT      time.Duration
	// em stamps and sends the run's events; journal is its sink in
	// events.jsonl.
	em      *report.Emitter
	journal *report.Journal
	// k is a build's runner kernel (builder.kernel); it holds what waits
	// for the next save of the state. Unused by a run that saves no state
	// between its events (plan).
	k runkit.Kernel[Machine, Event, Action]
	// log is the run's structured debug log, runs/<id>/ralph.log: what
	// ralph decided and why, for when a person asks "what happened?".
	log     *slog.Logger
	logFile *os.File
	// onAgentStart receives the agent's process group id.
	onAgentStart func(pgid int)
	// onAgentExit is called once the agent's process group is stopped
	// (trees.watchAgentExit).
	onAgentExit func()
	// agentToken tags the processes of the agent run in progress (see
	// attemptToken); "" lets agent.Run pick one.
	agentToken string
	// The ports (see ports.go): git, checks and agent attempts.
	git    GitPort
	checks runkit.CheckPort
	agents AgentPort
}

// newRunID returns a sortable id: time of start plus a random suffix so two
// runs started in the same second do not collide.
func newRunID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func begin(ctx context.Context, ws *workspace.Workspace, kind string, opts Options, resumeID string) (*run, error) {
	if _, err := ws.EnsureStateFiles(opts.now()); err != nil {
		return nil, err
	}
	home := homeFor(ws, opts)
	if err := os.MkdirAll(home.Dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := store.TryLock(home.LockPath(), "ralph "+kind)
	if err != nil {
		return nil, err
	}
	// A kill during an atomic write leaves its temporary file; remove
	// them before anything is committed.
	for _, dir := range []string{ws.Dir(), home.Dir, filepath.Dir(opts.PRDPath)} {
		if err := store.RemoveStaleTemps(dir); err != nil {
			lock.Unlock()
			return nil, err
		}
	}
	if opts.Source != nil {
		if err := store.RemoveStaleTemps(filepath.Dir(opts.Source.Path())); err != nil {
			lock.Unlock()
			return nil, err
		}
	}
	now := opts.now()
	r := &run{ws: ws, home: home, opts: opts, kind: kind, lock: lock, start: now, git: opts.gitPort(ws.Repo), checks: opts.checkPort()}
	r.agents = opts.Agents
	if r.agents == nil {
		r.agents = runAgentPort{r}
	}
	r.id = resumeID
	if r.id == "" {
		r.id = newRunID(now)
	}
	if opts.Attach != nil {
		r.opts.Control = opts.Attach(r.id)
	}
	r.dir = filepath.Join(home.RunsDir(), r.id)
	r.startEvents(home.EventsPath())
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		lock.Unlock()
		return nil, err
	}
	r.record = RunRecord{
		SchemaVersion: 1, ID: r.id, Kind: kind, Agent: opts.Agent.Name,
		PRD: ws.Rel(opts.PRDPath), MaxIterations: opts.MaxIterations, NoCommit: opts.NoCommit,
		StartedAt: now.UTC(),
	}
	if resumeID != "" {
		var prev RunRecord
		if _, err := store.ReadJSON(filepath.Join(r.dir, "run.json"), 1, &prev); err == nil {
			r.record = prev
			r.record.EndedAt, r.record.Outcome, r.record.Reason = time.Time{}, "", ""
			r.record.Resumes++
		}
	}
	if err := r.saveRecord(); err != nil {
		lock.Unlock()
		return nil, err
	}
	r.log = slog.New(slog.DiscardHandler)
	if f, err := os.OpenFile(filepath.Join(r.dir, "ralph.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		r.logFile = f
		r.log = slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	r.log.Info("run started", "run", r.id, "kind", kind, "agent", opts.Agent.Name, "argv", opts.Agent.Headless,
		"format", opts.Agent.Format, "max_iterations", opts.MaxIterations, "prd", opts.PRDPath, "no_commit", opts.NoCommit,
		"checks", len(opts.Checks), "timeout", opts.AgentTimeout.String())
	r.event("run %s started: %s with agent %s, at most %s", r.id, kind, opts.Agent.Name, words.Count(opts.MaxIterations, "iteration", "iterations"))
	if opts.SandboxWarning != "" {
		r.sayf(report.KindWarning, "%s\n", opts.SandboxWarning)
	}
	return r, nil
}

func (r *run) saveRecord() error {
	r.recordWrite.Wait()
	return store.WriteJSONRecord(filepath.Join(r.dir, "run.json"), r.record)
}

// saveRecordLater writes run.json in the background: the count of
// iterations it gains after each one decides nothing, and its two fsyncs
// need not sit between two agent runs. A kill before it lands loses only
// that count, which the resumed run, or the final write of this one
// (saveRecord waits for this write first), sets again.
func (r *run) saveRecordLater() {
	r.recordWrite.Wait()
	rec := r.record
	r.recordWrite.Add(1)
	go func() {
		defer r.recordWrite.Done()
		store.WriteJSONRecord(filepath.Join(r.dir, "run.json"), rec)
	}()
}

// finish writes the final run record and releases the lock. It runs on
// every path out of a run, interrupt included, so that run.json never
// claims a run is still going when no process holds the lock.
func (r *run) finish(rep *Report, reason string) {
	now := r.opts.now()
	r.record.EndedAt = now.UTC()
	r.record.Outcome = rep.Outcome
	r.record.Reason = reason
	r.record.Iterations = rep.Iterations
	r.record.StoriesDone = rep.StoriesDone
	r.record.StoriesLeft = rep.StoriesLeft
	r.record.AgentMillis = r.agentT.Milliseconds()
	if snap, err := r.git.Snapshot(context.WithoutCancel(context.Background())); err == nil {
		r.record.HeadAfter = snap.Head
	}
	// With .ralph/ deleted there is nowhere to write: the run's error says
	// so once, instead of a raw error per record.
	if err := r.saveRecord(); err != nil && r.ws.Exists() {
		r.sayf(report.KindWarning, "ralph: could not write run record: %v\n", err)
	}
	r.event("run %s ended: %s (%s)", r.id, rep.Outcome, reason)
	r.log.Info("run ended", "outcome", rep.Outcome, "reason", reason, "iterations", rep.Iterations,
		"stories_done", rep.StoriesDone, "stories_left", rep.StoriesLeft, "agent_ms", r.agentT.Milliseconds())
	if r.logFile != nil {
		r.logFile.Close()
	}
	rep.RunID = r.id
	rep.RunDir = r.dir
	rep.Reason = reason
	rep.AgentTime = r.agentT
	rep.Elapsed = now.Sub(r.start)
	r.lock.Unlock()
}

func (r *run) event(format string, args ...any) {
	if err := r.ws.LogEvent(r.opts.now(), fmt.Sprintf(format, args...)); err != nil && r.ws.Exists() {
		r.sayf(report.KindWarning, "ralph: could not write activity.log: %v\n", err)
	}
}

func (r *run) logError(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if err := r.ws.LogError(r.opts.now(), msg); err != nil && r.ws.Exists() {
		r.sayf(report.KindWarning, "ralph: could not write errors.log: %v\n", err)
	}
}

// iterPath names a file of iteration n inside the run folder.
func (r *run) iterPath(n int, ext string) string {
	return filepath.Join(r.dir, fmt.Sprintf("iter-%d.%s", n, ext))
}

// runAgentAs runs spec for iteration n. The log is appended to, so that a
// run repeated after a usage limit keeps the limited run's output too.
func (r *run) runAgentAs(ctx context.Context, spec agent.Spec, n int, prompt string) (runkit.Result, error) {
	res, err := runkit.Attempt{
		Spec:        spec,
		Prompt:      prompt,
		PromptFile:  r.iterPath(n, "prompt.md"),
		LogFile:     r.iterPath(n, "log"),
		AppendLog:   true,
		Dir:         r.ws.Root,
		Timeout:     r.opts.AgentTimeout,
		IdleTimeout: r.opts.IdleTimeout,
		MaxLogBytes: r.opts.MaxLogBytes,
		// The attempt that holds the token is saved before this call.
		Token:         r.agentToken,
		OnStart:       r.onAgentStart,
		OnExit:        r.onAgentExit,
		Events:        r.em,
		Terminal:      r.opts.Terminal,
		LimitPatterns: r.opts.LimitPatterns,
		Sandbox:       r.opts.Sandbox,
	}.Run(ctx)
	r.agentT += res.Duration
	return res, err
}

// newRecord starts the record of iteration n from the agent's outcome.
func (r *run) newRecord(n int, started time.Time, out agent.Outcome, promptFile, logFile string) *IterationRecord {
	return &IterationRecord{
		SchemaVersion: 1, RunID: r.id, Iteration: n, Kind: r.kind, Agent: r.opts.Agent.Name,
		StartedAt: started.UTC(), DurationMillis: out.Duration.Milliseconds(), ExitCode: out.ExitCode,
		Signals: out.Result.Signals, Tokens: out.Result.Usage, FinalMessage: clip(out.Result.FinalMessage, 4096),
		ContextPercent: out.Result.ContextPercent(), CostUSD: out.Result.CostUSD, PermissionDenials: out.Result.PermissionDenials,
		OutputBytes: out.OutputBytes, LogCutBytes: out.LogCutBytes, PromptFile: r.ws.Rel(promptFile), LogFile: r.ws.Rel(logFile),
		Denied: out.Result.Denied,
	}
}

// agentStatus classifies how the agent process ended. A kill by ralph
// says the configured limit and how long the agent actually ran, apart:
// the kill lands after the limit (the process group gets a grace period
// after SIGTERM), so one rounded duration reads as a wrong limit.
func (r *run) agentStatus(out agent.Outcome) (status, reason string) {
	switch {
	case out.Interrupted:
		return StatusInterrupted, "interrupted by the user"
	case out.TimedOut:
		return StatusTimeout, fmt.Sprintf("agent killed after %s: iteration timeout %s reached", ranFor(out.Duration), r.opts.AgentTimeout)
	case out.Idle:
		// No "timeout" in the words: they decide a blocker's type, and
		// a silent agent is not the network failure that word means there.
		return StatusTimeout, fmt.Sprintf("agent killed after %s: no output for %s, the idle limit", ranFor(out.Duration), r.opts.IdleTimeout)
	case out.ExitCode != 0:
		return StatusAgentError, fmt.Sprintf("agent exited with code %d", out.ExitCode)
	}
	return "", ""
}

// ranFor is how long a killed agent ran: tenths of a second under a
// minute, where they tell the limit from the kill, whole seconds beyond.
func ranFor(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

func (r *run) saveIteration(rec *IterationRecord) {
	red := redact.Default()
	rec.FinalMessage, rec.Reason = red.Redact(rec.FinalMessage), red.Redact(rec.Reason)
	r.log.Info("iteration ended", "iteration", rec.Iteration, "story", rec.StoryID, "status", rec.Status,
		"reason", rec.Reason, "exit_code", rec.ExitCode, "duration_ms", rec.DurationMillis, "signals", rec.Signals,
		"signal_accepted", rec.SignalAccepted, "head_before", rec.HeadBefore, "head_after", rec.HeadAfter,
		"commits", len(rec.Commits), "uncommitted", len(rec.UncommittedFiles), "output_bytes", rec.OutputBytes)
	if err := store.WriteJSONRecord(r.iterPath(rec.Iteration, "json"), rec); err != nil && r.ws.Exists() {
		r.sayf(report.KindWarning, "ralph: could not write iteration summary: %v\n", err)
	}
	line := fmt.Sprintf("%s | run=%s | iter=%d | mode=%s", r.opts.now().Format("2006-01-02 15:04:05"), r.id, rec.Iteration, r.kind)
	if rec.StoryID != "" {
		line += " | story=" + rec.StoryID
	}
	line += fmt.Sprintf(" | duration=%s | exit=%d | status=%s | commits=%d | uncommitted=%d | tokens=%d/%d | cost=$%.4f",
		(time.Duration(rec.DurationMillis) * time.Millisecond).Round(100*time.Millisecond), rec.ExitCode, rec.Status, len(rec.Commits), len(rec.UncommittedFiles),
		rec.Tokens.InputTokens, rec.Tokens.OutputTokens, rec.CostUSD)
	if len(rec.LimitWaits) > 0 {
		line += fmt.Sprintf(" | limits=%d", len(rec.LimitWaits))
	}
	if rec.Reason != "" {
		line += " | " + rec.Reason
	}
	if err := r.ws.AddRunSummary(line); err != nil && r.ws.Exists() {
		r.sayf(report.KindWarning, "ralph: could not write activity.log: %v\n", err)
	}
	r.record.Iterations = rec.Iteration
	r.saveRecordLater()
}

// runCheck runs one of ralph's checks with a heartbeat: a test suite can
// take minutes without a word.
func (r *run) runCheck(ctx context.Context, c check.Check) check.Result {
	beat := heartbeat.Start(r.em.Writer(report.KindHeartbeat), "check "+c.Name+" running", r.opts.Terminal)
	defer beat.Stop()
	return r.checks.RunCheck(ctx, r.ws.Root, c)
}
