package thread

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/store"
)

// The agent's work on a thread outside the loop: the spec conversation
// (Drafting), the assessment (Assessing) and polish (Polishing). The agent
// advises and writes files; only the machine's events move the thread.

// specFormat tells the agent what a spec looks like.
const specFormat = `A spec is markdown: stories as "### [ ] US-001: Title", each followed by
acceptance criteria as "- [ ] criterion", optionally with a command that
proves it: "- [ ] the tests pass (verify: ` + "`make test`" + `)". It also has a
line "Promise: COMPLETE": the tag the build agent prints when it is done.`

// conversationText renders the spec conversation for a headless prompt.
func (r *Runner) conversationText() string {
	msgs, _ := ReadConversation(r.dir, r.t.ID)
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s: %s\n\n", m.Role, strings.TrimSpace(m.Content))
	}
	if b.Len() == 0 {
		return "(none yet)\n"
	}
	return b.String()
}

// agentTokenFile records the spec agent in progress (runkit.AgentFile: its
// token, saved before it starts, and its process group once it runs); it
// is removed when the agent ends, so that what a crash of ralph leaves
// running is found and stopped by the next spec agent run.
const agentTokenFile = "agent.token"

func (r *Runner) agentFile() runkit.AgentFile { return runkit.AgentFile(r.path(agentTokenFile)) }

// runAgent runs name (or the configured agent) headless with prompt and
// returns its final message. The raw output goes to threads/<id>/<kind>.log.
// It refuses to start once the [budget] is spent, and what the agent uses
// counts against it (specSpent).
func (r *Runner) runAgent(name, kind, prompt string) (string, error) {
	// A spec agent a kill of ralph left running goes first, whatever
	// fails next: it would go on writing the draft or the spec.
	r.stopLeftoverAgent()
	spec, err := r.env.ResolveAgent(name)
	if err != nil {
		return "", err
	}
	if err := r.checkBudget(kind); err != nil {
		return "", err
	}
	dir := r.agentDir(kind)
	r.note("ralph: running %s for the %s of thread %s", spec.Name, kind, r.t.ID)
	logPath := r.path(kind + ".log")
	f := r.agentFile()
	var token string
	res, err := r.agents.RunAgent(r.ctx, runkit.Attempt{
		Spec: spec, Prompt: prompt, Dir: dir,
		PromptFile: r.path(kind + ".prompt.md"), LogFile: logPath,
		Timeout: r.cfg.AgentTimeout, IdleTimeout: r.cfg.AgentIdleTimeout, MaxLogBytes: r.cfg.MaxLogBytes,
		SaveToken: func(tok string) error { token = tok; return f.Save(0, tok) },
		OnStart:   func(pgid int) { _ = f.Save(pgid, token) },
		Events:    r.env.Events,
		Sandbox:   r.env.Sandbox,
	})
	// Run stopped whatever carried the token before it returned.
	f.Clear()
	out := res.Outcome
	if uerr := r.addSpecUsage(out); uerr != nil && err == nil {
		err = uerr
	}
	if r.ctx.Err() != nil {
		return "", ErrInterrupted
	}
	if err != nil {
		return "", err
	}
	if out.ExitCode != 0 {
		return out.Result.FinalMessage, fmt.Errorf("the agent %s exited with code %d (output in %s)", spec.Name, out.ExitCode, r.ws.Rel(logPath))
	}
	return out.Result.FinalMessage, nil
}

// stopLeftoverAgent stops a spec agent that a crash of ralph left running
// (see agentTokenFile): it would still be writing the draft or the spec.
func (r *Runner) stopLeftoverAgent() {
	if st, found := r.agentFile().StopRecorded(); found && st.Any() {
		r.note("ralph: stopped the agent a crashed run of thread %s left behind", r.t.ID)
	}
}

// BudgetError refuses a spec agent run of a thread whose [budget] is
// spent. Nothing has changed when it is returned.
type BudgetError struct {
	ID, Kind, Why string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("not running the agent for the %s of thread %s: the [budget] is spent: %s; raise it in .ralph/config.toml to go on", e.Kind, e.ID, e.Why)
}

// budget is the [budget] of the configuration: the same bound `ralph
// build` gives the loop.
func (r *Runner) budget() runkit.Budget { return r.cfg.Budget }

// specSpent is what the thread's spec agents have used, as config.json
// records it. Every loop run of the thread counts it against its budget
// too (loop.Options.SpentBefore).
func (r *Runner) specSpent() runkit.Spent {
	c := r.loadConf()
	return runkit.Spent{Tokens: c.SpecTokens, CostUSD: c.SpecCostUSD}
}

// checkBudget refuses a spec agent run for kind when the spec agents
// have used the budget up.
func (r *Runner) checkBudget(kind string) error {
	if why := r.budget().Exceeded(r.specSpent()); why != "" {
		return &BudgetError{ID: r.t.ID, Kind: kind, Why: why}
	}
	return nil
}

// addSpecUsage records what one spec agent run used in config.json: the
// tokens of every kind, and the cost when the agent reported one.
func (r *Runner) addSpecUsage(out agent.Outcome) error {
	u := out.Result.Usage
	tokens := u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	cost := 0.0
	if out.Result.CostKnown {
		cost = out.Result.CostUSD
	}
	if tokens == 0 && cost == 0 {
		return nil
	}
	c := r.loadConf()
	c.SpecTokens += tokens
	c.SpecCostUSD += cost
	return r.saveConf(c)
}

// Draft sends one message of the spec conversation to the agent, which
// writes or refines the draft spec. Without a message it hands the
// terminal to the agent, and refuses when there is none.
func (r *Runner) Draft(msg string) error {
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.Release()
	rel := r.ws.Rel(r.draftPath())
	before, _ := os.ReadFile(r.draftPath())
	if msg == "" && r.env.InTerminal && r.env.Interactive != nil {
		return r.draftInteractive(rel)
	}
	if msg == "" {
		return usageErrorf("no message and no terminal: ralph thread draft \"what the spec should say\"")
	}
	// Refused before the message is kept: a refusal changes nothing.
	if err := r.checkBudget("draft"); err != nil {
		return err
	}
	if err := AppendMessage(r.dir, r.t.ID, Message{Role: "user", Content: msg, At: r.now().UTC()}); err != nil {
		return err
	}
	prompt := fmt.Sprintf(`You are writing the spec of one feature or fix with a person: %q.
Spec draft: %s
Write the whole spec to that file (or reply with the whole spec as markdown).

%s

Current draft:
%s
Conversation so far:
%s
Latest message from the person:
%s
`, r.t.Title, rel, specFormat, orEmpty(string(before)), r.conversationText(), msg)
	reply, err := r.runAgent(r.opts.Agent, "draft", prompt)
	if err != nil {
		return err
	}
	after, _ := os.ReadFile(r.draftPath())
	if bytes.Equal(before, after) {
		if spec := specFromReply(reply); spec != "" {
			if err := store.WriteFileAtomic(r.draftPath(), []byte(spec), 0o644); err != nil {
				return err
			}
		}
	}
	if err := AppendMessage(r.dir, r.t.ID, Message{Role: "assistant", Content: reply, At: r.now().UTC()}); err != nil {
		return err
	}
	if _, err := os.Stat(r.draftPath()); err != nil {
		r.note("the agent has not written a draft yet; reply with `ralph thread draft \"...\"`")
		return nil
	}
	r.note("draft: %s", rel)
	r.note("next: ralph thread draft \"more\" | assess | finalize")
	return nil
}

func orEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty)\n"
	}
	return s
}

// specFromReply takes a spec out of an agent's reply: a fenced markdown
// block, or the reply itself when it has a story heading.
func specFromReply(reply string) string {
	if i := strings.Index(reply, "```"); i >= 0 {
		rest := reply[i+3:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
			if j := strings.Index(rest, "```"); j >= 0 {
				rest = rest[:j]
			}
			if strings.Contains(rest, "### ") {
				return strings.TrimSpace(rest) + "\n"
			}
		}
	}
	if strings.Contains(reply, "### ") {
		return strings.TrimSpace(reply) + "\n"
	}
	return ""
}

func (r *Runner) draftInteractive(rel string) error {
	spec, err := r.env.ResolveAgent(r.opts.Agent)
	if err != nil {
		return err
	}
	if err := r.checkBudget("draft"); err != nil {
		return err
	}
	prompt := fmt.Sprintf("Help the person write the spec of %q. Write it to %s.\n\n%s\n\nConversation so far:\n%s",
		r.t.Title, rel, specFormat, r.conversationText())
	promptFile := r.path("draft.prompt.md")
	if err := store.WriteFileAtomic(promptFile, []byte(prompt), 0o644); err != nil {
		return err
	}
	AppendMessage(r.dir, r.t.ID, Message{Role: "user", Content: "(interactive session with " + spec.Name + ")", At: r.now().UTC()})
	code, err := r.env.Interactive(r.ctx, spec, promptFile, prompt, r.ws.Root)
	if err != nil {
		return err
	}
	content, _ := os.ReadFile(r.draftPath())
	AppendMessage(r.dir, r.t.ID, Message{Role: "assistant", Content: fmt.Sprintf("(interactive session ended with code %d; draft is %d bytes)", code, len(content)), At: r.now().UTC()})
	r.note("draft: %s; next: ralph thread assess | finalize", rel)
	return nil
}

// ImportSpec makes a file written by hand the draft. A relative file is
// taken from Env.WorkDir.
func (r *Runner) ImportSpec(file string) error {
	if err := r.acquire(); err != nil {
		return err
	}
	defer r.Release()
	p := file
	if !filepath.IsAbs(p) {
		wd, err := r.env.WorkDir()
		if err != nil {
			return err
		}
		p = filepath.Join(wd, p)
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return usageErrorf("no file %s", file)
	}
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "" {
		return usageErrorf("%s is empty", file)
	}
	if err := store.WriteFileAtomic(r.draftPath(), b, 0o644); err != nil {
		return err
	}
	if err := AppendMessage(r.dir, r.t.ID, Message{Role: "user", Content: "imported the draft from " + file + ":\n" + string(b), At: r.now().UTC()}); err != nil {
		return err
	}
	r.note("draft of thread %s is now %s (%s)", r.t.ID, file, r.ws.Rel(r.draftPath()))
	r.note("next: ralph thread assess | finalize")
	return nil
}

// assess is the Assessing phase's work: the agent reviews the draft. Its
// advice is shown, never acted on, except that a reply ending in
// "VERDICT: REVISE" sends the thread back to drafting (the seed's "AI
// found issues"); otherwise the thread waits for the person.
func (r *Runner) assess() (Event, error) {
	draft, err := os.ReadFile(r.draftPath())
	if err != nil {
		draft = nil
	}
	prompt := fmt.Sprintf(`Review this spec for clarity, testability and completeness. Do not change any file.
Say what is unclear, which criteria cannot be tested, and what is missing.
End with a line "VERDICT: OK" when it can be built as it is, or "VERDICT: REVISE".

%s

Spec of %q:
%s`, specFormat, r.t.Title, orEmpty(string(draft)))
	reply, err := r.runAgent(r.opts.Agent, "assessment", prompt)
	if err != nil {
		return Event{}, err
	}
	if err := store.WriteFileAtomic(r.path("assessment.md"), []byte(reply+"\n"), 0o644); err != nil {
		return Event{}, err
	}
	AppendMessage(r.dir, r.t.ID, Message{Role: "assessor", Content: reply, At: r.now().UTC()})
	// The agent's reply was on the terminal as it ran: printing it again
	// would show the assessment twice.
	r.note("assessment (advice only) saved in %s", r.ws.Rel(r.path("assessment.md")))
	if verdictRevise(reply) {
		return Event{Verb: VerbRevise, Source: SourceAgent}, nil
	}
	r.note("next: ralph thread finalize (you decide) | revise")
	return Event{}, nil
}

func verdictRevise(reply string) bool {
	for _, l := range strings.Split(reply, "\n") {
		if strings.EqualFold(strings.TrimSpace(l), "VERDICT: REVISE") {
			return true
		}
	}
	return false
}

// polish is the Polishing phase's work: the agent adds docs and tests;
// then the thread is Implemented again and waits for review.
func (r *Runner) polish() (Event, error) {
	spec, _ := ReadSpec(r.dir, r.t.ID, r.t.SpecVersion)
	prompt := fmt.Sprintf(`Polish the implementation of %q before review: add documentation and tests
where they are missing, and clean up. Do not change behaviour.

Spec:
%s`, r.t.Title, spec)
	if _, err := r.runAgent(r.opts.Agent, "polish", prompt); err != nil {
		return Event{}, err
	}
	// The polish stays uncommitted: it is reviewed with the rest and
	// committed by `ralph thread commit` with the proposed message.
	return Event{Verb: VerbPolishDone, Source: SourceAgent}, nil
}
