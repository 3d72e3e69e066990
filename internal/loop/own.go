package loop

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
)

// ralph's own files are ralph's: the config that says what the checks
// are, the prompts, and the task file's stories, titles and criteria. An
// agent that edits them (run = "true", a criterion's verify command
// rewritten to `true`) must not get that into the next run or a commit.
// ralph copies them before the agent runs and puts back whatever the
// agent changed, as it always did with the marks of other stories. The
// agent's ticks on its own story are its claim (seed 001): they stay, are
// recorded in the attempt, and are taken off again when the attempt is
// not accepted; the views show the story as being verified meanwhile,
// from the run's state, never as done. guardrails.md, progress.md and
// the plan stay the agent's to write (seed 001).

// ownFile is one of ralph's files as it was before the agent.
type ownFile struct {
	rel    string // relative to the work tree, slash-separated
	copy   string // in the attempt's folder of copies
	absent bool
	// data is the content, kept in memory by the process that copied it:
	// the folder of copies is in the run's folder, which the agent can
	// write, so only a resume after a kill reads the copies back.
	data []byte
}

// ownCopies are the copies made before an agent, named by their folder in
// the run's.
type ownCopies struct {
	name  string
	files []ownFile
}

// ownFileList names the files to guard: the config, every prompt
// override, and the task file (a file in the tree; beads keeps its tasks
// in bd's database).
func (b *builder) ownFileList() []string {
	rels := []string{b.ws.Rel(b.ws.ConfigPath())}
	filepath.WalkDir(b.ws.PromptsDir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rels = append(rels, b.ws.Rel(p))
		}
		return nil
	})
	if b.taskFileGuarded() {
		rels = append(rels, b.ws.Rel(b.src.Path()))
	}
	return rels
}

// taskFileGuarded reports whether the task file is a file of the tree
// whose content ralph owns.
func (b *builder) taskFileGuarded() bool {
	if _, ok := b.src.(*tasks.BeadsSource); ok {
		return false
	}
	fi, err := os.Stat(b.src.Path())
	return err == nil && fi.Mode().IsRegular()
}

// saveOwnFiles copies ralph's files into the run's folder before
// iteration n's agent starts and returns the copies, which IMPLEMENT
// puts back from memory.
func (b *builder) saveOwnFiles(n int) (*ownCopies, error) {
	name := fmt.Sprintf("iter-%d.own", n)
	dir := filepath.Join(b.dir, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var list []string
	mem := &ownCopies{name: name}
	for i, rel := range b.ownFileList() {
		data, err := os.ReadFile(filepath.Join(b.ws.Root, rel))
		if errors.Is(err, fs.ErrNotExist) {
			list = append(list, "-"+rel) // the agent may not make it either
			mem.files = append(mem.files, ownFile{rel: rel, absent: true})
			continue
		}
		if err != nil {
			return nil, err
		}
		copyPath := filepath.Join(dir, fmt.Sprint(i))
		if err := store.WriteRecord(copyPath, data, 0o600); err != nil {
			return nil, err
		}
		list = append(list, rel)
		mem.files = append(mem.files, ownFile{rel: rel, copy: copyPath, data: data})
	}
	return mem, store.WriteRecord(filepath.Join(dir, "list"), []byte(strings.Join(list, "\n")), 0o600)
}

// readOwnFiles reads back the copies saved before an agent a kill cut
// short, from the run's folder.
func (b *builder) readOwnFiles(name string) ([]ownFile, error) {
	dir := filepath.Join(b.dir, name)
	data, err := os.ReadFile(filepath.Join(dir, "list"))
	if err != nil {
		return nil, err
	}
	var out []ownFile
	for i, rel := range strings.Split(string(data), "\n") {
		if rel == "" {
			continue
		}
		if absent, ok := strings.CutPrefix(rel, "-"); ok {
			out = append(out, ownFile{rel: absent, absent: true})
			continue
		}
		out = append(out, ownFile{rel: rel, copy: filepath.Join(dir, fmt.Sprint(i))})
	}
	return out, nil
}

// putBackOwnFiles puts ralph's files back as they were before the agent,
// after reading the agent's claim on storyID from the markdown PRD, and
// says what the agent had changed. It returns the claim (nil when the task
// file has no boxes for the agent).
func (b *builder) putBackOwnFiles(files []ownFile, storyID string) (*Claim, error) {
	taskRel := ""
	if b.taskFileGuarded() {
		taskRel = b.ws.Rel(b.src.Path())
	}
	var claim *Claim
	var changed []string
	saved := map[string]bool{}
	for _, f := range files {
		saved[f.rel] = true
		abs := filepath.Join(b.ws.Root, f.rel)
		if f.absent {
			if os.Remove(abs) == nil {
				changed = append(changed, f.rel+" (added)")
			}
			continue
		}
		before := f.data
		if before == nil {
			var err error
			if before, err = os.ReadFile(f.copy); err != nil {
				return nil, err
			}
		}
		now, err := os.ReadFile(abs)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if f.rel == taskRel && agentTicks(b.src) {
			claim = readClaim(now, storyID)
			if what := describeTaskEdits(before, now, storyID); len(what) > 0 {
				changed = append(changed, fmt.Sprintf("%s in %s", strings.Join(what, ", "), f.rel))
			}
			// The ticks on its own story stay: they are its claim, which
			// VALIDATE judges and a rejected attempt loses (reopenClaim).
			before = withClaim(before, storyID, claim)
		} else if err == nil && !bytes.Equal(before, now) || err != nil {
			changed = append(changed, f.rel)
		}
		if err == nil && bytes.Equal(before, now) {
			continue
		}
		// Atomic against a kill, which is what ralph must survive; the
		// state on disk still says the story is not accepted whatever a
		// power loss does to this write.
		if werr := store.WriteRecord(abs, before, 0o644); werr != nil {
			return claim, fmt.Errorf("putting back %s, which the agent changed: %w", f.rel, werr)
		}
	}
	// A prompt override the agent added is no prompt of the user's.
	filepath.WalkDir(b.ws.PromptsDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if rel := b.ws.Rel(p); !saved[rel] {
			if os.Remove(p) == nil {
				changed = append(changed, rel+" (added)")
			}
		}
		return nil
	})
	if len(changed) > 0 {
		msg := fmt.Sprintf("the agent changed ralph's own files (%s) while working on %s; ralph owns them and put them back", strings.Join(changed, "; "), b.st.Machine.TaskID)
		b.logError("%s", msg)
		b.say(report.KindWarning, "  ! "+msg+"\n", report.Warning{OwnFilesRestored: changed})
	}
	return claim, nil
}

// restoreOwnFilesAfterCrash puts ralph's files back as they were before an
// agent whose run a kill cut short: the rerun must start from them, not
// from what that agent left.
func (b *builder) restoreOwnFilesAfterCrash(a *Attempt) {
	if a == nil || a.Own == "" || a.AgentDone {
		return
	}
	files, err := b.readOwnFiles(a.Own)
	if err == nil {
		_, err = b.putBackOwnFiles(files, "")
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.logError("could not put back ralph's files after the interrupted agent: %v", err)
	}
}

// withClaim is the PRD before the agent with the agent's ticks on its own
// story set, or before itself when that cannot be done.
func withClaim(before []byte, id string, c *Claim) []byte {
	if c == nil || id == "" {
		return before
	}
	out, err := tasks.SetStoryDone(before, id, c.Story)
	if err == nil {
		out, err = tasks.SetCriteriaMarks(out, id, c.Criteria)
	}
	if err != nil {
		return before
	}
	return out
}

// readClaim reads the agent's ticks on story id.
func readClaim(prd []byte, id string) *Claim {
	p, err := tasks.ParseMarkdown("", prd)
	if err != nil {
		return &Claim{}
	}
	s, ok := p.Find(id)
	if !ok {
		return &Claim{}
	}
	c := &Claim{Story: s.Done}
	for _, cr := range s.Criteria {
		c.Criteria = append(c.Criteria, cr.Done)
	}
	return c
}

// describeTaskEdits says what an agent changed in the markdown PRD beyond
// the ticks on its own story, which are its claim.
func describeTaskEdits(before, after []byte, own string) []string {
	if bytes.Equal(before, after) {
		return nil
	}
	old, err1 := tasks.ParseMarkdown("", before)
	cur, err2 := tasks.ParseMarkdown("", after)
	if err1 != nil || err2 != nil {
		return []string{"the file (left unreadable)"}
	}
	// By id, not with PRD.Find: a scan per story made this quadratic,
	// 50 s an iteration on a PRD of 100,000 stories.
	curByID := storiesByID(cur.Stories)
	oldByID := storiesByID(old.Stories)
	var out []string
	for _, s := range old.Stories {
		n, ok := curByID[s.ID]
		switch {
		case !ok:
			out = append(out, "removed "+s.ID)
		case n.Title != s.Title:
			out = append(out, "the title of "+s.ID)
		case !sameCriteriaText(s, *n):
			out = append(out, "the criteria of "+s.ID)
		case s.ID != own && (n.Done != s.Done || !sameTicks(s, *n)):
			out = append(out, "the marks of "+s.ID)
		}
	}
	for _, s := range cur.Stories {
		if _, ok := oldByID[s.ID]; !ok {
			out = append(out, "added "+s.ID)
		}
	}
	if len(out) == 0 && !onlyOwnTicks(old, cur, own) {
		out = append(out, "the text")
	}
	return out
}

// storiesByID indexes stories by id (ids are unique in a parsed PRD).
func storiesByID(stories []tasks.Story) map[string]*tasks.Story {
	m := make(map[string]*tasks.Story, len(stories))
	for i := range stories {
		m[stories[i].ID] = &stories[i]
	}
	return m
}

func sameCriteriaText(a, b tasks.Story) bool {
	return slices.EqualFunc(a.Criteria, b.Criteria, func(x, y tasks.Criterion) bool { return x.Text == y.Text && x.Verify == y.Verify })
}

func sameTicks(a, b tasks.Story) bool {
	return slices.EqualFunc(a.Criteria, b.Criteria, func(x, y tasks.Criterion) bool { return x.Done == y.Done })
}

// onlyOwnTicks reports whether the two PRDs differ only in the boxes of
// story own: everything else, block by block, is the same.
func onlyOwnTicks(a, b *tasks.PRD, own string) bool {
	if len(a.Stories) != len(b.Stories) {
		return false
	}
	for i := range a.Stories {
		x, y := a.Stories[i], b.Stories[i]
		if x.ID != y.ID {
			return false
		}
		if x.ID != own && x.Block != y.Block {
			return false
		}
	}
	return true
}

// withoutRestored drops from the tree read after the agent the files of
// ralph's that were clean before it and that ralph has just put back: the
// agent's change to them is undone, and they are clean again.
func (b *builder) withoutRestored(after, before gitx.Snapshot, files []ownFile) gitx.Snapshot {
	guarded := map[string]bool{}
	for _, f := range files {
		now, err := os.ReadFile(filepath.Join(b.ws.Root, f.rel))
		was := f.data
		if !f.absent && was == nil {
			was, _ = os.ReadFile(f.copy)
		}
		// Only a file now exactly as it was is clean again: the agent's
		// ticks on its own story, which stay, are a change of the tree.
		if (f.absent && errors.Is(err, fs.ErrNotExist)) || (!f.absent && err == nil && bytes.Equal(now, was)) {
			guarded[filepath.ToSlash(f.rel)] = true
		}
	}
	for _, f := range before.Dirty {
		delete(guarded, f)
	}
	out := after
	out.Dirty = nil
	for _, f := range after.Dirty {
		if !guarded[f] {
			out.Dirty = append(out.Dirty, f)
		}
	}
	return out
}

// storeStatuses reads the statuses of a task store that is not a file of
// the tree (beads), nil for one that is: an agent can close issues with
// the store's own CLI, and ralph, not the agent, says what is done.
func (b *builder) storeStatuses(taskID string) map[string]tasks.Status {
	if b.taskFileGuarded() {
		return nil
	}
	board, err := b.src.Load()
	if err != nil {
		return nil
	}
	storyID, _ := tasks.ParseTaskID(taskID)
	out := make(map[string]tasks.Status, len(board.Stories))
	for _, s := range board.Stories {
		// A parallel worker shares the store with its run's merge queue,
		// the other workers and other ralphs, which close and claim
		// other issues while its agent works: only its own story's
		// status is the agent's to leave alone. (Setting the others
		// back reopened issues that had just landed.)
		if only := b.opts.OnlyStory; only != "" && s.ID != only {
			continue
		}
		// An issue someone else has claimed is theirs to close: another
		// ralph on the same store finishes it while this agent works.
		// What the agent must not do is close open work, its own story
		// included.
		if s.Status == tasks.StatusInProgress && s.ID != storyID {
			continue
		}
		out[s.ID] = s.Status
	}
	return out
}

// putBackStoreStatuses sets back every status the agent changed in the
// task store while it worked on taskID, and says so.
func (b *builder) putBackStoreStatuses(before map[string]tasks.Status, taskID string) {
	if before == nil {
		return
	}
	board, err := b.src.Load()
	if err != nil {
		return
	}
	var changed []string
	for _, s := range board.Stories {
		was, ok := before[s.ID]
		if !ok || was == s.Status {
			continue
		}
		if err := b.src.SetState(s.ID, was, s.RetryCount, s.Blocker, b.opts.now()); err != nil {
			b.logError("could not set %s back to %s after the agent changed it: %v", s.ID, was, err)
			continue
		}
		changed = append(changed, fmt.Sprintf("%s (%s → %s)", s.ID, was, s.Status))
	}
	if len(changed) > 0 {
		msg := fmt.Sprintf("the agent changed the status of %s in the task store while working on %s; ralph owns it and set it back", strings.Join(changed, ", "), taskID)
		b.logError("%s", msg)
		b.say(report.KindWarning, "  ! "+msg+"\n", report.Warning{StatusesRestored: changed})
	}
}
