package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// threadCtx is one `ralph thread` command at work on one thread: it raises
// events through thread.Next, performs the actions, saves, and drives the
// phases ralph works in (Preflight, Running, Verifying, Polishing) until the
// thread waits for a person.
type threadCtx struct {
	env  *Env
	opts *ThreadOptions
	ctx  context.Context
	ws   *workspace.Workspace
	cfg  config.Config
	dir  string // .ralph
	t    thread.Thread
	lock *store.Lock
	// in reads answers from inSrc (the command's standard input).
	in    *bufio.Reader
	inSrc io.Reader
}

// threadConf is threads/<id>/config.json: the Configuring phase's choices
// and the bookkeeping of the loop runs of the thread.
type threadConf struct {
	SchemaVersion int      `json:"schema_version"`
	Agents        []string `json:"agents"`
	MaxIterations int      `json:"max_iterations"`
	Verifiers     []string `json:"verifiers"`
	// RunID is the last loop run; RunBase the thread's iteration count
	// before it began, so a resumed run is not counted twice.
	RunID   string `json:"run_id,omitempty"`
	RunBase int    `json:"run_base"`
	// PRDSpecVersion is the spec version copied to prd.md.
	PRDSpecVersion int `json:"prd_spec_version"`
	// Extra numbers the stories added to prd.md by review requests and
	// failed verifications.
	Extra     int    `json:"extra,omitempty"`
	CommitSHA string `json:"commit_sha,omitempty"`
}

const threadConfVersion = 1

// Evidence is threads/<id>/evidence.json: the last verification.
type Evidence struct {
	SchemaVersion int            `json:"schema_version"`
	RunID         string         `json:"run_id,omitempty"`
	At            time.Time      `json:"at"`
	Passed        bool           `json:"passed"`
	Items         []EvidenceItem `json:"items"`
}

// EvidenceItem is one verified criterion, verifier or the promise.
type EvidenceItem struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

func (tc *threadCtx) path(elem ...string) string {
	return filepath.Join(append([]string{thread.Dir(tc.dir, tc.t.ID)}, elem...)...)
}

func (tc *threadCtx) draftPath() string { return tc.path("draft.md") }
func (tc *threadCtx) prdPath() string   { return tc.path("prd.md") }

func openThreads(cmd *cobra.Command, opts *ThreadOptions) (*threadCtx, error) {
	ws, cfg, err := openWorkspace(cmd.Context(), opts.Env)
	if err != nil {
		return nil, err
	}
	// .ralph/.gitignore keeps threads/ out of git before anything is written.
	if _, err := ws.EnsureStateFiles(opts.Env.Now()); err != nil {
		return nil, err
	}
	if err := ensureThreadIgnores(ws); err != nil {
		return nil, err
	}
	return &threadCtx{env: opts.Env, opts: opts, ctx: cmd.Context(), ws: ws, cfg: cfg, dir: ws.Dir()}, nil
}

// threadIgnores are thread records that must never be committed (nor
// rewound by a reset): the selection and the spec conversations.
var threadIgnores = []string{"active_thread", "spec/threads/"}

// ensureThreadIgnores adds them to .ralph/.gitignore when an older
// workspace's file lacks them.
func ensureThreadIgnores(ws *workspace.Workspace) error {
	p := ws.Path(".gitignore")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var add []string
	for _, l := range threadIgnores {
		if !slices.Contains(strings.Split(string(b), "\n"), l) {
			add = append(add, l)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return store.AppendFile(p, []byte("# ralph threads\n"+strings.Join(add, "\n")+"\n"))
}

func openThread(cmd *cobra.Command, opts *ThreadOptions, args []string) (*threadCtx, error) {
	tc, err := openThreads(cmd, opts)
	if err != nil {
		return nil, err
	}
	id := ""
	if len(args) > 0 {
		id = args[0]
		if err := thread.ValidateID(id); err != nil {
			return nil, &UsageError{Err: err}
		}
	} else {
		id, err = thread.ActiveThread(tc.dir)
		if err != nil {
			return nil, err
		}
		if id == "" {
			return nil, usageErrorf("no active thread: create one with `ralph thread new \"title\"` or pick one with `ralph thread switch ID`")
		}
	}
	t, err := thread.Load(tc.dir, id)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usageErrorf("no thread %q: see `ralph thread list`", id)
	}
	if err != nil {
		return nil, err
	}
	tc.t = t
	return tc, nil
}

func (tc *threadCtx) out(format string, args ...any) {
	fmt.Fprintf(tc.env.IO.Out, format+"\n", args...)
}

// bg is a context for short bookkeeping (git, files) that must finish
// even after Ctrl+C cancelled the command's context.
func (tc *threadCtx) bg() context.Context { return context.WithoutCancel(tc.ctx) }

func (tc *threadCtx) requireExtra(name string) error {
	for _, p := range extraVerbs[name] {
		if p == tc.t.Phase.Type {
			return nil
		}
	}
	return &WrongVerbError{ID: tc.t.ID, Phase: tc.t.Phase.Type, Verb: name, Allowed: allowedCommands(tc.t.Phase.Type)}
}

// explain turns the machine's refusals into the CLI's words.
func (tc *threadCtx) explain(err error, verb string) error {
	var te *thread.TransitionError
	if errors.As(err, &te) {
		return &WrongVerbError{ID: tc.t.ID, Phase: te.Phase, Verb: verb, Allowed: allowedCommands(te.Phase)}
	}
	return err
}

// ---- locking ----

func (tc *threadCtx) lockPath() string { return tc.path("lock") }

// acquire takes the thread's lock: one command at a time works on a thread.
func (tc *threadCtx) acquire() error {
	l, err := store.TryLock(tc.lockPath(), "ralph thread")
	if err != nil {
		var le *store.LockedError
		if errors.As(err, &le) {
			return fmt.Errorf("thread %s is busy in another ralph (%v): wait for it, or `ralph thread pause %s`", tc.t.ID, le.Holder, tc.t.ID)
		}
		return err
	}
	tc.lock = l
	// The thread may have moved while we waited for nothing: read it again.
	if t, err := thread.Load(tc.dir, tc.t.ID); err == nil {
		tc.t = t
	}
	return nil
}

func (tc *threadCtx) release() {
	if tc.lock != nil {
		tc.lock.Unlock()
		tc.lock = nil
	}
}

// interruptHolder asks the ralph working on the thread to stop, as Ctrl+C
// would, and waits for it to let go. It reports whether one was running.
func (tc *threadCtx) interruptHolder() (bool, error) {
	h, held := store.Held(tc.lockPath())
	if !held {
		return false, nil
	}
	if h == nil || h.PID <= 0 {
		return true, fmt.Errorf("thread %s is busy in another ralph that cannot be named: stop it with Ctrl+C", tc.t.ID)
	}
	if err := syscall.Kill(h.PID, syscall.SIGINT); err != nil {
		return true, fmt.Errorf("could not interrupt ralph (pid %d): %w", h.PID, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, still := store.Held(tc.lockPath()); !still {
			if t, err := thread.Load(tc.dir, tc.t.ID); err == nil {
				tc.t = t
			}
			return true, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true, fmt.Errorf("ralph (pid %d) did not stop within a minute", h.PID)
}

// ---- the verbs ----

func (tc *threadCtx) runVerb(v cliVerb, msg string) error {
	phase := tc.t.Phase.Type
	switch v.name {
	case "pause":
		if phase == thread.PhaseRunning {
			if running, err := tc.interruptHolder(); running {
				if err == nil {
					tc.out("thread %s: pause requested; it is now %s", tc.t.ID, tc.t.Phase.Type)
				}
				return err
			}
		}
	case "abandon":
		if _, err := tc.interruptHolder(); err != nil {
			return err
		}
	}
	if err := tc.acquire(); err != nil {
		return err
	}
	defer tc.release()
	phase = tc.t.Phase.Type

	if v.name == "review" && phase == thread.PhasePendingReview {
		tc.printReview()
		return tc.finish()
	}
	if v.name == "resume" && phase != thread.PhasePaused && tc.requireExtra("resume") == nil {
		// A crash cut the work of this phase short: do it again.
		tc.out("thread %s: going on with %s after an interruption", tc.t.ID, phase)
		return tc.driveAndFinish()
	}
	mv, ok := v.phases[phase]
	if !ok {
		return &WrongVerbError{ID: tc.t.ID, Phase: phase, Verb: v.name, Allowed: allowedCommands(phase)}
	}
	ev := thread.Event{Verb: mv, Source: thread.SourceHuman}
	switch v.name {
	case "assess":
		if err := tc.apply(ev, v.name); err != nil {
			return err
		}
		if err := tc.assess(); err != nil {
			return err
		}
		return tc.finish()
	case "start":
		if phase == thread.PhaseFinalized {
			if err := tc.implement(v.name); err != nil {
				return err
			}
			if err := tc.drive(); err != nil {
				return err
			}
			if tc.t.Phase.Type != thread.PhaseConfiguring {
				return tc.finish()
			}
		}
		if err := tc.configure(); err != nil {
			return err
		}
		if err := tc.apply(thread.Event{Verb: thread.VerbStart, Source: thread.SourceHuman}, v.name); err != nil {
			return err
		}
		return tc.driveAndFinish()
	case "reconfigure":
		if err := tc.apply(ev, v.name); err != nil {
			return err
		}
		// The new configuration starts a new run; the paused run's work
		// stays in the tree and its records in runs/.
		if err := tc.retireLoopState(false); err != nil {
			return err
		}
		if err := tc.configure(); err != nil {
			return err
		}
		if tc.t.Mode == thread.ModeMethodical {
			tc.out("next: ralph thread start (with --agent, --max-iterations, --verify to change more)")
		}
		return tc.driveAndFinish()
	case "assist":
		if err := tc.commitHumanEdits("manual assist"); err != nil {
			return err
		}
		if tc.hasConfigFlags() {
			if err := tc.configure(); err != nil {
				return err
			}
		}
		if err := tc.apply(ev, v.name); err != nil {
			return err
		}
		return tc.driveAndFinish()
	case "resume":
		if tc.hasConfigFlags() {
			return usageErrorf("resume keeps the configuration: use `ralph thread reconfigure` to change it")
		}
		if err := tc.apply(ev, v.name); err != nil {
			return err
		}
		return tc.driveAndFinish()
	case "request-changes":
		if msg == "" {
			return usageErrorf("say what to fix: ralph thread request-changes \"the total is off by one\"")
		}
		if err := tc.commitHumanEdits("review edits"); err != nil {
			return err
		}
		if err := tc.addStory("RV", "Review changes", []string{msg}); err != nil {
			return err
		}
		thread.AppendMessage(tc.dir, tc.t.ID, thread.Message{Role: "reviewer", Content: msg, At: tc.env.Now().UTC(), SpecVersion: tc.t.SpecVersion})
		if err := tc.apply(ev, v.name); err != nil {
			return err
		}
		return tc.driveAndFinish()
	case "pause":
		// No ralph is running the loop (it was killed): record the pause.
		return tc.applyAndFinish(ev, v.name)
	}
	return tc.applyAndFinish(ev, v.name)
}

func (tc *threadCtx) hasConfigFlags() bool {
	return len(tc.opts.Agents) > 0 || tc.opts.MaxIterations > 0 || len(tc.opts.Verifiers) > 0
}

func (tc *threadCtx) applyAndFinish(ev thread.Event, verb string) error {
	if err := tc.apply(ev, verb); err != nil {
		return err
	}
	return tc.driveAndFinish()
}

func (tc *threadCtx) driveAndFinish() error {
	if err := tc.drive(); err != nil {
		return err
	}
	return tc.finish()
}

// finish prints the thread (as JSON with --json) and maps the phase it
// waits in to the exit code.
func (tc *threadCtx) finish() error {
	if tc.opts.JSON {
		if err := tc.printJSON(); err != nil {
			return err
		}
	}
	switch tc.t.Phase.Type {
	case thread.PhaseStuck:
		if tc.env.IO.InTerminal && !tc.opts.JSON {
			return tc.stuckPrompt()
		}
		return &ExitError{Code: ExitNeedsHuman, Msg: fmt.Sprintf("thread %s is stuck: a person must decide: ralph thread revise | reconfigure | assist | abandon | diagnose", tc.t.ID)}
	case thread.PhasePreflightFailed:
		return &ExitError{Code: ExitFailure, Msg: fmt.Sprintf("preflight failed for thread %s: fix the above, then `ralph thread retry` (or `ralph thread revise` to fix the spec)", tc.t.ID)}
	}
	return nil
}

// apply raises ev, performs the transition's actions with the thread as it
// was, and only then saves the new thread: a failed action leaves the old
// thread on disk.
func (tc *threadCtx) apply(ev thread.Event, verb string) error {
	old := tc.t
	n, acts, err := thread.Next(old, ev)
	if err != nil {
		return tc.explain(err, verb)
	}
	for _, a := range acts {
		if err := tc.before(a, old, &n); err != nil {
			return err
		}
	}
	if err := thread.Save(tc.dir, &n); err != nil {
		return err
	}
	tc.t = n
	tc.logTransition(old.Phase.Type, n.Phase.Type, string(ev.Verb), ev.Source)
	tc.out("thread %s: %s → %s", n.ID, old.Phase.Type, n.Phase.Type)
	for _, a := range acts {
		tc.after(a)
	}
	return nil
}

// before performs the actions that must succeed before the new phase is
// saved.
func (tc *threadCtx) before(a thread.Action, old thread.Thread, n *thread.Thread) error {
	switch a {
	case thread.ActResetWorkspace:
		return tc.resetWorkspace(old)
	case thread.ActCaptureBaseline:
		return tc.createBranch(n)
	case thread.ActFreezeSpec:
		draft, err := os.ReadFile(tc.draftPath())
		if errors.Is(err, os.ErrNotExist) || (err == nil && strings.TrimSpace(string(draft)) == "") {
			return fmt.Errorf("thread %s has no draft spec to finalize: write one with `ralph thread draft \"...\"` or `ralph thread spec FILE`", old.ID)
		}
		if err != nil {
			return err
		}
		// A finalize cut short after writing the version reuses it.
		vs, _ := thread.SpecVersions(tc.dir, old.ID)
		if len(vs) > 0 && vs[len(vs)-1] > old.SpecVersion {
			if b, err := thread.ReadSpec(tc.dir, old.ID, vs[len(vs)-1]); err == nil && string(b) == string(draft) {
				n.SpecVersion = vs[len(vs)-1]
				return nil
			}
		}
		v, err := thread.AddSpec(tc.dir, old.ID, draft)
		if err != nil {
			return err
		}
		n.SpecVersion = v
		thread.AppendMessage(tc.dir, old.ID, thread.Message{Role: "user", Content: fmt.Sprintf("finalized the draft as spec v%d", v), At: tc.env.Now().UTC(), SpecVersion: v})
	case thread.ActPrepareCommit:
		return os.WriteFile(tc.path("commit_msg.txt"), []byte(tc.commitMessage()), 0o644)
	case thread.ActCommit:
		return tc.commitWork()
	}
	return nil
}

// after reports what the new phase means for the person.
func (tc *threadCtx) after(a thread.Action) {
	t := tc.t
	switch a {
	case thread.ActFreezeSpec:
		tc.out("spec v%d frozen: %s", t.SpecVersion, tc.ws.Rel(thread.SpecPath(tc.dir, t.ID, t.SpecVersion)))
		if t.Mode == thread.ModeMethodical {
			tc.out("next: ralph thread start (or ralph thread reopen)")
		}
	case thread.ActDraftSpec:
		tc.out("next: ralph thread draft \"...\" / spec FILE, then finalize (or assess first)")
	case thread.ActReportPreflight:
		for _, f := range t.Phase.Failures {
			tc.out("  ✗ %s", f)
		}
	case thread.ActAwaitHuman:
		tc.printPausedBox()
	case thread.ActRecordStuck:
		tc.printStuckBox()
	case thread.ActOfferPolish:
		if t.Mode == thread.ModeMethodical {
			tc.out("implemented and verified: next: ralph thread polish (docs/tests) or ralph thread review")
		}
	case thread.ActRequestReview:
		tc.printReview()
	case thread.ActPrepareCommit:
		tc.out("proposed commit message (%s):", tc.ws.Rel(tc.path("commit_msg.txt")))
		for _, l := range strings.Split(strings.TrimRight(tc.commitMessage(), "\n"), "\n") {
			tc.out("    %s", l)
		}
		tc.out("next: ralph thread commit (you commit; ralph never pushes or merges)")
	case thread.ActCommit:
		conf := tc.loadConf()
		what := "nothing left to commit"
		if conf.CommitSHA != "" {
			what = "committed " + short(conf.CommitSHA)
		}
		base := "your branch"
		if t.Baseline != nil && t.Baseline.Branch != "" {
			base = t.Baseline.Branch
		}
		tc.out("done: %s; the work is on branch %s. Merge it yourself, e.g. git checkout %s && git merge %s",
			what, thread.BranchName(t.ID), base, thread.BranchName(t.ID))
	case thread.ActArchive:
		if t.Phase.Type == thread.PhaseAbandoned && t.Branch != "" {
			tc.out("abandoned; branch %s is kept: delete it with git branch -D %s when you no longer need it", t.Branch, t.Branch)
		}
	}
}

// drive performs the phases ralph works in, and quick mode's automatic
// steps, until the thread waits for a person. It never passes a human
// checkpoint: the events it raises come from ralph (system), the agent or
// quick mode, which thread.Next refuses on every human row.
func (tc *threadCtx) drive() error {
	for range 64 {
		var err error
		switch tc.t.Phase.Type {
		case thread.PhasePreflight:
			err = tc.preflight()
		case thread.PhaseRunning:
			err = tc.runLoop()
		case thread.PhaseVerifying:
			err = tc.verify()
		case thread.PhasePolishing:
			err = tc.polish()
		default:
			ev, ok := thread.AutoEvent(tc.t.Phase.Type, tc.t.Mode)
			if !ok {
				return nil
			}
			if tc.t.Phase.Type == thread.PhaseConfiguring {
				if err := tc.configure(); err != nil {
					return err
				}
			}
			if ev.Verb == thread.VerbImplement {
				return tc.implementAs(thread.SourceQuick, string(ev.Verb))
			}
			err = tc.apply(ev, string(ev.Verb))
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("thread %s did not settle in a phase that waits for you", tc.t.ID)
}

// ---- Finalized → Preflight ----

func (tc *threadCtx) implement(verb string) error {
	if err := tc.implementAs(thread.SourceHuman, verb); err != nil {
		return err
	}
	return nil
}

// implementAs begins implementation: the baseline is recorded (kept when
// the thread's branch is already checked out with a baseline), the branch
// is created by the capture_baseline action, and preflight runs.
func (tc *threadCtx) implementAs(src thread.Source, verb string) error {
	ctx := tc.bg()
	ev := thread.Event{Verb: thread.VerbImplement, Source: src}
	head, _ := tc.ws.Repo.Head(ctx)
	branch := tc.currentBranch()
	if head != "" {
		if branch == thread.BranchName(tc.t.ID) && tc.t.Baseline != nil {
			b := *tc.t.Baseline
			ev.Baseline = &b
		} else {
			ev.Baseline = &thread.Baseline{Branch: branch, CommitSHA: head, CapturedAt: tc.env.Now().UTC()}
		}
		ev.Branch = thread.BranchName(tc.t.ID)
	}
	if err := tc.apply(ev, verb); err != nil {
		return err
	}
	if src != thread.SourceHuman {
		return tc.drive()
	}
	return nil
}

func (tc *threadCtx) git(args ...string) (string, error) {
	out, err := tc.ws.Repo.Runner.Git(tc.bg(), tc.ws.Root, args...)
	return strings.TrimSpace(string(out)), err
}

func (tc *threadCtx) currentBranch() string {
	b, err := tc.git("symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		return ""
	}
	return b
}

func (tc *threadCtx) createBranch(n *thread.Thread) error {
	if n.Branch == "" {
		return nil // no commit yet: preflight reports it
	}
	if tc.currentBranch() == n.Branch {
		return nil
	}
	if _, err := tc.git("rev-parse", "--verify", "--quiet", "refs/heads/"+n.Branch); err == nil {
		_, err := tc.git("checkout", "-q", n.Branch)
		if err != nil {
			return fmt.Errorf("could not check out %s: %w", n.Branch, err)
		}
		return nil
	}
	if _, err := tc.git("checkout", "-q", "-b", n.Branch); err != nil {
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

func (tc *threadCtx) preflightFailures() []string {
	var fails []string
	t := tc.t
	ctx := tc.bg()
	// 1. git state
	snap, err := tc.ws.Repo.Snapshot(ctx)
	if err != nil {
		fails = append(fails, "git: "+err.Error())
	} else {
		var dirty []string
		for _, f := range snap.Dirty {
			if !strings.HasPrefix(f, workspace.DirName+"/") {
				dirty = append(dirty, f)
			}
		}
		if len(dirty) > 0 {
			if len(dirty) > 5 {
				dirty = append(dirty[:5], "…")
			}
			fails = append(fails, fmt.Sprintf("git: the working tree has uncommitted changes (%s): commit or stash them", strings.Join(dirty, ", ")))
		} else if b := tc.currentBranch(); t.Branch != "" && b != t.Branch {
			fails = append(fails, fmt.Sprintf("git: on branch %q, not the thread's branch %s: git checkout %s", b, t.Branch, t.Branch))
		}
	}
	// 2. baseline
	if t.Baseline == nil || t.Baseline.CommitSHA == "" {
		fails = append(fails, "baseline: the repository has no commit to return to: make a first commit")
	} else if _, err := tc.git("cat-file", "-e", t.Baseline.CommitSHA+"^{commit}"); err != nil {
		fails = append(fails, fmt.Sprintf("baseline: commit %s is gone", short(t.Baseline.CommitSHA)))
	}
	// 3. spec
	spec, err := thread.ReadSpec(tc.dir, t.ID, t.SpecVersion)
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
	conf := tc.effectiveConf()
	for _, name := range conf.Agents {
		spec, err := tc.agentSpec(name)
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
				if _, serr := os.Stat(filepath.Join(tc.ws.Root, f[0])); serr != nil {
					fails = append(fails, fmt.Sprintf("verifier %q: %s is not installed", v, f[0]))
				}
			}
		}
	}
	// 5. conflicts
	if h, held := store.Held(tc.ws.LockPath()); held {
		fails = append(fails, fmt.Sprintf("conflict: another ralph is running in this workspace (%v): wait for it", h))
	}
	if others, err := thread.List(tc.dir); err == nil {
		for _, o := range others {
			if o.ID != t.ID && (o.Phase.Type == thread.PhaseRunning || o.Phase.Type == thread.PhaseVerifying) {
				fails = append(fails, fmt.Sprintf("conflict: thread %s is %s: pause, finish or abandon it first", o.ID, o.Phase.Type))
			}
		}
	}
	return fails
}

func oneLineErr(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (tc *threadCtx) preflight() error {
	tc.out("preflight: git state, baseline, spec, tools, conflicts")
	fails := tc.preflightFailures()
	if len(fails) > 0 {
		return tc.apply(thread.Event{Verb: thread.VerbChecksFail, Source: thread.SourceSystem, Failures: fails}, "checks_fail")
	}
	tc.out("  ✓ all preflight checks pass (baseline %s on %s, branch %s)", short(tc.t.Baseline.CommitSHA), orNone(tc.t.Baseline.Branch), tc.t.Branch)
	return tc.apply(thread.Event{Verb: thread.VerbChecksPass, Source: thread.SourceSystem}, "checks_pass")
}

func orNone(s string) string {
	if s == "" {
		return "(detached)"
	}
	return s
}

// ---- Configuring ----

func (tc *threadCtx) loadConf() threadConf {
	var c threadConf
	if _, err := store.ReadJSON(tc.path("config.json"), threadConfVersion, &c); err != nil {
		return threadConf{}
	}
	return c
}

func (tc *threadCtx) saveConf(c threadConf) error {
	c.SchemaVersion = threadConfVersion
	return store.WriteJSON(tc.path("config.json"), c)
}

// effectiveConf is the saved configuration with this command's flags over
// it and the defaults under it.
func (tc *threadCtx) effectiveConf() threadConf {
	c := tc.loadConf()
	if len(tc.opts.Agents) > 0 {
		c.Agents = nil
		for _, a := range tc.opts.Agents {
			if a = strings.TrimSpace(a); a != "" {
				c.Agents = append(c.Agents, a)
			}
		}
	}
	if tc.opts.MaxIterations > 0 {
		c.MaxIterations = tc.opts.MaxIterations
	}
	if len(tc.opts.Verifiers) > 0 {
		c.Verifiers = tc.opts.Verifiers
	}
	if len(c.Agents) == 0 {
		if s, err := resolveAgent(tc.env, tc.cfg, ""); err == nil {
			c.Agents = []string{s.Name}
		}
		c.Agents = append(c.Agents, tc.cfg.Agent.Fallbacks...)
	}
	if c.MaxIterations <= 0 {
		c.MaxIterations = max(tc.cfg.Build.MaxIterations, 1)
	}
	return c
}

func (tc *threadCtx) agentSpec(name string) (agent.Spec, error) {
	if s, err := resolveAgent(tc.env, tc.cfg, ""); err == nil && s.Name == name {
		return s, nil // AGENT_CMD or the configured default
	}
	return namedAgent(tc.cfg, name, "thread agents")
}

// configure saves the configuration: this command's flags, else what was
// chosen before, else the defaults (quick mode never asks).
func (tc *threadCtx) configure() error {
	c := tc.effectiveConf()
	if tc.opts.MaxIterations < 0 {
		return usageErrorf("--max-iterations must be at least 1")
	}
	for _, name := range c.Agents {
		if _, err := tc.agentSpec(name); err != nil {
			return err
		}
	}
	if err := tc.saveConf(c); err != nil {
		return err
	}
	verifiers := "none"
	if len(c.Verifiers) > 0 {
		verifiers = strings.Join(c.Verifiers, "; ")
	}
	tc.out("configuration: agents %s, at most %d iterations, verifiers: %s", strings.Join(c.Agents, " → "), c.MaxIterations, verifiers)
	return nil
}

// ---- Running ----

func (tc *threadCtx) copySpecToPRD(conf *threadConf) error {
	spec, err := thread.ReadSpec(tc.dir, tc.t.ID, tc.t.SpecVersion)
	if err != nil {
		return err
	}
	if err := store.WriteFileAtomic(tc.prdPath(), spec, 0o644); err != nil {
		return err
	}
	conf.PRDSpecVersion = tc.t.SpecVersion
	conf.Extra = 0
	return tc.saveConf(*conf)
}

// retireLoopState marks an unfinished loop run over this thread's PRD copy
// as finished, so that the next run starts afresh instead of resuming it,
// and forgets the retry counters of the thread's stories.
func (tc *threadCtx) retireLoopState(keepRun bool) error {
	st, err := loop.LoadState(tc.ws)
	if err != nil || st == nil {
		return err
	}
	rel := tc.ws.Rel(tc.prdPath())
	changed := false
	// A person decided to run again: the circuit breaker of earlier
	// attempts does not hold this one back.
	if st.Breaker.State == loop.BreakerOpen || st.Breaker.NoProgress > 0 || st.Breaker.SameError > 0 {
		st.Breaker = loop.Breaker{Opened: st.Breaker.Opened}
		changed = true
	}
	if st.TaskFile == rel && !st.Finished && !keepRun {
		st.Finished, st.Outcome, st.Reason = true, loop.OutcomeInterrupted, "superseded: thread "+tc.t.ID+" starts a new run"
		changed = true
	}
	if b, err := os.ReadFile(tc.prdPath()); err == nil {
		if prd, err := tasks.ParseMarkdown(rel, b); err == nil {
			for _, s := range prd.Stories {
				for id := range st.Tasks {
					if sid, _ := tasks.ParseTaskID(id); sid == s.ID {
						delete(st.Tasks, id)
						delete(st.Feedback, id)
						changed = true
					}
				}
			}
		}
	}
	if !changed {
		return nil
	}
	return loop.SaveState(tc.ws, st)
}

func (tc *threadCtx) runLoop() error {
	conf := tc.effectiveConf()
	if _, err := os.Stat(tc.prdPath()); err != nil || conf.PRDSpecVersion != tc.t.SpecVersion {
		if err := tc.retireLoopState(false); err != nil {
			return err
		}
		if err := tc.copySpecToPRD(&conf); err != nil {
			return err
		}
	}
	rel := tc.ws.Rel(tc.prdPath())
	prior, err := loop.LoadState(tc.ws)
	if err != nil {
		return err
	}
	resuming := prior != nil && !prior.Finished && prior.TaskFile == rel
	base := tc.t.Phase.Iteration
	if resuming && conf.RunID == prior.RunID {
		base = conf.RunBase
	}
	remaining := conf.MaxIterations - base
	if !resuming {
		// A new run needs a clean tree: what the last attempt left on the
		// thread's branch is committed there.
		if err := tc.commitHumanEdits("work in progress before a new run"); err != nil {
			return err
		}
		if remaining <= 0 {
			return tc.stuck(base, fmt.Sprintf("no iterations left (%d of %d used)", base, conf.MaxIterations), nil)
		}
		if err := tc.retireLoopState(false); err != nil {
			return err
		}
	}
	if err := tc.saveConf(conf); err != nil {
		return err
	}
	if why := tc.agentsExhausted(conf.Agents); why != "" {
		return tc.stuck(base, why, nil)
	}
	if spec, err := thread.ReadSpec(tc.dir, tc.t.ID, tc.t.SpecVersion); err == nil {
		if p := specPromise(spec); p != "" && p != "COMPLETE" && !resuming {
			store.AppendFile(tc.ws.Path("context.md"), []byte(fmt.Sprintf("- (thread %s) when every story is done, end your final message with <promise>%s</promise> on a line of its own\n", tc.t.ID, p)))
		}
	}
	cmd := &cobra.Command{}
	cmd.SetContext(tc.ctx)
	s, err := loopOptions(cmd, &BuildOptions{Env: tc.env, Agent: conf.Agents[0], PRD: rel, MaxIterations: max(remaining, 1)}, false)
	if err != nil {
		return err
	}
	s.opts.RequirePlan = false
	s.opts.Fallbacks = nil
	for _, name := range conf.Agents[1:] {
		f, err := tc.agentSpec(name)
		if err != nil {
			return err
		}
		s.opts.Fallbacks = append(s.opts.Fallbacks, f)
	}
	s.opts.MaxLimitWait = threadMaxLimitWait
	tc.out("running the loop for thread %s: spec v%d, iterations %d/%d used", tc.t.ID, tc.t.SpecVersion, base, conf.MaxIterations)
	rep, runErr := loop.Build(tc.ctx, tc.ws, s.opts)
	// Another command may have moved the thread meanwhile (abandon).
	if t, err := thread.Load(tc.dir, tc.t.ID); err == nil {
		tc.t = t
	}
	if tc.t.Phase.Type != thread.PhaseRunning {
		tc.out("thread %s is %s now; the loop's outcome (%s) is not applied", tc.t.ID, tc.t.Phase.Type, rep.Outcome)
		return nil
	}
	used := base + rep.Iterations
	if rep.RunID != "" {
		conf.RunID, conf.RunBase = rep.RunID, base
		if err := tc.saveConf(conf); err != nil {
			return err
		}
	}
	switch {
	case errors.Is(runErr, loop.ErrInterrupted):
		if err := tc.apply(thread.Event{Verb: thread.VerbInterrupt, Source: thread.SourceHuman, Iteration: used, RunID: rep.RunID}, "pause"); err != nil {
			return err
		}
		return &ExitError{Code: ExitInterrupted, Msg: fmt.Sprintf("thread %s paused; nothing is lost: ralph thread resume | reconfigure | abandon", tc.t.ID)}
	case errors.Is(runErr, loop.ErrAllLimited):
		return tc.stuck(used, runErr.Error(), nil)
	case errors.Is(runErr, loop.ErrNeedsHuman) || rep.Outcome == loop.OutcomeNeedsHuman:
		return tc.stuck(used, "only blocked stories are left", nil)
	case runErr != nil:
		return fmt.Errorf("the loop stopped: %w (thread %s stays Running: fix it, then `ralph thread resume`)", runErr, tc.t.ID)
	case rep.Outcome == loop.OutcomeMaxIterations || rep.Outcome == loop.OutcomeBudget:
		return tc.stuck(used, rep.Reason, nil)
	case rep.Outcome == loop.OutcomeComplete:
		return tc.apply(thread.Event{Verb: thread.VerbClaimDone, Source: thread.SourceAgent, Iteration: used, RunID: rep.RunID}, "claim_done")
	}
	return fmt.Errorf("the loop ended with outcome %q; thread %s stays Running: `ralph thread resume`", rep.Outcome, tc.t.ID)
}

// threadMaxLimitWait is the longest a thread's loop waits for a usage
// limit to reset when every configured agent is cooling down; beyond it
// the thread goes to Stuck (all agents exhausted) for a person to decide.
var threadMaxLimitWait = 10 * time.Minute

// agentsExhausted says why no configured agent can run within
// threadMaxLimitWait (the cooldowns in .ralph/state.json), "" when one can.
func (tc *threadCtx) agentsExhausted(agents []string) string {
	st, err := loop.LoadState(tc.ws)
	if err != nil || st == nil || len(agents) == 0 {
		return ""
	}
	limit := tc.env.Now().Add(threadMaxLimitWait)
	var parts []string
	for _, name := range agents {
		until, ok := st.Cooldowns[name]
		if !ok || !until.After(limit) {
			return ""
		}
		parts = append(parts, fmt.Sprintf("%s until %s", name, until.Local().Format("15:04:05")))
	}
	return fmt.Sprintf("%v: every agent is cooling down after a usage limit (%s)", loop.ErrAllLimited, strings.Join(parts, ", "))
}

// stuck records what the failed attempt leaves and moves to Stuck.
func (tc *threadCtx) stuck(used int, reason string, ev *Evidence) error {
	tc.out("stuck: %s", reason)
	info := thread.StuckInfo{SpecVersion: tc.t.SpecVersion, Iterations: used}
	if ev != nil {
		for _, it := range ev.Items {
			if it.Passed {
				info.CriteriaPassed = append(info.CriteriaPassed, it.Name)
			} else {
				info.CriteriaFailed = append(info.CriteriaFailed, it.Name)
			}
		}
	} else if b, err := os.ReadFile(tc.prdPath()); err == nil {
		if prd, err := tasks.ParseMarkdown("prd", b); err == nil {
			for _, s := range prd.Stories {
				for _, c := range s.Criteria {
					name := s.ID + ": " + c.Text
					if s.Done || c.Done {
						info.CriteriaPassed = append(info.CriteriaPassed, name)
					} else {
						info.CriteriaFailed = append(info.CriteriaFailed, name)
					}
				}
			}
		}
	}
	if out := tc.closestOutput(); out != "" {
		info.ClosestOutput = tc.ws.Rel(out)
	}
	if tc.t.Baseline != nil {
		diff, _ := tc.git("diff", tc.t.Baseline.CommitSHA, "--", ".", ":(exclude).ralph")
		if untracked, _ := tc.git("ls-files", "--others", "--exclude-standard", "--", ".", ":(exclude).ralph"); untracked != "" {
			diff += "\n# untracked files (not in the diff above):\n# " + strings.ReplaceAll(untracked, "\n", "\n# ")
		}
		p := tc.path("stuck.diff")
		if err := store.WriteFileAtomic(p, []byte(diff+"\n"), 0o644); err == nil {
			info.DiffPath = tc.ws.Rel(p)
		}
	}
	store.WriteFileAtomic(tc.path("stuck_reason.txt"), []byte(reason+"\n"), 0o644)
	return tc.apply(thread.Event{Verb: thread.VerbStuck, Source: thread.SourceSystem, Iteration: used, Stuck: &info}, "stuck")
}

// closestOutput is the raw output of the last iteration of the thread's
// last run: the nearest the agent came.
func (tc *threadCtx) closestOutput() string {
	conf := tc.loadConf()
	if conf.RunID == "" {
		return ""
	}
	logs, _ := filepath.Glob(filepath.Join(tc.ws.RunsDir(), conf.RunID, "iter-*.log"))
	best, bestN := "", -1
	for _, l := range logs {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(l), "iter-%d.log", &n); err == nil && n > bestN {
			best, bestN = l, n
		}
	}
	return best
}

// ---- Verifying ----

func (tc *threadCtx) verify() error {
	conf := tc.effectiveConf()
	tc.out("verifying thread %s: criteria, verifiers and the promise", tc.t.ID)
	ev := &Evidence{SchemaVersion: 1, RunID: conf.RunID, At: tc.env.Now().UTC()}
	var failedStories []string
	b, err := os.ReadFile(tc.prdPath())
	if err != nil {
		return err
	}
	prd, err := tasks.ParseMarkdown(tc.ws.Rel(tc.prdPath()), b)
	if err != nil {
		return err
	}
	for _, s := range prd.Stories {
		ok := s.Done
		if !s.Done {
			ev.Items = append(ev.Items, EvidenceItem{Name: s.ID + ": " + s.Title, Passed: false, Detail: "story not checked"})
		}
		for _, c := range s.Criteria {
			item := EvidenceItem{Name: s.ID + ": " + c.Text, Passed: s.Done}
			if c.Verify != "" {
				res := check.Run(tc.ctx, tc.ws.Root, check.Check{Name: c.Verify, Run: c.Verify, Timeout: tc.cfg.Agent.Timeout.Duration})
				item.Passed = res.Passed()
				item.Detail = "verify: " + c.Verify + tailDetail(res)
			}
			ok = ok && item.Passed
			ev.Items = append(ev.Items, item)
		}
		if !ok {
			failedStories = append(failedStories, s.ID)
		}
	}
	allStories := len(failedStories) == 0
	for _, v := range conf.Verifiers {
		res := check.Run(tc.ctx, tc.ws.Root, check.Check{Name: v, Run: v})
		ev.Items = append(ev.Items, EvidenceItem{Name: "verifier: " + v, Passed: res.Passed(), Detail: tailDetail(res)})
	}
	spec, _ := thread.ReadSpec(tc.dir, tc.t.ID, tc.t.SpecVersion)
	promise := specPromise(spec)
	seen := tc.promiseSeen(conf.RunID, promise)
	ev.Items = append(ev.Items, EvidenceItem{Name: "promise <promise>" + promise + "</promise>", Passed: seen})
	ev.Passed = true
	for _, it := range ev.Items {
		if !it.Passed {
			ev.Passed = false
		}
	}
	if tc.ctx.Err() != nil {
		return &ExitError{Code: ExitInterrupted, Msg: fmt.Sprintf("interrupted while verifying; thread %s stays Verifying: `ralph thread resume` verifies again", tc.t.ID)}
	}
	if err := store.WriteJSON(tc.path("evidence.json"), ev); err != nil {
		return err
	}
	for _, it := range ev.Items {
		mark := "✓"
		if !it.Passed {
			mark = "✗"
		}
		tc.out("  %s %s", mark, it.Name)
	}
	if ev.Passed {
		return tc.apply(thread.Event{Verb: thread.VerbCriteriaPassed, Source: thread.SourceSystem}, "criteria_passed")
	}
	used := tc.t.Phase.Iteration
	if used >= conf.MaxIterations {
		return tc.stuck(used, fmt.Sprintf("verification failed with no iterations left (%d of %d used)", used, conf.MaxIterations), ev)
	}
	// Send the loop back to work: reopen the stories that failed, or add
	// one for failures no story owns.
	var failures []string
	for _, it := range ev.Items {
		if !it.Passed {
			failures = append(failures, it.Name+" "+it.Detail)
		}
	}
	if !allStories {
		data := b
		for _, id := range failedStories {
			if d, err := tasks.SetStoryDone(data, id, false); err == nil {
				data = d
			}
			if d, err := tasks.UncheckCriteria(data, id); err == nil {
				data = d
			}
		}
		if err := store.WriteFileAtomic(tc.prdPath(), data, 0o644); err != nil {
			return err
		}
	} else {
		crit := []string{"every verifier passes and the final message ends with <promise>" + promise + "</promise>"}
		if err := tc.addStory("VF", "Fix what verification found", crit); err != nil {
			return err
		}
	}
	store.AppendFile(tc.ws.Path("context.md"), []byte(fmt.Sprintf("- (thread %s) verification failed: %s\n", tc.t.ID, strings.Join(failures, "; "))))
	return tc.apply(thread.Event{Verb: thread.VerbCriteriaFailed, Source: thread.SourceSystem}, "criteria_failed")
}

func tailDetail(res check.Result) string {
	if res.Passed() {
		return ""
	}
	out := strings.TrimSpace(res.Output)
	if len(out) > 300 {
		out = "…" + out[len(out)-300:]
	}
	return fmt.Sprintf(" (exit %d) %s", res.ExitCode, out)
}

// promiseSeen reports whether an iteration of the run ended with the
// spec's promise tag in its final message.
func (tc *threadCtx) promiseSeen(runID, promise string) bool {
	if runID == "" || promise == "" {
		return false
	}
	files, _ := filepath.Glob(filepath.Join(tc.ws.RunsDir(), runID, "iter-*.json"))
	for _, f := range files {
		var rec loop.IterationRecord
		if _, err := store.ReadJSON(f, 1, &rec); err != nil {
			continue
		}
		for _, s := range rec.Signals {
			if strings.EqualFold(s, promise) {
				return true
			}
		}
		if strings.Contains(rec.FinalMessage, "<promise>"+promise+"</promise>") {
			return true
		}
	}
	// An iteration cut short by a kill after the agent's final message is
	// finished by the resumed run without that message in its record: the
	// end of its raw output, where the final message is, still has it.
	logs, _ := filepath.Glob(filepath.Join(tc.ws.RunsDir(), runID, "iter-*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "<promise>"+promise+"</promise>") && !strings.Contains(line, "Output <promise>") {
				return true
			}
		}
	}
	return false
}

// addStory appends a story to the PRD copy, so that the loop has work.
func (tc *threadCtx) addStory(prefix, title string, criteria []string) error {
	conf := tc.effectiveConf()
	if _, err := os.Stat(tc.prdPath()); err != nil || conf.PRDSpecVersion != tc.t.SpecVersion {
		if err := tc.copySpecToPRD(&conf); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(tc.prdPath())
	if err != nil {
		return err
	}
	conf.Extra++
	var sb strings.Builder
	sb.WriteString(strings.TrimRight(string(b), "\n"))
	fmt.Fprintf(&sb, "\n\n### [ ] %s-%d: %s\n", prefix, conf.Extra, title)
	for _, c := range criteria {
		fmt.Fprintf(&sb, "- [ ] %s\n", strings.ReplaceAll(c, "\n", " "))
	}
	if err := store.WriteFileAtomic(tc.prdPath(), []byte(sb.String()), 0o644); err != nil {
		return err
	}
	return tc.saveConf(conf)
}

// commitHumanEdits commits what a person changed on the thread's branch,
// so that the loop, which refuses a dirty tree, can go on from it.
func (tc *threadCtx) commitHumanEdits(what string) error {
	snap, err := tc.ws.Repo.Snapshot(tc.bg())
	if err != nil || snap.Clean() {
		return err
	}
	if tc.t.Branch != "" && tc.currentBranch() != tc.t.Branch {
		return fmt.Errorf("you are on %q, not the thread's branch %s: git checkout %s first", tc.currentBranch(), tc.t.Branch, tc.t.Branch)
	}
	if err := tc.ws.Repo.AddAll(tc.bg()); err != nil {
		return err
	}
	sha, err := tc.ws.Repo.Commit(tc.bg(), fmt.Sprintf("%s: %s\n\nRalph-Thread: %s\n", tc.t.Title, what, tc.t.ID))
	if err != nil {
		return err
	}
	tc.out("committed your edits on %s: %s", tc.t.Branch, short(sha))
	return nil
}

// ---- Reset, review, commit ----

// input reads the person's answers: one buffered reader for the Stuck
// menu and the questions it leads to, so that no typed-ahead line is lost.
func (tc *threadCtx) input() *bufio.Reader {
	if tc.in == nil || tc.inSrc != tc.env.IO.In {
		tc.in, tc.inSrc = bufio.NewReader(tc.env.IO.In), tc.env.IO.In
	}
	return tc.in
}

func (tc *threadCtx) confirm(question string) bool {
	if tc.opts.Yes {
		return true
	}
	if !tc.env.IO.InTerminal {
		return false
	}
	fmt.Fprintf(tc.env.IO.Out, "%s [y/N] ", question)
	line, _ := tc.input().ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// resetWorkspace restores the baseline: checkout of the baseline branch,
// reset --hard to the baseline commit, deletion of the thread's branch.
// It asks first (or takes --yes) and refuses without an answer.
func (tc *threadCtx) resetWorkspace(old thread.Thread) error {
	if old.Baseline == nil || old.Baseline.CommitSHA == "" {
		return nil
	}
	b := old.Baseline
	tc.out("revise resets the workspace to the baseline %s (%s) and deletes %s; the loop's commits there are dropped.", short(b.CommitSHA), orNone(b.Branch), thread.BranchName(old.ID))
	if !tc.confirm("This will reset changes. Continue?") {
		return &ExitError{Code: ExitFailure, Msg: "not reset, nothing changed: confirm with --yes (or answer y on a terminal)"}
	}
	// Uncommitted work is stashed, not thrown away (ralph's own folder
	// is left alone): git stash list shows it.
	if snap, err := tc.ws.Repo.Snapshot(tc.bg()); err == nil && !snap.Clean() {
		msg := fmt.Sprintf("ralph: thread %s work before reset to baseline", old.ID)
		if out, err := tc.git("stash", "push", "--include-untracked", "-m", msg, "--", ".", ":(exclude).ralph"); err != nil {
			return fmt.Errorf("reset: git stash: %w", err)
		} else if !strings.Contains(out, "No local changes") {
			tc.out("uncommitted work stashed: %q (git stash list)", msg)
		}
	}
	target := b.Branch
	if target == "" || target == thread.BranchName(old.ID) {
		target = b.CommitSHA
	}
	if _, err := tc.git("checkout", "-q", "-f", target); err != nil {
		return fmt.Errorf("reset: git checkout %s: %w", target, err)
	}
	if _, err := tc.git("reset", "-q", "--hard", b.CommitSHA); err != nil {
		return fmt.Errorf("reset: git reset --hard %s: %w", short(b.CommitSHA), err)
	}
	if _, err := tc.git("rev-parse", "--verify", "--quiet", "refs/heads/"+thread.BranchName(old.ID)); err == nil {
		if _, err := tc.git("branch", "-q", "-D", thread.BranchName(old.ID)); err != nil {
			return fmt.Errorf("reset: deleting %s: %w", thread.BranchName(old.ID), err)
		}
	}
	// The next run starts from the new spec, not from this attempt.
	if err := tc.retireLoopState(false); err != nil {
		return err
	}
	os.Remove(tc.prdPath())
	c := tc.loadConf()
	c.PRDSpecVersion, c.Extra, c.RunID, c.RunBase = 0, 0, "", 0
	tc.saveConf(c)
	tc.out("workspace reset to %s; %s deleted", short(b.CommitSHA), thread.BranchName(old.ID))
	return nil
}

func (tc *threadCtx) loadEvidence() *Evidence {
	var ev Evidence
	if _, err := store.ReadJSON(tc.path("evidence.json"), 1, &ev); err != nil {
		return nil
	}
	return &ev
}

func (tc *threadCtx) recommendApprove() bool {
	ev := tc.loadEvidence()
	return tc.t.Mode == thread.ModeQuick && ev != nil && ev.Passed
}

func (tc *threadCtx) printReview() {
	t := tc.t
	tc.out("── review of thread %s: %s ──", t.ID, t.Title)
	if t.Baseline != nil {
		stat, _ := tc.git("diff", "--stat", t.Baseline.CommitSHA, "--", ".", ":(exclude).ralph")
		log, _ := tc.git("log", "--oneline", t.Baseline.CommitSHA+"..HEAD")
		tc.out("commits since the baseline %s:", short(t.Baseline.CommitSHA))
		for _, l := range strings.Split(log, "\n") {
			if l != "" {
				tc.out("  %s", l)
			}
		}
		tc.out("diff from the baseline (git diff %s):", short(t.Baseline.CommitSHA))
		for _, l := range strings.Split(stat, "\n") {
			if l != "" {
				tc.out("  %s", l)
			}
		}
	}
	if ev := tc.loadEvidence(); ev != nil {
		tc.out("verification evidence:")
		for _, it := range ev.Items {
			mark := "✓"
			if !it.Passed {
				mark = "✗"
			}
			tc.out("  %s %s", mark, it.Name)
		}
	}
	if tc.recommendApprove() {
		tc.out("★ Recommend Approve: every criterion, verifier and the promise passed. Approving is still yours.")
	}
	tc.out("next: ralph thread approve | request-changes \"what to fix\" | revise (resets to the baseline) | abandon")
}

func (tc *threadCtx) commitMessage() string {
	t := tc.t
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nThread %s, spec v%d.\n", t.Title, t.ID, t.SpecVersion)
	if ev := tc.loadEvidence(); ev != nil {
		b.WriteString("\nVerification:\n")
		for _, it := range ev.Items {
			mark := "✓"
			if !it.Passed {
				mark = "✗"
			}
			fmt.Fprintf(&b, "- %s %s\n", mark, it.Name)
		}
	}
	fmt.Fprintf(&b, "\nRalph-Thread: %s\n", t.ID)
	if c := tc.loadConf(); c.RunID != "" {
		fmt.Fprintf(&b, "Ralph-Run: %s\n", c.RunID)
	}
	return b.String()
}

// commitWork commits what is left on the thread's branch with the proposed
// message. It never pushes or merges.
func (tc *threadCtx) commitWork() error {
	if tc.t.Branch != "" && tc.currentBranch() != tc.t.Branch {
		return fmt.Errorf("you are on %q, not the thread's branch %s: git checkout %s, then commit again", tc.currentBranch(), tc.t.Branch, tc.t.Branch)
	}
	msg, err := os.ReadFile(tc.path("commit_msg.txt"))
	if err != nil {
		msg = []byte(tc.commitMessage())
	}
	conf := tc.loadConf()
	snap, err := tc.ws.Repo.Snapshot(tc.bg())
	if err != nil {
		return err
	}
	if !snap.Clean() {
		if err := tc.ws.Repo.AddAll(tc.bg()); err != nil {
			return err
		}
		sha, err := tc.ws.Repo.Commit(tc.bg(), string(msg))
		if err != nil && !errors.Is(err, gitx.ErrNothingToCommit) {
			return err
		}
		conf.CommitSHA = sha
	}
	return tc.saveConf(conf)
}

// ---- output ----

// ThreadView is what `ralph thread show --json` prints.
type ThreadView struct {
	thread.Thread
	Active           bool        `json:"active"`
	Allowed          []string    `json:"allowed"`
	Config           *threadConf `json:"config,omitempty"`
	Evidence         *Evidence   `json:"evidence,omitempty"`
	RecommendApprove bool        `json:"recommend_approve"`
	Spec             string      `json:"spec,omitempty"`
	Draft            string      `json:"draft,omitempty"`
	Conversation     string      `json:"conversation"`
	Messages         int         `json:"messages"`
	Running          bool        `json:"running"`
	StuckReason      string      `json:"stuck_reason,omitempty"`
}

func (tc *threadCtx) view() ThreadView {
	t := tc.t
	v := ThreadView{Thread: t, Allowed: allowedCommands(t.Phase.Type), RecommendApprove: tc.recommendApprove(),
		Conversation: tc.ws.Rel(thread.ConversationPath(tc.dir, t.ID))}
	if v.Allowed == nil {
		v.Allowed = []string{}
	}
	active, _ := thread.ActiveThread(tc.dir)
	v.Active = active == t.ID
	if _, err := os.Stat(tc.path("config.json")); err == nil {
		c := tc.loadConf()
		v.Config = &c
	}
	v.Evidence = tc.loadEvidence()
	if t.SpecVersion > 0 {
		v.Spec = tc.ws.Rel(thread.SpecPath(tc.dir, t.ID, t.SpecVersion))
	}
	if _, err := os.Stat(tc.draftPath()); err == nil {
		v.Draft = tc.ws.Rel(tc.draftPath())
	}
	msgs, _ := thread.ReadConversation(tc.dir, t.ID)
	v.Messages = len(msgs)
	_, v.Running = store.Held(tc.lockPath())
	if t.Phase.Type == thread.PhaseStuck {
		b, _ := os.ReadFile(tc.path("stuck_reason.txt"))
		v.StuckReason = strings.TrimSpace(string(b))
	}
	return v
}

func (tc *threadCtx) printJSON() error {
	b, err := json.MarshalIndent(tc.view(), "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(tc.env.IO.Out, string(b))
	return nil
}

func (tc *threadCtx) printShow() {
	v := tc.view()
	t := tc.t
	tc.out("thread %s: %s", t.ID, t.Title)
	phase := string(t.Phase.Type)
	if t.Phase.Type == thread.PhaseRunning || t.Phase.Type == thread.PhasePaused || t.Phase.Type == thread.PhaseVerifying {
		phase += fmt.Sprintf(" (iteration %d)", t.Phase.Iteration)
	}
	tc.out("  phase:     %s", phase)
	tc.out("  mode:      %s", t.Mode)
	if v.Spec != "" {
		tc.out("  spec:      v%d (%s)", t.SpecVersion, v.Spec)
	}
	if v.Draft != "" {
		tc.out("  draft:     %s", v.Draft)
	}
	tc.out("  talk:      %d message(s) in %s", v.Messages, v.Conversation)
	if t.Baseline != nil {
		tc.out("  baseline:  %s on %s, captured %s", short(t.Baseline.CommitSHA), orNone(t.Baseline.Branch), t.Baseline.CapturedAt.Format(time.RFC3339))
	}
	if t.Branch != "" {
		tc.out("  branch:    %s", t.Branch)
	}
	if v.Config != nil {
		tc.out("  config:    agents %s, max %d iterations, %d verifier(s)", strings.Join(v.Config.Agents, " → "), v.Config.MaxIterations, len(v.Config.Verifiers))
	}
	if t.CurrentRunID != "" {
		tc.out("  run:       %s", t.CurrentRunID)
	}
	if v.Running {
		tc.out("  busy:      a ralph is working on it now")
	}
	switch t.Phase.Type {
	case thread.PhasePreflightFailed:
		for _, f := range t.Phase.Failures {
			tc.out("  ✗ %s", f)
		}
	case thread.PhaseStuck:
		tc.printStuckBox()
	case thread.PhasePaused:
		tc.printPausedBox()
	case thread.PhasePendingReview:
		if v.RecommendApprove {
			tc.out("  ★ Recommend Approve (you still approve)")
		}
	}
	if len(v.Allowed) > 0 {
		tc.out("  allowed:   %s", strings.Join(v.Allowed, ", "))
	}
}

func (tc *threadCtx) printStuckBox() {
	t := tc.t
	reason, _ := os.ReadFile(tc.path("stuck_reason.txt"))
	tc.out("┌─────────────────────────────────────────────────────┐")
	tc.out("│  STUCK: What would you like to do?                  │")
	tc.out("├─────────────────────────────────────────────────────┤")
	tc.out("│  [R] Revise spec     → Resets workspace, Drafting   │")
	tc.out("│  [C] Reconfigure     → Configuring (keep changes)   │")
	tc.out("│  [M] Manual assist   → Running (after human edits)  │")
	tc.out("│  [A] Abandon         → Abandoned                    │")
	tc.out("│  [D] Diagnose        → (view details, stay Stuck)   │")
	tc.out("└─────────────────────────────────────────────────────┘")
	if r := strings.TrimSpace(string(reason)); r != "" {
		tc.out("why: %s", r)
	}
	if t.Stuck != nil {
		tc.out("spec v%d, %d iteration(s), criteria %d passed / %d failed", t.Stuck.SpecVersion, t.Stuck.Iterations, len(t.Stuck.CriteriaPassed), len(t.Stuck.CriteriaFailed))
	}
	tc.out("commands: ralph thread revise [--yes] | reconfigure | assist | abandon | diagnose")
}

func (tc *threadCtx) printPausedBox() {
	conf := tc.loadConf()
	passed, total := 0, 0
	if b, err := os.ReadFile(tc.prdPath()); err == nil {
		if prd, err := tasks.ParseMarkdown("prd", b); err == nil {
			for _, s := range prd.Stories {
				for _, c := range s.Criteria {
					total++
					if s.Done || c.Done {
						passed++
					}
				}
			}
		}
	}
	model := "default"
	if len(conf.Agents) > 0 {
		model = conf.Agents[0]
	}
	tc.out("┌─────────────────────────────────────────────────────┐")
	tc.out("│  PAUSED: Loop interrupted                           │")
	tc.out("├─────────────────────────────────────────────────────┤")
	tc.out("│  Iteration: %-40s│", fmt.Sprintf("%d/%d", tc.t.Phase.Iteration, conf.MaxIterations))
	tc.out("│  Current model: %-36s│", model)
	tc.out("│  Criteria: %-41s│", fmt.Sprintf("%d/%d passing", passed, total))
	tc.out("│                                                     │")
	tc.out("│  [R] Resume          → Continue from here           │")
	tc.out("│  [C] Reconfigure     → Change models/iterations     │")
	tc.out("│  [A] Abandon         → Abandon thread               │")
	tc.out("└─────────────────────────────────────────────────────┘")
	tc.out("commands: ralph thread resume | reconfigure | abandon")
}

func (tc *threadCtx) printDiagnosis() {
	s := tc.t.Stuck
	if s == nil {
		tc.out("no record of the failed attempt")
		return
	}
	reason, _ := os.ReadFile(tc.path("stuck_reason.txt"))
	tc.out("thread %s is stuck: %s", tc.t.ID, strings.TrimSpace(string(reason)))
	tc.out("  spec attempted: v%d", s.SpecVersion)
	tc.out("  iterations run: %d", s.Iterations)
	for _, c := range s.CriteriaPassed {
		tc.out("  ✓ %s", c)
	}
	for _, c := range s.CriteriaFailed {
		tc.out("  ✗ %s", c)
	}
	if s.ClosestOutput != "" {
		tc.out("  closest output: %s", s.ClosestOutput)
	}
	if s.DiffPath != "" {
		tc.out("  diff from the baseline: %s", s.DiffPath)
		if b, err := os.ReadFile(tc.ws.Abs(s.DiffPath)); err == nil {
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 40 {
				lines = append(lines[:40], fmt.Sprintf("… (%d more lines)", len(lines)-40))
			}
			for _, l := range lines {
				tc.out("    %s", l)
			}
		}
	}
}

// stuckPrompt is the Stuck box as a question on a terminal.
func (tc *threadCtx) stuckPrompt() error {
	r := tc.input()
	for {
		fmt.Fprint(tc.env.IO.Out, "choose [R/C/M/A/D] (empty to decide later): ")
		line, err := r.ReadString('\n')
		choice := strings.ToUpper(strings.TrimSpace(line))
		var name string
		switch choice {
		case "R":
			name = "revise"
		case "C":
			name = "reconfigure"
		case "M":
			fmt.Fprint(tc.env.IO.Out, "edit the files, then press Enter to run the loop again: ")
			r.ReadString('\n')
			name = "assist"
		case "A":
			name = "abandon"
		case "D":
			tc.printDiagnosis()
			continue
		default:
			if err == nil && choice != "" {
				continue
			}
			return &ExitError{Code: ExitNeedsHuman, Msg: fmt.Sprintf("thread %s is stuck: decide later with ralph thread revise | reconfigure | assist | abandon", tc.t.ID)}
		}
		for _, v := range threadVerbs {
			if v.name == name {
				tc.release()
				tc.opts.Yes = false // the reset question is asked on the terminal
				return tc.runVerb(v, "")
			}
		}
	}
}
