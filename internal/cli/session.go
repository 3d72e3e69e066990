package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// sessionMaxLimitWait is the longest a session sits out a usage limit in
// place; a longer one stops it, to be resumed.
var sessionMaxLimitWait = 10 * time.Minute

// RunOptions holds the flags of `ralph run`.
type RunOptions struct {
	Env     *Env
	Request string
	Resume  bool
	Session string
	Agent   string
	JSON    bool
	// Engine, Host and Detach: run on Temporal (session_temporal.go).
	Engine, Host string
	Detach       bool
	// Sandbox is --sandbox: off, bwrap or auto ("": [sandbox] mode).
	Sandbox string
}

func newRunCmd(env *Env, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "run \"REQUEST\" | run --resume [--session ID]",
		Short: "Turn a request into a plan, tasks and reviewed commits (planner, questioner, executor, reviewer)",
		Long: `run starts a session for one request: a planner writes plan.md and the
task list, asking a questioner when something is unclear (questions only a
person can answer are queued: ralph questions, ralph answer); an executor
does one task at a time; ralph runs its checks and a reviewer judges the
task's success criteria; ralph marks the task and commits it. When every
task is [x], a holistic goal check compares the whole request with the
work, re-planning what is missing.

Everything lives in .ralph/sessions/<id>/: request.md, plan.md, tasks.md
([ ] / [P] / [x]), progress.md (state and counters), qa.md, questions.json,
reports/, logs/ and transitions.jsonl. A killed session resumes where it
stopped with ralph run --resume; finished tasks are never repeated.

Each role may use its own agent and model: [roles.planner] agent = "claude",
model = "..." in .ralph/config.toml; the retry policy is under [session].`,
		Example: `  ralph run "add a --verbose flag that logs each request"
  ralph questions
  ralph answer q-1 "log to stderr"
  ralph run --resume
  ralph metrics`,
		Args: func(cmd *cobra.Command, args []string) error {
			req := strings.TrimSpace(strings.Join(args, " "))
			switch {
			case opts.Resume && req != "":
				return usageErrorf("give a request or --resume, not both")
			case !opts.Resume && req == "":
				return usageErrorf("run needs a request: ralph run \"what to build\" (or ralph run --resume to continue a session)")
			case opts.Session != "" && !opts.Resume:
				return usageErrorf("--session picks the session to resume: use it with --resume")
			}
			opts.Request = req
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runSession(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Resume, "resume", false, "continue the active (or --session) session where it stopped")
	cmd.Flags().StringVar(&opts.Session, "session", "", "the session to resume (default: the active one)")
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "agent for every role without [roles.NAME] agent in config")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "stream the session's events on stdout, one JSON object per line (docs/events.md)")
	cmd.Flags().StringVar(&opts.Sandbox, "sandbox", "", "run the roles' agents in a sandbox: off, bwrap (fail when it cannot start) or auto (default [sandbox] mode: off); on Temporal the worker's --sandbox decides")
	addEngineFlags(cmd.Flags(), &opts.Engine, &opts.Host, &opts.Detach,
		"where the session runs: local (in this process) or temporal (a workflow, run by the ralph worker of this checkout's host)")
	return cmd
}

// openSession finds a session of the current workspace for a read
// command: id, or the active one.
func openSession(ctx context.Context, env *Env, id string) (string, error) {
	ws, _, err := openWorkspace(ctx, env)
	if err != nil {
		return "", err
	}
	return app.SessionDir(ws, id)
}

func runSession(ctx context.Context, opts *RunOptions) error {
	if err := checkSandboxFlag(ctx, opts.Sandbox); err != nil {
		return err
	}
	if done, err := sessionOnTemporal(ctx, opts); done {
		return err
	}
	env := opts.Env
	ws, a, err := openWorkspace(ctx, env)
	if err != nil {
		return err
	}
	// Bad input changes nothing: what a user can get wrong is checked
	// before the first write, and again under the lock. While another
	// ralph works, the changes in the tree are its own: the lock below
	// says so better.
	if opts.Resume {
		if _, err := app.SessionDir(ws, opts.Session); err != nil {
			return err
		}
	}
	// Agents come after the session: with nothing to resume, that is the
	// answer, whatever the agents. A mistake in the configuration comes
	// before the state of the tree: it is what the person must fix first.
	specs, err := a.SessionRoles(opts.Agent)
	if err != nil {
		return err
	}
	box, boxWarning, err := a.Sandbox(ctx, sandbox.Mode(opts.Sandbox))
	if err != nil {
		return err
	}
	if _, busy := store.Held(ws.LockPath()); !opts.Resume && !busy {
		if _, err := cleanTree(ctx, ws); err != nil {
			return err
		}
	}
	if _, err := ws.EnsureStateFiles(env.Now()); err != nil {
		return err
	}
	lock, err := store.TryLock(ws.LockPath(), "ralph run")
	if err != nil {
		var le *store.LockedError
		if errors.As(err, &le) {
			return fmt.Errorf("another ralph is working in this repository (%v): wait for it to finish", le.Holder)
		}
		return err
	}
	defer lock.Unlock()

	var dir, note string
	if opts.Resume {
		if dir, err = app.SessionDir(ws, opts.Session); err != nil {
			return err
		}
		p, err := session.Load(dir)
		if err != nil {
			return err
		}
		if p.State.Final() {
			verb := "complete"
			if !p.State.Done {
				verb = "failed (" + p.State.Reason + ")"
			}
			return fmt.Errorf("session %s is %s; start a new one with ralph run \"request\"", p.State.SessionID, verb)
		}
	} else {
		snap, err := cleanTree(ctx, ws)
		if err != nil {
			return err
		}
		if prev, err := app.SessionDir(ws, ""); err == nil {
			if p, err := session.Load(prev); err == nil && !p.State.Final() {
				note = fmt.Sprintf("note: session %s was left at %s; ralph run --resume --session %s continues it\n", p.State.SessionID, p.State.Resumes(), p.State.SessionID)
			}
		}
		id := session.NewID(env.Now())
		dir = filepath.Join(app.SessionsDir(ws), id)
		for n := 2; pathExists(dir); n++ {
			dir = filepath.Join(app.SessionsDir(ws), fmt.Sprintf("%s-%d", id, n))
		}
		if err := session.Create(ws, dir, filepath.Base(dir), opts.Request, snap.Head, env.Now()); err != nil {
			return err
		}
	}
	if err := store.WriteFileAtomic(app.ActiveSessionPath(ws), []byte(filepath.Base(dir)+"\n"), 0o644); err != nil {
		return err
	}
	em, journal := sessionEvents(env, ws, filepath.Base(dir), opts.JSON, notifier(env, a))
	// The session takes pause and stop between its steps, from any
	// terminal or front end.
	ctx, attach, detach := attachControl(ctx, env, ws, control.Run{Run: "session-" + filepath.Base(dir), Machine: "session"})
	defer detach()
	att := attach("") // the session exists: it has begun
	if note != "" {
		em.Emit(report.Event{Kind: report.KindNote, Text: note})
	}
	if boxWarning != "" {
		em.Emit(report.Event{Kind: report.KindWarning, Text: boxWarning + "\n"})
	}
	em.Emit(report.Event{Kind: report.KindRun, Text: fmt.Sprintf("session %s · %s · %s\n", filepath.Base(dir), describeRoles(specs), ws.Rel(dir)),
		Data: report.Run{Dir: ws.Rel(dir), Resumed: report.Ptr(opts.Resume)}})
	r := a.SessionRunner(dir)
	r.Invoker = &agentInvoker{env: env, ws: ws, app: a, specs: specs, dir: dir, em: em, sandbox: box,
		terminal: env.IO.OutTerminal && !opts.JSON} // JSON lines carry no terminal control characters
	r.MaxLimitWait, r.Events, r.Control, r.Checker = sessionMaxLimitWait, em, att, a.Checker(box)
	p, err := r.Run(ctx)
	err = ws.Gone(err, `ralph run "REQUEST"`)
	if jerr := journal.Err(); jerr != nil && err == nil {
		err = fmt.Errorf("the session's events could not all be written to %s: %w", ws.Rel(journal.Path), jerr)
	}
	var budget *session.BudgetError
	// A session that stopped is told by where it resumes.
	at := p.State.Resumes()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, loop.ErrInterrupted) || ctx.Err() != nil:
		em.Emit(report.Event{Kind: report.KindSummary, Data: report.Summary{Interrupted: true, State: string(at)},
			Text: fmt.Sprintf("%s: session %s is saved at %s; ralph run --resume continues it\n", loopStopWord(ctx), p.State.SessionID, at)})
		return &ExitError{Code: ExitInterrupted, Msg: loopStopWord(ctx)}
	case errors.As(err, &budget):
		return &ExitError{Code: ExitLimit, Msg: fmt.Sprintf("session %s stopped at %s: %v", p.State.SessionID, at, err)}
	case errors.Is(err, session.ErrWaitingForAnswers):
		return &ExitError{Code: ExitNeedsHuman, Msg: "session " + p.State.SessionID + " waits for answers: ralph questions, ralph answer ID \"...\", then ralph run --resume"}
	case errors.Is(err, session.ErrFailed):
		return &ExitError{Code: ExitNeedsHuman, Msg: fmt.Sprintf("session %s failed: %s\nsee %s and %s; fix what blocks it and start again with ralph run \"request\"",
			p.State.SessionID, p.State.Reason, ws.Rel(session.ProgressPath(dir)), ws.Rel(filepath.Join(dir, "reports")))}
	}
	return err
}

// sessionEvents returns the session's emitter: its events go to the
// journal .ralph/events.jsonl, whose seq they continue, and to stdout, as
// the text a person reads or, with asJSON, one JSON object per line.
func sessionEvents(env *Env, ws *workspace.Workspace, id string, asJSON bool, extra ...report.Sink) (*report.Emitter, *report.Journal) {
	journal := &report.Journal{Path: loop.EventsPath(ws)}
	after, _ := report.LastSeq(journal.Path) // an unreadable journal starts at 1; its appends say what is wrong
	return report.NewEmitter(session.MachineName, id, after, env.Now, append([]report.Sink{env.events(asJSON), journal}, extra...)...), journal
}

// cleanTree refuses a work tree with changes of the user's: a session's
// commits must hold only its own work.
func cleanTree(ctx context.Context, ws *workspace.Workspace) (gitx.Snapshot, error) {
	snap, err := ws.Repo.Snapshot(context.WithoutCancel(ctx))
	if err != nil {
		return snap, err
	}
	if dirty := workspace.UserChanges(snap.Dirty); len(dirty) > 0 {
		return snap, fmt.Errorf("the work tree has uncommitted changes (%s): commit or stash them first, so that ralph's commits hold only the session's work", strings.Join(text.ClipList(dirty, 5), ", "))
	}
	return snap, nil
}

func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func describeRoles(specs map[string]agent.Spec) string {
	names := map[string][]string{}
	var order []string
	for _, role := range app.RoleNames {
		n := specs[role].Name
		if _, ok := names[n]; !ok {
			order = append(order, n)
		}
		names[n] = append(names[n], role)
	}
	if len(order) == 1 {
		return "agent " + order[0]
	}
	var parts []string
	for _, n := range order {
		parts = append(parts, strings.Join(names[n], ", ")+": "+n)
	}
	return strings.Join(parts, " · ")
}

// agentInvoker runs a role with its agent; prompts and raw output go to
// the session's logs/ folder.
type agentInvoker struct {
	env   *Env
	ws    *workspace.Workspace
	app   *app.App
	specs map[string]agent.Spec
	dir   string
	// em receives the role run's banner, the agent's output and the
	// heartbeat; terminal says whether the heartbeat may redraw a line.
	em       *report.Emitter
	terminal bool
	// sandbox confines every role's agent to the checkout; nil: none.
	sandbox *sandbox.Policy
}

// Agent names role's agent: its usage limits are recorded under that name.
func (a *agentInvoker) Agent(role string) string { return a.specs[role].Name }

func (a *agentInvoker) Invoke(ctx context.Context, c session.Call) (string, error) {
	spec := a.specs[c.Role]
	logs := filepath.Join(a.dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return "", err
	}
	logPath := filepath.Join(logs, c.Name+".log")
	a.em.Emit(report.Event{Data: report.Iteration{Role: c.Role, Agent: spec.Name, Name: c.Name}})
	res, err := a.app.Attempt(runkit.Attempt{
		Spec: spec, Prompt: c.Prompt, Dir: a.ws.Root,
		PromptFile: filepath.Join(logs, c.Name+".prompt.md"), LogFile: logPath,
		Token: c.Token, OnStart: c.OnStart,
		Events: a.em, Working: c.Role + " " + spec.Name + " working", Terminal: a.terminal,
		Sandbox: a.sandbox,
	}).Run(ctx)
	out := res.Outcome
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if res.EnvFailure != nil {
		return "", res.EnvFailure
	}
	if err != nil {
		return "", err
	}
	if c.OnUsage != nil {
		u := out.Result.Usage
		c.OnUsage(u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens, out.Result.CostUSD)
	}
	if l := res.Limit; l != nil {
		reset := l.ResetsAt
		if reset.IsZero() {
			reset = a.env.Now().Add(a.app.LimitCooldown())
		}
		return "", &session.LimitError{Agent: spec.Name, ResetsAt: reset, Message: l.Message}
	}
	rel := a.ws.Rel(logPath)
	switch {
	case out.TimedOut:
		return "", fmt.Errorf("%s timed out (output in %s)", spec.Name, rel)
	case out.ExitCode != 0:
		return "", fmt.Errorf("%s exited with code %d (output in %s)", spec.Name, out.ExitCode, rel)
	}
	return out.Result.FinalMessage, nil
}

// ---- questions, answer, metrics ----

// QuestionsOptions holds the flags of `ralph questions`.
type QuestionsOptions struct {
	Env     *Env
	Session string
	All     bool
	JSON    bool
}

func newQuestionsCmd(env *Env) *cobra.Command {
	opts := &QuestionsOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "questions",
		Short: "List the questions a session waits for a person to answer",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := openSession(cmd.Context(), env, opts.Session)
			if errors.Is(err, app.ErrNoSession) {
				// Nothing to answer is an empty list, as a script expects.
				if opts.JSON {
					return writeJSON(env, []session.Question{})
				}
				fmt.Fprintln(env.IO.Out, "no questions: no session yet (ralph run \"what to build\" starts one)")
				return nil
			}
			if err != nil {
				return err
			}
			qs, err := session.LoadQuestions(dir)
			if err != nil {
				return err
			}
			if !opts.All {
				qs = session.OpenQuestions(qs)
			}
			if qs == nil {
				qs = []session.Question{}
			}
			if opts.JSON {
				return writeJSON(env, qs)
			}
			if len(qs) == 0 {
				fmt.Fprintf(env.IO.Out, "no open questions in session %s\n", filepath.Base(dir))
				return nil
			}
			for _, q := range qs {
				fmt.Fprintf(env.IO.Out, "%s  %s\n", q.ID, q.Text)
				if !q.Open() {
					fmt.Fprintf(env.IO.Out, "      answered: %s\n", q.Answer)
				}
			}
			if open := session.OpenQuestions(qs); len(open) > 0 {
				fmt.Fprintf(env.IO.Out, "answer with: ralph answer %s \"...\"\n", open[0].ID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "session id (default: the active one)")
	cmd.Flags().BoolVar(&opts.All, "all", false, "include answered questions")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

func newAnswerCmd(env *Env) *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "answer ID \"TEXT\"",
		Short: "Answer a question a session is waiting on",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || strings.TrimSpace(strings.Join(args[1:], " ")) == "" {
				return usageErrorf("answer needs a question id and the answer: ralph answer q-1 \"use PostgreSQL\" (ralph questions lists them)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if done, err := answerOnTemporal(cmd, env, sessionID, args[0], strings.Join(args[1:], " ")); done {
				return err
			}
			// The session must exist before anything is journaled.
			if _, err := openSession(cmd.Context(), env, sessionID); err != nil {
				return err
			}
			return steerFromCLI(cmd, env, control.Answer, func(c *control.Command) {
				c.Session, c.Question, c.Text = sessionID, args[0], strings.Join(args[1:], " ")
			})
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "session id (default: the active one)")
	addSteerJSON(cmd)
	return cmd
}

// MetricsOptions holds the flags of `ralph metrics`.
type MetricsOptions struct {
	Env     *Env
	Session string
	Build   bool
	JSON    bool
}

// BuildMetrics is `ralph metrics --build --json`: the last build's
// counters, as `ralph status --json` has them under "metrics".
type BuildMetrics struct {
	Kind     string `json:"kind"` // "build"
	RunID    string `json:"run_id"`
	Finished bool   `json:"finished"`
	loop.Metrics
}

func newMetricsCmd(env *Env) *cobra.Command {
	opts := &MetricsOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Show a session's or a build's metrics: time in each state, success and rework rates, Q&A cycles, duration",
		Long: `Show metrics: time in each state, task successes and failed attempts,
reworks, blocked tasks, waits and the run's duration.

By default, the active session's (ralph run); when the workspace has no
session, the last build's (ralph build). --build always shows the last
build's, --session ID a given session's.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return metricsRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "session id (default: the active one)")
	cmd.Flags().BoolVar(&opts.Build, "build", false, "show the last build's metrics (ralph build), not a session's")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	cmd.MarkFlagsMutuallyExclusive("build", "session")
	return cmd
}

func metricsRun(ctx context.Context, opts *MetricsOptions) error {
	env := opts.Env
	ws, _, err := openWorkspace(ctx, env)
	if err != nil {
		return err
	}
	if !opts.Build {
		dir, err := app.SessionDir(ws, opts.Session)
		switch {
		case err == nil:
			m, err := app.SessionMetrics(dir, env.Now())
			if err != nil {
				return err
			}
			if opts.JSON {
				return writeJSON(env, m)
			}
			fmt.Fprint(env.IO.Out, m.Text())
			return nil
		case !errors.Is(err, app.ErrNoSession) || opts.Session != "":
			return err
		}
	}
	st, err := loop.HomeOf(ws).Load()
	if err != nil {
		return err
	}
	if st == nil {
		// Nothing has run: an empty answer, not an error.
		if opts.JSON && opts.Build {
			return writeJSON(env, BuildMetrics{Kind: "build"})
		}
		if opts.JSON {
			return writeJSON(env, session.ComputeMetrics(nil, nil, env.Now()))
		}
		fmt.Fprintln(env.IO.Out, "no metrics: no session or build yet (ralph build runs the PRD's stories, ralph run \"what to build\" starts a session)")
		return nil
	}
	if opts.JSON {
		return writeJSON(env, BuildMetrics{Kind: "build", RunID: st.RunID, Finished: st.Finished, Metrics: st.Metrics})
	}
	state := "stopped before its end"
	switch _, held := store.Held(ws.LockPath()); {
	case st.Finished:
		state = "finished"
	case held:
		state = "running"
	}
	fmt.Fprintf(env.IO.Out, "build %s (%s)\n", st.RunID, state)
	printBuildMetrics(env.IO.Out, st.Metrics)
	return nil
}

func printSessionStatus(env *Env, st *SessionStatus) {
	out := env.IO.Out
	state := st.State
	if st.Done {
		state = "Complete, goal check passed"
	}
	fmt.Fprintf(out, "session %s: %s · %d of %s done · %s\n", st.ID, state, st.TasksDone, words.Count(st.Tasks, "task", "tasks"), words.Count(st.QACycles, "Q&A cycle", "Q&A cycles"))
	if st.CurrentTask != "" {
		fmt.Fprintf(out, "  current task: %s (attempt %d)\n", st.CurrentTask, st.Attempt)
	}
	if st.Reason != "" && !st.Done {
		fmt.Fprintf(out, "  reason: %s\n", st.Reason)
	}
	if st.OpenQuestions > 0 {
		fmt.Fprintf(out, "  %s for an answer: ralph questions\n", words.Count(st.OpenQuestions, "question waits", "questions wait"))
	}
	m := st.Metrics
	fmt.Fprintf(out, "  metrics: %d succeeded, %d failed, %s, %s end to end (ralph metrics for more)\n",
		m.TaskSuccesses, m.TaskFailures, words.Count(m.Reworks, "rework", "reworks"), (time.Duration(m.DurationMillis) * time.Millisecond).Round(time.Second))
}
