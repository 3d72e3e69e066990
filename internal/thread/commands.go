package thread

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Command is one human command on a thread (`ralph thread NAME`): the
// machine verb it raises in each phase that accepts it. Every event a
// Command raises carries SourceHuman; the verbs ralph takes by itself
// (check outcomes, the agent's claims) are not commands.
type Command struct {
	Name   string
	Phases map[Phase]Verb
}

// Commands are the commands that move a thread, in the order they are
// listed.
var Commands = []Command{
	{"assess", map[Phase]Verb{PhaseDrafting: VerbAssess}},
	{"finalize", map[Phase]Verb{PhaseDrafting: VerbFinalize, PhaseAssessing: VerbFinalize}},
	{"reopen", map[Phase]Verb{PhaseFinalized: VerbReopen}},
	{"revise", map[Phase]Verb{PhaseAssessing: VerbRevise, PhasePreflightFailed: VerbFixSpec,
		PhaseStuck: VerbReviseSpec, PhasePendingReview: VerbReviseSpec}},
	{"start", map[Phase]Verb{PhaseFinalized: VerbImplement, PhaseConfiguring: VerbStart}},
	{"retry", map[Phase]Verb{PhasePreflightFailed: VerbRetry}},
	{"pause", map[Phase]Verb{PhaseRunning: VerbInterrupt}},
	{"resume", map[Phase]Verb{PhasePaused: VerbResume}},
	{"reconfigure", map[Phase]Verb{PhasePaused: VerbReconfigure, PhaseStuck: VerbReconfigure}},
	{"assist", map[Phase]Verb{PhaseStuck: VerbAssist}},
	{"polish", map[Phase]Verb{PhaseImplemented: VerbPolish}},
	{"review", map[Phase]Verb{PhaseImplemented: VerbSubmit}},
	{"request-changes", map[Phase]Verb{PhasePendingReview: VerbRequestChanges}},
	{"approve", map[Phase]Verb{PhasePendingReview: VerbApprove}},
	{"commit", map[Phase]Verb{PhaseReadyToCommit: VerbCommit}},
	{"abandon", abandonPhases()},
}

func abandonPhases() map[Phase]Verb {
	m := map[Phase]Verb{}
	for _, p := range Phases {
		if _, ok := Lookup(p, VerbAbandon); ok {
			m[p] = VerbAbandon
		}
	}
	return m
}

// extras are commands that read or work inside a phase without moving the
// thread.
var extras = map[string][]Phase{
	"draft":    {PhaseDrafting},
	"spec":     {PhaseDrafting},
	"diagnose": {PhaseStuck},
	"review":   {PhasePendingReview},
	"resume":   {PhaseRunning, PhaseVerifying, PhasePreflight, PhasePolishing},
}

// AllowedCommands lists, sorted, the command names that phase p accepts:
// the Commands with a verb in p and the commands that work inside p.
func AllowedCommands(p Phase) []string {
	var out []string
	for _, c := range Commands {
		if _, ok := c.Phases[p]; ok {
			out = append(out, c.Name)
		}
	}
	for name, ps := range extras {
		if slices.Contains(ps, p) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// WrongCommandError is a command the thread's phase does not accept.
type WrongCommandError struct {
	ID      string
	Phase   Phase
	Command string
	Allowed []string
}

func (e *WrongCommandError) Error() string {
	if e.Phase.Terminal() {
		return fmt.Sprintf("thread %s is %s, which is final: `%s` does not apply; start a new thread with `ralph thread new`", e.ID, e.Phase, e.Command)
	}
	return fmt.Sprintf("thread %s is %s, which does not accept `%s`; allowed in %s: %s",
		e.ID, e.Phase, e.Command, e.Phase, strings.Join(e.Allowed, ", "))
}

// Require refuses, with a WrongCommandError, a command that works inside a
// phase (draft, spec, diagnose, review, resume) when the thread is in
// another.
func (r *Runner) Require(name string) error {
	if slices.Contains(extras[name], r.t.Phase.Type) {
		return nil
	}
	return &WrongCommandError{ID: r.t.ID, Phase: r.t.Phase.Type, Command: name, Allowed: AllowedCommands(r.t.Phase.Type)}
}

// explain turns the machine's refusals into the commands' words.
func (r *Runner) explain(err error, verb string) error {
	var te *TransitionError
	if errors.As(err, &te) {
		return &WrongCommandError{ID: r.t.ID, Phase: te.Phase, Command: verb, Allowed: AllowedCommands(te.Phase)}
	}
	return err
}

// Do runs the human command name on the thread, with msg as what to fix
// for request-changes, and drives the thread until it waits for a person.
//
// Do holds the thread's lock while it works. Once the thread has settled,
// and while the lock is still held, it calls settled (when not nil), so
// that what the command reports is what it saw; settled may Release the
// lock to hand the thread to a further Do, as the Stuck menu does. Do
// does not call settled when it fails, nor when pause only interrupted
// the ralph running the thread.
func (r *Runner) Do(name, msg string, settled func() error) error {
	i := slices.IndexFunc(Commands, func(c Command) bool { return c.Name == name })
	if i < 0 {
		return fmt.Errorf("no thread command %q", name)
	}
	c := Commands[i]
	if settled == nil {
		settled = func() error { return nil }
	}
	phase := r.t.Phase.Type
	switch c.Name {
	case "pause":
		if phase == PhaseRunning {
			if running, err := r.interruptHolder(); running {
				if err == nil {
					r.note("thread %s: pause requested; it is now %s", r.t.ID, r.t.Phase.Type)
				}
				return err
			}
		}
	case "abandon":
		if _, err := r.interruptHolder(); err != nil {
			return err
		}
	}
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.Release()
	phase = r.t.Phase.Type
	if r.opts.Worktree && r.t.Worktree == "" && r.t.Branch != "" {
		return usageErrorf("thread %s works in your checkout already, on its branch %s: --worktree applies when implementation begins; go on without it, or abandon this thread and start a new one with --worktree", r.t.ID, r.t.Branch)
	}
	// Abandon needs no work tree: it only lets go of the worktree, which
	// may be past repair.
	if c.Name != "abandon" {
		if err := r.ensureWorktree(); err != nil {
			return err
		}
	}
	driveAndSettle := func() error {
		if err := r.drive(); err != nil {
			return err
		}
		return settled()
	}
	raiseAndSettle := func(ev Event) error {
		if err := r.raise(ev, c.Name); err != nil {
			return err
		}
		return settled()
	}

	if c.Name == "review" && phase == PhasePendingReview {
		r.printReview()
		return settled()
	}
	if c.Name == "resume" && phase != PhasePaused && r.Require("resume") == nil {
		// A crash cut the work of this phase short: do it again.
		r.note("thread %s: going on with %s after an interruption", r.t.ID, phase)
		return driveAndSettle()
	}
	mv, ok := c.Phases[phase]
	if !ok {
		return &WrongCommandError{ID: r.t.ID, Phase: phase, Command: c.Name, Allowed: AllowedCommands(phase)}
	}
	ev := Event{Verb: mv, Source: SourceHuman}
	switch c.Name {
	case "assess", "polish":
		// The phase these enter is a spec agent's work: with the budget
		// spent, the command is refused before the thread moves.
		if err := r.checkBudget(specWork[c.Name]); err != nil {
			return err
		}
	case "start":
		if phase == PhaseFinalized {
			if err := r.raise(r.implementEvent(SourceHuman), c.Name); err != nil {
				return err
			}
			if r.t.Phase.Type != PhaseConfiguring {
				return settled()
			}
		}
		if err := r.configure(); err != nil {
			return err
		}
		return raiseAndSettle(Event{Verb: VerbStart, Source: SourceHuman})
	case "reconfigure":
		if err := r.apply(ev, c.Name); err != nil {
			return err
		}
		// The new configuration starts a new run; the paused run's work
		// stays in the tree and its records in runs/.
		if err := r.retireLoopState(false); err != nil {
			return err
		}
		if err := r.configure(); err != nil {
			return err
		}
		if r.t.Mode == ModeMethodical {
			r.note("next: ralph thread start (with --agent, --max-iterations, --verify to change more)")
		}
		return driveAndSettle()
	case "assist":
		if err := r.commitHumanEdits("manual assist"); err != nil {
			return err
		}
		if r.hasConfigOptions() {
			if err := r.configure(); err != nil {
				return err
			}
		}
		return raiseAndSettle(ev)
	case "resume":
		if r.hasConfigOptions() {
			return usageErrorf("resume keeps the configuration: use `ralph thread reconfigure` to change it")
		}
	case "request-changes":
		if msg == "" {
			return usageErrorf("say what to fix: ralph thread request-changes \"the total is off by one\"")
		}
		if err := r.commitHumanEdits("review edits"); err != nil {
			return err
		}
		if err := r.addStory("RV", "Review changes", []string{msg}); err != nil {
			return err
		}
		AppendMessage(r.dir, r.t.ID, Message{Role: "reviewer", Content: msg, At: r.now().UTC(), SpecVersion: r.t.SpecVersion})
	}
	// The other commands, pause among them when no ralph runs the loop
	// (it was killed), only record the transition and go on from it.
	return raiseAndSettle(ev)
}

// specWork names the spec agent run of the commands that start one, as
// runAgent's kind.
var specWork = map[string]string{"assess": "assessment", "polish": "polish"}

func (r *Runner) hasConfigOptions() bool {
	return len(r.opts.Agents) > 0 || r.opts.MaxIterations > 0 || len(r.opts.Verifiers) > 0
}
