package loop

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Home is where a run keeps its machine state: state.json, the transition
// log, the lock and the run records. It is the only writer of state.json:
// the runner saves through it, and everyone else (the thread runner,
// `ralph unblock`) asks it for one change at a time, made under the run's
// lock, instead of editing the state and saving it over a running loop's.
//
// A home is apart from the work tree the agent changes, so that two runs of
// one repository, in two worktrees, keep two states and two locks; by
// default it is the work tree's own .ralph folder.
type Home struct {
	// Dir is the folder that holds the state.
	Dir string
	// Shared holds the cooldowns shared with other runs; "" is Dir.
	Shared string
	ws     *workspace.Workspace
}

// HomeOf is the home of the work tree ws: its .ralph folder.
func HomeOf(ws *workspace.Workspace) *Home { return &Home{Dir: ws.Dir(), ws: ws} }

// HomeAt is the home in dir (from ws's root when relative), apart from
// ws's own .ralph: the state of runs given Options.Home dir, which a
// caller reads and changes through it (a thread in its own worktree keeps
// its loop's state with the thread's records). ws names the files in
// messages.
func HomeAt(ws *workspace.Workspace, dir string) *Home { return &Home{Dir: ws.Abs(dir), ws: ws} }

// homeFor is the home a run over ws uses: opts.Home when one was given,
// else the work tree's own; its cooldowns are opts.SharedHome's when set.
func homeFor(ws *workspace.Workspace, opts Options) *Home {
	h := HomeOf(ws)
	if opts.Home != "" {
		h = &Home{Dir: ws.Abs(opts.Home), ws: ws}
	}
	if opts.SharedHome != "" {
		h.Shared = ws.Abs(opts.SharedHome)
	}
	return h
}

// StatePath is the home's state.json.
func (h *Home) StatePath() string { return filepath.Join(h.Dir, "state.json") }

// EventsPath is the home's transition log.
func (h *Home) EventsPath() string { return filepath.Join(h.Dir, "events.jsonl") }

// LockPath is the lock a run holds while it works from this home.
func (h *Home) LockPath() string { return filepath.Join(h.Dir, "lock") }

// RunsDir holds one folder per run.
func (h *Home) RunsDir() string { return filepath.Join(h.Dir, "runs") }

// Cooldowns is the record of the agents resting after a usage limit,
// kept beside the state and shared by every run from this home: a limit is
// the account's, so an agent limited by one run is not asked by another
// before its reset.
func (h *Home) Cooldowns() *runkit.Cooldowns {
	if h.Shared != "" {
		return runkit.OpenCooldowns(h.Shared)
	}
	return runkit.OpenCooldowns(h.Dir)
}

// RestingAgents returns the agents resting after a usage limit at now. An
// unreadable record is an error that says what to do, never an empty
// answer: asking a limited agent again burns its quota.
func (h *Home) RestingAgents(now time.Time) (map[string]runkit.Rest, error) {
	all, err := h.Cooldowns().All(now)
	return all, h.cooldownsErr(err)
}

// cooldownsErr words an error of the cooldowns file for the person who has
// to fix it: the file as they would type it, and what to do.
func (h *Home) cooldownsErr(err error) error {
	if err == nil {
		return nil
	}
	path := h.Cooldowns().Path()
	rel := path
	if h.ws != nil {
		rel = h.ws.Rel(path)
	}
	msg := strings.ReplaceAll(err.Error(), path, rel)
	if errors.As(err, new(*store.SchemaError)) {
		return errors.New(msg)
	}
	return fmt.Errorf("%s; ralph keeps there which agents rest after a usage limit and cannot go on without it: undo the change, or remove the file, which lets every agent be asked again at once", msg)
}

// Load reads the state; no state yet returns nil and no error.
func (h *Home) Load() (*LoopState, error) { return h.load() }

// save writes the state atomically. Only the runner that holds the lock,
// and update under it, call it.
func (h *Home) save(st *LoopState) error { return store.WriteJSON(h.StatePath(), st) }

// update applies change to the state under the run's lock and saves it
// when change says it changed something. A run that is working from this
// home holds the lock and would write its own state over the change, so
// update refuses then, naming the run. With no state there is nothing to
// change and nothing is created.
func (h *Home) update(command string, change func(*LoopState) (bool, error)) error {
	if st, err := h.load(); err != nil || st == nil {
		return err
	}
	lock, err := store.TryLock(h.LockPath(), command)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	st, err := h.load() // again: the state may have moved on before the lock
	if err != nil || st == nil {
		return err
	}
	changed, err := change(st)
	if err != nil || !changed {
		return err
	}
	return h.save(st)
}

// BlockedTask finds the task that `ralph unblock id` means: id itself, or
// when id is a story, its blocked subtask. It returns the task id the state
// knows and its record; a nil record means the state knows no such task.
func (st *LoopState) BlockedTask(id string) (string, *TaskRecord) {
	if st == nil {
		return id, nil
	}
	if rec := st.Tasks[id]; rec != nil {
		return id, rec
	}
	storyID, _ := tasks.ParseTaskID(id)
	if id != storyID {
		return id, nil
	}
	for tid, t := range st.Tasks {
		if sid, _ := tasks.ParseTaskID(tid); sid == storyID && t.Blocker != nil {
			return tid, t
		}
	}
	return id, nil
}

// Unblock clears a blocked task: its blocker, retry count, automatic
// retry and feedback go, so the next run picks it up afresh. id is a task
// or a story (then its blocked subtask). before runs first, under the same
// lock, with the task id the state knows (id itself when the state has no
// state or no record of it) and that record; its error changes nothing.
// Unblock returns the task id it cleared.
func (h *Home) Unblock(id string, before func(taskID string, rec *TaskRecord) error) (string, error) {
	// A state ralph cannot have written is refused before the lock file
	// is made: bad input changes nothing.
	if _, err := h.load(); err != nil {
		return id, err
	}
	lock, err := store.TryLock(h.LockPath(), "ralph unblock")
	if err != nil {
		return id, err
	}
	defer lock.Unlock()
	st, err := h.load()
	if err != nil {
		return id, err
	}
	tid, rec := st.BlockedTask(id)
	if err := before(tid, rec); err != nil {
		return tid, err
	}
	if rec == nil {
		return tid, nil
	}
	rec.Blocker, rec.RetryCount, rec.AutoRetried = nil, 0, false
	delete(st.Feedback, tid)
	return tid, h.save(st)
}

// ResetBreaker closes the circuit breaker and forgets its counts: a person
// decided to run again, and earlier attempts do not hold this one back.
// When it last opened is kept.
func (h *Home) ResetBreaker(command string) error {
	return h.update(command, func(st *LoopState) (bool, error) {
		b := st.Breaker
		if b.State != BreakerOpen && b.NoProgress == 0 && b.SameError == 0 {
			return false, nil
		}
		st.Breaker = Breaker{Opened: b.Opened}
		return true, nil
	})
}

// RetireRun ends an unfinished run over taskFile (as the repository names
// it) as interrupted for reason, so that the next run starts afresh
// instead of resuming it. A finished run, or one over another file, stays.
func (h *Home) RetireRun(command, taskFile, reason string) error {
	return h.update(command, func(st *LoopState) (bool, error) {
		if st.Finished || st.TaskFile != taskFile {
			return false, nil
		}
		st.Finished, st.Outcome, st.Reason = true, OutcomeInterrupted, reason
		return true, nil
	})
}

// ForgetStories drops the counters, blockers and feedback of the given
// stories' tasks, so that they start from zero.
func (h *Home) ForgetStories(command string, storyIDs []string) error {
	if len(storyIDs) == 0 {
		return nil
	}
	return h.update(command, func(st *LoopState) (bool, error) {
		changed := false
		for id := range st.Tasks {
			sid, _ := tasks.ParseTaskID(id)
			for _, s := range storyIDs {
				if sid == s {
					delete(st.Tasks, id)
					delete(st.Feedback, id)
					changed = true
				}
			}
		}
		return changed, nil
	})
}

// Block blocks a task by a person's decision while no run is going: a
// permanent blocker that requires a person, which only `ralph unblock`
// clears. before runs first, under the same lock, with the task id and
// its record (nil when the state has none); it marks the task file, and
// its error changes nothing. With no state yet, one is not created: the
// task file's mark is the blocker then.
func (h *Home) Block(id, reason string, before func(taskID string, rec *TaskRecord) error) error {
	if _, err := h.load(); err != nil {
		return err
	}
	lock, err := store.TryLock(h.LockPath(), "ralph block")
	if err != nil {
		return err
	}
	defer lock.Unlock()
	st, err := h.load()
	if err != nil {
		return err
	}
	var rec *TaskRecord
	if st != nil {
		rec = st.Tasks[id]
	}
	if err := before(id, rec); err != nil {
		return err
	}
	if st == nil {
		// No run yet: a finished record holds the blocker, which the
		// next run carries on like any task's counters (a markdown PRD
		// cannot mark a story blocked itself).
		now := time.Now().UTC()
		st = &LoopState{SchemaVersion: StateSchemaVersion, RunID: "blocked-" + now.Format("20060102-150405"), Finished: true,
			Outcome: OutcomeNeedsHuman, Reason: id + " blocked by a person before any run", Machine: Machine{State: StateExit},
			StartedAt: now, EnteredAt: now, UpdatedAt: now, Tasks: map[string]*TaskRecord{}, Feedback: map[string]string{},
			Metrics: Metrics{StateMillis: map[State]int64{}}}
	}
	t := st.task(id)
	t.Blocker = &BlockerRecord{Reason: reason, Type: "permanent", RequiresHuman: true, InFile: true, ByPerson: true, Iteration: st.Machine.Iteration}
	return h.save(st)
}
