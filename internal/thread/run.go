package thread

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/words"
)

// RunConfig is threads/<id>/config.json: the Configuring phase's choices
// and the bookkeeping of the loop runs of the thread.
type RunConfig struct {
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
	// SpecTokens and SpecCostUSD are what the thread's spec agents (the
	// conversation, the assessment, polish) have used: every agent run
	// counts against [budget], so each loop run of the thread starts
	// with them spent.
	SpecTokens  int64   `json:"spec_tokens,omitempty"`
	SpecCostUSD float64 `json:"spec_cost_usd,omitempty"`
	// CommandAgent is the agent AGENT_CMD gave as a command line when the
	// thread was configured. Such an agent has no name to look up again,
	// so its command is kept: a resume in a shell without AGENT_CMD runs
	// the same agent.
	CommandAgent *CommandAgent `json:"command_agent,omitempty"`
}

// CommandAgent is an agent known only by its command line.
type CommandAgent struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
}

// RunConfigVersion is the schema version of config.json.
const RunConfigVersion = 1

// loadConf reads config.json; a missing or unreadable one is the zero
// configuration, which effectiveConf fills with the defaults.
func (r *Runner) loadConf() RunConfig {
	var c RunConfig
	if _, err := store.ReadJSON(r.path("config.json"), RunConfigVersion, &c); err != nil {
		return RunConfig{}
	}
	if c.RunID != "" && store.CheckID("run_id", c.RunID) != nil {
		// The run id names the loop run's folder, read for evidence and
		// logs: one edited into a path is no run ralph made.
		c.RunID = ""
	}
	return c
}

func (r *Runner) saveConf(c RunConfig) error {
	c.SchemaVersion = RunConfigVersion
	return store.WriteJSON(r.path("config.json"), c)
}

// SavedConfig is the thread's config.json, nil when none was written yet.
func (r *Runner) SavedConfig() *RunConfig {
	if _, err := os.Stat(r.path("config.json")); err != nil {
		return nil
	}
	c := r.loadConf()
	return &c
}

// effectiveConf is the saved configuration with this command's options
// over it and the defaults under it.
func (r *Runner) effectiveConf() RunConfig {
	c := r.loadConf()
	if len(r.opts.Agents) > 0 {
		c.Agents = nil
		for _, a := range r.opts.Agents {
			if a = strings.TrimSpace(a); a != "" {
				c.Agents = append(c.Agents, a)
			}
		}
	}
	if r.opts.MaxIterations > 0 {
		c.MaxIterations = r.opts.MaxIterations
	}
	if len(r.opts.Verifiers) > 0 {
		c.Verifiers = r.opts.Verifiers
	}
	if len(c.Agents) == 0 {
		if s, err := r.env.ResolveAgent(""); err == nil {
			c.Agents = []string{s.Name}
		}
		c.Agents = append(c.Agents, r.cfg.Fallbacks...)
	}
	if c.MaxIterations <= 0 {
		c.MaxIterations = max(r.cfg.MaxIterations, 1)
	}
	return c
}

// agentSpec resolves one of the thread's agents. The usual precedence
// comes first, so that AGENT_CMD set now wins over what was recorded; an
// agent that was a command line is then found in the record; any other
// name is looked up in configuration and the built-ins.
func (r *Runner) agentSpec(name string) (agent.Spec, error) {
	if s, err := r.env.ResolveAgent(""); err == nil && s.Name == name {
		return s, nil // AGENT_CMD or the configured default
	}
	if ca := r.loadConf().CommandAgent; ca != nil && ca.Name == name && len(ca.Command) > 0 {
		return agent.Spec{Name: ca.Name, Headless: ca.Command, Interactive: ca.Command, Format: agent.FormatPlain}, nil
	}
	s, err := r.env.NamedAgent(name, "thread agents")
	var ue *agent.UnknownError
	if errors.As(err, &ue) && ue.Name == name && !slices.Contains(r.opts.Agents, name) {
		// The name came from the thread's saved configuration.
		return s, fmt.Errorf("%w; or run the thread with AGENT_CMD set as when it was configured, or change its agents with `ralph thread reconfigure --agent NAME`", err)
	}
	return s, err
}

// configure saves the configuration: this command's options, else what
// was chosen before, else the defaults (quick mode never asks).
func (r *Runner) configure() error {
	c := r.effectiveConf()
	if r.opts.MaxIterations < 0 {
		return usageErrorf("--max-iterations must be at least 1")
	}
	c.CommandAgent = nil
	for _, name := range c.Agents {
		s, err := r.agentSpec(name)
		if err != nil {
			return err
		}
		if _, err := r.env.NamedAgent(name, "thread agents"); err != nil {
			c.CommandAgent = &CommandAgent{Name: s.Name, Command: s.Headless}
		}
	}
	if err := r.saveConf(c); err != nil {
		return err
	}
	verifiers := "none"
	if len(c.Verifiers) > 0 {
		verifiers = strings.Join(c.Verifiers, "; ")
	}
	r.note("configuration: agents %s, at most %s, verifiers: %s", strings.Join(c.Agents, " → "), words.Count(c.MaxIterations, "iteration", "iterations"), verifiers)
	return nil
}

// ---- Running ----

// copySpecToPRD makes the thread's spec version the PRD the loop works on
// (threads/<id>/prd.md), without the stories added to an earlier copy.
func (r *Runner) copySpecToPRD(conf *RunConfig) error {
	spec, err := ReadSpec(r.dir, r.t.ID, r.t.SpecVersion)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.prdPath()), 0o755); err != nil {
		return err
	}
	if err := store.WriteFileAtomic(r.prdPath(), spec, 0o644); err != nil {
		return err
	}
	conf.PRDSpecVersion = r.t.SpecVersion
	conf.Extra = 0
	return r.saveConf(*conf)
}

// retireLoopState marks an unfinished loop run over this thread's PRD copy
// as finished, so that the next run starts afresh instead of resuming it,
// and forgets the retry counters of the thread's stories. The loop's state
// is changed through its owner, which refuses while a loop is running.
func (r *Runner) retireLoopState(keepRun bool) error {
	home := r.loopHome()
	const command = "ralph thread"
	// A person decided to run again: the circuit breaker of earlier
	// attempts does not hold this one back.
	if err := home.ResetBreaker(command); err != nil {
		return err
	}
	rel := r.work.Rel(r.prdPath())
	if !keepRun {
		if err := home.RetireRun(command, rel, "superseded: thread "+r.t.ID+" starts a new run"); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(r.prdPath())
	if err != nil {
		return nil
	}
	prd, err := tasks.ParseMarkdown(rel, b)
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range prd.Stories {
		ids = append(ids, s.ID)
	}
	return home.ForgetStories(command, ids)
}

// runLoop is the Running phase's work: it runs the loop over the thread's
// PRD copy, resuming the thread's unfinished run if there is one, and
// turns how the loop ended into the thread's next event. The iterations of
// all runs of the thread count against its configured maximum.
func (r *Runner) runLoop() (Event, error) {
	conf := r.effectiveConf()
	if _, err := os.Stat(r.prdPath()); err != nil || conf.PRDSpecVersion != r.t.SpecVersion {
		if err := r.retireLoopState(false); err != nil {
			return Event{}, err
		}
		if err := r.copySpecToPRD(&conf); err != nil {
			return Event{}, err
		}
	}
	if r.t.Assisted {
		// A person fixed the work by hand and said so with assist: their
		// edits are verified first (against the thread's PRD copy, made
		// above if no run had made it yet), and the agent runs only if
		// that fails.
		return Event{Verb: VerbClaimDone, Source: SourceHuman}, nil
	}
	rel := r.work.Rel(r.prdPath())
	prior, err := r.loopHome().Load()
	if err != nil {
		return Event{}, err
	}
	resuming := prior != nil && !prior.Finished && prior.TaskFile == rel
	base := r.t.Phase.Iteration
	if resuming && conf.RunID == prior.RunID {
		base = conf.RunBase
	}
	if !resuming && prior != nil && prior.Finished && prior.TaskFile == rel && prior.Outcome == loop.OutcomeComplete && r.prdAllDone() {
		// The loop finished every story, but ralph was stopped before the
		// thread recorded it. A new run would do nothing and hide the
		// finished run's final message (and its promise) from
		// verification: the finished run is taken as this one's.
		if conf.RunID == prior.RunID {
			base = conf.RunBase
		}
		conf.RunID, conf.RunBase = prior.RunID, base
		if err := r.saveConf(conf); err != nil {
			return Event{}, err
		}
		r.note("thread %s: the loop run %s had finished every story before ralph stopped; verifying it", r.t.ID, prior.RunID)
		return Event{Verb: VerbClaimDone, Source: SourceAgent, Iteration: base + prior.Machine.Iteration, RunID: prior.RunID}, nil
	}
	remaining := conf.MaxIterations - base
	if !resuming {
		// A new run needs a clean tree: what the last attempt left on the
		// thread's branch is committed there.
		if err := r.commitHumanEdits("work in progress before a new run"); err != nil {
			return Event{}, err
		}
		if remaining <= 0 {
			return r.stuckEvent(base, fmt.Sprintf("no iterations left (%d of %d used)", base, conf.MaxIterations), nil), nil
		}
		if err := r.retireLoopState(false); err != nil {
			return Event{}, err
		}
	}
	if err := r.saveConf(conf); err != nil {
		return Event{}, err
	}
	if why := r.agentsExhausted(conf.Agents); why != "" {
		return r.stuckEvent(base, why, nil), nil
	}
	if spec, err := ReadSpec(r.dir, r.t.ID, r.t.SpecVersion); err == nil {
		if p := specPromise(spec); p != "" && p != "COMPLETE" && !resuming {
			store.AppendFile(r.work.Path("context.md"), []byte(fmt.Sprintf("- (thread %s) when every story is done, end your final message with <promise>%s</promise> on a line of its own\n", r.t.ID, p)))
		}
	}
	opts, err := r.loopOptions(conf, rel, remaining)
	if err != nil {
		// The loop cannot even be set up (an agent of the thread's
		// configuration is unknown, a bad setting): as when it fails.
		return r.loopFailed(base, "", err), nil
	}
	r.note("running the loop for thread %s: spec v%d, iterations %d/%d used", r.t.ID, r.t.SpecVersion, base, conf.MaxIterations)
	rep, runErr := r.loops.Build(r.ctx, r.work, opts)
	// The loop journaled its own events with its own numbers: the
	// thread's next event follows them, so that seq keeps increasing.
	if last, err := report.LastSeq(loop.EventsPath(r.ws)); err == nil {
		r.env.Events.Skip(last)
	}
	loop.CrashPoint("thread-loop-done")
	// Another command may have moved the thread meanwhile (abandon).
	if t, err := Load(r.dir, r.t.ID); err == nil {
		r.t = t
	}
	if r.t.Phase.Type != PhaseRunning {
		r.note("thread %s is %s now; the loop's outcome (%s) is not applied", r.t.ID, r.t.Phase.Type, rep.Outcome)
		return Event{}, nil
	}
	used := base + rep.Iterations
	if rep.RunID != "" {
		conf.RunID, conf.RunBase = rep.RunID, base
		if err := r.saveConf(conf); err != nil {
			return Event{}, err
		}
	}
	switch {
	case errors.Is(runErr, loop.ErrInterrupted):
		return Event{Verb: VerbInterrupt, Source: SourceHuman, Iteration: used, RunID: rep.RunID,
			Err: interruptedf("thread %s paused; nothing is lost: ralph thread resume | reconfigure | abandon", r.t.ID)}, nil
	case errors.Is(runErr, loop.ErrAllLimited):
		return r.stuckEvent(used, runErr.Error(), nil), nil
	case errors.Is(runErr, loop.ErrNeedsHuman) || rep.Outcome == loop.OutcomeNeedsHuman:
		return r.stuckEvent(used, "only blocked stories are left", nil), nil
	case runErr != nil:
		return r.loopFailed(used, rep.RunID, runErr), nil
	case rep.Outcome == loop.OutcomeMaxIterations || rep.Outcome == loop.OutcomeBudget:
		return r.stuckEvent(used, rep.Reason, nil), nil
	case rep.Outcome == loop.OutcomeComplete:
		return Event{Verb: VerbClaimDone, Source: SourceAgent, Iteration: used, RunID: rep.RunID}, nil
	}
	return r.loopFailed(used, rep.RunID, fmt.Errorf("the loop ended with outcome %q, which this ralph does not know", rep.Outcome)), nil
}

// loopOptions configures the loop run of the thread as `ralph build` would,
// with the thread's agents, at most remaining iterations, and what the
// thread's spec agents spent already counted against the budget.
func (r *Runner) loopOptions(conf RunConfig, rel string, remaining int) (loop.Options, error) {
	primary, err := r.agentSpec(conf.Agents[0])
	if err != nil {
		return loop.Options{}, err
	}
	opts, err := r.env.LoopOptions(r.ctx, primary, rel, max(remaining, 1))
	if err != nil {
		return loop.Options{}, err
	}
	opts.RequirePlan = false
	// A blocked story makes the thread stuck, which assist resolves.
	opts.UnblockHint = "ralph thread assist"
	opts.Fallbacks = nil
	for _, name := range conf.Agents[1:] {
		f, err := r.agentSpec(name)
		if err != nil {
			return loop.Options{}, err
		}
		opts.Fallbacks = append(opts.Fallbacks, f)
	}
	opts.MaxLimitWait = maxLimitWait
	opts.SpentBefore = r.specSpent()
	if r.inWorktree() {
		// LoopOptions made them for the checkout: the loop works in the
		// worktree, on the PRD copy there, and keeps its state apart, with
		// the thread's records; the agents' cooldowns are the checkout's,
		// which every run shares.
		opts.PRDPath = r.prdPath()
		opts.Source = tasks.Open(tasks.KindMarkdown, opts.PRDPath)
		if opts.PlanPath != "" {
			opts.PlanPath = r.work.Abs(r.ws.Rel(opts.PlanPath))
		}
		opts.Home = r.loopHome().Dir
		opts.SharedHome = r.ws.Dir()
	}
	return opts, nil
}

// loopFailed is the event of a loop that stopped on err, something outside
// the work (an agent that cannot run, history changed under the run): the
// thread pauses, and the command ends with err and what to do.
func (r *Runner) loopFailed(used int, runID string, err error) Event {
	return Event{Verb: VerbLoopFailed, Source: SourceSystem, Iteration: used, RunID: runID, Reason: oneLineErr(err),
		Err: fmt.Errorf("the loop stopped: %w (thread %s is Paused: fix it, then `ralph thread resume`)", err, r.t.ID)}
}

// maxLimitWait is the longest a thread's loop waits for a usage limit to
// reset when every configured agent is cooling down; beyond it the thread
// goes to Stuck (all agents exhausted) for a person to decide.
var maxLimitWait = 10 * time.Minute

// agentsExhausted says why no configured agent can run within
// maxLimitWait, "" when one can. The rests are the workspace's shared
// cooldowns, which every run and machine records and honours.
func (r *Runner) agentsExhausted(agents []string) string {
	if len(agents) == 0 {
		return ""
	}
	now := r.now()
	rests, err := runkit.OpenCooldowns(r.ws.Dir()).All(now)
	if err != nil {
		return "" // the loop reports an unreadable record itself
	}
	limit := now.Add(maxLimitWait)
	var parts []string
	for _, name := range agents {
		rest, ok := rests[name]
		if !ok || !rest.Until.After(limit) {
			return ""
		}
		parts = append(parts, fmt.Sprintf("%s until %s", name, rest.Until.Local().Format("15:04:05")))
	}
	return fmt.Sprintf("%v: every agent is cooling down after a usage limit (%s)", loop.ErrAllLimited, strings.Join(parts, ", "))
}

// stuckEvent is the event that sends the thread to Stuck, with what the
// failed attempt reached: the criteria of the verification ev when there
// is one, else those ticked in the PRD copy. The record_stuck action keeps
// the rest (the reason, the closest output, the diff).
func (r *Runner) stuckEvent(used int, reason string, ev *Evidence) Event {
	info := StuckInfo{SpecVersion: r.t.SpecVersion, Iterations: used}
	if ev != nil {
		for _, it := range ev.Items {
			if it.Passed {
				info.CriteriaPassed = append(info.CriteriaPassed, it.Name)
			} else {
				info.CriteriaFailed = append(info.CriteriaFailed, it.Name)
			}
		}
	} else if b, err := os.ReadFile(r.prdPath()); err == nil {
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
	return Event{Verb: VerbStuck, Source: SourceSystem, Iteration: used, Stuck: &info, Reason: reason}
}

// StuckReason is why the thread last got stuck, "" when it never did.
func (r *Runner) StuckReason() string {
	b, _ := os.ReadFile(r.path("stuck_reason.txt"))
	return strings.TrimSpace(string(b))
}

// closestOutput is the raw output of the last iteration of the thread's
// last run: the nearest the agent came.
func (r *Runner) closestOutput() string {
	conf := r.loadConf()
	if conf.RunID == "" {
		return ""
	}
	logs, _ := filepath.Glob(filepath.Join(r.loopHome().RunsDir(), conf.RunID, "iter-*.log"))
	best, bestN := "", -1
	for _, l := range logs {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(l), "iter-%d.log", &n); err == nil && n > bestN {
			best, bestN = l, n
		}
	}
	return best
}

// prdAllDone reports whether every story of the thread's PRD copy is done.
func (r *Runner) prdAllDone() bool {
	b, err := os.ReadFile(r.prdPath())
	if err != nil {
		return false
	}
	prd, err := tasks.ParseMarkdown(r.work.Rel(r.prdPath()), b)
	return err == nil && prd.Remaining() == 0
}
