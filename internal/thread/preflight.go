package thread

import (
	"fmt"
	"github.com/ralphloop/ralph/internal/report"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/workspace"
)

// ---- Finalized → Preflight ----

// implementEvent is the event that begins implementation, raised by src:
// the baseline is recorded (kept when the thread's branch is already
// checked out with a baseline), and the branch is created by the
// capture_baseline action. Preflight, the new phase's work, follows.
func (r *Runner) implementEvent(src Source) Event {
	ctx := r.bg()
	ev := Event{Verb: VerbImplement, Source: src}
	if r.opts.Worktree || r.t.Worktree != "" {
		ev.Worktree = r.t.Worktree
		if ev.Worktree == "" {
			ev.Worktree = WorktreePath(r.ws.Root, r.cfg.WorktreeRoot, r.t.ID)
		}
	}
	head, _ := r.repo.Head(ctx)
	branch := r.currentBranch()
	if head != "" {
		if branch == BranchName(r.t.ID) && r.t.Baseline != nil {
			b := *r.t.Baseline
			ev.Baseline = &b
		} else {
			ev.Baseline = &Baseline{Branch: branch, CommitSHA: head, CapturedAt: r.now().UTC()}
			r.warnThreadBaseline(branch)
		}
		ev.Branch = BranchName(r.t.ID)
	}
	return ev
}

// warnThreadBaseline warns when the baseline is another thread's branch
// that no other branch contains: this thread would silently build on
// that thread's unreviewed work.
func (r *Runner) warnThreadBaseline(branch string) {
	if !strings.HasPrefix(branch, BranchName("")) {
		return
	}
	out, err := r.git("branch", "--contains", "HEAD", "--format=%(refname:short)")
	if err != nil {
		return
	}
	for _, b := range strings.Fields(out) {
		if !strings.HasPrefix(b, BranchName("")) {
			return // merged into a branch of the person's own
		}
	}
	r.say(report.KindWarning, "warning: the baseline is %s, another thread's branch that is not merged anywhere yet: this thread builds on its work. To start from your main branch instead, check it out before `ralph thread start`.", branch)
}

// git runs a git command in the work tree through the git port, to the
// end even after Ctrl+C.
func (r *Runner) git(args ...string) (string, error) {
	return r.repo.Git(r.bg(), args...)
}

func (r *Runner) currentBranch() string {
	b, err := r.git("symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return ""
	}
	return b
}

func (r *Runner) createBranch(n *Thread) error {
	if n.Branch == "" {
		return nil // no commit yet: preflight reports it
	}
	if n.Worktree != "" {
		// The checkout stays as it is: the branch, cut from the baseline,
		// is checked out in the thread's own worktree.
		return r.openWorktree(n.Worktree, n.Branch, n.Baseline.CommitSHA)
	}
	if r.currentBranch() == n.Branch {
		return nil
	}
	if busy := r.checkoutBusy(); busy != "" {
		// Switching the checkout's branch would pull it from under that
		// thread's loop.
		return fmt.Errorf("%s in your checkout, and thread %s would check out its branch %s there: start it with --worktree to work in a worktree of its own, or wait for the other thread to finish (or pause it)", busy, n.ID, n.Branch)
	}
	if _, err := r.git("rev-parse", "--verify", "--quiet", "refs/heads/"+n.Branch); err == nil {
		_, err := r.git("checkout", "-q", n.Branch)
		if err != nil {
			return fmt.Errorf("could not check out %s: %w", n.Branch, err)
		}
		return nil
	}
	if _, err := r.git("checkout", "-q", "-b", n.Branch); err != nil {
		return fmt.Errorf("could not create branch %s: %w", n.Branch, err)
	}
	return nil
}

// ---- Preflight ----

var promiseLine = regexp.MustCompile(`(?mi)^\s*[*_]*promise[*_]*\s*:\s*(?:<promise>)?\s*([A-Za-z][A-Za-z0-9_]*)`)

// specPromise returns the promise tag the spec names ("COMPLETE").
func specPromise(spec []byte) string {
	m := promiseLine.FindSubmatch(spec)
	if m == nil {
		return ""
	}
	return strings.ToUpper(string(m[1]))
}

// preflightFailures runs the five preflight checks (git state, baseline,
// spec, tools, conflicts) and says what fails, each with what to do.
func (r *Runner) preflightFailures() []string {
	var fails []string
	t := r.t
	ctx := r.bg()
	// 1. git state
	snap, err := r.repo.Snapshot(ctx)
	if err != nil {
		fails = append(fails, "git: "+err.Error())
	} else {
		if dirty := workspace.UserChanges(snap.Dirty); len(dirty) > 0 {
			if len(dirty) > 5 {
				dirty = append(dirty[:5], "…")
			}
			fails = append(fails, fmt.Sprintf("git: the working tree has uncommitted changes (%s): commit or stash them", strings.Join(dirty, ", ")))
		} else if b := r.currentBranch(); t.Branch != "" && b != t.Branch {
			fails = append(fails, fmt.Sprintf("git: on branch %q, not the thread's branch %s: git checkout %s", b, t.Branch, t.Branch))
		}
	}
	// 2. baseline
	if t.Baseline == nil || t.Baseline.CommitSHA == "" {
		fails = append(fails, "baseline: the repository has no commit to return to: make a first commit")
	} else if _, err := r.git("cat-file", "-e", t.Baseline.CommitSHA+"^{commit}"); err != nil {
		fails = append(fails, fmt.Sprintf("baseline: commit %s is gone", text.ShortHash(t.Baseline.CommitSHA)))
	}
	// 3. spec
	spec, err := ReadSpec(r.dir, t.ID, t.SpecVersion)
	if err != nil {
		fails = append(fails, fmt.Sprintf("spec v%d: cannot read it: %v", t.SpecVersion, err))
	} else {
		prd, err := tasks.ParseMarkdown(fmt.Sprintf("spec v%d", t.SpecVersion), spec)
		switch {
		case err != nil:
			fails = append(fails, "spec: "+oneLineErr(err))
		default:
			n := 0
			for _, s := range prd.Stories {
				n += len(s.Criteria)
			}
			if n == 0 {
				fails = append(fails, fmt.Sprintf("spec v%d: no acceptance criteria: add \"- [ ] ...\" lines under each story", t.SpecVersion))
			}
		}
		if specPromise(spec) == "" {
			fails = append(fails, fmt.Sprintf("spec v%d: no promise tag: add a line \"Promise: COMPLETE\"", t.SpecVersion))
		}
	}
	// 4. tools
	conf := r.effectiveConf()
	for _, name := range conf.Agents {
		spec, err := r.agentSpec(name)
		if err == nil {
			argv, _ := agent.Argv(spec.Headless, "prompt.md")
			err = agent.CheckInstalled(spec, argv)
		}
		if err != nil {
			fails = append(fails, "agent: "+oneLineErr(err))
		}
	}
	for _, v := range conf.Verifiers {
		if f := strings.Fields(v); len(f) > 0 {
			if _, err := exec.LookPath(f[0]); err != nil {
				if _, serr := os.Stat(filepath.Join(r.work.Root, f[0])); serr != nil {
					fails = append(fails, fmt.Sprintf("verifier %q: %s is not installed", v, f[0]))
				}
			}
		}
	}
	// 5. conflicts: one run at a time in a work tree. A thread in its own
	// worktree shares it with nobody, so threads in worktrees of their own
	// run at the same time, beside one in the checkout.
	if h, held := store.Held(r.work.LockPath()); held {
		fails = append(fails, fmt.Sprintf("conflict: another ralph is running in this work tree (%v): wait for it", h))
	}
	if others, err := List(r.dir); err == nil {
		for _, o := range others {
			if o.ID != t.ID && o.Phase.Type.busyInWorkTree() && sameWorkTree(o, t) {
				fails = append(fails, fmt.Sprintf("conflict: thread %s is %s in this work tree: pause, finish or abandon it first", o.ID, o.Phase.Type))
			}
		}
	}
	return fails
}

// preflight is the Preflight phase's work: its checks decide the event.
func (r *Runner) preflight() (Event, error) {
	r.note("preflight: git state, baseline, spec, tools, conflicts")
	fails := r.preflightFailures()
	if len(fails) > 0 {
		return Event{Verb: VerbChecksFail, Source: SourceSystem, Failures: fails}, nil
	}
	r.note("  ✓ all preflight checks pass (baseline %s on %s, branch %s)", text.ShortHash(r.t.Baseline.CommitSHA), text.OrNone(r.t.Baseline.Branch, "(detached)"), r.t.Branch)
	return Event{Verb: VerbChecksPass, Source: SourceSystem}, nil
}
