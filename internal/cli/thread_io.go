package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/thread"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/ralphloop/ralph/internal/worktree"
	"github.com/spf13/cobra"
)

// threadCmd is one `ralph thread` command: the workspace it opened, the
// runner (thread.Runner) of the thread it works on, and the terminal side
// of the work: the questions a person answers and what is printed when
// the thread settles. The thread's own work happens in the runner.
type threadCmd struct {
	env  *Env
	opts *ThreadOptions
	ctx  context.Context
	ws   *workspace.Workspace
	app  *app.App
	dir  string // .ralph
	// r is nil until the command has chosen its thread (use).
	r *thread.Runner
	// in reads answers from inSrc (the command's standard input).
	in    *bufio.Reader
	inSrc io.Reader
	// journal records the runner's events; nil for a command that only
	// reads threads, which writes nothing.
	journal *report.Journal
	// em is the runner's emitter, which the command's summary shares.
	em *report.Emitter
	// document says --json prints one JSON document after the work (thread
	// new) instead of streaming the events.
	document bool
	// att is the thread's hold on the control folder (pause and stop
	// from any terminal or front end); detach lets go.
	att    *control.Attachment
	attach func(runID string) *control.Attachment
	detach func()
	// box confines the thread's agents (nil: none), and boxWarning says
	// once that mode auto found no sandbox (see useSandbox).
	box        *sandbox.Policy
	boxSettled bool
	boxWarning string
}

// openThreads opens the workspace for a command that writes threads (new):
// .ralph/.gitignore keeps threads/ out of git before anything is written.
func openThreads(cmd *cobra.Command, opts *ThreadOptions) (*threadCmd, error) {
	tc, err := readThreads(cmd, opts)
	if err != nil {
		return nil, err
	}
	return tc, tc.prepare()
}

// readThreads opens the workspace for a command that only reads threads:
// it creates nothing, not even .ralph/.
func readThreads(cmd *cobra.Command, opts *ThreadOptions) (*threadCmd, error) {
	ws, a, err := openWorkspace(cmd.Context(), opts.Env)
	if err != nil {
		return nil, err
	}
	if worktree.IsInside(ws.Root) {
		// The threads are the checkout's; a command here would find none,
		// or start one whose worktree nests in this one.
		return nil, usageErrorf("%s is one of ralph's worktrees, where a thread's or a worker's agent works: run `ralph thread` from the repository's own checkout", ws.Root)
	}
	return &threadCmd{env: opts.Env, opts: opts, ctx: cmd.Context(), ws: ws, app: a, dir: ws.Dir()}, nil
}

// prepare creates the state files a thread command writes next to.
func (tc *threadCmd) prepare() error {
	if _, err := tc.ws.EnsureStateFiles(tc.env.Now()); err != nil {
		return err
	}
	if err := thread.EnsureIgnores(tc.ws); err != nil {
		return err
	}
	tc.journal = &report.Journal{Path: loop.EventsPath(tc.ws)}
	if tc.r != nil {
		tc.use(tc.r.Thread()) // its events go to the journal from now on
	}
	if tc.boxWarning != "" {
		tc.em.Emit(report.Event{Kind: report.KindWarning, Text: tc.boxWarning + "\n"})
	}
	return nil
}

// useSandbox settles the sandbox of the command's agents (flag over
// [sandbox] mode) before the thread moves: a bwrap that cannot start
// fails here, with no record, worktree or branch made, rather than once
// the loop begins.
func (tc *threadCmd) useSandbox(flag string) error {
	mode, err := sandboxFlag(flag)
	if err != nil {
		return err
	}
	tc.box, tc.boxWarning, err = tc.app.Sandbox(tc.ctx, mode)
	tc.boxSettled = err == nil
	return err
}

// openThread opens the thread args names, else the active one, for a
// command that changes it. Nothing is written until the thread is found.
func openThread(cmd *cobra.Command, opts *ThreadOptions, args []string) (*threadCmd, error) {
	tc, err := readThread(cmd, opts, args)
	if err != nil {
		return nil, err
	}
	return tc, tc.prepare()
}

// readThread opens the thread args names, else the active one, for a
// command that only reads it (show, diagnose).
func readThread(cmd *cobra.Command, opts *ThreadOptions, args []string) (*threadCmd, error) {
	tc, err := readThreads(cmd, opts)
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
			return nil, usageErrorf("no active thread: give a thread's ID or pick one with `ralph thread switch ID` (`ralph thread list` lists them), or create one with `ralph thread new \"title\"`")
		}
	}
	t, err := thread.Load(tc.dir, id)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usageErrorf("no thread %q: see `ralph thread list`", id)
	}
	if err != nil {
		return nil, err
	}
	tc.use(t)
	return tc, nil
}

// use makes t the command's thread: it turns the command's environment,
// configuration and flags into the runner's inputs.
func (tc *threadCmd) use(t thread.Thread) {
	env, a := tc.env, tc.app
	sinks := []report.Sink{tc.sink()}
	var after int64
	if tc.journal != nil {
		sinks = append(sinks, tc.journal)
		sinks = append(sinks, notifier(env, a))
		// An unreadable journal starts at 1; its appends say what is wrong.
		after, _ = report.LastSeq(tc.journal.Path)
		// A command that works the thread takes pause and stop; its
		// loop pauses at its step boundaries, a stop ends it as Ctrl+C.
		// It attaches when its work begins (runVerb): a refused command
		// writes no control record.
		if tc.detach == nil {
			tc.ctx, tc.attach, tc.detach = attachControl(tc.ctx, env, tc.ws, control.Run{Run: "thread-" + t.ID, Machine: "thread"})
		}
	}
	tc.em = report.NewEmitter(thread.MachineName, t.ID, after, env.Now, sinks...)
	tc.r = thread.NewRunner(tc.ctx, tc.ws, a.ThreadSettings(), t, thread.Env{
		Events:     tc.em,
		InTerminal: env.IO.InTerminal,
		Interactive: func(ctx context.Context, s agent.Spec, promptFile, prompt, dir string) (int, error) {
			return agent.RunInteractive(ctx, s, promptFile, prompt, dir, tc.box, env.IO.In, tc.progress(), env.IO.Err)
		},
		Now:          env.Now,
		WorkDir:      env.WorkDir,
		Checks:       a.Checks(),
		ResolveAgent: a.Agent,
		NamedAgent:   a.NamedAgent,
		LoopOptions: func(ctx context.Context, spec agent.Spec, prd string, maxIterations int) (loop.Options, error) {
			cmd := &cobra.Command{}
			cmd.SetContext(ctx)
			// loopOptions looks the agent up by name, as --agent would. An
			// agent AGENT_CMD gave as a command line has no such name: the
			// usual precedence picks one, and the thread's agent replaces it.
			name := spec.Name
			if _, err := a.NamedAgent(name, "thread agents"); err != nil {
				name = ""
			}
			// The sandbox was settled when the command began (useSandbox):
			// "off" keeps loopOptions from probing and warning again.
			s, err := loopOptions(cmd, &BuildOptions{Env: env, Agent: name, PRD: prd, MaxIterations: maxIterations, JSON: tc.opts.JSON, Sandbox: string(sandbox.Off)}, false)
			if err != nil {
				return loop.Options{}, err
			}
			s.opts.Sandbox = tc.box
			s.opts.Checker = a.Checker(tc.box)
			s.opts.Agent = spec
			s.opts.Sink = withNotify(env, a, tc.sink())
			s.opts.Control, s.opts.ControlPauseOnly = tc.att, true
			return s.opts, nil
		},
		Confirm: tc.confirm,
		Ports:   thread.Ports{Checks: &threadChecks{tc: tc}},
		Sandbox: tc.box,
	}, thread.Options{
		Agents:        tc.opts.Agents,
		MaxIterations: tc.opts.MaxIterations,
		Verifiers:     tc.opts.Verifiers,
		Agent:         tc.opts.Agent,
		Worktree:      tc.opts.Worktree,
	})
}

// threadChecks runs the thread's own checks (its criteria's verify
// commands, ralph's checks and the verifiers) as its loop runs its: in the
// sandbox of --sandbox or [sandbox] mode when [sandbox] checks is on. The
// sandbox is decided at the first check, so that a command that runs
// none does not start bwrap to see whether it works.
type threadChecks struct {
	tc   *threadCmd
	once sync.Once
	port runkit.CheckPort
	err  error
}

func (c *threadChecks) RunCheck(ctx context.Context, dir string, chk check.Check) check.Result {
	c.once.Do(func() {
		box := c.tc.box
		if !c.tc.boxSettled {
			box, _, c.err = c.tc.app.Sandbox(ctx, sandbox.Mode(c.tc.opts.Sandbox))
		}
		c.port = c.tc.app.Checker(box)
	})
	if c.err != nil {
		// Never a pass: the check could not run where it must.
		return check.Result{Check: chk, ExitCode: -1, Output: "ralph: running check " + chk.Name + ": " + c.err.Error()}
	}
	return c.port.RunCheck(ctx, dir, chk)
}

// runVerb runs the thread command name and, once the thread has settled,
// reports it (finish) while the runner still holds the thread's lock.
func (tc *threadCmd) runVerb(name, msg string) error {
	if tc.detach != nil {
		tc.att = tc.attach("")
		defer tc.detach()
	}
	return tc.ws.Gone(tc.r.Do(name, msg, tc.finish), `ralph thread new "TITLE"`)
}

// sink renders the events of the thread and of the loop it runs: as text
// on stdout, or as JSON lines there with --json.
func (tc *threadCmd) sink() report.Sink {
	if tc.opts.JSON && tc.document {
		return nil // stdout holds the document alone
	}
	return tc.env.events(tc.opts.JSON)
}

// progress is where the terminal's questions and an interactive agent
// go: stdout, but stderr with --json, whose stdout holds JSON alone.
func (tc *threadCmd) progress() io.Writer {
	return tc.env.progress(tc.opts.JSON)
}

// ---- the person at the terminal ----

// input reads the person's answers: one buffered reader for the Stuck
// menu and the questions it leads to, so that no typed-ahead line is lost.
func (tc *threadCmd) input() *bufio.Reader {
	if tc.in == nil || tc.inSrc != tc.env.IO.In {
		tc.in, tc.inSrc = bufio.NewReader(tc.env.IO.In), tc.env.IO.In
	}
	return tc.in
}

// confirm is the runner's Confirm: --yes answers yes; otherwise only a
// person at a terminal can, and no terminal means no.
func (tc *threadCmd) confirm(question string) bool {
	if tc.opts.Yes {
		return true
	}
	if !tc.env.IO.InTerminal {
		return false
	}
	return askYes(tc.input(), tc.progress(), question)
}

// finish emits the settled thread as the command's summary event (shown
// only with --json, as the stream's last line) and maps the phase it
// waits in to the exit code.
func (tc *threadCmd) finish() error {
	t := tc.r.Thread()
	tc.em.Emit(report.Event{Kind: report.KindSummary, Data: report.Summary{Thread: tc.view()}})
	switch t.Phase.Type {
	case thread.PhaseStuck:
		if tc.env.IO.InTerminal && !tc.opts.JSON {
			return tc.stuckPrompt()
		}
		return &ExitError{Code: ExitNeedsHuman, Msg: fmt.Sprintf("thread %s is stuck: a person must decide: ralph thread revise | reconfigure | assist | abandon | diagnose", t.ID)}
	case thread.PhasePreflightFailed:
		return &ExitError{Code: ExitFailure, Msg: fmt.Sprintf("preflight failed for thread %s: fix the above, then `ralph thread retry` (or `ralph thread revise` to fix the spec)", t.ID)}
	}
	return nil
}

// stuckPrompt is the Stuck box as a question on a terminal. A choice runs
// that command as if it had been typed, in place of this one.
func (tc *threadCmd) stuckPrompt() error {
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
			return &ExitError{Code: ExitNeedsHuman, Msg: fmt.Sprintf("thread %s is stuck: decide later with ralph thread revise | reconfigure | assist | abandon", tc.r.Thread().ID)}
		}
		tc.r.Release()
		tc.opts.Yes = false // the reset question is asked on the terminal
		return tc.runVerb(name, "")
	}
}

// ---- output ----

// ThreadView is what `ralph thread show --json` prints.
type ThreadView struct {
	thread.Thread
	Active           bool              `json:"active"`
	Allowed          []string          `json:"allowed"`
	Config           *thread.RunConfig `json:"config,omitempty"`
	Evidence         *thread.Evidence  `json:"evidence,omitempty"`
	RecommendApprove bool              `json:"recommend_approve"`
	Spec             string            `json:"spec,omitempty"`
	Draft            string            `json:"draft,omitempty"`
	Conversation     string            `json:"conversation"`
	Messages         int               `json:"messages"`
	Running          bool              `json:"running"`
	StuckReason      string            `json:"stuck_reason,omitempty"`
}

func (tc *threadCmd) view() ThreadView {
	t := tc.r.Thread()
	v := ThreadView{Thread: t, Allowed: thread.AllowedCommands(t.Phase.Type), RecommendApprove: tc.r.RecommendApprove(),
		Conversation: tc.ws.Rel(thread.ConversationPath(tc.dir, t.ID))}
	if v.Allowed == nil {
		v.Allowed = []string{}
	}
	active, _ := thread.ActiveThread(tc.dir)
	v.Active = active == t.ID
	v.Config = tc.r.SavedConfig()
	v.Evidence = tc.r.Evidence()
	if t.SpecVersion > 0 {
		v.Spec = tc.ws.Rel(thread.SpecPath(tc.dir, t.ID, t.SpecVersion))
	}
	if _, err := os.Stat(tc.r.DraftPath()); err == nil {
		v.Draft = tc.ws.Rel(tc.r.DraftPath())
	}
	msgs, _ := thread.ReadConversation(tc.dir, t.ID)
	v.Messages = len(msgs)
	v.Running = tc.r.Busy()
	if t.Phase.Type == thread.PhaseStuck {
		v.StuckReason = tc.r.StuckReason()
	}
	return v
}

func (tc *threadCmd) out(format string, args ...any) {
	fmt.Fprintf(tc.env.IO.Out, format+"\n", args...)
}

func (tc *threadCmd) printJSON() error {
	return writeJSON(tc.env, tc.view())
}

func (tc *threadCmd) printShow() {
	v := tc.view()
	t := v.Thread
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
	tc.out("  talk:      %s in %s", words.Count(v.Messages, "message", "messages"), v.Conversation)
	if t.Baseline != nil {
		branch := t.Baseline.Branch
		if branch == "" {
			branch = "(detached)"
		}
		tc.out("  baseline:  %s on %s, captured %s", text.ShortHash(t.Baseline.CommitSHA), branch, t.Baseline.CapturedAt.Format(time.RFC3339))
	}
	if t.Branch != "" {
		tc.out("  branch:    %s", t.Branch)
	}
	if t.Worktree != "" {
		where := t.Worktree
		if _, err := os.Stat(t.Worktree); err != nil {
			switch {
			case t.Phase.Type.Terminal():
				where += " (removed)"
			case t.Branch == "":
				where += " (made when implementation begins)"
			default:
				where += fmt.Sprintf(" (gone: the next command on the thread makes it again from %s)", t.Branch)
			}
		}
		tc.out("  worktree:  %s", where)
	}
	if v.Config != nil {
		tc.out("  config:    agents %s, at most %s, %s", strings.Join(v.Config.Agents, " → "), words.Count(v.Config.MaxIterations, "iteration", "iterations"), words.Count(len(v.Config.Verifiers), "verifier", "verifiers"))
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
		tc.r.ReportStuck()
	case thread.PhasePaused:
		tc.r.ReportPaused()
	case thread.PhasePendingReview:
		if v.RecommendApprove {
			tc.out("  ★ Recommend Approve (you still approve)")
		}
	}
	if len(v.Allowed) > 0 {
		tc.out("  allowed:   %s", strings.Join(v.Allowed, ", "))
	}
}

// printDiagnosis is `ralph thread diagnose`: what the Stuck phase kept of
// the failed attempt, with the start of its diff.
func (tc *threadCmd) printDiagnosis() {
	t := tc.r.Thread()
	s := t.Stuck
	if s == nil {
		tc.out("no record of the failed attempt")
		return
	}
	tc.out("thread %s is stuck: %s", t.ID, tc.r.StuckReason())
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
