package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/modelserver"
)

// trustModel is the scripted model of one scenario. Each Claude Code
// process is one conversation, and an orchestrator starts a fresh one for
// every attempt; so the model answers by the conversation's own progress,
// not by a script consumed across requests: a request whose conversation
// has run the scenario's first k commands gets the next one as a tool
// call, and one that has run them all gets the final message. Every
// attempt of every tool gets the same agent, however many attempts a tool
// makes.
//
// Progress is read from the commands the conversation ran, not from how
// many answers it holds: Claude Code 2.1.197, in its first run in a fresh
// HOME, sends one request of a conversation twice and may run both answers,
// and a count would then skip a step.
//
// The one thing it adds is a commit, as its last tool call, when the
// prompt tells the agent to commit its changes (ralphy's does; ralph and
// ralph-tui commit themselves and tell the agent not to): an honest agent
// does what the prompt asks, and a tool that expects the agent to commit
// must not have its honest stories judged on an empty branch.
type trustModel struct {
	URL string

	srv       *httptest.Server
	commands  []string
	commitCmd string
	tools     map[string]*modelserver.Server // a tool call for each command
	final     *modelserver.Server
	fallback  *modelserver.Server

	mu            sync.Mutex
	calls         int
	conversations int
	commitAsked   bool
}

func startTrustModel(b testing.TB, sc trustScenario, delay time.Duration) *trustModel {
	b.Helper()
	m := &trustModel{
		commands:  scenarioCommands(sc),
		commitCmd: fmt.Sprintf("git add -A && git commit -q -m %s || true", shellQuote(sc.repo.story.id+": "+sc.repo.story.title)),
		tools:     map[string]*modelserver.Server{},
	}
	for _, c := range append(slices.Clone(m.commands), m.commitCmd) {
		m.tools[c] = modelserver.Start(b, []modelserver.Turn{{Tool: &modelserver.ToolCall{Command: c}, Delay: delay}})
	}
	m.final = modelserver.Start(b, []modelserver.Turn{{Text: sc.final, EchoPrompt: sc.echo, Delay: delay}})
	m.fallback = modelserver.Start(b, []modelserver.Turn{{Text: "unused"}})
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	b.Cleanup(m.srv.Close)
	m.URL = m.srv.URL
	return m
}

// scenarioCommands are the tool calls of a scenario's agent, in order.
func scenarioCommands(sc trustScenario) []string {
	cmds := slices.Clone(sc.do)
	if sc.tick {
		cmds = append(cmds, tickCmd)
	}
	return cmds
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (m *trustModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		m.fallback.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	prompt, ran := readConversation(body)
	commit := commitAsked.MatchString(prompt)
	script := m.commands
	if commit {
		script = append(slices.Clone(script), m.commitCmd)
	}
	m.mu.Lock()
	m.calls++
	if len(ran) == 0 {
		m.conversations++
	}
	m.commitAsked = m.commitAsked || commit
	m.mu.Unlock()
	answer := m.final
	if k := scriptStep(script, ran); k < len(script) {
		answer = m.tools[script[k]]
	}
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	answer.ServeHTTP(w, r2)
}

// readConversation reads a Messages request: its prompt (the first
// message's text, without the context blocks Claude Code adds) and the
// commands of the tool calls the model made in it so far, in order.
func readConversation(body []byte) (prompt string, ran []string) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	for i, msg := range req.Messages {
		if i == 0 {
			prompt, _ = contentText(msg.Content)
		}
		if msg.Role != "assistant" {
			continue
		}
		var blocks []struct {
			Type  string `json:"type"`
			Input struct {
				Command string `json:"command"`
			} `json:"input"`
		}
		_ = json.Unmarshal(msg.Content, &blocks)
		for _, bl := range blocks {
			if bl.Type == "tool_use" {
				ran = append(ran, bl.Input.Command)
			}
		}
	}
	return prompt, ran
}

// scriptStep is how far a conversation that ran these commands is into
// the script: each command that is the script's next one moves it on; a
// repeat does not.
func scriptStep(script, ran []string) int {
	k := 0
	for _, c := range ran {
		if k < len(script) && c == script[k] {
			k++
		}
	}
	return k
}

func (m *trustModel) stats() (calls, conversations int, commitAsked bool, leaks []string) {
	m.mu.Lock()
	calls, conversations, commitAsked = m.calls, m.conversations, m.commitAsked
	m.mu.Unlock()
	for _, r := range m.fallback.Requests() {
		if r.API == "proxy" {
			leaks = append(leaks, r.Path)
		}
	}
	return calls, conversations, commitAsked, leaks
}
