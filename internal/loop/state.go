package loop

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/verify"
	"github.com/ralphloop/ralph/internal/workspace"
)

// StateSchemaVersion is the version of state.json this ralph writes.
const StateSchemaVersion = 1

// LoopState is .ralph/state.json: the live state of the loop, written
// atomically at every transition so that a kill at any instant leaves a
// state the next start resumes from, counters intact.
type LoopState struct {
	SchemaVersion int       `json:"schema_version"`
	RunID         string    `json:"run_id"`
	TaskSource    string    `json:"task_source"`
	TaskFile      string    `json:"task_file"`
	Machine       Machine   `json:"machine"`
	MaxIterations int       `json:"max_iterations"`
	NoCommit      bool      `json:"no_commit"`
	StartedAt     time.Time `json:"started_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	// EnteredAt is when the machine entered its current state; time in
	// each state is measured from it.
	EnteredAt time.Time `json:"entered_at"`
	// Attempt is the agent run of the current task, kept so that TEST,
	// VALIDATE and COMMIT can resume after a crash.
	Attempt *Attempt `json:"attempt,omitempty"`
	// Tasks holds per-task counters and blockers. Task files that have no
	// place for them (markdown, prd.json) rely on it alone.
	Tasks map[string]*TaskRecord `json:"tasks"`
	// Feedback is why the last attempt at a task was sent back; it goes
	// into the next prompt for that task.
	Feedback map[string]string `json:"feedback,omitempty"`
	// MemoryConnected says whether the last MEMORY_LOAD reached the
	// configured memory store, whichever it is (MemoryStore names it).
	MemoryConnected bool `json:"memory_connected"`
	// Neo4jConnected is seed 000's neo4j_connected, kept for tools that
	// read it, and true to its name: true only when the store is Neo4j
	// and answered. With SQLite or the file store it is false: read
	// memory_connected. An older ralph wrote neo4j_connected for any
	// store; Load reads such a file as memory_connected.
	Neo4jConnected bool    `json:"neo4j_connected"`
	MemoryStore    string  `json:"memory_store,omitempty"`
	Metrics        Metrics `json:"metrics"`
	// Cooldowns is where an older ralph kept, per agent, when it may be
	// used again after a usage limit. Load moves them to the home's shared
	// record (Home.Cooldowns), which every run reads, and leaves this
	// empty, so it is no longer written.
	Cooldowns map[string]time.Time `json:"cooldowns,omitempty"`
	Budget    runkit.Budget        `json:"budget"`
	Breaker   Breaker              `json:"breaker"`
	// Baseline is how ralph's checks fared on the tree the run started
	// from, before any agent worked on it. Kept here so that a resume
	// judges attempts against the same start; nil when the run has no
	// checks or was started by a ralph that took none.
	Baseline *Baseline `json:"baseline,omitempty"`
	// LastEvent is the transition this state was saved for. events.jsonl
	// is appended after state.json is written; a kill between the two
	// would lose the line, so a resume appends LastEvent when the log
	// lacks it (see RepairEvents).
	LastEvent *report.Event `json:"last_event,omitempty"`
	// EarlierEvents are the transitions saved together with LastEvent,
	// oldest first, when one save recorded several (transitions into
	// quick states wait for the next save, see builder.transition). A
	// resume appends those the log lacks, in order, before LastEvent.
	EarlierEvents []report.Event `json:"earlier_events,omitempty"`
	// CommitToken is written here just before ralph commits a task and
	// goes into the commit as its Ralph-Commit trailer. Only a commit that
	// carries it is ralph's: the other trailers are in the agent's prompt
	// and an agent can copy them. Leaving COMMIT clears it.
	CommitToken string `json:"commit_token,omitempty"`
	// TaskBase is where the branch was when the current task was
	// selected: a task that ends blocked leaves the branch there, its
	// agent's own commits kept at the attempt's ref, so that nothing no
	// check passed stays on the branch.
	TaskBase string `json:"task_base,omitempty"`
	// TaskBaseFor is the task TaskBase belongs to.
	TaskBaseFor string `json:"task_base_for,omitempty"`
	// Branch is the branch the run started on ("" when HEAD was
	// detached): ralph never commits a run's work on another one.
	Branch   string  `json:"branch,omitempty"`
	Finished bool    `json:"finished"`
	Outcome  Outcome `json:"outcome,omitempty"`
	Reason   string  `json:"reason,omitempty"`
}

// Attempt is one agent run at a task.
type Attempt struct {
	Iteration  int       `json:"iteration"`
	TaskID     string    `json:"task_id"`
	StartedAt  time.Time `json:"started_at"`
	HeadBefore string    `json:"head_before"`
	// AgentDone is set once the agent process has ended; a crash before
	// it means the agent run itself was interrupted.
	AgentDone bool   `json:"agent_done"`
	ExitCode  int    `json:"exit_code"`
	Millis    int64  `json:"duration_ms"`
	Prompt    string `json:"prompt_file"`
	Log       string `json:"log_file"`
	// TreeBefore fingerprints the work before the agent ran (HEAD and the
	// content of dirty files), so that a rerun after a crash still sees the
	// interrupted agent's changes as this attempt's.
	TreeBefore string `json:"tree_before,omitempty"`
	// PGID is the agent's process group, stopped on resume if a crash of
	// ralph left it running.
	PGID int `json:"pgid,omitempty"`
	// PGIDStart is the start time of the group's leader (clock ticks
	// since boot): with it, the group is known again on resume although
	// its number alone may have been given to another program since.
	PGIDStart uint64 `json:"pgid_start,omitempty"`
	// Own is the folder, in the run's folder, holding ralph's own files
	// (config, prompts, the task file) as they were before the agent: an
	// agent's edits to them are put back, after the agent or, should a
	// kill come first, on resume.
	Own string `json:"own_files,omitempty"`
	// Claim is what the agent ticked in the markdown PRD: its claim,
	// which ralph reads and then takes off the file, so that nothing
	// shows the story done before ralph has verified it.
	Claim *Claim `json:"claim,omitempty"`
	// Checks names the file, in the run's folder, holding what TEST ran
	// on this attempt's tree; VALIDATE and COMMIT read it, after a
	// resume too.
	Checks string `json:"checks,omitempty"`
	// Judgement is VALIDATE's conclusion, which COMMIT records.
	Judgement *verify.Judgement `json:"judgement,omitempty"`
}

// Claim is an agent's ticks on its own story in the markdown PRD.
type Claim struct {
	Story    bool   `json:"story"`
	Criteria []bool `json:"criteria,omitempty"`
}

// TaskRecord is what ralph remembers about one task across runs.
type TaskRecord struct {
	RetryCount int `json:"retry_count"`
	// AutoRetried is set once a transient blocker had its automatic retry.
	AutoRetried bool           `json:"auto_retried,omitempty"`
	Successes   int            `json:"successes"`
	Failures    int            `json:"failures"`
	Blocker     *BlockerRecord `json:"blocker,omitempty"`
	// Done is how ralph accepted the task, nil until it did: verified
	// with evidence, or done on the agent's word. Views show it so.
	Done *DoneRecord `json:"done,omitempty"`
}

// DoneRecord is ralph's acceptance of a task.
type DoneRecord struct {
	Outcome  verify.Outcome `json:"outcome"`
	Evidence []string       `json:"evidence,omitempty"`
	Commit   string         `json:"commit,omitempty"`
	Run      string         `json:"run,omitempty"`
}

// BlockerRecord is a blocked task (seed 000's blocker fields).
type BlockerRecord struct {
	Reason         string   `json:"blocker_reason"`
	Type           string   `json:"blocker_type"`
	RequiresHuman  bool     `json:"requires_human"`
	AttemptedFixes []string `json:"attempted_fixes,omitempty"`
	// SkippedBy names who skipped the task (`ralph skip`): a transient
	// blocker no failure caused, which messages must not call one.
	SkippedBy string `json:"skipped_by,omitempty"`
	// Iteration is when the task was blocked; a transient blocker is
	// retried once automatically three iterations later.
	Iteration int `json:"iteration"`
	// InFile is set when the task file itself says blocked, so that a
	// person clearing it there unblocks the task.
	InFile bool `json:"in_file,omitempty"`
	// ByPerson is a person's block (`ralph block`): it lasts until `ralph
	// unblock`, whatever the task file says.
	ByPerson bool `json:"by_person,omitempty"`
	// Ref is the ref that holds the blocked attempt's work (see
	// AttemptRef), "" when the attempt left nothing to keep.
	Ref string `json:"work_ref,omitempty"`
	// Review says the task waits for a person to approve a test change
	// its story asks for (`ralph approve ID`); the work is at Ref.
	Review bool `json:"review,omitempty"`
	// Base is the commit Ref's work starts from: `git diff Base Ref` is
	// the blocked attempt's work, which `ralph approve` brings back.
	Base string `json:"work_base,omitempty"`
	// MovedBack is the number of the agent's own commits taken off the
	// branch (kept at Ref): no check passed on them.
	MovedBack int `json:"moved_back,omitempty"`
	// Stash names the git stash that holds the blocked attempt's work,
	// as a ralph that used git stash recorded it.
	Stash string `json:"stash,omitempty"`
}

// Baseline is what ralph knows of the tree the current task starts from:
// how its checks fared there (test by test where the runner reports
// tests), how the open stories' verify commands fared, and which files
// define the checks. A fresh run takes it on the tree it starts from,
// before any agent works on it; each accepted story moves it to the tree
// ralph committed, whose checks that story's attempt has just run, so no
// check runs twice. Kept here so that a resume judges attempts against
// the same start.
type Baseline struct {
	// Head is the commit the checks ran on.
	Head   string          `json:"head"`
	Checks []BaselineCheck `json:"checks"`
	// Tests names the file, in the run's folder, holding the checks'
	// per-test results on this tree ("" when none reported tests): too
	// big for a state saved at every transition.
	Tests string `json:"tests,omitempty"`
	// TestsSum is the SHA-256 of that file as ralph wrote it: the run's
	// folder is writable by the agent, and a baseline edited to say a
	// passing test failed would make "fixed" evidence of nothing.
	TestsSum string `json:"tests_sha256,omitempty"`
	// Verify holds, per verify command of a story that was open when the
	// run started, whether it passed on the start tree: one that already
	// passed proves nothing.
	Verify map[string]bool `json:"verify,omitempty"`
	// Guard is what the run protects: the files that define the checks
	// and the user's protected globs.
	Guard verify.Guard `json:"guard"`
}

// BaselineCheck is one check's outcome on the starting tree.
type BaselineCheck struct {
	Name     string `json:"name"`
	Run      string `json:"run"`
	Passed   bool   `json:"passed"`
	ExitCode int    `json:"exit_code"`
	// PerTest says the check reported its tests one by one there.
	PerTest bool `json:"per_test,omitempty"`
}

// Failing names the checks that fail on the baseline's tree.
func (bl *Baseline) Failing() []string {
	if bl == nil {
		return nil
	}
	var out []string
	for _, c := range bl.Checks {
		if !c.Passed {
			out = append(out, c.Name)
		}
	}
	return out
}

// Metrics are the loop's counters (seed 002's metrics to track).
type Metrics struct {
	// StateMillis is the time in each state, waits not included.
	StateMillis map[State]int64 `json:"time_in_state_ms"`
	// WaitMillis is the time the loop slept instead of working, by
	// reason: WaitBreaker (the circuit breaker's cooldown), WaitLimit
	// (every agent cooling down after a usage limit) and WaitPause (a
	// person's pause).
	WaitMillis    map[string]int64 `json:"waiting_ms,omitempty"`
	TaskSuccesses int              `json:"task_successes"`
	TaskFailures  int              `json:"task_failures"`
	Reworks       int              `json:"rework_count"`
	Blocked       int              `json:"blocked"`
	Iterations    int              `json:"iterations"`
	// TotalMillis is the run's time: in states and waiting.
	TotalMillis int64       `json:"total_duration_ms"`
	AgentMillis int64       `json:"agent_ms"`
	Tokens      agent.Usage `json:"tokens"`
	CostUSD     float64     `json:"cost_usd_estimate"`
}

// The reasons of Metrics.WaitMillis.
const (
	WaitBreaker = "breaker"
	WaitLimit   = "limit"
	WaitPause   = "pause"
)

// EventsPath is the transition log of the work tree ws by default.
func EventsPath(ws *workspace.Workspace) string { return HomeOf(ws).EventsPath() }

// cannotGoOn is what a person does about a state file ralph cannot read.
func cannotGoOn(rel string) string {
	return fmt.Sprintf("; ralph writes this file and cannot go on from it: undo the change, or move it aside (mv %s %s.bad) to start a new run, which forgets the old run's retry counts and blockers", rel, rel)
}

// load reads state.json; a missing file returns nil and no error.
func (h *Home) load() (*LoopState, error) {
	var st LoopState
	_, err := store.ReadJSON(h.StatePath(), StateSchemaVersion, &st)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var newer *store.SchemaError
	if errors.As(err, &newer) {
		return nil, err
	}
	if err != nil {
		// A file edited by hand into bad JSON: say where, and what to do.
		rel := h.ws.Rel(h.StatePath())
		return nil, fmt.Errorf("%s%s", strings.Replace(err.Error(), h.StatePath(), rel, 1), cannotGoOn(rel))
	}
	if st.Tasks == nil {
		st.Tasks = map[string]*TaskRecord{}
	}
	if st.Feedback == nil {
		st.Feedback = map[string]string{}
	}
	if st.Metrics.StateMillis == nil {
		st.Metrics.StateMillis = map[State]int64{}
	}
	if st.Neo4jConnected && !st.MemoryConnected {
		// Written by a ralph that had only neo4j_connected, for any store.
		st.MemoryConnected, st.Neo4jConnected = true, st.MemoryStore == "neo4j"
	}
	if err := st.validate(); err != nil {
		rel := h.ws.Rel(h.StatePath())
		return nil, fmt.Errorf("%s: %w%s", rel, err, cannotGoOn(rel))
	}
	if len(st.Cooldowns) > 0 {
		// Written by a ralph that kept cooldowns per run: they move to the
		// shared record, never shortening one kept there. Should the move
		// fail they stay here, and are written back, rather than be lost.
		if err := h.Cooldowns().Merge(st.Cooldowns, time.Now()); err == nil {
			st.Cooldowns = nil
		}
	}
	return &st, nil
}

// CrashPoint is the runner kernel's crash test hook (runkit), for the
// instants between two transitions.
var CrashPoint = runkit.CrashPoint

func (st *LoopState) task(id string) *TaskRecord {
	t := st.Tasks[id]
	if t == nil {
		t = &TaskRecord{}
		// A copy of the id, never the caller's string: ids are
		// substrings of the parsed task file, and a key that outlives
		// its board would keep the whole file of its iteration in
		// memory, one file more for every task the run records.
		st.Tasks[strings.Clone(id)] = t
	}
	return t
}

// RepairEvents, TransitionEvent and TransitionEntry are the kernel's
// (runkit): seed 002's journal line, which sessions write too.
var RepairEvents = runkit.RepairEvents

type (
	TransitionEvent = runkit.TransitionEvent
	TransitionEntry = runkit.TransitionEntry
)
