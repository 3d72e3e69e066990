package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/thread"
)

// specFormat tells the agent what a spec looks like.
const specFormat = `A spec is markdown: stories as "### [ ] US-001: Title", each followed by
acceptance criteria as "- [ ] criterion", optionally with a command that
proves it: "- [ ] the tests pass (verify: ` + "`make test`" + `)". It also has a
line "Promise: COMPLETE": the tag the build agent prints when it is done.`

// conversationText renders the spec conversation for a headless prompt.
func (tc *threadCtx) conversationText() string {
	msgs, _ := thread.ReadConversation(tc.dir, tc.t.ID)
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s: %s\n\n", m.Role, strings.TrimSpace(m.Content))
	}
	if b.Len() == 0 {
		return "(none yet)\n"
	}
	return b.String()
}

// runAgent runs name (or the configured agent) headless with prompt and
// returns its final message. The raw output goes to threads/<id>/<kind>.log.
func (tc *threadCtx) runAgent(name, kind, prompt string) (string, error) {
	spec, err := resolveAgent(tc.env, tc.cfg, name)
	if err != nil {
		return "", err
	}
	promptFile := tc.path(kind + ".prompt.md")
	if err := store.WriteFileAtomic(promptFile, []byte(prompt), 0o644); err != nil {
		return "", err
	}
	logf, err := os.OpenFile(tc.path(kind+".log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	tc.out("ralph: running %s for the %s of thread %s", spec.Name, kind, tc.t.ID)
	out, err := agent.Run(tc.ctx, agent.Invocation{Spec: spec, Prompt: prompt, PromptFile: promptFile, Dir: tc.ws.Root,
		Log: logf, Display: tc.env.IO.Out, Timeout: tc.cfg.Agent.Timeout.Duration, IdleTimeout: tc.cfg.Agent.IdleTimeout.Duration})
	if tc.ctx.Err() != nil {
		return "", &ExitError{Code: ExitInterrupted, Msg: "interrupted"}
	}
	if err != nil {
		return "", err
	}
	if out.ExitCode != 0 {
		return out.Result.FinalMessage, fmt.Errorf("the agent %s exited with code %d (output in %s)", spec.Name, out.ExitCode, tc.ws.Rel(tc.path(kind+".log")))
	}
	return out.Result.FinalMessage, nil
}

// draft sends one message of the spec conversation to the agent, which
// writes or refines the draft spec.
func (tc *threadCtx) draft(msg string) error {
	if err := tc.acquire(); err != nil {
		return err
	}
	defer tc.release()
	rel := tc.ws.Rel(tc.draftPath())
	before, _ := os.ReadFile(tc.draftPath())
	if msg == "" && tc.env.IO.InTerminal {
		return tc.draftInteractive(rel)
	}
	if msg == "" {
		return usageErrorf("no message and no terminal: ralph thread draft \"what the spec should say\"")
	}
	if err := thread.AppendMessage(tc.dir, tc.t.ID, thread.Message{Role: "user", Content: msg, At: tc.env.Now().UTC()}); err != nil {
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
`, tc.t.Title, rel, specFormat, orEmpty(string(before)), tc.conversationText(), msg)
	reply, err := tc.runAgent(tc.opts.Agent, "draft", prompt)
	if err != nil {
		return err
	}
	after, _ := os.ReadFile(tc.draftPath())
	if bytes.Equal(before, after) {
		if spec := specFromReply(reply); spec != "" {
			if err := store.WriteFileAtomic(tc.draftPath(), []byte(spec), 0o644); err != nil {
				return err
			}
		}
	}
	if err := thread.AppendMessage(tc.dir, tc.t.ID, thread.Message{Role: "assistant", Content: reply, At: tc.env.Now().UTC()}); err != nil {
		return err
	}
	if _, err := os.Stat(tc.draftPath()); err != nil {
		tc.out("the agent has not written a draft yet; reply with `ralph thread draft \"...\"`")
		return nil
	}
	tc.out("draft: %s", rel)
	tc.out("next: ralph thread draft \"more\" | assess | finalize")
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

func (tc *threadCtx) draftInteractive(rel string) error {
	spec, err := resolveAgent(tc.env, tc.cfg, tc.opts.Agent)
	if err != nil {
		return err
	}
	prompt := fmt.Sprintf("Help the person write the spec of %q. Write it to %s.\n\n%s\n\nConversation so far:\n%s",
		tc.t.Title, rel, specFormat, tc.conversationText())
	promptFile := tc.path("draft.prompt.md")
	if err := store.WriteFileAtomic(promptFile, []byte(prompt), 0o644); err != nil {
		return err
	}
	thread.AppendMessage(tc.dir, tc.t.ID, thread.Message{Role: "user", Content: "(interactive session with " + spec.Name + ")", At: tc.env.Now().UTC()})
	code, err := agent.RunInteractive(tc.ctx, spec, promptFile, prompt, tc.ws.Root, tc.env.IO.In, tc.env.IO.Out, tc.env.IO.Err)
	if err != nil {
		return err
	}
	content, _ := os.ReadFile(tc.draftPath())
	thread.AppendMessage(tc.dir, tc.t.ID, thread.Message{Role: "assistant", Content: fmt.Sprintf("(interactive session ended with code %d; draft is %d bytes)", code, len(content)), At: tc.env.Now().UTC()})
	tc.out("draft: %s; next: ralph thread assess | finalize", rel)
	return nil
}

// importSpec makes a file written by hand the draft.
func (tc *threadCtx) importSpec(file string) error {
	if err := tc.acquire(); err != nil {
		return err
	}
	defer tc.release()
	p := file
	if !filepath.IsAbs(p) {
		wd, err := tc.env.WorkDir()
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
	if err := store.WriteFileAtomic(tc.draftPath(), b, 0o644); err != nil {
		return err
	}
	if err := thread.AppendMessage(tc.dir, tc.t.ID, thread.Message{Role: "user", Content: "imported the draft from " + file + ":\n" + string(b), At: tc.env.Now().UTC()}); err != nil {
		return err
	}
	tc.out("draft of thread %s is now %s (%s)", tc.t.ID, file, tc.ws.Rel(tc.draftPath()))
	tc.out("next: ralph thread assess | finalize")
	return nil
}

// assess asks the agent to review the draft. Its advice is shown, never
// acted on, except that a reply ending in "VERDICT: REVISE" sends the
// thread back to drafting (the seed's "AI found issues").
func (tc *threadCtx) assess() error {
	draft, err := os.ReadFile(tc.draftPath())
	if err != nil {
		draft = nil
	}
	prompt := fmt.Sprintf(`Review this spec for clarity, testability and completeness. Do not change any file.
Say what is unclear, which criteria cannot be tested, and what is missing.
End with a line "VERDICT: OK" when it can be built as it is, or "VERDICT: REVISE".

%s

Spec of %q:
%s`, specFormat, tc.t.Title, orEmpty(string(draft)))
	reply, err := tc.runAgent(tc.opts.Agent, "assessment", prompt)
	if err != nil {
		return err
	}
	if err := store.WriteFileAtomic(tc.path("assessment.md"), []byte(reply+"\n"), 0o644); err != nil {
		return err
	}
	thread.AppendMessage(tc.dir, tc.t.ID, thread.Message{Role: "assessor", Content: reply, At: tc.env.Now().UTC()})
	tc.out("── assessment (advice only) ──")
	for _, l := range strings.Split(strings.TrimSpace(reply), "\n") {
		tc.out("  %s", l)
	}
	if verdictRevise(reply) {
		return tc.apply(thread.Event{Verb: thread.VerbRevise, Source: thread.SourceAgent}, "revise")
	}
	tc.out("next: ralph thread finalize (you decide) | revise")
	return nil
}

func verdictRevise(reply string) bool {
	for _, l := range strings.Split(reply, "\n") {
		if strings.EqualFold(strings.TrimSpace(l), "VERDICT: REVISE") {
			return true
		}
	}
	return false
}

// polish lets the agent add docs and tests; then the thread is
// Implemented again and waits for review.
func (tc *threadCtx) polish() error {
	spec, _ := thread.ReadSpec(tc.dir, tc.t.ID, tc.t.SpecVersion)
	prompt := fmt.Sprintf(`Polish the implementation of %q before review: add documentation and tests
where they are missing, and clean up. Do not change behaviour.

Spec:
%s`, tc.t.Title, spec)
	if _, err := tc.runAgent(tc.opts.Agent, "polish", prompt); err != nil {
		return err
	}
	// The polish stays uncommitted: it is reviewed with the rest and
	// committed by `ralph thread commit` with the proposed message.
	return tc.apply(thread.Event{Verb: thread.VerbPolishDone, Source: thread.SourceAgent}, "polish_done")
}
