package fleet

import (
	"time"

	"github.com/ralphloop/ralph/internal/landing"
)

// Names Temporal knows ralph's workflow, activities, queries, signals and
// updates by. They are part of the recorded histories: renaming one breaks
// the replay of runs in flight.
const (
	BuildWorkflow = "ralph.build"

	ActivityBoard   = "ralph.board"
	ActivityPrepare = "ralph.prepare"
	ActivityWork    = "ralph.work"
	ActivityLand    = "ralph.land"
	// Cleanup and Finish tidy up after a landing and at the end of a run.
	ActivityCleanup = "ralph.cleanup"
	ActivityFinish  = "ralph.finish"

	QueryStatus   = "status"
	SignalControl = "control"
	UpdateControl = "control"
)

// Error types an activity fails with that no retry can fix: Temporal's
// retry policy lists them as non-retryable.
const (
	ErrTypeAgentCannotRun = "AgentCannotRun" // not installed, not logged in, bad flags: the environment's failure
	ErrTypeUsage          = "Usage"          // bad input or configuration a person must fix
	ErrTypeWorktreeGone   = "WorktreeGone"   // the host no longer holds the task's worktree
	ErrTypeTargetMoved    = "TargetMoved"    // the run's tip moved outside ralph to a commit that fails a check
)

// DefaultHistoryLimit is the history length at which a run continues as
// new (after its in-flight work), well under Temporal's 51,200 events
// (it warns at 10,240).
const DefaultHistoryLimit = 8000

// BuildInput starts (or, continued as new, carries on) a build.
type BuildInput struct {
	// RunID names the run's branches (ralph/<run>/<task>) and records.
	RunID string
	// Target is the branch tasks land on; PRD the task file's path in
	// the repository.
	Target string
	PRD    string
	// Workers is how many tasks are worked at once across every host.
	Workers int
	// MaxIterations bounds agent runs of the whole run (0: none).
	MaxIterations int
	// LandAttempts is how many attempts a task gets at landing.
	LandAttempts int
	// Queues: Shared is polled by every host (Prepare goes there and any
	// host takes it); Integration by the host that runs the merge queue.
	// A host's own queue is HostQueue(Shared, host).
	Shared      string
	Integration string
	// HostTimeout is how long work waits for its host before the task
	// moves to another host; Heartbeat how long an attempt may be silent.
	HostTimeout time.Duration
	Heartbeat   time.Duration
	// HistoryLimit continues the run as new once its history is this long
	// (0: DefaultHistoryLimit). Temporal's own suggestion counts too.
	HistoryLimit int
	// State is what a run continued as new carries over; nil at start.
	State *RunState
}

// HostQueue is the task queue of one host's checkouts.
func HostQueue(shared, host string) string { return shared + "@" + host }

// IntegrationQueue is the task queue of the merge queue's host.
func IntegrationQueue(shared string) string { return shared + ".integration" }

// RunState is everything the workflow knows of a run: what status shows
// and what continue-as-new carries.
type RunState struct {
	RunID  string  `json:"run_id"`
	Target string  `json:"target"`
	Tasks  []*Task `json:"tasks"`
	// Paused stops new work from starting; in-flight attempts finish.
	Paused bool `json:"paused,omitempty"`
	// Stopping ends the run: in-flight attempts are cancelled (their
	// loops save their state) and nothing new starts.
	Stopping bool `json:"stopping,omitempty"`
	// Hints go into the next prompts of every task.
	Hints []string `json:"hints,omitempty"`
	// CooldownUntil holds every new attempt until every agent's limit
	// reset (a durable timer).
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
	Iterations    int       `json:"iterations"`
	// Generation counts continue-as-new.
	Generation int       `json:"generation"`
	StartedAt  time.Time `json:"started_at"`
	Outcome    string    `json:"outcome,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	// Failing are the checks that fail on the tip after the last landing:
	// the run is not complete while there are any.
	Failing []string `json:"failing,omitempty"`
	// Controls are the commands the run took, newest last (at most 50).
	Controls []string `json:"controls,omitempty"`
}

// Task is one story of the run.
type Task struct {
	ID        string            `json:"id"`
	Title     string            `json:"title"`
	DependsOn []string          `json:"depends_on,omitempty"`
	Priority  int               `json:"priority,omitempty"`
	State     landing.TaskState `json:"state"`
	// Host is the host that holds the task's worktree ("" before Prepare
	// or after the host was lost).
	Host    string `json:"host,omitempty"`
	Attempt int    `json:"attempt"`
	Base    string `json:"base,omitempty"`
	Head    string `json:"head,omitempty"`
	Commit  string `json:"commit,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Feedback is the failed check of the landing that sent the task
	// back, for its next attempt's prompt (LandResult.Feedback).
	Feedback string `json:"feedback,omitempty"`
	Skipped  bool   `json:"skipped,omitempty"`
	HeldBy   string `json:"held_block,omitempty"`
	Iters    int    `json:"iterations"`
	Branch   string `json:"branch"`
	Hosts    int    `json:"host_moves,omitempty"`
	// Resume: the run stopped with the task's loop in flight on Host; the
	// next run works it there with the same attempt, and its loop
	// resumes from its saved state instead of starting over.
	Resume   bool  `json:"resume,omitempty"`
	LogBytes int64 `json:"log_bytes,omitempty"`
}

// Story is a task as the task file holds it: what Board returns.
type Story struct {
	ID        string   `json:"id"`
	Title     string   `json:"title"`
	Done      bool     `json:"done"`
	Started   bool     `json:"started,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	Priority  int      `json:"priority,omitempty"`
	// Held is the reason of a person's block (`ralph block`) kept in the
	// workspace: the run starts with the task blocked.
	Held string `json:"held,omitempty"`
}

// BoardInput asks the integration host for the task file at the target.
type BoardInput struct {
	RunID, Target, PRD string
}

// PrepareInput asks any host to make a task's worktree and branch from
// the current tip of the target on the exchange remote.
type PrepareInput struct {
	RunID, Target, Task string
	Attempt             int
}

// PrepareResult names the host that now holds the task's worktree.
type PrepareResult struct {
	Host string `json:"host"`
	Base string `json:"base"`
}

// WorkInput runs a task's loop on the host that holds its worktree.
type WorkInput struct {
	RunID, Target, Task string
	// PRD is the task file's path in the repository.
	PRD     string
	Attempt int
	// Feedback goes into the prompts: why an earlier attempt could not
	// land, and the hints people gave.
	Feedback string
	// MaxIterations bounds this loop's agent runs (0: the host's config).
	MaxIterations int
}

// Work outcomes.
const (
	WorkVerified = "verified"
	WorkBlocked  = "blocked"
	WorkLimited  = "limited"
)

// WorkResult is how a task's loop ended.
type WorkResult struct {
	Outcome    string    `json:"outcome"`
	Reason     string    `json:"reason,omitempty"`
	Head       string    `json:"head,omitempty"`
	Until      time.Time `json:"until,omitzero"`
	Iterations int       `json:"iterations"`
}

// Heartbeat is what a running attempt reports: the byte offset of its
// agent output in the host's journal, so a viewer (and a retry) knows how
// far it got. The output itself stays on the host, out of the history.
type Heartbeat struct {
	Iteration int   `json:"iteration"`
	LogBytes  int64 `json:"log_bytes"`
	// Worker is the worker process that heartbeat (Host.identity): a
	// retry by the same process finds its worker alive, not lost.
	Worker string `json:"worker,omitempty"`
}

// LandInput asks the integration host to land a verified branch.
type LandInput struct {
	RunID, Target, PRD, Task, Title string
	Base, Head                      string
	Attempt                         int
	Host                            string
	// Token marks the landing commit, so that a retried Land recognises
	// a landing that already happened and never lands twice.
	Token string
}

// LandResult is how a landing ended: the parallel core's outcome.
type LandResult = landing.Outcome

// Command is a control command sent to a run as a Signal or an Update.
type Command struct {
	// Kind is pause, resume, stop, hint, skip, block or unblock.
	Kind string `json:"kind"`
	Task string `json:"task,omitempty"`
	Text string `json:"text,omitempty"`
	By   string `json:"by,omitempty"`
}

// Status is what the status Query returns.
type Status struct {
	RunState
	// HistoryLength is the run's history length at the query.
	HistoryLength int `json:"history_length"`
	Workers       int `json:"workers"`
}
