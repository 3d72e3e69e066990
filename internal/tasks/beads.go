package tasks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/beads"
)

// KindBeads is a beads issue database (.beads, driven through the bd CLI):
// the tasks are bd's issues, bd decides what is ready, and ralph records
// outcomes with bd close, bd comments add and bd update.
const KindBeads Kind = "beads"

// BeadsSourcePrefix starts a source value that names a molecule to work
// in: "beads:rl-mol-eap" keeps the loop inside that molecule
// (bd ready --mol).
const BeadsSourcePrefix = "beads:"

// ParseBeadsSource reports whether a --tasks or [tasks] source value names
// the beads source, and the molecule it names ("" for plain "beads").
func ParseBeadsSource(v string) (mol string, ok bool) {
	if v == string(KindBeads) {
		return "", true
	}
	if m, found := strings.CutPrefix(v, BeadsSourcePrefix); found && m != "" {
		return m, true
	}
	return "", false
}

// BeadsSource is the task source over a beads database. Besides Source it
// offers Prime (bd prime, for MEMORY_LOAD) and Claim (bd update --claim,
// for STORY_SELECT), which the loop uses when a source has them.
type BeadsSource struct {
	root   string
	mol    string
	client *beads.Client
	// checked is set once bd's version was found good enough.
	checked bool
	// Ctx bounds bd commands; nil means context.Background().
	Ctx context.Context

	// mu guards the answers below: parallel workers share the source.
	mu sync.Mutex
	// cache holds bd's answers (list and ready) with ralph's own writes
	// since laid over them. Every bd process costs half a second, the
	// loop reads the board several times an iteration, and between the
	// points where the loop says so (Prime, Forget) only ralph changes
	// bd. nil when both must be read.
	cache *beadsAnswers
	// closedHere are the issues this process closed: none of them can
	// hold ralph's audit comment yet, so Audit need not read comments.
	closedHere map[string]bool
	// keepNothing makes every read and check ask bd (KeepNothing).
	keepNothing bool
}

// KeepNothing makes the source ask bd every time, as a parallel build
// needs: its workers, its merge queue and other ralphs change bd at any
// moment, so nothing read earlier can stand in for bd's answer.
func (s *BeadsSource) KeepNothing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepNothing, s.cache = true, nil
}

// beadsAnswers are bd's answers that make a board; a nil list is one to
// ask for again.
type beadsAnswers struct {
	all, ready         []beads.Issue
	haveAll, haveReady bool
	// listStale says all was read after the last agent, before a new
	// iteration: only ralph's own writes are laid over it, and another
	// ralph or a person may have changed bd since. The next bd ready
	// tells whether they did (see readyAgrees).
	listStale bool
}

// OpenBeads returns the beads source of the repository at root, working
// inside molecule mol when it is not empty. A nil client runs the real bd.
func OpenBeads(root, mol string, client *beads.Client) *BeadsSource {
	if client == nil {
		client = beads.New(root)
	}
	return &BeadsSource{root: root, mol: mol, client: client}
}

// Client is the bd client the source uses.
func (s *BeadsSource) Client() *beads.Client { return s.client }

// Molecule is the molecule the source keeps the work in, or "".
func (s *BeadsSource) Molecule() string { return s.mol }

func (s *BeadsSource) ctx() context.Context {
	if s.Ctx != nil {
		return s.Ctx
	}
	return context.Background()
}

// Kind implements Source.
func (s *BeadsSource) Kind() Kind { return KindBeads }

// Path is the .beads folder.
func (s *BeadsSource) Path() string { return filepath.Join(s.root, beads.DirName) }

// types that are containers or plumbing rather than work for an agent.
var beadsSkipTypes = map[string]bool{
	"epic": true, "molecule": true, "gate": true, "merge-request": true, "message": true,
	"agent": true, "role": true, "rig": true, "event": true,
}

// Load reads the issues from bd. Ready issues (bd ready, or bd ready --mol
// inside a molecule) are not started, in bd's order; in_progress ones are
// in progress; closed ones complete; blocked ones blocked. An open issue
// that is not ready waits on its open blockers (from bd blocked), or is
// shown as blocked when bd holds it back for another reason (deferred, a
// blocker outside the board). Epics, molecule roots and other containers
// are not tasks. A missing .beads folder yields an error wrapping
// fs.ErrNotExist.
func (s *BeadsSource) Load() (*Board, error) {
	ctx := s.ctx()
	if info, err := os.Stat(s.Path()); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("no beads database at %s (run `bd init` first): %w", s.Path(), fs.ErrNotExist)
	}
	if !s.checked {
		if _, _, err := s.client.Check(ctx); err != nil {
			return nil, err
		}
		s.checked = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		s.cache = &beadsAnswers{}
	}
	if err := s.read(ctx, s.cache); err != nil {
		s.cache = nil
		return nil, err
	}
	// A new board every time from the answers: callers lay their own
	// records over the board they get.
	board := beadsBoard(s.Path(), s.client.Actor, slices.Clone(s.cache.all), s.cache.ready)
	if s.keepNothing {
		s.cache = nil
	}
	return board, nil
}

// read asks bd for what a is missing: the issues (bd list) and the ready
// ones (bd ready), a process each. What an open issue that is not ready
// waits on comes from the "blocks" edges in the list (bd blocked would
// be a third process).
func (s *BeadsSource) read(ctx context.Context, a *beadsAnswers) error {
	if a.haveAll && a.listStale && !a.haveReady {
		// A new iteration with the list read after the last agent: bd
		// ready, which the iteration asks anyway, says whether anyone
		// changed bd since. When it agrees the list stands (one bd
		// process fewer an iteration); when not, the list is read again.
		ready, err := s.client.Ready(ctx, beads.ReadyOptions{Mol: s.mol, IncludeEphemeral: true})
		if err != nil {
			return err
		}
		a.listStale = false
		if !readyAgrees(ready, a.all) {
			all, err := s.list(ctx)
			if err != nil {
				return err
			}
			a.all = all
		}
		a.all = freshen(a.all, ready)
		a.ready, a.haveReady = ready, true
		return nil
	}
	if !a.haveAll {
		all, err := s.list(ctx)
		if err != nil {
			return err
		}
		if a.haveReady {
			a.ready = readyAfter(a.ready, a.all, all)
		}
		a.all, a.haveAll, a.listStale = all, true, false
	}
	if !a.haveReady {
		ready, err := s.client.Ready(ctx, beads.ReadyOptions{Mol: s.mol, IncludeEphemeral: true})
		if err != nil {
			return err
		}
		a.all = freshen(a.all, ready)
		a.ready, a.haveReady = ready, true
	}
	return nil
}

// list is every issue of the board: bd list, or a molecule's steps.
func (s *BeadsSource) list(ctx context.Context) ([]beads.Issue, error) {
	if s.mol != "" {
		return s.moleculeIssues(ctx)
	}
	return s.client.List(ctx, true)
}

// freshen lays the ready answer, the newer one, over the list: its
// issues are open, with the text bd has now.
func freshen(all, ready []beads.Issue) []beads.Issue {
	newer := make(map[string]beads.Issue, len(ready))
	for _, is := range ready {
		newer[is.ID] = is
	}
	for i := range all {
		is, ok := newer[all[i].ID]
		if !ok {
			continue
		}
		all[i].Status = beads.StatusOpen
		// Text a person edited since the list was read; ready's output
		// leaves empty fields out, so an empty one says nothing.
		for _, f := range [][2]*string{{&all[i].Title, &is.Title}, {&all[i].Description, &is.Description}, {&all[i].AcceptanceCriteria, &is.AcceptanceCriteria}} {
			if *f[1] != "" {
				*f[0] = *f[1]
			}
		}
	}
	return all
}

// readyAgrees says whether a fresh bd ready answer is what the kept list
// (with ralph's writes laid over) makes ready: every ready issue listed
// and open, and every open issue with no open blocker ready. A claim, a
// close, a reopen or a new issue by someone else breaks that. What it
// cannot see (someone closing an issue that waits, or one in progress)
// the agent guard leaves alone anyway: it guards open work and the
// agent's own story. When bd holds an open issue back for a reason of
// its own (deferred), the list is read again every iteration: slower,
// never wrong.
func readyAgrees(ready, all []beads.Issue) bool {
	status := make(map[string]string, len(all))
	for _, is := range all {
		status[is.ID] = is.Status
	}
	inReady := make(map[string]bool, len(ready))
	for _, is := range ready {
		inReady[is.ID] = true
		st, listed := status[is.ID]
		if !listed && is.Ephemeral {
			continue // bd list leaves ephemeral issues out
		}
		if st != beads.StatusOpen {
			return false
		}
	}
	for _, is := range all {
		if is.Status != beads.StatusOpen || inReady[is.ID] {
			continue
		}
		waits := false
		for _, d := range is.Dependencies {
			if d.Kind() == "blocks" && status[d.Target()] != beads.StatusClosed {
				waits = true
				break
			}
		}
		if !waits {
			return false
		}
	}
	return true
}

// readyAfter is the ready list kept from before the agent, with the
// issues the agent created (in now, not in before) that bd would call
// ready: open, with no open blocker. bd ready is asked again at the next
// iteration's Prime; until then this is what the board shows.
func readyAfter(ready, before, now []beads.Issue) []beads.Issue {
	known := map[string]bool{}
	for _, is := range before {
		known[is.ID] = true
	}
	status := map[string]string{}
	for _, is := range now {
		status[is.ID] = is.Status
	}
	out := slices.Clone(ready)
	for _, is := range now {
		if known[is.ID] || is.Status != beads.StatusOpen {
			continue
		}
		waits := false
		for _, d := range is.Dependencies {
			if d.Kind() == "blocks" && status[d.Target()] != beads.StatusClosed {
				waits = true
			}
		}
		if !waits {
			out = append(out, is)
		}
	}
	return out
}

// Forget marks the issues read as old: the loop calls it after the
// agent ran, which may have closed or created some. The next Load reads
// them again (bd list); which are ready is asked again at the next
// iteration's Prime.
func (s *BeadsSource) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache != nil {
		s.cache.haveAll = false
	}
}

// Reset forgets every answer: the next Load asks bd for all of it. The
// parallel scheduler calls it before each of its reads, since other
// workers' agents and the merge queue change bd between them.
func (s *BeadsSource) Reset() { s.drop() }

// drop forgets every answer: after a write whose effect ralph does not
// lay over them itself.
func (s *BeadsSource) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache = nil
}

// setCached lays a write of ralph's over the kept answers: the issue's
// new status, and out of the ready list unless it is open.
func (s *BeadsSource) setCached(id, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		return
	}
	listed := false
	for i := range s.cache.all {
		if s.cache.all[i].ID == id {
			s.cache.all[i].Status, listed = status, true
		}
	}
	if !listed {
		// Only bd ready named it (an ephemeral issue, which bd list
		// leaves out): keep it on the board with its new status.
		for _, is := range s.cache.ready {
			if is.ID == id {
				is.Status = status
				s.cache.all = append(s.cache.all, is)
				break
			}
		}
	}
	if status != beads.StatusOpen {
		s.cache.ready = slices.DeleteFunc(slices.Clone(s.cache.ready), func(is beads.Issue) bool { return is.ID == id })
	}
}

// cached returns the kept answer about one issue, if any.
func (s *BeadsSource) cached(id string) (beads.Issue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache != nil && s.cache.haveAll {
		for _, is := range s.cache.all {
			if is.ID == id {
				return is, true
			}
		}
	}
	return beads.Issue{}, false
}

// Pick is bd's own choice of the next task (REQ-030): `bd ready --json
// --limit 1`, or inside a molecule the first ready step of `bd ready
// --mol`, which lists every step whatever the limit. Containers (epics,
// molecule roots) are not tasks; when bd's first answer is one, the whole
// ready list is read and its first task taken. "" means bd has nothing
// ready.
func (s *BeadsSource) Pick(ctx context.Context) (string, error) {
	// The board read this iteration holds bd's whole ready list, in
	// bd's order: its first task is bd's pick, without asking again.
	s.mu.Lock()
	if s.cache != nil && s.cache.haveReady {
		defer s.mu.Unlock()
		for _, is := range s.cache.ready {
			if !beadsSkipTypes[is.IssueType] && is.ID != s.mol {
				return is.ID, nil
			}
		}
		return "", nil
	}
	s.mu.Unlock()
	ready, err := s.client.Ready(ctx, beads.ReadyOptions{Mol: s.mol, Limit: 1, IncludeEphemeral: true})
	if err != nil {
		return "", err
	}
	if len(ready) > 0 && beadsSkipTypes[ready[0].IssueType] && s.mol == "" {
		if ready, err = s.client.Ready(ctx, beads.ReadyOptions{IncludeEphemeral: true}); err != nil {
			return "", err
		}
	}
	for _, is := range ready {
		if !beadsSkipTypes[is.IssueType] && is.ID != s.mol {
			return is.ID, nil
		}
	}
	return "", nil
}

// moleculeIssues lists the molecule's steps: the issues whose parent is the
// molecule root, and their children.
func (s *BeadsSource) moleculeIssues(ctx context.Context) ([]beads.Issue, error) {
	var out []beads.Issue
	seen := map[string]bool{}
	queue := []string{s.mol}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		kids, err := s.client.List(ctx, true, "--parent", parent)
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			if seen[k.ID] || k.ID == s.mol {
				continue
			}
			seen[k.ID] = true
			out = append(out, k)
			queue = append(queue, k.ID)
		}
	}
	return out, nil
}

// beadsBoard maps bd's answers onto a Board.
func beadsBoard(path, actor string, all, ready []beads.Issue) *Board {
	byID := map[string]beads.Issue{}
	for _, is := range all {
		byID[is.ID] = is
	}
	isReady := map[string]bool{}
	var order []string
	for _, is := range ready {
		if _, ok := byID[is.ID]; !ok {
			byID[is.ID] = is
			all = append(all, is)
		}
		if !isReady[is.ID] {
			isReady[is.ID] = true
			order = append(order, is.ID)
		}
	}
	// What bd blocked would say: the open blockers of each issue.
	waitsOn := map[string][]string{}
	for _, is := range all {
		for _, d := range is.Dependencies {
			if d.Kind() != "blocks" {
				continue
			}
			if t, ok := byID[d.Target()]; ok && t.Status == beads.StatusClosed {
				continue
			}
			waitsOn[is.ID] = append(waitsOn[is.ID], d.Target())
		}
	}
	for _, is := range all {
		if !isReady[is.ID] {
			order = append(order, is.ID)
		}
	}
	inBoard := map[string]bool{}
	for _, id := range order {
		if is := byID[id]; !beadsSkipTypes[is.IssueType] {
			inBoard[id] = true
		}
	}
	b := &Board{Kind: KindBeads, Path: path}
	for _, id := range order {
		if !inBoard[id] {
			continue
		}
		is := byID[id]
		st := Story{ID: is.ID, Title: strings.TrimSpace(is.Title), Description: is.Description, Priority: is.Priority + 1, Line: 0}
		if st.Title == "" {
			st.Title = is.ID
		}
		switch is.Status {
		case beads.StatusClosed:
			st.Status = StatusComplete
		case beads.StatusInProgress, beads.StatusHooked:
			st.Status = StatusInProgress
			// Claimed by another actor: theirs to finish, not ralph's to
			// resume (ralph claims as its client's actor).
			if actor != "" && is.Assignee != "" && is.Assignee != actor {
				st.ClaimedBy = is.Assignee
			}
		case beads.StatusBlocked:
			st.Status = StatusBlocked
		case beads.StatusOpen:
			st.Status = StatusNotStarted
			if !isReady[id] {
				var deps []string
				for _, d := range waitsOn[id] {
					if inBoard[d] {
						deps = append(deps, d)
					}
				}
				if len(deps) == 0 {
					// Held back by something outside the board (a
					// deferred parent, a gate): not selectable.
					st.Status = StatusBlocked
				}
				st.DependsOn = deps
			}
		default: // deferred, pinned, custom frozen statuses
			st.Status = StatusBlocked
		}
		st.Done = st.Status == StatusComplete
		st.Criteria = beadsCriteria(is.AcceptanceCriteria)
		st.Block = beadsBlock(is)
		b.Stories = append(b.Stories, st)
	}
	dropCycles(b)
	return b
}

// dropCycles removes dependencies that would make the board invalid: bd
// refuses cycles, but a board must never carry one whatever bd printed.
func dropCycles(b *Board) {
	deps := make([][]depRef, len(b.Stories))
	for i, s := range b.Stories {
		for _, d := range s.DependsOn {
			deps[i] = append(deps[i], depRef{id: d})
		}
	}
	if checkGraph(b.Path, "dependencies", b.Stories, deps) != nil {
		for i := range b.Stories {
			if len(b.Stories[i].DependsOn) > 0 && b.Stories[i].Status == StatusNotStarted {
				b.Stories[i].Status = StatusBlocked
			}
			b.Stories[i].DependsOn = nil
		}
	}
}

// beadsCriteria reads acceptance criteria: one per non-empty line, list
// markers and checkboxes removed, with the usual "(verify: `cmd`)" suffix.
func beadsCriteria(text string) []Criterion {
	var out []Criterion
	for i, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		for _, p := range []string{"- ", "* ", "+ "} {
			t = strings.TrimPrefix(t, p)
		}
		done := false
		switch {
		case strings.HasPrefix(t, "[ ] "):
			t = t[4:]
		case strings.HasPrefix(t, "[x] "), strings.HasPrefix(t, "[X] "):
			t, done = t[4:], true
		}
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		rest, verify := splitVerify(t)
		if rest == "" {
			rest = t
		}
		out = append(out, Criterion{Text: rest, Done: done, Line: i + 1, Verify: verify})
	}
	return out
}

// beadsBlock renders an issue for the prompt.
func beadsBlock(is beads.Issue) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %s", is.ID, is.Title)
	if is.IssueType != "" {
		fmt.Fprintf(&sb, " (%s, P%d)", is.IssueType, is.Priority)
	}
	if d := strings.TrimSpace(is.Description); d != "" {
		sb.WriteString("\n\n" + d)
	}
	if a := strings.TrimSpace(is.AcceptanceCriteria); a != "" {
		sb.WriteString("\n\nAcceptance criteria:\n" + a)
	}
	return sb.String()
}

// MarkDone closes the issue with a reason (bd close --reason), and the
// molecule root once its last step is closed. An issue already closed is
// left as it is, so COMMIT may run again after a crash.
func (s *BeadsSource) MarkDone(storyID, subtaskID string, now time.Time) error {
	if subtaskID != "" {
		return fmt.Errorf("%s: issue %s: %w %q: beads issues have no subtasks", s.Path(), storyID, ErrSubtaskNotFound, subtaskID)
	}
	ctx := s.ctx()
	// The board read after the agent knows the issue's status; bd show
	// only when it is not on it.
	is, ok := s.cached(storyID)
	if !ok {
		var err error
		if is, err = s.client.Show(ctx, storyID); err != nil {
			return s.notFound(storyID, err)
		}
	}
	if is.Status == beads.StatusClosed {
		// COMMIT again after a crash: the root may still need closing.
		return s.closeFinishedMolecule(ctx)
	}
	// How ralph accepted it (verified on its evidence, or on the agent's
	// word) is in the audit comment the loop adds next.
	if err := s.client.Close(ctx, storyID, "ralph: done (ralph's comment says how it was accepted)"); err != nil {
		return err
	}
	s.setCached(storyID, beads.StatusClosed)
	s.mu.Lock()
	if !s.keepNothing {
		if s.closedHere == nil {
			s.closedHere = map[string]bool{}
		}
		s.closedHere[storyID] = true
	}
	s.mu.Unlock()
	// The audit comment (bd comments add) is written by Audit, which the
	// loop calls after the git commit with the iteration's summary.
	return s.closeFinishedMolecule(ctx)
}

// closeFinishedMolecule closes the molecule root once every step is done.
func (s *BeadsSource) closeFinishedMolecule(ctx context.Context) error {
	if s.mol == "" {
		return nil
	}
	steps, err := s.moleculeIssues(ctx)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if st.Status != beads.StatusClosed {
			return nil
		}
	}
	root, err := s.client.Show(ctx, s.mol)
	if err != nil || root.Status == beads.StatusClosed {
		return nil
	}
	return s.client.Close(ctx, s.mol, "ralph: every step of the molecule is done")
}

// SetState records a status: blocked adds the comment "Stuck: <reason>" and
// sets status blocked (the circuit breaker of REQ-032); in progress and not
// started reopen the issue; complete closes it. The retry count stays in
// ralph's state.
func (s *BeadsSource) SetState(storyID string, status Status, _ int, b *Blocker, now time.Time) error {
	if err := validateStatus(status); err != nil {
		return err
	}
	ctx := s.ctx()
	is, err := s.client.Show(ctx, storyID)
	if err != nil {
		return s.notFound(storyID, err)
	}
	if status != StatusComplete {
		// A rare write: read bd again afterwards rather than guess.
		defer s.drop()
	}
	switch status {
	case StatusComplete:
		return s.MarkDone(storyID, "", now)
	case StatusBlocked:
		reason := "unknown error"
		if b != nil && strings.TrimSpace(b.Reason) != "" {
			reason = strings.Join(strings.Fields(b.Reason), " ")
		}
		if len(reason) > 500 {
			reason = reason[:500] + "…"
		}
		if is.Status == beads.StatusBlocked {
			return nil
		}
		if err := s.client.Comment(ctx, storyID, "Stuck: "+reason); err != nil {
			return err
		}
		return s.client.SetStatus(ctx, storyID, beads.StatusBlocked)
	case StatusInProgress:
		if is.Status == beads.StatusInProgress {
			return nil
		}
		return s.client.SetStatus(ctx, storyID, beads.StatusInProgress)
	default:
		if is.Status == beads.StatusOpen {
			return nil
		}
		return s.client.SetStatus(ctx, storyID, beads.StatusOpen)
	}
}

func (s *BeadsSource) notFound(id string, err error) error {
	var be *beads.Error
	if errors.As(err, &be) && strings.Contains(strings.ToLower(be.Msg+be.Stderr), "no issue") {
		return fmt.Errorf("%s: %w %q: %v", s.Path(), ErrStoryNotFound, id, err)
	}
	return err
}

// Prime runs bd prime: the beads workflow context for the prompt's memory
// section (bd honours .beads/PRIME.md itself).
func (s *BeadsSource) Prime(ctx context.Context) (string, error) {
	// Prime starts an iteration. Another ralph or a person may have
	// changed bd since the last agent, and what the board says before
	// the agent is what the agent's changes are told from: a stale one
	// would blame the agent for theirs. bd ready is asked again; the
	// list read after the last agent stands only when that answer
	// agrees with it (read).
	s.mu.Lock()
	if s.cache != nil && s.cache.haveAll && !s.keepNothing {
		s.cache.ready, s.cache.haveReady, s.cache.listStale = nil, false, true
	} else {
		s.cache = nil
	}
	s.mu.Unlock()
	return s.client.Prime(ctx)
}

// Claim marks the selected issue as taken by ralph (bd update --claim).
func (s *BeadsSource) Claim(ctx context.Context, taskID string) error {
	storyID, _ := ParseTaskID(taskID)
	if err := s.client.Claim(ctx, storyID); err != nil {
		s.drop()
		return err
	}
	s.setCached(storyID, beads.StatusInProgress)
	return nil
}
