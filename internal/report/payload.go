package report

import (
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/gitx"
)

// Payload is an event's data: one type per kind, so that a consumer
// reads a fact by its field, never by a string key. The JSON of a payload
// is the "data" object of events.jsonl, `--json` and the dashboard's
// stream; its keys are the schema (docs/events.md).
//
// A key some emitters always write, even as zero, and others never write
// is a pointer (or a group: an embedded pointer to a struct), so that the
// object keeps the keys it always had.
type Payload interface {
	Kind() Kind
}

// Ptr returns a pointer to a copy of v: the value of a field that keeps
// its key when zero.
func Ptr[T any](v T) *T { return &v }

// Transition: why the machine moved.
type Transition struct {
	Detail string `json:"detail,omitempty"` // a loop's or a session's reason, clipped
	Reason string `json:"reason,omitempty"` // a thread's
	Source string `json:"source,omitempty"` // a thread's: who caused it
	Thread string `json:"thread,omitempty"`
}

// Run: a run started, resumed, or a worker prepared or finished an attempt.
type Run struct {
	Workers   int    `json:"workers,omitempty"`
	Target    string `json:"target,omitempty"`
	Worktrees string `json:"worktrees,omitempty"`
	Worktree  string `json:"worktree,omitempty"`
	Branch    string `json:"branch,omitempty"`
	Host      string `json:"host,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	Head      string `json:"head,omitempty"`
	Dir       string `json:"dir,omitempty"`
	Resumed   *bool  `json:"resumed,omitempty"`
	State     string `json:"state,omitempty"`
	Temporal  bool   `json:"temporal,omitempty"`
	*Retried
}

// Retried is a Temporal attempt run again after its last one ended
// unfinished, with what its heartbeats had told.
type Retried struct {
	LogBytes    int64 `json:"log_bytes"`
	Iteration   int   `json:"iteration"`
	Retry       int32 `json:"retry"`
	WorkerAlive bool  `json:"worker_alive,omitempty"`
}

// Iteration: a loop's iteration started (its banner) or ended (End), or
// a session's role took its turn (Role, Name).
type Iteration struct {
	*Turn
	Agent string `json:"agent,omitempty"`
	Role  string `json:"role,omitempty"`
	Name  string `json:"name,omitempty"`
	*End
}

// Turn is which iteration of a loop, on which task ("" while planning).
type Turn struct {
	Iteration int    `json:"iteration"`
	Task      string `json:"task"`
}

// End closes an iteration, whatever its status.
type End struct {
	IterationEnd bool          `json:"iteration_end"`
	Status       string        `json:"status"`
	DurationMS   int64         `json:"duration_ms"`
	Tokens       agent.Usage   `json:"tokens"`
	CostUSD      float64       `json:"cost_usd_estimate"`
	Commits      []gitx.Commit `json:"commits"`
	Reason       string        `json:"reason"`
	*Accepted
	*Failed
}

// Accepted is how ralph accepted a task: verified on its evidence, or on
// the agent's word.
type Accepted struct {
	Verdict  string   `json:"verdict"`
	Evidence []string `json:"evidence"`
}

// Failed names the checks that failed on an iteration's tree, and those
// of them that failed at the start too.
type Failed struct {
	FailingChecks    []string `json:"failing_checks"`
	FailedAtStartToo []string `json:"failed_at_start_too"`
}

// Line is one line an agent showed (AgentOutput) or a silent agent's or
// check's status line (Heartbeat).
type Line struct {
	Line string `json:"line"`
}

// AgentOutput is the data of a KindAgentOutput event.
type AgentOutput Line

// Heartbeat is the data of a KindHeartbeat event.
type Heartbeat Line

// Check: one of ralph's checks ran (Name, Passed), or a session runs its
// checks again with the start's tests (Protected).
type Check struct {
	Name       string      `json:"name,omitempty"`
	Passed     *bool       `json:"passed,omitempty"`
	DurationMS *int64      `json:"duration_ms,omitempty"`
	Baseline   bool        `json:"baseline,omitempty"` // the starting tree, before any agent
	Tests      *TestCounts `json:"tests,omitempty"`
	*TestDiff
	ReportNote     string   `json:"report_note,omitempty"`
	FailedAtStart  bool     `json:"failed_at_start,omitempty"`
	WithStartTests bool     `json:"with_start_tests,omitempty"`
	Protected      []string `json:"protected,omitempty"`
}

// TestCounts are a test report's results.
type TestCounts struct {
	Failed  int `json:"failed"`
	Passed  int `json:"passed"`
	Skipped int `json:"skipped"`
}

// TestDiff is how a check's tests compare with the same check before the
// agent's work, test by test.
type TestDiff struct {
	Fixed        []string `json:"fixed"`
	Broken       []string `json:"broken"`
	StillFailing []string `json:"still_failing"`
	New          []string `json:"new"`
	Gone         []string `json:"gone"`
}

// Verdict: how an accepted attempt was judged.
type Verdict struct {
	Outcome  string   `json:"outcome"`
	Evidence []string `json:"evidence"`
	Failing  []string `json:"failing"`
}

// Commit: ralph committed a task's work, or the merge queue landed it
// (State "landed").
type Commit struct {
	Iteration     int    `json:"iteration,omitempty"`
	Commit        string `json:"commit,omitempty"`
	Status        string `json:"status,omitempty"`
	State         string `json:"state,omitempty"`
	Branch        string `json:"branch,omitempty"`
	BeforeRestart bool   `json:"before_restart,omitempty"`
	Batch         *Batch `json:"batch,omitempty"`
	*Judged
}

// Batch is the merge queue's batch a landing came from: tasks integrated
// together and checked once. A landing alone has none.
type Batch struct {
	ID      string   `json:"id"`
	Members []string `json:"members"`
}

// Judged is how a committed task was accepted.
type Judged struct {
	Verdict  string   `json:"verdict"`
	Evidence []string `json:"evidence"`
	Failing  []string `json:"failing"`
}

// Blocker: a task was blocked, sent back or moved back.
type Blocker struct {
	State         string    `json:"state,omitempty"` // blocked, needs_review, sent_back
	Type          string    `json:"type,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	RequiresHuman *bool     `json:"requires_human,omitempty"`
	ByControl     bool      `json:"by_control,omitempty"`
	ByPerson      bool      `json:"by_person,omitempty"`
	Error         string    `json:"error,omitempty"`
	Outcome       string    `json:"outcome,omitempty"`
	Branch        string    `json:"branch,omitempty"`
	Conflicts     *[]string `json:"conflicts,omitempty"`
	Attempt       int       `json:"attempt,omitempty"`
	Attempts      int       `json:"attempts,omitempty"`
	MovedBack     int       `json:"moved_back,omitempty"`
	Ref           string    `json:"ref,omitempty"`
	Base          string    `json:"base,omitempty"`
	Target        string    `json:"target,omitempty"`
	From          string    `json:"from,omitempty"`
	To            string    `json:"to,omitempty"`
	Failing       *[]string `json:"failing,omitempty"`
	Batch         *Batch    `json:"batch,omitempty"`
}

// Limit: an agent hit a usage limit, or a run limit ended the run.
type Limit struct {
	Agent       string     `json:"agent,omitempty"`
	Until       string     `json:"until,omitempty"` // RFC 3339
	Role        string     `json:"role,omitempty"`
	ResetsAt    *time.Time `json:"resets_at,omitempty"`
	WaitSeconds float64    `json:"wait_seconds,omitempty"`
	*Ending
}

// Ending is why a limit ended the run.
type Ending struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
}

// Wait: the run waits (a usage limit, the circuit breaker, a pause, a
// person's answers).
type Wait struct {
	Wait        string   `json:"wait,omitempty"`  // limit, breaker
	State       string   `json:"state,omitempty"` // started, waiting, ended; or the machine's state when paused
	Until       string   `json:"until,omitempty"` // RFC 3339
	Reason      string   `json:"reason,omitempty"`
	Agent       *string  `json:"agent,omitempty"`
	LeftMS      *int64   `json:"left_ms,omitempty"`
	WaitedMS    *int64   `json:"waited_ms,omitempty"`
	Breaker     string   `json:"breaker,omitempty"` // open, half_open
	CooldownMS  *int64   `json:"cooldown_ms,omitempty"`
	Paused      bool     `json:"paused,omitempty"`
	By          string   `json:"by,omitempty"`
	ID          string   `json:"id,omitempty"`
	WaitingFor  string   `json:"waiting_for,omitempty"`
	LeftSeconds *float64 `json:"left_seconds,omitempty"`
	Questions   []string `json:"questions,omitempty"`
}

// Warning: something went wrong, and the run goes on.
type Warning struct {
	Error            string    `json:"error,omitempty"`
	Target           string    `json:"target,omitempty"`
	From             string    `json:"from,omitempty"`
	To               string    `json:"to,omitempty"`
	Branch           string    `json:"branch,omitempty"`
	CheckoutBranch   string    `json:"checkout_branch,omitempty"`
	CheckoutHead     string    `json:"checkout_head,omitempty"`
	CheckoutChanged  []string  `json:"checkout_changed,omitempty"`
	WorktreeChanged  []string  `json:"worktree_changed,omitempty"`
	Worktree         string    `json:"worktree,omitempty"`
	Tasks            *[]string `json:"tasks,omitempty"`
	Role             string    `json:"role,omitempty"`
	Retry            int       `json:"retry,omitempty"`
	MaxRetries       int       `json:"max_retries,omitempty"`
	Dropped          []string  `json:"dropped,omitempty"`
	TaskID           string    `json:"task_id,omitempty"`
	Mark             string    `json:"mark,omitempty"`
	AgentMark        string    `json:"agent_mark,omitempty"`
	OwnFilesRestored []string  `json:"own_files_restored,omitempty"`
	StatusesRestored []string  `json:"statuses_restored,omitempty"`
}

// Note: anything else a person is told.
type Note struct {
	Task        string   `json:"task,omitempty"`
	Paused      *bool    `json:"paused,omitempty"`
	PGID        int      `json:"pgid,omitempty"`
	Process     string   `json:"process,omitempty"`
	Added       []string `json:"added,omitempty"`
	ContextUsed string   `json:"context_used,omitempty"`
}

// Summary: the end of a run.
type Summary struct {
	Outcome     string    `json:"outcome,omitempty"`
	Complete    *bool     `json:"complete,omitempty"`
	Iterations  *int      `json:"iterations,omitempty"`
	Blocked     *[]string `json:"blocked,omitempty"`
	Tasks       int       `json:"tasks,omitempty"`
	Interrupted bool      `json:"interrupted,omitempty"`
	State       string    `json:"state,omitempty"`
	Thread      any       `json:"thread,omitempty"` // a thread's view, as `ralph thread --json` shows it
	*Build
	*Landings
}

// Build is what a build's summary counts.
type Build struct {
	StoriesCompleted  int      `json:"stories_completed"`
	StoriesTotal      int      `json:"stories_total"`
	StoriesVerified   int      `json:"stories_verified"`
	StoriesAgentWord  int      `json:"stories_agent_word"`
	StoriesDoneBefore int      `json:"stories_done_before"`
	FinalCommit       string   `json:"final_commit"`
	ElapsedMS         int64    `json:"elapsed_ms"`
	FailingChecks     []string `json:"failing_checks"`
	Reason            string   `json:"reason"`
	MetricsCommit     string   `json:"metrics_commit,omitempty"`
}

// Landings is what a parallel build's summary counts.
type Landings struct {
	Landed      int      `json:"landed"`
	NeedsReview []string `json:"needs_review"`
	Left        int      `json:"left"`
}

// Control: what became of a command a person or a program gave.
type Control struct {
	ID           string  `json:"id"`
	Command      string  `json:"command"`
	By           string  `json:"by"`
	Status       string  `json:"status"` // taken, refused, queued, ...
	Task         *string `json:"task,omitempty"`
	Text         string  `json:"text,omitempty"`
	Why          string  `json:"why,omitempty"`
	Session      string  `json:"session,omitempty"`
	Question     string  `json:"question,omitempty"`
	Thread       string  `json:"thread,omitempty"`
	Step         string  `json:"step,omitempty"`
	ContextAdded string  `json:"context_added,omitempty"` // the name add-context's journal line always had
}

// Denied: the allow-list proxy of a sandbox with network "proxy"
// refused a connection of the agent.
type Denied struct {
	Host string    `json:"host"`
	Port int       `json:"port"`
	At   time.Time `json:"at"`
}

// Kind implements Payload.
func (Transition) Kind() Kind  { return KindTransition }
func (Run) Kind() Kind         { return KindRun }
func (Iteration) Kind() Kind   { return KindIteration }
func (AgentOutput) Kind() Kind { return KindAgentOutput }
func (Heartbeat) Kind() Kind   { return KindHeartbeat }
func (Check) Kind() Kind       { return KindCheck }
func (Verdict) Kind() Kind     { return KindVerdict }
func (Commit) Kind() Kind      { return KindCommit }
func (Blocker) Kind() Kind     { return KindBlocker }
func (Limit) Kind() Kind       { return KindLimit }
func (Wait) Kind() Kind        { return KindWait }
func (Warning) Kind() Kind     { return KindWarning }
func (Note) Kind() Kind        { return KindNote }
func (Summary) Kind() Kind     { return KindSummary }
func (Control) Kind() Kind     { return KindControl }
func (Denied) Kind() Kind      { return KindDenied }

// payloads decode each kind's data: the one list of kinds (Kinds is
// made from it).
var payloads = map[Kind]func([]byte) (Payload, error){
	KindTransition: decodeAs[Transition], KindRun: decodeAs[Run], KindIteration: decodeAs[Iteration],
	KindAgentOutput: decodeAs[AgentOutput], KindHeartbeat: decodeAs[Heartbeat], KindCheck: decodeAs[Check],
	KindVerdict: decodeAs[Verdict], KindCommit: decodeAs[Commit], KindBlocker: decodeAs[Blocker],
	KindLimit: decodeAs[Limit], KindWait: decodeAs[Wait], KindWarning: decodeAs[Warning],
	KindNote: decodeAs[Note], KindSummary: decodeAs[Summary], KindControl: decodeAs[Control],
	KindDenied: decodeAs[Denied],
}
