// Package status holds the status document of a workspace: what `ralph
// status --json` prints, `ralph serve` answers at /api/status, and `ralph
// watch` and `ralph mcp` show. cli builds it; the front ends read it.
package status

import (
	"time"

	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/store"
)

// SchemaVersion is the version of the status document, its
// schema_version field. It grows when a field changes meaning or goes
// away; new fields do not change it.
const SchemaVersion = 1

// The engines a status document can come from: its engine field.
const (
	EngineLocal    = "local"
	EngineTemporal = "temporal"
)

// Report is what `ralph status --json` prints, whichever engine runs the
// build: the same document, with Temporal's own facts under temporal.
type Report struct {
	SchemaVersion int `json:"schema_version"`
	// Engine is where the build runs: "local" or "temporal".
	Engine        string        `json:"engine"`
	Running       bool          `json:"running"`
	Holder        *store.Holder `json:"holder,omitempty"`
	RunID         string        `json:"run_id,omitempty"`
	State         string        `json:"state,omitempty"`
	Finished      bool          `json:"finished"`
	Outcome       string        `json:"outcome,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	Iteration     int           `json:"iteration"`
	MaxIterations int           `json:"max_iterations,omitempty"`
	ElapsedMillis int64         `json:"elapsed_ms"`
	TaskFile      string        `json:"task_file"`
	TaskSource    string        `json:"task_source"`
	Stories       int           `json:"stories"`
	StoriesDone   int           `json:"stories_done"`
	// StoriesVerified and StoriesAgentWord split StoriesDone by how ralph
	// accepted them; StoriesVerifying are claimed done by their agent
	// and being checked (not counted done).
	StoriesVerified  int                   `json:"stories_verified"`
	StoriesAgentWord int                   `json:"stories_agent_word"`
	StoriesVerifying int                   `json:"stories_verifying"`
	CurrentTask      string                `json:"current_task,omitempty"`
	CurrentStory     string                `json:"current_story,omitempty"`
	RetryCounts      map[string]int        `json:"retry_counts"`
	Blocked          []Blocked             `json:"blocked"`
	Memory           string                `json:"memory,omitempty"`
	MemoryOK         bool                  `json:"memory_connected"`
	Neo4jOK          bool                  `json:"neo4j_connected"` // seed 000's name: true only with Neo4j
	Metrics          *loop.Metrics         `json:"metrics,omitempty"`
	PendingHints     int                   `json:"pending_context_hints"`
	Breaker          *loop.Breaker         `json:"breaker,omitempty"`
	Cooldowns        map[string]string     `json:"cooldowns"`
	Budget           *runkit.Budget        `json:"budget,omitempty"`
	LastIteration    *loop.IterationRecord `json:"last_iteration,omitempty"`
	Beads            *Beads                `json:"beads,omitempty"`
	Session          *Session              `json:"session,omitempty"`
	Parallel         *Parallel             `json:"parallel,omitempty"`
	// Board lists every story of the task file with where it is.
	Board []Story `json:"board"`
	// Paused is the pause in force (`ralph pause`), nil when none is.
	Paused *control.Command `json:"paused,omitempty"`
	// Steerable lists the runs that take control commands now.
	Steerable []control.Run `json:"steerable_runs"`
	// Queued lists the control commands given and not taken yet, oldest
	// first: a run takes them at its next step boundary.
	Queued []control.Command `json:"queued_controls"`
	// Waiting lists what waits for a person: a session's open
	// questions, a thread at a human checkpoint, a task blocked for a
	// person to decide.
	Waiting []Waiting `json:"waiting"`
	// Temporal is the build on Temporal as its status Query gave it;
	// absent for a local build.
	Temporal *Temporal         `json:"temporal,omitempty"`
	Extra    map[string]string `json:"-"`
}

// Temporal is what only a build on Temporal has: where it runs and its
// workflow's own state.
type Temporal struct {
	Address   string `json:"address"`
	TaskQueue string `json:"task_queue"`
	// HistoryLength is the workflow's history length at the query;
	// Generation counts its continue-as-new.
	HistoryLength int  `json:"history_length"`
	Generation    int  `json:"generation"`
	Stopping      bool `json:"stopping"`
	// CooldownUntil, when set, holds every new attempt until every
	// agent's usage limit resets (RFC 3339).
	CooldownUntil string `json:"cooldown_until,omitempty"`
	// Failing are the checks that fail on the target after the last
	// landing.
	Failing []string `json:"failing,omitempty"`
	// Controls are the commands the run took, newest last.
	Controls []string `json:"controls,omitempty"`
	// Tasks are the run's tasks in its own words (the board has them
	// in the document's).
	Tasks []TemporalTask `json:"tasks"`
}

// TemporalTask is one task of a build on Temporal.
type TemporalTask struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Host    string `json:"host,omitempty"`
	Attempt int    `json:"attempt"`
	Branch  string `json:"branch,omitempty"`
	Commit  string `json:"commit,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Skipped bool   `json:"skipped,omitempty"`
	// HeldBy is the block a person gave the task while it was in flight,
	// applied when its attempt comes back.
	HeldBy string `json:"held_block,omitempty"`
}

// Blocked is one blocked task in the status.
type Blocked struct {
	ID            string `json:"id"`
	Reason        string `json:"reason"`
	Type          string `json:"type"`
	RequiresHuman bool   `json:"requires_human"`
	// ByPerson says a person blocked the task (`ralph block`): it stays
	// blocked, in every run and engine, until `ralph unblock`.
	ByPerson bool `json:"by_person,omitempty"`
	// WorkRef is the ref that keeps the blocked attempt's work.
	WorkRef string `json:"work_ref,omitempty"`
	// Stash is the stash that keeps it, for blockers an older ralph
	// recorded.
	Stash string `json:"stash,omitempty"`
}

// Parallel is the last parallel build (`ralph build --workers N`) in
// `ralph status`: its workers and its merge queue.
type Parallel struct {
	RunID    string `json:"run_id"`
	Target   string `json:"target"`
	Workers  int    `json:"workers"`
	Finished bool   `json:"finished"`
	Outcome  string `json:"outcome,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// CheckoutBranch is the branch the person's checkout is on when it
	// is not Target ("" when it is; "HEAD" when detached): the board is
	// then read from Target, where the tasks landed.
	CheckoutBranch string `json:"checkout_branch,omitempty"`
	// Running is true while the build holds the workspace; a build
	// neither running nor finished was stopped.
	Running   bool      `json:"running"`
	StartedAt time.Time `json:"started_at"`
	// ElapsedMillis runs from the start to now while it runs, else to
	// its registry's last write.
	ElapsedMillis int64 `json:"elapsed_ms"`
	// Working lists the tasks in the workers' hands.
	Working []Worker `json:"working"`
	// Queue is the merge queue: tasks verified on their branch that
	// wait or are landing.
	Queue       []Queued `json:"queue"`
	NeedsReview []Queued `json:"needs_review"`
	Blocked     []Queued `json:"blocked"`
	Landed      int      `json:"landed"`
	// LandedTasks names the tasks on the target branch.
	LandedTasks []string `json:"landed_tasks,omitempty"`
	Worktrees   string   `json:"worktrees"`
}

// Worker is one worker at work.
type Worker struct {
	Worker        string `json:"worker"`
	Task          string `json:"task"`
	State         string `json:"state"`
	Attempt       int    `json:"attempt"`
	ElapsedMillis int64  `json:"elapsed_ms"`
	Agent         string `json:"agent,omitempty"`
	Worktree      string `json:"worktree"`
	Branch        string `json:"branch"`
}

// Queued is a task the merge queue holds, landed or could not land.
type Queued struct {
	Task      string   `json:"task"`
	State     string   `json:"state"`
	Attempt   int      `json:"attempt"`
	Branch    string   `json:"branch"`
	Reason    string   `json:"reason,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	// Batch is the merge queue's batch it lands in with other tasks.
	Batch string `json:"batch,omitempty"`
	// Look is the command that shows the task's work against the target.
	Look string `json:"look,omitempty"`
}

// Session is the active session in `ralph status`.
type Session struct {
	ID            string          `json:"id"`
	Request       string          `json:"request"`
	State         string          `json:"state"`
	Done          bool            `json:"done"`
	Reason        string          `json:"reason,omitempty"`
	CurrentTask   string          `json:"current_task,omitempty"`
	Attempt       int             `json:"attempt,omitempty"`
	Tasks         int             `json:"tasks"`
	TasksDone     int             `json:"tasks_done"`
	QACycles      int             `json:"qa_cycles"`
	OpenQuestions int             `json:"open_questions"`
	Metrics       session.Metrics `json:"metrics"`
}

// Beads is the beads part of `ralph status`: bd's version and daemon
// note, the active molecule's progress and the issues bd holds as blocked.
type Beads struct {
	Version  string          `json:"version,omitempty"`
	Daemon   string          `json:"daemon,omitempty"`
	Molecule string          `json:"molecule,omitempty"`
	Progress *beads.Progress `json:"progress,omitempty"`
	Current  string          `json:"current_step,omitempty"`
	Blocked  []string        `json:"blocked"`
	Error    string          `json:"error,omitempty"`
	// PendingProto is a proto `ralph plan` wrote that no build has
	// poured yet.
	PendingProto string `json:"pending_proto,omitempty"`
}

// The states of a story on the board. A story is shown done only once
// ralph accepted it, and how: verified on its own evidence, or on the
// agent's word; never on the agent's tick alone, which shows as
// verifying while ralph runs its checks.
const (
	// StoryDone is a story done before ralph recorded how it accepted it
	// (done in the task file as it came, or by an older ralph).
	StoryDone = "done"
	// StoryVerified was accepted on evidence ralph produced (Evidence).
	StoryVerified = "verified"
	// StoryAgentWord was accepted on the agent's word: its checks pass
	// and nothing ralph ran proves it.
	StoryAgentWord = "done_agent_word"
	// StoryLanded is a parallel build's story on the target branch.
	StoryLanded = "landed"
	// StoryClaimed is a story an agent is working on.
	StoryClaimed = "claimed"
	// StoryVerifying is a story whose attempt ralph is checking.
	StoryVerifying = "verifying"
	// StoryInFlight is the older name of StoryClaimed.
	StoryInFlight    = StoryClaimed
	StoryTodo        = "todo"
	StoryBlocked     = "blocked"
	StoryNeedsReview = "needs_review"
	StoryQueued      = "merge_queue"
)

// Accepted reports whether a story in state s is done.
func Accepted(s string) bool {
	return s == StoryDone || s == StoryVerified || s == StoryAgentWord || s == StoryLanded
}

// Story is one story on the board.
type Story struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Worker is the worker whose hands it is in, in a parallel build.
	Worker string `json:"worker,omitempty"`
	// Attempts counts its failed attempts so far.
	Attempts int `json:"attempts,omitempty"`
	// Evidence is what ralph ran that shows a verified story done.
	Evidence []string `json:"evidence,omitempty"`
}

// The kinds of Waiting.
const (
	WaitQuestion   = "question"
	WaitCheckpoint = "checkpoint"
	WaitBlocked    = "blocked"
)

// Waiting is one thing a person is waited for.
type Waiting struct {
	Kind string `json:"kind"`
	// ID is the question's, the thread's or the task's id.
	ID   string `json:"id"`
	Text string `json:"text"`
	// Session is the question's session.
	Session string `json:"session,omitempty"`
	// Steps are the checkpoints a thread may take now.
	Steps []string `json:"steps,omitempty"`
	// Hint is the command that answers it.
	Hint string `json:"hint"`
}
