package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/runkit"
)

// trees is what a build knows of its work tree between git processes, and
// the one place that decides when that is no longer the tree. An
// iteration on the success path needs one git status, beside the agent's
// end: the next agent starts from the tree COMMIT left, COMMIT from the
// one read after the agent while HEAD stays put, and after the commit the
// tree is the commit when git ran nothing else on the way
// (git_processes.txtar counts them). The steps ask it for the tree before
// the agent, after it, and to commit.
type trees struct {
	repo GitPort
	// trace is the run's scratch file for git's trace of a commit.
	trace string
	// last is the tree as ralph last read or made it.
	last gitx.Snapshot
	// agentIter is the iteration whose record holds the agent's commits
	// and files as read after its agent, and whose read last still is: COMMIT
	// adds its own to them instead of asking git again. 0: none.
	agentIter int
	// descent is a pair of commits (from, to) that the git log read after
	// the agent showed to descend one from the other.
	descent [2]string
	// fresh is the tree as COMMIT left it, kept for the next IMPLEMENT.
	fresh *freshSnap
	// freshToken is the commit token this process made with the
	// transition into TEST and has not committed with: no commit carries
	// it. savedToken is the token in the state as last saved. (The
	// transition sets both.)
	freshToken, savedToken string
}

// freshSnap is a snapshot COMMIT took, kept for the next IMPLEMENT.
type freshSnap struct {
	snap      gitx.Snapshot
	iteration int
	// taskFile is the task file's content when the snapshot was taken:
	// STORY_SELECT, `ralph skip` and the like write it between COMMIT
	// and IMPLEMENT, and then the snapshot is no longer the tree.
	taskFile []byte
}

func newTrees(git GitPort, runDir string) trees {
	t := trees{repo: git}
	if p, err := filepath.Abs(filepath.Join(runDir, "commit.trace")); err == nil {
		t.trace = p
	}
	return t
}

// invalidate forgets the tree COMMIT left: a person may have changed the
// tree since (a pause, an approval that committed).
func (t *trees) invalidate() { t.fresh = nil }

func (t *trees) head() string {
	h, _ := t.repo.Head(context.Background())
	return h
}

// before is the tree before iteration n's agent: the one the previous
// iteration's COMMIT left, when nothing ralph knows of can have changed it
// since (the next iteration, the same task file, no pause in between), or
// git's status.
func (t *trees) before(ctx context.Context, n int, taskFile string) (gitx.Snapshot, error) {
	f := t.fresh
	t.fresh, t.descent, t.agentIter = nil, [2]string{}, 0
	if f != nil && f.iteration == n-1 {
		if data, err := inputlimit.ReadFile(taskFile); err == nil && bytes.Equal(data, f.taskFile) {
			t.last = f.snap
			return f.snap, nil
		}
	}
	snap, err := t.repo.Snapshot(ctx)
	if err == nil {
		t.last = snap
	}
	return snap, err
}

// watchAgentExit has the next agent run read the work tree as soon as the
// agent's process group is stopped, beside agent.Run's scan of /proc for
// processes that left the group (milliseconds on a busy desktop). It sets
// hook, the run's OnExit; the func it returns clears it and waits for that
// status. A process that left the group may still write while the status
// reads: COMMIT's staging names whatever it changed.
func (t *trees) watchAgentExit(ctx context.Context, hook *func()) (wait func() treeRead) {
	var ch chan treeRead
	*hook = func() {
		ch = make(chan treeRead, 1)
		go func() {
			snap, err := t.repo.Snapshot(ctx)
			ch <- treeRead{snap: snap, err: err, ok: true}
		}()
	}
	return func() treeRead {
		*hook = nil
		if ch == nil {
			return treeRead{}
		}
		got := <-ch
		ch = nil
		return got
	}
}

// treeRead is a status read beside the agent's end (watchAgentExit).
type treeRead struct {
	snap gitx.Snapshot
	err  error
	// ok is false when the run never got that far: an agent that could
	// not start, a port that runs no process.
	ok bool
}

// afterAgent fills the git part of rec, the iteration of the agent that
// just ended (rangeInto), from read or, when there is none, a git status.
func (t *trees) afterAgent(ctx context.Context, rec *IterationRecord, before gitx.Snapshot, read treeRead) (gitx.Snapshot, error) {
	after, err := read.snap, read.err
	if !read.ok {
		after, err = t.repo.Snapshot(ctx)
	}
	if err != nil {
		return after, err
	}
	rg, err := rangeInto(ctx, t.repo, rec, before.Head, after)
	if err == nil {
		t.last, t.agentIter = after, rec.Iteration
		if rg.Descends {
			t.descent = [2]string{before.Head, after.Head}
		}
	}
	return after, err
}

// restored says what the tree read after the agent is once ralph has put
// its own files back (withoutRestored): the same HEAD, fewer dirty files.
func (t *trees) restored(after gitx.Snapshot) { t.last = after }

// changedSince lists the files the tree now changes against base: the
// ones it leaves dirty and the ones committed since. When rec is the
// iteration read after its agent, that read is the tree and, HEAD still
// where the agent left it, its log lists the commits: no git process.
func (t *trees) changedSince(ctx context.Context, base string, rec *IterationRecord) ([]string, error) {
	snap, known := t.last, rec != nil && t.agentIter == rec.Iteration && rec.Iteration != 0
	if !known {
		var err error
		if snap, err = t.repo.Snapshot(ctx); err != nil {
			return nil, err
		}
	}
	files := slices.Clone(snap.Dirty)
	switch {
	case base == "" || snap.Head == base:
		return files, nil
	case known && rec.HeadBefore == base && rec.HeadAfter == snap.Head:
		return append(files, rec.ChangedFiles...), nil
	}
	committed, err := t.repo.ChangedFiles(ctx, base, snap.Head)
	return append(files, committed...), err
}

// history verifies, after an attempt and before anything is committed,
// that HEAD is still on branch and still descends from start. A descent
// this iteration already read is not asked of git again.
func (t *trees) history(ctx context.Context, branch, start string, now gitx.Snapshot) error {
	if start != "" && t.descent == [2]string{start, now.Head} {
		start = "" // known to descend: only the branch is left to check
	}
	return historyChanged(ctx, t.repo, branch, start, now)
}

// committedWith reports whether HEAD is the commit a COMMIT cut short made
// with token. A token this process made and has not committed with is on
// no commit: only a resumed COMMIT looks.
func (t *trees) committedWith(ctx context.Context, token string) (string, bool) {
	if token == t.freshToken {
		return "", false
	}
	return runkit.Committed(ctx, t.repo, token)
}

// treeCommit is what COMMIT's commit did to the tree.
type treeCommit struct {
	// pre is the tree COMMIT found, with what the staging took in since.
	pre gitx.Snapshot
	// after is the tree once the work is committed, read by the commit
	// itself; made is the commit, nil when there was nothing to commit.
	after gitx.Snapshot
	made  *gitx.Commit
}

// commitRefused is a staging or a commit git refused (what says which),
// or, with what "git", a tree it could not read.
type commitRefused struct {
	what string
	err  error
}

func (e *commitRefused) Error() string { return e.what + ": " + e.err.Error() }

// commit commits the work of iteration n with msg once HEAD is known to be
// on branch and to descend from start (else a *HistoryError). save puts a
// fresh token on disk before the commit; the token saved with the
// transition into TEST needs none. What git refuses is a *commitRefused,
// with the index left staged.
//
// COMMIT starts from the tree read after the agent when HEAD and the
// branch are still what that read saw (from git's files: no process): what
// the checks and ralph changed since is what the staging names, so the
// commit is tried even with nothing dirty then. Otherwise (a resume, a
// check that committed or switched branches) it is git's status.
func (t *trees) commit(ctx context.Context, n int, branch, start string, msg runkit.Message, save func(token string) error) (c treeCommit, err error) {
	snap, known := t.last, false
	if t.agentIter == n && n != 0 {
		head, br, ok := t.repo.HeadFiles()
		known = ok && head == snap.Head && br == snap.Branch && head != ""
	}
	if known {
		snap.Dirty = slices.Clone(snap.Dirty)
	} else if snap, err = t.repo.Snapshot(ctx); err != nil {
		return c, &commitRefused{"git", err}
	}
	c.pre, c.after = snap, snap // nothing to commit: the tree is as it was
	if err := t.history(ctx, branch, start, snap); err != nil {
		// Never commit on another branch, or over lost commits.
		return c, err
	}
	if !known && len(snap.Dirty) == 0 {
		return c, nil
	}
	saved := false
	msg.Token = t.freshToken
	t.freshToken = "" // a COMMIT entered again looks for this commit
	after, staged, err := runkit.CommitListed(ctx, t.repo, msg, func(token string) error {
		if token == t.savedToken {
			// On disk since the transition into TEST. The transitions
			// since wait for the next save: a kill before it resumes in
			// TEST, and the COMMIT after the checks finds this commit by
			// its token.
			saved = true
			return nil
		}
		err := save(token)
		saved = err == nil
		return err
	}, t.commitTrace(snap))
	// What the checks and ralph changed since the agent is what the
	// staging took in.
	c.pre.Dirty = slices.Compact(slices.Sorted(slices.Values(append(c.pre.Dirty, staged...))))
	switch {
	case err != nil && !saved:
		return c, &commitRefused{"git add failed (a lock in .git may have refused it)", err}
	case err != nil && !errors.Is(err, gitx.ErrNothingToCommit):
		return c, &commitRefused{"git commit failed (a pre-commit hook or a lock in .git refused it)", err}
	case err != nil && known:
		// Nothing to commit after all: the tree is not the one read
		// after the agent (a check put files back).
		if c.after, err = t.repo.Snapshot(ctx); err != nil {
			return c, &commitRefused{"git", err}
		}
		c.pre = c.after
	case err == nil:
		c.after = after
		c.made = &gitx.Commit{Hash: after.Head, Subject: strings.TrimSpace(msg.Subject)}
	}
	return c, nil
}

// commitTrace is where COMMIT's git traces what it runs, so that a commit
// that ran no hook needs no git status after it (runkit.CommitListed): a
// scratch file of the run's folder, which no status lists. A tree holding
// a repository of its own (a submodule) gets none: what changed inside it
// stays dirty whatever ralph stages, so only a status tells the tree after.
func (t *trees) commitTrace(pre gitx.Snapshot) string {
	if len(pre.Nested) > 0 {
		return ""
	}
	return t.trace
}

// commitDone says how COMMIT ended: start is the HEAD the attempt started
// from; noCommit, that nothing is committed by design; reread, that a step
// after the commit may have changed the tree (bd's audit note); taskFile,
// when set, keeps the tree for the next IMPLEMENT while that file stays.
type commitDone struct {
	start            string
	noCommit, reread bool
	taskFile         string
}

// recordCommit fills the git part of rec once COMMIT is done. When this
// process read the agent's commits after the agent and HEAD has not moved
// since but for ralph's commit, the record is that plus ralph's commit and
// the files it took in (dirty before it, clean after): no git process.
func (t *trees) recordCommit(ctx context.Context, rec *IterationRecord, c treeCommit, d commitDone) {
	after := c.after
	if d.reread || d.noCommit {
		now, err := t.repo.Snapshot(ctx)
		if err == nil {
			after = now
		} else if d.noCommit {
			return
		}
	}
	if d.noCommit || t.agentIter != rec.Iteration || c.pre.Head != rec.HeadAfter || c.pre.Head == "" {
		if _, err := rangeInto(ctx, t.repo, rec, d.start, after); err != nil {
			return
		}
	} else {
		rec.HeadAfter, rec.UncommittedFiles = after.Head, after.Dirty
		if c.made != nil {
			rec.Commits = append(rec.Commits, *c.made)
			left := map[string]bool{}
			for _, f := range after.Dirty {
				left[f] = true
			}
			for _, f := range c.pre.Dirty {
				if !left[f] {
					rec.ChangedFiles = append(rec.ChangedFiles, f)
				}
			}
			slices.Sort(rec.ChangedFiles)
			rec.ChangedFiles = slices.Compact(rec.ChangedFiles)
		}
	}
	t.last, t.fresh = after, nil
	if d.taskFile != "" {
		if data, err := inputlimit.ReadFile(d.taskFile); err == nil {
			t.fresh = &freshSnap{snap: after, iteration: rec.Iteration, taskFile: data}
		}
	}
}

// rangeInto fills rec's HEAD before and after, its commits and changed
// files between from and after's HEAD (one git log, none when HEAD did not
// move), and the files after leaves uncommitted.
func rangeInto(ctx context.Context, git GitPort, rec *IterationRecord, from string, after gitx.Snapshot) (gitx.Range, error) {
	rec.HeadBefore, rec.HeadAfter = from, after.Head
	rec.UncommittedFiles = after.Dirty
	if after.Head == from || after.Head == "" {
		return gitx.Range{Descends: true}, nil
	}
	rg, err := git.Range(ctx, from, after.Head)
	if err == nil {
		rec.Commits, rec.ChangedFiles = rg.Commits, rg.Files
	}
	return rg, err
}

// worktreeDigest fingerprints the work: HEAD plus the content of every
// dirty file. Comparing names alone would miss a retry that rewrites the
// files an earlier attempt already changed.
func worktreeDigest(root string, snap gitx.Snapshot) string {
	h := sha256.New()
	io.WriteString(h, snap.Head+"\n")
	for _, f := range snap.Dirty {
		io.WriteString(h, f+"\x00")
		p := filepath.Join(root, f)
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			io.WriteString(h, "missing")
		case !fi.Mode().IsRegular() || fi.Size() > 16<<20:
			fmt.Fprintf(h, "%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		default:
			if fh, err := os.Open(p); err == nil {
				io.Copy(h, fh)
				fh.Close()
			}
		}
		io.WriteString(h, "\x00")
	}
	return hex.EncodeToString(h.Sum(nil))
}
