package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/thread"
	"github.com/spf13/cobra"
)

// ThreadOptions holds the flags shared by the `ralph thread` commands.
type ThreadOptions struct {
	Env  *Env
	JSON bool
	// Yes confirms a workspace reset without asking. It confirms nothing
	// else: no flag passes a human checkpoint.
	Yes bool
	// Configuration (start, reconfigure, assist, resume).
	Agents        []string
	MaxIterations int
	Verifiers     []string
	// new
	Quick bool
	ID    string
	// Agent runs the spec conversation, the assessment and polish.
	Agent string
	// Worktree (start, finalize) makes the thread work in a worktree of
	// its own when implementation begins.
	Worktree bool
	// Engine, Host and Detach: start on Temporal (thread_temporal.go).
	Engine, Host string
	Detach       bool
	// Sandbox is --sandbox for the agents of the commands that run them
	// ("": [sandbox] mode).
	Sandbox string
}

// threadCommandHelp is the one-line help of each thread.Commands entry.
var threadCommandHelp = map[string]string{
	"assess":          "Ask the agent to review the draft spec for clarity, testability and completeness",
	"finalize":        "Freeze the draft as the next immutable spec version (human checkpoint)",
	"reopen":          "Go back to drafting a finalized spec",
	"revise":          "Back to drafting: after an assessment, a failed preflight, a stuck run or a review (the last two reset the workspace)",
	"start":           "Begin implementation: preflight, configuration and the loop",
	"retry":           "Run the preflight checks again",
	"pause":           "Pause a running loop (as Ctrl+C does)",
	"resume":          "Resume a paused loop, or go on with work a crash cut short",
	"reconfigure":     "Change agents, iterations or verifiers of a paused or stuck thread",
	"assist":          "After editing files by hand (stuck): verify them, and run the loop again only if that fails",
	"polish":          "Let the agent add docs and tests before review",
	"review":          "Submit an implemented thread for review, or show the review of one pending",
	"request-changes": "Send a thread under review back to the loop with what to fix",
	"approve":         "Approve the reviewed changes (human checkpoint)",
	"commit":          "Squash the approved work into one commit on the thread's branch, keeping the story commits at refs/ralph/threads/<id>/stories (human checkpoint)",
	"abandon":         "Abandon the thread (its branch is kept)",
}

// threadAgentVerbs are the thread commands that can run an agent: a spec
// agent (assess, polish) or the loop, directly or by the phases the
// thread then goes through by itself.
var threadAgentVerbs = map[string]bool{"assess": true, "finalize": true, "start": true, "retry": true,
	"resume": true, "reconfigure": true, "assist": true, "polish": true, "request-changes": true}

func newThreadCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "thread",
		Short: "Take one feature or fix from spec to commit: its spec, branch, baseline and phase",
		Long: `A thread is one feature or fix with its own spec, branch, baseline and phase.
Its phases and transitions are those of 'ralph diagram thread'. Four steps
always need you: finalize (the spec), handling a stuck thread, approve and
commit. Nothing else can take them, not agent output, a flag or quick mode.

Commands without an ID work on the active thread ('ralph thread switch ID').`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newThreadNewCmd(env), newThreadListCmd(env), newThreadShowCmd(env), newThreadSwitchCmd(env),
		newThreadDraftCmd(env), newThreadSpecCmd(env), newThreadDiagnoseCmd(env))
	for _, c := range thread.Commands {
		cmd.AddCommand(newThreadVerbCmd(env, c.Name))
	}
	return cmd
}

func newThreadNewCmd(env *Env) *cobra.Command {
	opts := &ThreadOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "new TITLE",
		Short: "Create a thread in Drafting and make it the active one",
		Args: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(strings.Join(args, " ")) == "" {
				return usageErrorf("thread new needs a title: ralph thread new \"add due dates to todos\"")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// A bad --id changes nothing: it is refused before the
			// workspace is set up.
			if opts.ID != "" {
				if err := thread.ValidateID(opts.ID); err != nil {
					return &UsageError{Err: err}
				}
			}
			tc, err := openThreads(cmd, opts)
			if err != nil {
				return err
			}
			mode := thread.ModeMethodical
			if opts.Quick {
				mode = thread.ModeQuick
			}
			title := strings.TrimSpace(strings.Join(args, " "))
			var t thread.Thread
			if opts.ID != "" {
				t, err = createWithID(tc.dir, opts.ID, title, mode)
			} else {
				t, err = thread.Create(tc.dir, title, mode)
			}
			if err != nil {
				return err
			}
			if err := thread.SetActive(tc.dir, t.ID); err != nil {
				return err
			}
			tc.document = true
			tc.use(t)
			tc.r.LogTransition("", thread.PhaseDrafting, "new", thread.SourceHuman)
			if opts.JSON {
				return tc.printJSON()
			}
			fmt.Fprintf(env.IO.Out, "thread %s created (%s mode), now active: %s\n", t.ID, mode, title)
			fmt.Fprintln(env.IO.Out, "next: ralph thread draft \"what you want\" (or ralph thread spec FILE), then ralph thread finalize")
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.Quick, "quick", false, "quick mode: skip assessment, use the default configuration and skip polish (never the human checkpoints)")
	cmd.Flags().StringVar(&opts.ID, "id", "", "the thread's id (default: generated)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the thread as JSON")
	return cmd
}

func createWithID(ralphDir, id, title string, mode thread.Mode) (thread.Thread, error) {
	if err := thread.ValidateID(id); err != nil {
		return thread.Thread{}, &UsageError{Err: err}
	}
	if err := os.MkdirAll(ralphDir+"/threads", 0o755); err != nil {
		return thread.Thread{}, err
	}
	if err := os.Mkdir(thread.Dir(ralphDir, id), 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return thread.Thread{}, usageErrorf("thread %s exists already: pick another --id", id)
		}
		return thread.Thread{}, err
	}
	t, err := thread.New(id, title, mode, time.Now())
	if err != nil {
		return t, err
	}
	return t, thread.Save(ralphDir, &t)
}

// ThreadSummary is one line of `ralph thread list --json`.
type ThreadSummary struct {
	ID     string       `json:"id"`
	Title  string       `json:"title"`
	Mode   thread.Mode  `json:"mode"`
	Phase  thread.Phase `json:"phase"`
	Active bool         `json:"active"`
	Branch string       `json:"branch,omitempty"`
	// Worktree is the thread's own worktree, when it works in one.
	Worktree string    `json:"worktree,omitempty"`
	Updated  time.Time `json:"updated_at"`
}

func newThreadListCmd(env *Env) *cobra.Command {
	opts := &ThreadOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the threads with their phases",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := readThreads(cmd, opts)
			if err != nil {
				return err
			}
			ts, lerr := thread.List(tc.dir)
			active, _ := thread.ActiveThread(tc.dir)
			out := []ThreadSummary{}
			for _, t := range ts {
				out = append(out, ThreadSummary{ID: t.ID, Title: t.Title, Mode: t.Mode, Phase: t.Phase.Type, Active: t.ID == active, Branch: t.Branch, Worktree: t.Worktree, Updated: t.UpdatedAt})
			}
			if opts.JSON {
				if err := writeJSON(env, out); err != nil {
					return err
				}
				return lerr
			}
			if len(out) == 0 {
				fmt.Fprintln(env.IO.Out, "no threads yet: ralph thread new \"title\"")
			}
			for _, s := range out {
				mark := " "
				if s.Active {
					mark = "*"
				}
				fmt.Fprintf(env.IO.Out, "%s %s  %-15s %-10s %s\n", mark, s.ID, s.Phase, s.Mode, s.Title)
			}
			return lerr
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

func newThreadShowCmd(env *Env) *cobra.Command {
	return threadReadCmd(env, "show [ID]", "Show a thread: phase, spec, baseline, configuration, evidence and the verbs allowed now",
		func(cmd *cobra.Command, tc *threadCmd, asJSON bool) error {
			if asJSON {
				return tc.printJSON()
			}
			tc.printShow()
			showThreadOnTemporal(cmd, tc)
			return nil
		})
}

// threadReadCmd is a command that reads the thread [ID] names, else the
// active one, and prints what print makes of it (asJSON: with --json).
func threadReadCmd(env *Env, use, short string, print func(cmd *cobra.Command, tc *threadCmd, asJSON bool) error) *cobra.Command {
	opts := &ThreadOptions{Env: env}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := readThread(cmd, opts, args)
			if err != nil {
				return err
			}
			return print(cmd, tc, opts.JSON)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

func newThreadSwitchCmd(env *Env) *cobra.Command {
	opts := &ThreadOptions{Env: env}
	return &cobra.Command{
		Use:   "switch ID",
		Short: "Make a thread the active one",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("thread switch needs the thread's id: ralph thread switch ID (see ralph thread list)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := openThread(cmd, opts, args)
			if err != nil {
				return err
			}
			t := tc.r.Thread()
			if err := thread.SetActive(tc.dir, t.ID); err != nil {
				return err
			}
			fmt.Fprintf(env.IO.Out, "active thread: %s (%s) %s\n", t.ID, t.Phase.Type, t.Title)
			return nil
		},
	}
}

func newThreadDiagnoseCmd(env *Env) *cobra.Command {
	return threadReadCmd(env, "diagnose [ID]", "Show what a stuck thread kept: spec version, iterations, criteria, closest output, diff",
		func(_ *cobra.Command, tc *threadCmd, asJSON bool) error {
			if err := tc.r.Require("diagnose"); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(env, tc.r.Thread().Stuck)
			}
			tc.printDiagnosis()
			return nil
		})
}

func newThreadVerbCmd(env *Env, name string) *cobra.Command {
	opts := &ThreadOptions{Env: env}
	use := name + " [ID]"
	if name == "request-changes" {
		use = name + " [ID] [WHAT TO FIX]"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: threadCommandHelp[name],
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var idArgs, rest []string
			if len(args) > 0 {
				if name == "request-changes" {
					if threadExists(cmd, env, args[0]) {
						idArgs, rest = args[:1], args[1:]
					} else {
						rest = args
					}
				} else if len(args) == 1 {
					idArgs = args
				} else {
					return usageErrorf("%s takes at most one thread id", name)
				}
			}
			if _, err := sandboxFlag(opts.Sandbox); err != nil {
				return err
			}
			if done, err := threadOnTemporal(cmd, opts, name, idArgs, strings.TrimSpace(strings.Join(rest, " "))); done {
				return threadExit(err)
			}
			tc, err := readThread(cmd, opts, idArgs)
			if err != nil {
				return err
			}
			if threadAgentVerbs[name] {
				if err := tc.useSandbox(opts.Sandbox); err != nil {
					return err
				}
			}
			if err := tc.prepare(); err != nil {
				return err
			}
			if name == "retry" && tc.r.Thread().Mode != thread.ModeQuick && configFlagsSet(cmd) {
				return usageErrorf("a methodical thread waits in Configuring after its preflight: give --agent, --max-iterations and --verify to `ralph thread start`")
			}
			if name == "finalize" && opts.Worktree && tc.r.Thread().Mode != thread.ModeQuick {
				return usageErrorf("a methodical thread begins implementation with `ralph thread start`: give --worktree there")
			}
			return threadExit(tc.runVerb(name, strings.TrimSpace(strings.Join(rest, " "))))
		},
	}
	// Each verb lists only the flags it acts on: a flag that a verb
	// accepted and ignored would look like it had done something.
	f := cmd.Flags()
	switch name {
	case "start", "reconfigure", "assist", "retry":
		f.StringSliceVar(&opts.Agents, "agent", nil, "agents in rotation order (repeat or comma-separate); all exhausted makes the thread stuck")
		f.IntVar(&opts.MaxIterations, "max-iterations", 0, "iterations the loop may use, as N in 'ralph build N' (default: [build] max_iterations)")
		f.StringArrayVar(&opts.Verifiers, "verify", nil, "a verifier command that must pass before the thread counts as implemented (repeatable)")
	case "assess", "polish":
		f.StringVar(&opts.Agent, "agent", "", "agent to run (default: the configured one)")
	}
	if threadAgentVerbs[name] {
		f.StringVar(&opts.Sandbox, "sandbox", "", "run the agents in a sandbox: off, bwrap (fail when it cannot start) or auto (default [sandbox] mode: off); on Temporal the worker's --sandbox decides")
	}
	switch name {
	case "start", "finalize":
		if name == "start" {
			addEngineFlags(f, &opts.Engine, &opts.Host, &opts.Detach,
				"where the thread's work runs: local (in this process) or temporal (a workflow, worked by the ralph worker of this checkout's host)")
		}
		// finalize begins implementation at once in quick mode.
		f.BoolVar(&opts.Worktree, "worktree", false, "work in a worktree of the thread's own, outside the repository, so that your checkout stays as it is and several threads can run at once (applies when implementation begins; finalize: quick mode only)")
	case "revise":
		// Only revise can reset the workspace, the one question a flag
		// may answer; no flag passes a human checkpoint.
		f.BoolVarP(&opts.Yes, "yes", "y", false, "confirm resetting the workspace to the baseline without asking (from Stuck or PendingReview)")
	}
	f.BoolVar(&opts.JSON, "json", false, "stream the thread's events (and the loop's) on stdout, one JSON object per line; the last, of kind summary, holds the thread")
	switch name {
	case "resume":
		// resume goes on with the configuration the paused run had, so
		// that its iterations and agents' cooldowns carry on; a new one
		// starts a new run, which is what reconfigure is for.
		cmd.Long = threadCommandHelp[name] + `.

resume keeps the thread's configuration (agents, iterations, verifiers). To
change it, use 'ralph thread reconfigure --agent ... --max-iterations N
--verify ...' on the paused thread, then 'ralph thread start'.`
		cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
			for _, flag := range []string{"--agent", "--max-iterations", "--verify"} {
				if strings.Contains(err.Error(), flag) {
					return usageErrorf("%v: resume keeps the thread's configuration; change it with `ralph thread reconfigure %s ...`, then `ralph thread start`", err, flag)
				}
			}
			return &UsageError{Err: err}
		})
	case "retry":
		cmd.Long = threadCommandHelp[name] + `.

In quick mode a passing preflight goes on to the loop at once, with the
configuration --agent, --max-iterations and --verify give. In methodical
mode the thread then waits in Configuring: give them to 'ralph thread start'.`
	}
	return cmd
}

// threadExit gives a spec agent run refused for a spent [budget] the exit
// status of every budget reached with work left.
func threadExit(err error) error {
	var be *thread.BudgetError
	if errors.As(err, &be) {
		return &ExitError{Code: ExitLimit, Msg: err.Error()}
	}
	return err
}

// configFlagsSet reports whether the command line gave a configuration
// flag (--agent, --max-iterations, --verify).
func configFlagsSet(cmd *cobra.Command) bool {
	f := cmd.Flags()
	return f.Changed("agent") || f.Changed("max-iterations") || f.Changed("verify")
}

func threadExists(cmd *cobra.Command, env *Env, id string) bool {
	ws, _, err := openWorkspace(cmd.Context(), env)
	if err != nil {
		return false
	}
	_, err = os.Stat(thread.Path(ws.Dir(), id))
	return err == nil
}

func newThreadDraftCmd(env *Env) *cobra.Command {
	opts := &ThreadOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "draft [ID] [MESSAGE]",
		Short: "Talk with the agent about the spec: it writes or refines the draft",
		Long: `Send one message of the spec conversation. The agent writes or refines the
draft spec (.ralph/threads/<id>/draft.md); every message and reply is
appended to .ralph/spec/threads/<id>.jsonl. On a terminal without a message
the agent runs interactively. Finalize the draft with 'ralph thread finalize'.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var idArgs []string
			if len(args) > 0 && threadExists(cmd, env, args[0]) {
				idArgs, args = args[:1], args[1:]
			}
			tc, err := readThread(cmd, opts, idArgs)
			if err != nil {
				return err
			}
			if err := tc.r.Require("draft"); err != nil {
				return err
			}
			if err := tc.useSandbox(opts.Sandbox); err != nil {
				return err
			}
			if err := tc.prepare(); err != nil {
				return err
			}
			return threadExit(tc.r.Draft(strings.TrimSpace(strings.Join(args, " "))))
		},
	}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "agent to talk with (default: the configured one)")
	cmd.Flags().StringVar(&opts.Sandbox, "sandbox", "", "run the agent in a sandbox (interactively: keeping the terminal): off, bwrap (fail when it cannot start) or auto (default [sandbox] mode: off)")
	return cmd
}

func newThreadSpecCmd(env *Env) *cobra.Command {
	opts := &ThreadOptions{Env: env}
	return &cobra.Command{
		Use:   "spec [ID] FILE",
		Short: "Use a spec written by hand as the thread's draft",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("thread spec needs the file: ralph thread spec [ID] FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := openThread(cmd, opts, args[:len(args)-1])
			if err != nil {
				return err
			}
			if err := tc.r.Require("spec"); err != nil {
				return err
			}
			return tc.r.ImportSpec(args[len(args)-1])
		},
	}
}
