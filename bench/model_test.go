package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/modelserver"
)

// storyModel is the scripted model every contender runs against: one
// Anthropic endpoint for Claude Code that works each story of the benchmark
// in one tool call and then gives its final answer, each answer after the
// same delay.
//
// modelserver answers the turns of a script in the order requests arrive,
// which is right for one agent at a time and wrong for four: the second
// agent to ask would get the first agent's final answer. So storyModel reads
// each request to pick the answer, and lets a modelserver, scripted with
// that one answer, write it in the API's own shape:
//
//   - a request whose newest message carries a tool result gets the final
//     answer for its story;
//   - any other gets the tool call that writes the story's file.
//
// The story is the one the orchestrator's prompt assigns (each tool words
// it its own way; see storyLine). The model follows the prompt where the
// tools' prompts differ: it commits in the tool call when the prompt tells
// the agent to commit (ralphy), and it ends its final answer with the
// completion tag unless the prompt asks for the tag only once every story
// of the task file is done (ralph, whose agent cannot know that here).
type storyModel struct {
	URL string

	srv      *httptest.Server
	answers  map[string]*modelserver.Server // by answerKey
	fallback *modelserver.Server            // token counts, model lists, refused proxy use

	mu        sync.Mutex
	calls     int      // completion requests answered
	unmatched []string // first lines of prompts that named no story
	prompts   []int    // bytes of each conversation's prompt, on its first request
}

// storyLine finds the story a prompt assigns, in the words of each
// contender's prompt template:
//
//	ralph:     "Story: US-001: Write us-001.txt"
//	ralph-tui: "## Your Task: US-001 - Write us-001.txt"
//	ralphy:    "TASK: US-001: ..." (parallel), "## Task\nUS-001: ..." (one at a time)
//
// Other stories may appear elsewhere in a prompt (ralph-tui includes the
// whole PRD), so only these lines count.
var storyLine = regexp.MustCompile(`(?m)^(?:Story: |## Your Task: |TASK: |## Task\n)(US-\d{3})\b`)

// commitAsked and tagOnlyWhenAllDone are the prompt wordings the model
// follows (ralphy's "Commit your changes with a descriptive message";
// ralph's "only if every story in it is done").
var (
	commitAsked        = regexp.MustCompile(`(?i)\bcommit your changes\b`)
	tagOnlyWhenAllDone = regexp.MustCompile(`only if every story in it is done`)
)

// The answers for a story.
func toolAnswer(id string, commit bool) string {
	cmd := fmt.Sprintf("printf '%%s\\n' '%s done' > %s", id, storyFile(id))
	if commit {
		cmd += fmt.Sprintf(" && git add %s && git commit -q -m '%s: %s'", storyFile(id), id, storyTitle(id))
	}
	return cmd
}

func finalAnswer(id string, tag bool) string {
	s := fmt.Sprintf("Wrote %s for %s.", storyFile(id), id)
	if tag {
		s += "\n<promise>COMPLETE</promise>"
	}
	return s
}

type answerKey struct {
	id           string
	final        bool
	commit, tag  bool // the variant of the tool call or final answer
	unknownStory bool
}

// startStoryModel starts the model for the stories ids, answering every
// completion request after delay.
func startStoryModel(b testing.TB, ids []string, delay time.Duration) *storyModel {
	b.Helper()
	m := &storyModel{answers: map[string]*modelserver.Server{}}
	for _, id := range ids {
		for _, v := range []bool{false, true} {
			m.answers[key(answerKey{id: id, commit: v})] = modelserver.Start(b, []modelserver.Turn{{Tool: &modelserver.ToolCall{Command: toolAnswer(id, v)}, Delay: delay}})
			m.answers[key(answerKey{id: id, final: true, tag: v})] = modelserver.Start(b, []modelserver.Turn{{Text: finalAnswer(id, v), Delay: delay}})
		}
	}
	m.answers[key(answerKey{unknownStory: true})] = modelserver.Start(b, []modelserver.Turn{{Text: "I cannot tell which story is mine.", Delay: delay}})
	m.fallback = modelserver.Start(b, []modelserver.Turn{{Text: "unused"}})
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	b.Cleanup(m.srv.Close)
	m.URL = m.srv.URL
	return m
}

func key(k answerKey) string { return fmt.Sprintf("%+v", k) }

func (m *storyModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		m.fallback.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	k := m.pick(body)
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	m.answers[key(k)].ServeHTTP(w, r2)
}

// pick chooses the answer to a Messages request.
func (m *storyModel) pick(body []byte) answerKey {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var prompt string
	toolResult := false
	for i, msg := range req.Messages {
		text, results := contentText(msg.Content)
		if i == 0 {
			prompt = text
		}
		if i == len(req.Messages)-1 {
			toolResult = results
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	sm := storyLine.FindStringSubmatch(prompt)
	if sm == nil || m.answers[key(answerKey{id: sm[1]})] == nil {
		first, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
		m.unmatched = append(m.unmatched, first)
		return answerKey{unknownStory: true}
	}
	if toolResult {
		return answerKey{id: sm[1], final: true, tag: !tagOnlyWhenAllDone.MatchString(prompt)}
	}
	// The first request of a story's conversation: its prompt's size.
	m.prompts = append(m.prompts, len(prompt))
	return answerKey{id: sm[1], commit: commitAsked.MatchString(prompt)}
}

// contentText joins the text of a message's content (a string or a list of
// blocks) and says whether it holds a tool result.
func contentText(raw json.RawMessage) (text string, toolResult bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			// Claude Code adds context blocks of its own to the prompt.
			if !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
				parts = append(parts, b.Text)
			}
		case "tool_result":
			toolResult = true
		}
	}
	return strings.Join(parts, "\n"), toolResult
}

// stats returns the completion requests answered, the prompts that named no
// story, and the attempts to reach another host that were refused.
func (m *storyModel) stats() (calls int, unmatched []string, leaks []string) {
	m.mu.Lock()
	calls, unmatched = m.calls, append([]string(nil), m.unmatched...)
	m.mu.Unlock()
	for _, r := range m.fallback.Requests() {
		if r.API == "proxy" {
			leaks = append(leaks, r.Path)
		}
	}
	return calls, unmatched, leaks
}

// medianPromptBytes is the median size of the prompts the agents were
// given, or 0 before any: the bare loop's prompts are padded to ralph's
// size, and this shows they are.
func (m *storyModel) medianPromptBytes() int {
	m.mu.Lock()
	ps := slices.Clone(m.prompts)
	m.mu.Unlock()
	if len(ps) == 0 {
		return 0
	}
	slices.Sort(ps)
	return ps[len(ps)/2]
}
