package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/inputlimit"
)

// treeBeforeCommit is the tree COMMIT starts from. When this process read
// the tree after the agent (gitDelta) and HEAD and the branch are still
// what it read then (from git's files: no process), it is that tree, and
// known is true: what the checks and ralph (the task file, progress.md)
// changed since is what the commit's staging names, so the commit is
// tried even with nothing dirty then. Otherwise (a resume, a check that
// committed or switched branches, a layout only git reads) it is git's
// status.
func (b *builder) treeBeforeCommit(ctx context.Context) (snap gitx.Snapshot, known bool, err error) {
	if b.deltaIter == b.st.Machine.Iteration && b.deltaIter != 0 {
		if head, branch, ok := b.git.HeadFiles(); ok && head == b.snap.Head && branch == b.snap.Branch && head != "" {
			snap = b.snap
			snap.Dirty = slices.Clone(snap.Dirty)
			return snap, true, nil
		}
	}
	snap, err = b.git.Snapshot(ctx)
	return snap, false, err
}

// commitTrace is where COMMIT's git traces what it runs, so that a
// commit that ran no hook needs no git status after it
// (runkit.CommitListed): a scratch file of the run's folder, which no
// status lists, emptied before each commit and removed when the run
// returns. A tree holding a repository of its own (a submodule, an
// embedded repository) gets none: what changed inside it stays dirty
// whatever ralph stages, so only a status tells the tree after.
func (b *builder) commitTrace(pre gitx.Snapshot) string {
	if len(pre.Nested) > 0 {
		return ""
	}
	return b.commitTracePath()
}

// commitTracePath is the run's scratch file for git's trace of a commit,
// absolute as git wants it; "" when the folder has no absolute path.
func (b *builder) commitTracePath() string {
	p, err := filepath.Abs(filepath.Join(b.dir, "commit.trace"))
	if err != nil {
		return ""
	}
	return p
}

// commitDelta fills the git part of the iteration's record once COMMIT is
// done and returns the tree as it is now. pre is the tree COMMIT found,
// after the tree its commit left (made, nil when there was nothing to
// commit). When this process read the agent's commits after the agent
// (gitDelta) and HEAD has not moved since but for ralph's commit, the
// record is that plus ralph's commit and the files it took in (dirty
// before it, clean after): no git process. Otherwise (a resume, a check
// that committed, --no-commit) git is asked.
func (b *builder) commitDelta(ctx context.Context, pre, after gitx.Snapshot, made *gitx.Commit) (gitx.Snapshot, error) {
	rec := b.rec
	if b.st.NoCommit {
		var err error
		if after, err = b.git.Snapshot(ctx); err != nil {
			return after, err
		}
	}
	if b.st.NoCommit || b.deltaIter != rec.Iteration || pre.Head != rec.HeadAfter || pre.Head == "" {
		_, err := b.rangeInto(ctx, rec, b.attemptHead(), after)
		return after, err
	}
	rec.HeadAfter, rec.UncommittedFiles = after.Head, after.Dirty
	if made == nil {
		return after, nil
	}
	rec.Commits = append(rec.Commits, *made)
	left := map[string]bool{}
	for _, f := range after.Dirty {
		left[f] = true
	}
	for _, f := range pre.Dirty {
		if !left[f] {
			rec.ChangedFiles = append(rec.ChangedFiles, f)
		}
	}
	slices.Sort(rec.ChangedFiles)
	rec.ChangedFiles = slices.Compact(rec.ChangedFiles)
	return after, nil
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

// keepFresh keeps the tree COMMIT left for the next IMPLEMENT, which
// otherwise asks git for the same status again. Sources that write
// outside the task file on the way (bd's claim and audit note) keep none.
func (b *builder) keepFresh(after gitx.Snapshot) {
	b.fresh = nil
	if _, claims := b.src.(Claimer); claims || b.st.NoCommit {
		return
	}
	if _, audits := b.src.(Auditor); audits {
		return
	}
	data, err := inputlimit.ReadFile(b.src.Path())
	if err != nil {
		return
	}
	b.fresh = &freshSnap{snap: after, iteration: b.st.Machine.Iteration, taskFile: data}
}

// snapshotBefore is the tree before iteration n's agent: the one the
// previous iteration's COMMIT left, when nothing ralph knows of can have
// changed it since (the next iteration, the same task file, no pause in
// between, which a person may have used to edit files), or git's status.
func (b *builder) snapshotBefore(ctx context.Context, n int) (gitx.Snapshot, error) {
	f := b.fresh
	b.fresh = nil
	if f != nil && f.iteration == n-1 {
		if data, err := inputlimit.ReadFile(b.src.Path()); err == nil && bytes.Equal(data, f.taskFile) {
			return f.snap, nil
		}
	}
	return b.git.Snapshot(ctx)
}

func (b *builder) headNow() string {
	h, _ := b.git.Head(context.Background())
	return h
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
