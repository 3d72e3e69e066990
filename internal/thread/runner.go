package thread

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/workspace"
)

// Env is what a Runner takes from the command that runs it: where its
// events go, the clock, and the decisions that belong to the command line,
// such as which agent a name means or whether the person confirms a reset.
// The thread package never imports the command line; everything it needs
// from there comes through these fields. A runner has no writer: it emits
// events, and the command's sinks render them (DESIGN.md section 3).
type Env struct {
	// Events receives the narration of the work as events: transitions,
	// check results, the boxes shown on entering Stuck or Paused, the
	// review, the agent's output. Nil drops them.
	Events *report.Emitter
	// InTerminal says a person is at a terminal; Interactive then hands
	// that terminal to agent s for the spec session (the only place the
	// runner lets an agent talk to a person directly) and returns its exit
	// code.
	InTerminal  bool
	Interactive func(ctx context.Context, s agent.Spec, promptFile, prompt, dir string) (int, error)
	Now         func() time.Time
	// WorkDir is the directory relative file names given by the person
	// are taken from.
	WorkDir func() (string, error)
	// ResolveAgent applies the command line's precedence (flag, then
	// AGENT_CMD, then config, then the default) to name, which may be "".
	ResolveAgent func(name string) (agent.Spec, error)
	// NamedAgent resolves an agent that configuration names; key names
	// where the name came from, for messages.
	NamedAgent func(name, key string) (agent.Spec, error)
	// LoopOptions configures a loop run over prd (relative to the
	// workspace) with agent a for at most maxIterations iterations, as
	// `ralph build` would.
	LoopOptions func(ctx context.Context, a agent.Spec, prd string, maxIterations int) (loop.Options, error)
	// Checks are ralph's checks ([[checks]] in config): Verifying runs
	// them, and a thread is never verified while one fails.
	Checks []check.Check
	// Confirm asks the person a yes/no question and reports whether the
	// answer is yes. Nil refuses: a reset is never done without a yes.
	Confirm func(question string) bool
	// Ports are the spec agents, the loop, git and the checks; a nil one
	// is the real one.
	Ports Ports
	// Sandbox confines the spec agents (each to the folder it works in);
	// nil runs them as the user. The loop's agents get theirs from
	// LoopOptions, and Interactive's from its caller.
	Sandbox *sandbox.Policy
}

// Settings are what a thread takes from the workspace's configuration;
// internal/app fills them from config.toml.
type Settings struct {
	// Fallbacks are the agents a new thread tries after its first one
	// ([agent] fallbacks).
	Fallbacks []string
	// MaxIterations bounds a new thread's loop runs ([build]
	// max_iterations; at least 1).
	MaxIterations int
	// WorktreeRoot is where a thread's own worktree goes ([build]
	// worktree_root; empty is the default place).
	WorktreeRoot string
	// AgentTimeout and AgentIdleTimeout bound a spec agent run, and
	// MaxLogBytes its log ([agent] timeout, idle_timeout, max_log_bytes);
	// AgentTimeout also bounds a criterion's verify command.
	AgentTimeout, AgentIdleTimeout time.Duration
	MaxLogBytes                    int64
	// Budget is [budget]: the bound the spec agents and the thread's loop
	// runs share.
	Budget runkit.Budget
}

// Options are the choices of the command that runs the thread.
type Options struct {
	// Agents, MaxIterations and Verifiers override the thread's saved
	// configuration (the Configuring phase); zero values keep it.
	Agents        []string
	MaxIterations int
	Verifiers     []string
	// Agent runs the spec conversation, the assessment and polish.
	Agent string
	// Worktree makes the thread's work happen in a worktree of its own
	// when implementation begins (Thread.Worktree).
	Worktree bool
}

// Runner is one command at work on one thread: it raises events through
// Next, performs the actions, saves, and drives the phases ralph works in
// (Preflight, Running, Verifying, Polishing) until the thread waits for a
// person. It lives as long as the command, so it keeps the command's
// context; bookkeeping that must survive Ctrl+C uses bg.
type Runner struct {
	ctx context.Context
	// ws is the person's checkout, which holds the thread's records.
	ws *workspace.Workspace
	// work is the work tree the thread's branch is checked out in, where
	// git, the loop, the checks and polish work: ws, or the thread's own
	// worktree (Thread.Worktree) once it has its branch.
	work *workspace.Workspace
	cfg  Settings
	env  Env
	opts Options
	dir  string // .ralph
	t    Thread
	lock *store.Lock
	// The ports, each the real one unless Env gave another. repo is git
	// in work: Env's port, else the work tree's own repository.
	agents  AgentPort
	loops   LoopPort
	repo    GitPort
	checks  runkit.CheckPort
	gitPort GitPort
}

// NewRunner returns a runner for t in ws. It takes no lock: the commands
// that change the thread take it themselves.
func NewRunner(ctx context.Context, ws *workspace.Workspace, cfg Settings, t Thread, env Env, opts Options) *Runner {
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Events == nil {
		env.Events = report.NewEmitter(MachineName, t.ID, 0, env.Now)
	}
	p := env.Ports.withDefaults()
	r := &Runner{ctx: ctx, ws: ws, cfg: cfg, env: env, opts: opts, dir: ws.Dir(), t: t,
		agents: p.Agent, loops: p.Loop, checks: p.Checks, gitPort: env.Ports.Git}
	r.chooseWork()
	return r
}

// MachineName is the envelope's machine for every event of a thread.
const MachineName = "thread"

// Thread is the thread as the runner last saved or read it.
func (r *Runner) Thread() Thread { return r.t }

func (r *Runner) path(elem ...string) string {
	return filepath.Join(append([]string{Dir(r.dir, r.t.ID)}, elem...)...)
}

func (r *Runner) draftPath() string { return r.path("draft.md") }

// prdPath is the PRD copy the thread's loop works on, in the work tree's
// .ralph, where the loop and its agent find it: threads/<id>/prd.md.
func (r *Runner) prdPath() string { return filepath.Join(r.work.Dir(), "threads", r.t.ID, "prd.md") }

// DraftPath is the thread's draft spec, which exists only once written.
func (r *Runner) DraftPath() string { return r.draftPath() }

// say emits one line a person reads, made from format, as an event of kind.
func (r *Runner) say(kind report.Kind, format string, args ...any) {
	r.env.Events.Emit(report.Event{Kind: kind, Text: fmt.Sprintf(format, args...) + "\n"})
}

// note emits a line of narration.
func (r *Runner) note(format string, args ...any) { r.say(report.KindNote, format, args...) }

// now is the runner's clock (Env.Now).
func (r *Runner) now() time.Time { return r.env.Now() }

// bg is a context for short bookkeeping (git, files) that must finish
// even after Ctrl+C cancelled the command's context.
func (r *Runner) bg() context.Context { return context.WithoutCancel(r.ctx) }

// ignores are thread records that must never be committed (nor rewound by
// a reset): the selection and the spec conversations.
var ignores = []string{"active_thread", "spec/threads/"}

// EnsureIgnores adds the thread records to .ralph/.gitignore when an older
// workspace's file lacks them. The file must exist already
// (workspace.EnsureStateFiles writes it).
func EnsureIgnores(ws *workspace.Workspace) error {
	p := ws.Path(".gitignore")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var add []string
	for _, l := range ignores {
		if !slices.Contains(strings.Split(string(b), "\n"), l) {
			add = append(add, l)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return store.AppendFile(p, []byte("# ralph threads\n"+strings.Join(add, "\n")+"\n"))
}

// apply raises ev: Next, then the transition's actions, each by its
// performer, with the thread as it was still at hand; only then is the new
// thread saved, and the performers report what it means. A failed action
// leaves the old thread on disk. apply takes exactly the one step Next
// allows; the work of the new phase is drive's.
func (r *Runner) apply(ev Event, verb string) error {
	record := map[Action]func(context.Context, *transition) error{}
	for a, p := range performers {
		if p.before != nil {
			record[a] = func(_ context.Context, tr *transition) error { return p.before(r, tr) }
		}
	}
	k := runkit.Kernel[Thread, Event, Action]{
		State:  func() Thread { return r.t },
		Next:   Next,
		Record: record,
		Event: func(tr *transition) report.Event {
			return r.transitionEvent(tr.From.Phase.Type, tr.To.Phase.Type, string(ev.Verb), ev)
		},
		Store: func(tr []*transition, _ []report.Event) error {
			if err := Save(r.dir, &tr[0].To); err != nil {
				return err
			}
			r.t = tr[0].To
			return nil
		},
		After: func(tr *transition) error {
			for _, a := range tr.Actions {
				if p := performers[a].after; p != nil {
					p(r, tr)
				}
			}
			return nil
		},
		Emitter: r.env.Events,
	}
	if _, err := k.Take(r.bg(), ev); err != nil {
		return r.explain(err, verb)
	}
	// An event that carries an error (the interrupt, the loop's failure)
	// ends the command with it once the thread has moved.
	return ev.Err
}

// raise applies ev and drives the thread on from the phase it enters.
func (r *Runner) raise(ev Event, verb string) error {
	if err := r.apply(ev, verb); err != nil {
		return err
	}
	return r.drive()
}

// drive does ralph's work in the thread's phase, the work of the phase's
// entry action, and raises the event it comes to, phase after phase, until
// the thread waits for a person: preflight, the loop, verification, polish,
// the assessment, and quick mode's automatic steps. It never passes a
// human checkpoint: the events the work raises come from ralph (system),
// the agent or quick mode, which Next refuses on every human row.
//
// It is called in the phase a command has just entered, and by `ralph
// thread resume` in a phase whose work a crash cut short.
func (r *Runner) drive() error {
	for range 64 {
		work := performers[EntryAction(r.t.Phase.Type)].work
		if work == nil {
			return nil
		}
		ev, err := work(r)
		if err != nil || ev.Verb == "" {
			return err
		}
		if err := r.apply(ev, string(ev.Verb)); err != nil {
			return err
		}
	}
	return fmt.Errorf("thread %s did not settle in a phase that waits for you", r.t.ID)
}

// autoStep is the work of a phase ralph leaves by itself in some mode
// (AutoEvent): the step, or none when the phase waits for a person.
func (r *Runner) autoStep() (Event, error) {
	ev, _ := AutoEvent(r.t.Phase.Type, r.t.Mode)
	return ev, nil
}

// LogTransition records a thread transition that happened outside the
// runner (thread new, from no phase) as an event; it shows no line to a
// person.
func (r *Runner) LogTransition(from, to Phase, verb string, src Source) {
	r.env.Events.Emit(r.transitionEvent(from, to, verb, Event{Source: src}))
}

// transitionEvent is the thread's move from one phase to another, caused
// by ev. The journal records it, one envelope like every machine's, with
// why ralph raised it; a failed append is the journal's to report, never
// the thread's state.
func (r *Runner) transitionEvent(from, to Phase, verb string, ev Event) report.Event {
	return report.Event{Kind: report.KindTransition, From: string(from), To: string(to), Trigger: verb,
		Data: report.Transition{Thread: r.t.ID, Source: string(ev.Source), Reason: ev.Reason}}
}

func oneLineErr(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
