package thread

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
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
	// Confirm asks the person a yes/no question and reports whether the
	// answer is yes. Nil refuses: a reset is never done without a yes.
	Confirm func(question string) bool
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
}

// Runner is one command at work on one thread: it raises events through
// Next, performs the actions, saves, and drives the phases ralph works in
// (Preflight, Running, Verifying, Polishing) until the thread waits for a
// person. It lives as long as the command, so it keeps the command's
// context; bookkeeping that must survive Ctrl+C uses bg.
type Runner struct {
	ctx  context.Context
	ws   *workspace.Workspace
	cfg  config.Config
	env  Env
	opts Options
	dir  string // .ralph
	t    Thread
	lock *store.Lock
}

// NewRunner returns a runner for t in ws. It takes no lock: the commands
// that change the thread take it themselves.
func NewRunner(ctx context.Context, ws *workspace.Workspace, cfg config.Config, t Thread, env Env, opts Options) *Runner {
	if env.Events == nil {
		env.Events = report.NewEmitter(MachineName, t.ID, 0, env.Now)
	}
	return &Runner{ctx: ctx, ws: ws, cfg: cfg, env: env, opts: opts, dir: ws.Dir(), t: t}
}

// MachineName is the envelope's machine for every event of a thread.
const MachineName = "thread"

// Thread is the thread as the runner last saved or read it.
func (r *Runner) Thread() Thread { return r.t }

func (r *Runner) path(elem ...string) string {
	return filepath.Join(append([]string{Dir(r.dir, r.t.ID)}, elem...)...)
}

func (r *Runner) draftPath() string { return r.path("draft.md") }
func (r *Runner) prdPath() string   { return r.path("prd.md") }

// DraftPath is the thread's draft spec, which exists only once written.
func (r *Runner) DraftPath() string { return r.draftPath() }

// say emits one line a person reads, made from format, as an event of kind.
func (r *Runner) say(kind report.Kind, format string, args ...any) {
	r.env.Events.Emit(report.Event{Kind: kind, Text: fmt.Sprintf(format, args...) + "\n"})
}

// note emits a line of narration.
func (r *Runner) note(format string, args ...any) { r.say(report.KindNote, format, args...) }

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

// apply raises ev, performs the transition's actions with the thread as it
// was, and only then saves the new thread: a failed action leaves the old
// thread on disk.
func (r *Runner) apply(ev Event, verb string) error {
	old := r.t
	n, acts, err := Next(old, ev)
	if err != nil {
		return r.explain(err, verb)
	}
	for _, a := range acts {
		if err := r.before(a, old, &n); err != nil {
			return err
		}
	}
	if err := Save(r.dir, &n); err != nil {
		return err
	}
	r.t = n
	r.transition(old.Phase.Type, n.Phase.Type, string(ev.Verb), ev.Source, fmt.Sprintf("thread %s: %s → %s\n", n.ID, old.Phase.Type, n.Phase.Type))
	for _, a := range acts {
		r.after(a)
	}
	return nil
}

// before performs the actions that must succeed before the new phase is
// saved.
func (r *Runner) before(a Action, old Thread, n *Thread) error {
	switch a {
	case ActResetWorkspace:
		return r.resetWorkspace(old)
	case ActCaptureBaseline:
		return r.createBranch(n)
	case ActFreezeSpec:
		draft, err := os.ReadFile(r.draftPath())
		if errors.Is(err, os.ErrNotExist) || (err == nil && strings.TrimSpace(string(draft)) == "") {
			return fmt.Errorf("thread %s has no draft spec to finalize: write one with `ralph thread draft \"...\"` or `ralph thread spec FILE`", old.ID)
		}
		if err != nil {
			return err
		}
		// A finalize cut short after writing the version reuses it.
		vs, _ := SpecVersions(r.dir, old.ID)
		if len(vs) > 0 && vs[len(vs)-1] > old.SpecVersion {
			if b, err := ReadSpec(r.dir, old.ID, vs[len(vs)-1]); err == nil && string(b) == string(draft) {
				n.SpecVersion = vs[len(vs)-1]
				return nil
			}
		}
		v, err := AddSpec(r.dir, old.ID, draft)
		if err != nil {
			return err
		}
		n.SpecVersion = v
		AppendMessage(r.dir, old.ID, Message{Role: "user", Content: fmt.Sprintf("finalized the draft as spec v%d", v), At: r.env.Now().UTC(), SpecVersion: v})
	case ActPrepareCommit:
		return os.WriteFile(r.path("commit_msg.txt"), []byte(r.commitMessage()), 0o644)
	case ActCommit:
		return r.commitWork()
	}
	return nil
}

// drive performs the phases ralph works in, and quick mode's automatic
// steps, until the thread waits for a person. It never passes a human
// checkpoint: the events it raises come from ralph (system), the agent or
// quick mode, which Next refuses on every human row.
func (r *Runner) drive() error {
	for range 64 {
		var err error
		switch r.t.Phase.Type {
		case PhasePreflight:
			err = r.preflight()
		case PhaseRunning:
			err = r.runLoop()
		case PhaseVerifying:
			err = r.verify()
		case PhasePolishing:
			err = r.polish()
		default:
			ev, ok := AutoEvent(r.t.Phase.Type, r.t.Mode)
			if !ok {
				return nil
			}
			if r.t.Phase.Type == PhaseConfiguring {
				if err := r.configure(); err != nil {
					return err
				}
			}
			if ev.Verb == VerbImplement {
				return r.implementAs(SourceQuick, string(ev.Verb))
			}
			err = r.apply(ev, string(ev.Verb))
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("thread %s did not settle in a phase that waits for you", r.t.ID)
}

// LogTransition records a thread transition that happened outside the
// runner (thread new) as an event; it shows no line to a person.
func (r *Runner) LogTransition(from, to Phase, verb string, src Source) {
	r.transition(from, to, verb, src, "")
}

// transition emits the thread's move from one phase to another; text is
// the line a person reads, "" for none. The journal records it, one
// envelope like every machine's; a failed append is the journal's to
// report, never the thread's state.
func (r *Runner) transition(from, to Phase, verb string, src Source, text string) {
	r.env.Events.Emit(report.Event{Kind: report.KindTransition, From: string(from), To: string(to), Trigger: verb,
		Text: text, Data: map[string]any{"thread": r.t.ID, "source": string(src)}})
}

func oneLineErr(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
