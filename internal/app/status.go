package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Status builds the status document of the workspace: what `ralph status
// --json` prints and the front ends show. srcErr says why the task file
// could not be read (the document then has no board); err is a failure
// that leaves no document.
func (a *App) Status(tasksFlag string) (rep status.Report, st *loop.LoopState, srcErr, err error) {
	ws := a.WS
	rep = status.Report{SchemaVersion: status.SchemaVersion, Engine: status.EngineLocal,
		RetryCounts: map[string]int{}, Blocked: []status.Blocked{}, Cooldowns: map[string]string{}}
	if h, held := store.Held(ws.LockPath()); held {
		rep.Running, rep.Holder = true, h
	}
	home := loop.HomeOf(ws)
	st, err = home.Load()
	if err != nil {
		return rep, nil, nil, err
	}
	// The cooldowns are the workspace's, recorded by whichever run met
	// the limit, and outlive the state of any one run.
	rests, err := home.RestingAgents(a.now())
	if err != nil {
		return rep, nil, nil, err
	}
	for name, r := range rests {
		rep.Cooldowns[name] = r.Until.UTC().Format(time.RFC3339)
	}
	src, srcErr := a.TaskSource(tasksFlag, "")
	if ue := (*errs.UsageError)(nil); errors.As(srcErr, &ue) {
		return rep, nil, nil, srcErr // a --tasks that names nothing
	}
	var board *tasks.Board
	if srcErr == nil {
		rep.TaskFile, rep.TaskSource = ws.Rel(src.Path()), string(src.Kind())
		if board, err = src.Load(); err == nil {
			rep.Stories, rep.StoriesDone = len(board.Stories), len(board.Stories)-board.Remaining()
		} else {
			if errors.Is(err, fs.ErrNotExist) {
				srcErr = missingSource(ws, src)
			} else {
				srcErr = fmt.Errorf("%s cannot be read: %s", ws.Rel(src.Path()), strings.ReplaceAll(err.Error(), ws.Root+"/", ""))
			}
		}
	}
	if st != nil {
		rep.RunID, rep.State, rep.Finished = st.RunID, string(st.Machine.State), st.Finished
		rep.Outcome, rep.Reason = string(st.Outcome), st.Reason
		rep.Iteration, rep.MaxIterations = st.Machine.Iteration, st.MaxIterations
		rep.CurrentTask = st.Machine.TaskID
		rep.CurrentStory, _ = tasks.ParseTaskID(st.Machine.TaskID)
		end := st.UpdatedAt
		if rep.Running {
			end = a.now()
		}
		rep.ElapsedMillis = end.Sub(st.StartedAt).Milliseconds()
		rep.Memory, rep.MemoryOK, rep.Neo4jOK = st.MemoryStore, st.MemoryConnected, st.Neo4jConnected
		m := st.Metrics
		rep.Metrics = &m
		br, bud := st.Breaker, st.Budget
		rep.Breaker, rep.Budget = &br, &bud
		rep.LastIteration = lastIteration(ws.RunsDir(), st.RunID)
		ids := make([]string, 0, len(st.Tasks))
		for id := range st.Tasks {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			t := st.Tasks[id]
			if t.RetryCount > 0 {
				rep.RetryCounts[id] = t.RetryCount
			}
			if t.Blocker != nil {
				rep.Blocked = append(rep.Blocked, status.Blocked{ID: id, Reason: t.Blocker.Reason, Type: t.Blocker.Type, RequiresHuman: t.Blocker.RequiresHuman, WorkRef: t.Blocker.Ref, Stash: t.Blocker.Stash})
			}
		}
	}
	addHolds(ws, &rep, board)
	if srcErr == nil {
		var rec BeadsRecord
		if bs, ok := src.(*tasks.BeadsSource); ok {
			rec, _ = LoadBeadsRecord(ws)
			// The molecule a build poured or was given is remembered.
			if bs.Molecule() == "" && rec.Molecule != "" {
				src = tasks.OpenBeads(ws.Root, rec.Molecule, bs.Client())
			}
		}
		rep.Beads = beadsStatus(src, &rep)
		if rep.Beads != nil && rec.ProtoPending() {
			rep.Beads.PendingProto = rec.Proto
		}
	}
	if rep.PendingHints, err = CountHints(ws); err != nil {
		return rep, nil, nil, err
	}
	rep.Session = activeSessionStatus(ws, a.now())
	if rep.Parallel, err = parallelStatus(ws, a.now(), rep.Running); err != nil {
		return rep, nil, nil, err
	}
	if b := boardOnTarget(ws, src, srcErr, rep.Parallel); b != nil {
		board = b
		rep.Stories, rep.StoriesDone = len(board.Stories), len(board.Stories)-board.Remaining()
	}
	if p := rep.Parallel; p != nil && (st == nil || p.StartedAt.After(st.StartedAt)) {
		// The last run is a parallel build, which keeps no state.json of
		// its own here: the run's fields are its, not empty (the
		// dashboard's run card showed "Run –, Elapsed 0ms") nor those of
		// an older build.
		rep.RunID, rep.Finished, rep.Outcome, rep.Reason, rep.ElapsedMillis = p.RunID, p.Finished, p.Outcome, p.Reason, p.ElapsedMillis
		rep.State, rep.Iteration, rep.MaxIterations, rep.CurrentTask, rep.CurrentStory = "", 0, 0, "", ""
	}
	fillBoard(&rep, board, st)
	fillControl(ws, &rep)
	return rep, st, srcErr, nil
}

// boardOnTarget reads the task file from the branch the last parallel
// build landed on when the checkout is on another one (something switched
// it during the run): the landings are there, not in the checkout's task
// file. Nil when the checkout is on the target or it cannot be read.
func boardOnTarget(ws *workspace.Workspace, src tasks.Source, srcErr error, p *status.Parallel) *tasks.Board {
	if p == nil || srcErr != nil || p.Target == "" {
		return nil
	}
	ctx := context.Background()
	snap, err := ws.Repo.Snapshot(ctx)
	if err != nil || snap.Branch == p.Target {
		return nil
	}
	board, err := engine.BoardAt(ctx, ws.Repo, src, filepath.ToSlash(ws.Rel(src.Path())), "refs/heads/"+p.Target)
	if err != nil {
		return nil
	}
	p.CheckoutBranch = snap.Branch
	if p.CheckoutBranch == "" {
		p.CheckoutBranch = "HEAD"
	}
	return board
}

// addHolds marks the tasks a person blocked (`ralph block`): they are
// blocked whatever run or engine took the block, and whether one did.
// A block of a story done since is no longer in force.
func addHolds(ws *workspace.Workspace, rep *status.Report, board *tasks.Board) {
	for _, c := range (control.Folder{Dir: ws.Path("control")}).Holds() {
		if board != nil {
			s, ok := board.Find(storyOf(c.Task))
			if !ok || s.Done {
				continue
			}
		}
		i := slices.IndexFunc(rep.Blocked, func(b status.Blocked) bool { return b.ID == c.Task })
		if i < 0 {
			rep.Blocked = append(rep.Blocked, status.Blocked{ID: c.Task, Reason: control.HeldReason(c), Type: string(tasks.BlockerPermanent), RequiresHuman: true})
			i = len(rep.Blocked) - 1
		}
		rep.Blocked[i].ByPerson, rep.Blocked[i].RequiresHuman = true, true
	}
}

// parallelStatus reads the registry of the workspace's last parallel
// build; nil when it never had one. held says the workspace's lock is
// held: a build that has not finished is then running.
func parallelStatus(ws *workspace.Workspace, now time.Time, held bool) (*status.Parallel, error) {
	reg, ok, err := engine.LoadRegistry(ws.Dir())
	if err != nil || !ok {
		return nil, err
	}
	ps := &status.Parallel{RunID: reg.RunID, Target: reg.Target, Workers: reg.Workers, Finished: reg.Finished, Outcome: reg.Outcome, Reason: reg.Reason,
		Running: held && !reg.Finished, StartedAt: reg.StartedAt,
		Working: []status.Worker{}, Queue: []status.Queued{}, NeedsReview: []status.Queued{}, Blocked: []status.Queued{}, Worktrees: reg.WorktreeRoot}
	end := now
	if fi, err := os.Stat(engine.RegistryPath(ws.Dir())); err == nil && !ps.Running {
		end = fi.ModTime() // the registry is written last when the build ends or stops
	}
	if !reg.StartedAt.IsZero() && end.After(reg.StartedAt) {
		ps.ElapsedMillis = end.Sub(reg.StartedAt).Milliseconds()
	}
	for _, t := range reg.Sorted() {
		q := status.Queued{Task: t.ID, State: string(t.State), Attempt: t.Attempt, Branch: t.Branch, Reason: t.Reason, Conflicts: t.Conflicts, Batch: t.Batch}
		switch t.State {
		case landing.Landed:
			ps.Landed++
			ps.LandedTasks = append(ps.LandedTasks, t.ID)
		case landing.Working, landing.SentBack:
			w := status.Worker{Worker: t.Worker, Task: t.ID, State: string(t.State), Attempt: t.Attempt, Worktree: t.Worktree, Branch: t.Branch,
				ElapsedMillis: now.Sub(t.Since).Milliseconds()}
			if t.Home != "" {
				if st, err := (&loop.Home{Dir: t.Home}).Load(); err == nil && st != nil {
					w.State = string(st.Machine.State)
					if li := lastIteration(filepath.Join(t.Home, "runs"), st.RunID); li != nil {
						w.Agent = li.Agent
					}
				}
			}
			ps.Working = append(ps.Working, w)
		case landing.Queued, landing.Landing:
			ps.Queue = append(ps.Queue, q)
		case landing.NeedsReview:
			q.Look = fmt.Sprintf("git diff %s...%s", reg.Target, t.Branch)
			ps.NeedsReview = append(ps.NeedsReview, q)
		case landing.Blocked:
			q.Look = fmt.Sprintf("git log %s..%s", reg.Target, t.Branch)
			ps.Blocked = append(ps.Blocked, q)
		}
	}
	return ps, nil
}

// lastIteration reads the newest iteration record of a run.
func lastIteration(runsDir, runID string) *loop.IterationRecord {
	if runID == "" {
		return nil
	}
	matches, _ := filepath.Glob(filepath.Join(runsDir, runID, "iter-*.json"))
	best, bestN := "", -1
	for _, m := range matches {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(m), "iter-%d.json", &n); err == nil && n > bestN {
			best, bestN = m, n
		}
	}
	if best == "" {
		return nil
	}
	var rec loop.IterationRecord
	if _, err := store.ReadJSON(best, 1, &rec); err != nil {
		return nil
	}
	return &rec
}

// beadsStatus asks bd about the beads source; nil for other sources.
// Issues bd holds as blocked that ralph's state does not list are added to
// rep.Blocked.
func beadsStatus(src tasks.Source, rep *status.Report) *status.Beads {
	bs, ok := src.(*tasks.BeadsSource)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := bs.Client()
	out := &status.Beads{Molecule: bs.Molecule(), Blocked: []string{}}
	v, note, err := c.Check(ctx)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Version, out.Daemon = v.String(), note
	if list, err := c.List(ctx, false, "--status", beads.StatusBlocked); err == nil {
		known := map[string]bool{}
		for _, b := range rep.Blocked {
			known[b.ID] = true
		}
		for _, is := range list {
			out.Blocked = append(out.Blocked, is.ID)
			if !known[is.ID] {
				rep.Blocked = append(rep.Blocked, status.Blocked{ID: is.ID, Reason: "status blocked in beads: " + is.Title, Type: "beads", RequiresHuman: true})
			}
		}
	} else {
		out.Error = err.Error()
	}
	if out.Molecule != "" {
		if p, err := c.MolProgress(ctx, out.Molecule); err == nil {
			out.Progress = &p
		}
		if cur, err := c.MolCurrent(ctx, out.Molecule); err == nil && len(cur) > 0 && cur[0].NextStep != nil {
			out.Current = cur[0].NextStep.ID + ": " + cur[0].NextStep.Title
		}
	}
	return out
}

// missingSource says that src does not exist yet and what makes one.
func missingSource(ws *workspace.Workspace, src tasks.Source) error {
	if c, ok := src.(tasks.Creatable); ok {
		return fmt.Errorf("no %s at %s: run `%s` to create one (ralph run works without one)", c.Noun(), ws.Rel(src.Path()), c.CreateCommand())
	}
	return fmt.Errorf("none yet at %s", ws.Rel(src.Path()))
}

func CountHints(ws *workspace.Workspace) (int, error) {
	p := ws.Path("context.md")
	b, err := inputlimit.ReadFile(p)
	if inputlimit.IsRefusal(err) {
		// A named pipe there would have hung the read: say so.
		return 0, errors.New(strings.Replace(err.Error(), p, ws.Rel(p), 1))
	}
	if err != nil {
		return 0, nil
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "- ") {
			n++
		}
	}
	return n, nil
}
