package modelserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/testing/wait"
)

// event is one server-sent event.
type event struct {
	name string
	data string
}

func (e event) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e.data), &m); err != nil {
		t.Fatalf("event %s: data is not JSON: %v: %s", e.name, err, e.data)
	}
	return m
}

// post sends body as JSON and returns the response with its body read.
func post(t *testing.T, s *Server, path string, body any) (*http.Response, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// parseSSE splits an SSE body into events.
func parseSSE(t *testing.T, body []byte) []event {
	t.Helper()
	var evs []event
	var cur event
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || cur.data != "" {
				evs = append(evs, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.name != "" || cur.data != "" {
		t.Fatalf("SSE body does not end with a blank line: %q", body)
	}
	return evs
}

func names(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

// get walks m along a path of keys and indexes: get(m, "a", 0, "b").
func get(t *testing.T, m any, path ...any) any {
	t.Helper()
	cur := m
	for _, p := range path {
		switch k := p.(type) {
		case string:
			o, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %v is not an object", path, cur)
			}
			cur = o[k]
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %v is not an array with index %d", path, cur, k)
			}
			cur = a[k]
		}
	}
	return cur
}

func wantEq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func anthropicRequest(stream bool, msgs ...any) map[string]any {
	return map[string]any{
		"model": "claude-opus-4-8", "max_tokens": 1024, "stream": stream,
		"tools":    []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}},
		"messages": msgs,
	}
}

func userMsg(content any) map[string]any { return map[string]any{"role": "user", "content": content} }

func TestAnthropicStreamsText(t *testing.T) {
	s := Start(t, []Turn{{Text: "done\n<promise>COMPLETE</promise>"}})
	resp, body := post(t, s, "/v1/messages?beta=true", anthropicRequest(true, userMsg([]any{
		map[string]any{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
		map[string]any{"type": "text", "text": "do it"},
	})))
	wantEq(t, "status", resp.StatusCode, 200)
	wantEq(t, "content type", resp.Header.Get("Content-Type"), "text/event-stream")
	evs := parseSSE(t, body)
	wantEq(t, "events", names(evs), []string{"message_start", "ping", "content_block_start",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"})
	for _, e := range evs {
		wantEq(t, "type of "+e.name, e.json(t)["type"], e.name)
	}
	start := evs[0].json(t)
	wantEq(t, "message.role", get(t, start, "message", "role"), "assistant")
	wantEq(t, "message.model", get(t, start, "message", "model"), "claude-opus-4-8")
	wantEq(t, "message.content", get(t, start, "message", "content"), []any{})
	if n, _ := get(t, start, "message", "usage", "input_tokens").(float64); n < 1 {
		t.Errorf("message_start input_tokens = %v", n)
	}
	wantEq(t, "content_block", get(t, evs[2].json(t), "content_block"), map[string]any{"type": "text", "text": ""})
	wantEq(t, "delta", get(t, evs[3].json(t), "delta"),
		map[string]any{"type": "text_delta", "text": "done\n<promise>COMPLETE</promise>"})
	wantEq(t, "stop_reason", get(t, evs[5].json(t), "delta", "stop_reason"), "end_turn")
	if n, _ := get(t, evs[5].json(t), "usage", "output_tokens").(float64); n < 1 {
		t.Errorf("message_delta output_tokens = %v", n)
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(reqs))
	}
	r := reqs[0]
	wantEq(t, "request", []any{r.Method, r.Path, r.Query, r.API, r.Model, r.Stream, r.Turn, r.ToolResult, r.UserText, r.Tools, r.Status},
		[]any{"POST", "/v1/messages", "beta=true", "anthropic", "claude-opus-4-8", true, 0, false, "do it", []string{"Bash"}, 200})
}

func TestAnthropicStreamsToolUse(t *testing.T) {
	s := Start(t, []Turn{{Tool: &ToolCall{Command: `echo "hi" > marker.txt`}}, {Text: "ok"}})
	_, body := post(t, s, "/v1/messages", anthropicRequest(true, userMsg("make a marker")))
	evs := parseSSE(t, body)
	wantEq(t, "events", names(evs), []string{"message_start", "ping", "content_block_start",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"})
	block := get(t, evs[2].json(t), "content_block").(map[string]any)
	wantEq(t, "block type", block["type"], "tool_use")
	wantEq(t, "block name", block["name"], "Bash")
	wantEq(t, "block input", block["input"], map[string]any{})
	id, _ := block["id"].(string)
	if !strings.HasPrefix(id, "toolu_") {
		t.Errorf("tool_use id = %q", id)
	}
	delta := get(t, evs[3].json(t), "delta").(map[string]any)
	wantEq(t, "delta type", delta["type"], "input_json_delta")
	var input map[string]any
	if err := json.Unmarshal([]byte(delta["partial_json"].(string)), &input); err != nil {
		t.Fatalf("partial_json: %v", err)
	}
	wantEq(t, "tool input", input, map[string]any{"command": `echo "hi" > marker.txt`})
	wantEq(t, "stop_reason", get(t, evs[5].json(t), "delta", "stop_reason"), "tool_use")

	// The CLI answers with the tool result: the next turn.
	_, body = post(t, s, "/v1/messages", anthropicRequest(true,
		userMsg("make a marker"),
		map[string]any{"role": "assistant", "content": []any{block}},
		userMsg([]any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": ""}}),
	))
	wantEq(t, "text", get(t, parseSSE(t, body)[3].json(t), "delta", "text"), "ok")
	reqs := s.Requests()
	wantEq(t, "tool results", []bool{reqs[0].ToolResult, reqs[1].ToolResult}, []bool{false, true})
	wantEq(t, "user text after tool result", reqs[1].UserText, "make a marker")
}

func TestAnthropicNonStreaming(t *testing.T) {
	s := Start(t, []Turn{{Text: "hello"}, {Tool: &ToolCall{Command: "ls"}}})
	resp, body := post(t, s, "/v1/messages", anthropicRequest(false, userMsg("hi")))
	wantEq(t, "content type", resp.Header.Get("Content-Type"), "application/json")
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "type", m["type"], "message")
	wantEq(t, "content", m["content"], []any{map[string]any{"type": "text", "text": "hello"}})
	wantEq(t, "stop_reason", m["stop_reason"], "end_turn")

	_, body = post(t, s, "/v1/messages", anthropicRequest(false, userMsg("hi")))
	m = nil
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "tool name", get(t, m, "content", 0, "name"), "Bash")
	wantEq(t, "tool input", get(t, m, "content", 0, "input"), map[string]any{"command": "ls"})
	wantEq(t, "stop_reason", m["stop_reason"], "tool_use")
}

func TestAnthropicRateLimit(t *testing.T) {
	body := `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
	s := Start(t, []Turn{
		{Status: 429, Body: body, Headers: map[string]string{
			"retry-after":                        "30",
			"anthropic-ratelimit-unified-status": "rejected",
			"anthropic-ratelimit-unified-reset":  "1795344045",
		}},
		{Status: 529},
	})
	resp, got := post(t, s, "/v1/messages", anthropicRequest(true, userMsg("hi")))
	wantEq(t, "status", resp.StatusCode, 429)
	wantEq(t, "body", strings.TrimSpace(string(got)), body)
	wantEq(t, "retry-after", resp.Header.Get("Retry-After"), "30")
	wantEq(t, "unified status", resp.Header.Get("Anthropic-Ratelimit-Unified-Status"), "rejected")
	wantEq(t, "unified reset", resp.Header.Get("Anthropic-Ratelimit-Unified-Reset"), "1795344045")
	wantEq(t, "content type", resp.Header.Get("Content-Type"), "application/json")

	// Without a Body the error is in the Anthropic shape.
	resp, got = post(t, s, "/v1/messages", anthropicRequest(true, userMsg("hi")))
	wantEq(t, "status", resp.StatusCode, 529)
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "type", m["type"], "error")
	wantEq(t, "error.type", get(t, m, "error", "type"), "overloaded_error")
	wantEq(t, "recorded statuses", []int{s.Requests()[0].Status, s.Requests()[1].Status}, []int{429, 529})
}

func TestAnthropicCountTokensConsumesNoTurn(t *testing.T) {
	s := Start(t, []Turn{{Text: "a"}, {Text: "b"}})
	_, body := post(t, s, "/v1/messages/count_tokens", anthropicRequest(false, userMsg("hi")))
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if n, _ := m["input_tokens"].(float64); n < 1 {
		t.Errorf("input_tokens = %v", m["input_tokens"])
	}
	_, body = post(t, s, "/v1/messages", anthropicRequest(false, userMsg("hi")))
	if !strings.Contains(string(body), `"text":"a"`) {
		t.Errorf("count_tokens consumed a turn: %s", body)
	}
	wantEq(t, "turns", []int{s.Requests()[0].Turn, s.Requests()[1].Turn}, []int{-1, 0})
}

func responsesRequest(input ...any) map[string]any {
	return map[string]any{
		"model": "gpt-5.5", "stream": true, "input": input,
		"tools": []any{map[string]any{"type": "function", "name": "exec_command"}},
	}
}

func TestResponsesStreamsText(t *testing.T) {
	s := Start(t, []Turn{{Text: "done"}})
	resp, body := post(t, s, "/v1/responses", responsesRequest(
		map[string]any{"type": "message", "role": "user", "content": []any{
			map[string]any{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{
			map[string]any{"type": "input_text", "text": "make it"}}},
	))
	wantEq(t, "content type", resp.Header.Get("Content-Type"), "text/event-stream")
	evs := parseSSE(t, body)
	wantEq(t, "events", names(evs), []string{"response.created", "response.output_item.added",
		"response.output_text.delta", "response.output_item.done", "response.completed"})
	for i, e := range evs {
		m := e.json(t)
		wantEq(t, "type of "+e.name, m["type"], e.name)
		wantEq(t, "sequence_number of "+e.name, m["sequence_number"], float64(i))
	}
	wantEq(t, "created status", get(t, evs[0].json(t), "response", "status"), "in_progress")
	wantEq(t, "added item type", get(t, evs[1].json(t), "item", "type"), "message")
	wantEq(t, "delta", get(t, evs[2].json(t), "delta"), "done")
	item := get(t, evs[3].json(t), "item")
	wantEq(t, "item role", get(t, item, "role"), "assistant")
	wantEq(t, "item content", get(t, item, "content", 0, "type"), "output_text")
	wantEq(t, "item text", get(t, item, "content", 0, "text"), "done")
	wantEq(t, "delta item_id", get(t, evs[2].json(t), "item_id"), get(t, item, "id"))
	done := evs[4].json(t)
	wantEq(t, "completed status", get(t, done, "response", "status"), "completed")
	wantEq(t, "completed output", get(t, done, "response", "output", 0), item)
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		if n, _ := get(t, done, "response", "usage", k).(float64); n < 1 {
			t.Errorf("usage.%s = %v", k, n)
		}
	}
	r := s.Requests()[0]
	wantEq(t, "request", []any{r.API, r.Model, r.Stream, r.UserText, r.ToolResult, r.Tools},
		[]any{"responses", "gpt-5.5", true, "make it", false, []string{"exec_command"}})
}

func TestResponsesStreamsFunctionCall(t *testing.T) {
	s := Start(t, []Turn{{Tool: &ToolCall{Command: "echo hi > marker.txt"}}})
	req := responsesRequest()
	req["input"] = "make it" // a plain string input
	_, body := post(t, s, "/v1/responses", req)
	evs := parseSSE(t, body)
	wantEq(t, "events", names(evs), []string{"response.created", "response.output_item.added",
		"response.output_item.done", "response.completed"})
	added := get(t, evs[1].json(t), "item")
	wantEq(t, "added type", get(t, added, "type"), "function_call")
	wantEq(t, "added arguments", get(t, added, "arguments"), "")
	item := get(t, evs[2].json(t), "item").(map[string]any)
	wantEq(t, "type", item["type"], "function_call")
	wantEq(t, "name", item["name"], "exec_command")
	if id, _ := item["call_id"].(string); id == "" {
		t.Error("function_call has no call_id")
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(item["arguments"].(string)), &args); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "arguments", args, map[string]any{"cmd": "echo hi > marker.txt"})

	// The function output comes back: a tool result.
	post(t, s, "/v1/responses", responsesRequest(
		map[string]any{"role": "user", "content": "make it"},
		item,
		map[string]any{"type": "function_call_output", "call_id": item["call_id"], "output": ""},
	))
	r := s.Requests()
	wantEq(t, "tool results", []bool{r[0].ToolResult, r[1].ToolResult}, []bool{false, true})
	wantEq(t, "user texts", []string{r[0].UserText, r[1].UserText}, []string{"make it", "make it"})
	wantEq(t, "turns", []int{r[0].Turn, r[1].Turn}, []int{0, 0}) // the last turn repeats
}

func TestResponsesUsageLimit(t *testing.T) {
	body := `{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":3600}}`
	s := Start(t, []Turn{{Status: 429, Body: body}, {Status: 429}})
	resp, got := post(t, s, "/v1/responses", responsesRequest(map[string]any{"role": "user", "content": "hi"}))
	wantEq(t, "status", resp.StatusCode, 429)
	wantEq(t, "body", strings.TrimSpace(string(got)), body)
	resp, got = post(t, s, "/v1/responses", responsesRequest(map[string]any{"role": "user", "content": "hi"}))
	wantEq(t, "status", resp.StatusCode, 429)
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "default error type", get(t, m, "error", "type"), "rate_limit_exceeded")
}

func TestResponsesNonStreaming(t *testing.T) {
	s := Start(t, []Turn{{Text: "plain"}})
	req := responsesRequest(map[string]any{"role": "user", "content": "hi"})
	req["stream"] = false
	_, body := post(t, s, "/v1/responses", req)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "object", m["object"], "response")
	wantEq(t, "text", get(t, m, "output", 0, "content", 0, "text"), "plain")
}

func chatRequest(tools bool, msgs ...any) map[string]any {
	req := map[string]any{"model": "stub-model", "stream": true, "messages": msgs,
		"stream_options": map[string]any{"include_usage": true}}
	if tools {
		req["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}
	}
	return req
}

// chatChunks parses a Chat Completions stream: data-only events ending in
// [DONE].
func chatChunks(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	evs := parseSSE(t, body)
	if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %s", body)
	}
	var out []map[string]any
	for _, e := range evs[:len(evs)-1] {
		if e.name != "" {
			t.Errorf("chat chunk has an event name %q", e.name)
		}
		m := e.json(t)
		wantEq(t, "object", m["object"], "chat.completion.chunk")
		out = append(out, m)
	}
	return out
}

func TestChatCompletionsStreamsTextAndToolCalls(t *testing.T) {
	s := Start(t, []Turn{{Tool: &ToolCall{Command: "echo hi > marker.txt"}}, {Text: "done"}})

	_, body := post(t, s, "/v1/chat/completions", chatRequest(true,
		map[string]any{"role": "system", "content": "be brief"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "make it"}}}))
	ch := chatChunks(t, body)
	if len(ch) != 4 {
		t.Fatalf("%d chunks, want 4 (role+call, arguments, finish, usage)", len(ch))
	}
	call := get(t, ch[0], "choices", 0, "delta", "tool_calls", 0)
	wantEq(t, "call name", get(t, call, "function", "name"), "bash")
	wantEq(t, "call type", get(t, call, "type"), "function")
	var args map[string]any
	if err := json.Unmarshal([]byte(get(t, ch[1], "choices", 0, "delta", "tool_calls", 0, "function", "arguments").(string)), &args); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "command", args["command"], "echo hi > marker.txt")
	wantEq(t, "finish_reason", get(t, ch[2], "choices", 0, "finish_reason"), "tool_calls")
	wantEq(t, "usage chunk choices", get(t, ch[3], "choices"), []any{})
	if n, _ := get(t, ch[3], "usage", "total_tokens").(float64); n < 1 {
		t.Errorf("usage = %v", ch[3]["usage"])
	}

	_, body = post(t, s, "/v1/chat/completions", chatRequest(true,
		map[string]any{"role": "user", "content": "make it"},
		map[string]any{"role": "assistant", "tool_calls": []any{call}},
		map[string]any{"role": "tool", "tool_call_id": get(t, call, "id"), "content": ""}))
	ch = chatChunks(t, body)
	if len(ch) != 4 {
		t.Fatalf("%d chunks, want 4 (role, content, finish, usage)", len(ch))
	}
	wantEq(t, "role", get(t, ch[0], "choices", 0, "delta", "role"), "assistant")
	wantEq(t, "content", get(t, ch[1], "choices", 0, "delta", "content"), "done")
	wantEq(t, "finish_reason", get(t, ch[2], "choices", 0, "finish_reason"), "stop")
	r := s.Requests()
	wantEq(t, "requests", []any{r[0].API, r[0].UserText, r[0].ToolResult, r[1].UserText, r[1].ToolResult},
		[]any{"chat", "make it", false, "make it", true})
}

func TestChatCompletionsTitleRequestIsAuxiliary(t *testing.T) {
	s := Start(t, []Turn{{Text: "main answer"}})
	_, body := post(t, s, "/v1/chat/completions", chatRequest(false,
		map[string]any{"role": "user", "content": "Generate a title for this conversation"}))
	ch := chatChunks(t, body)
	wantEq(t, "title", get(t, ch[1], "choices", 0, "delta", "content"), AuxiliaryText)
	wantEq(t, "consumed", s.Consumed(), 0)
	_, body = post(t, s, "/v1/chat/completions", chatRequest(true, map[string]any{"role": "user", "content": "go"}))
	wantEq(t, "main", get(t, chatChunks(t, body)[1], "choices", 0, "delta", "content"), "main answer")
	r := s.Requests()
	wantEq(t, "aux, turn", []any{r[0].Auxiliary, r[0].Turn, r[1].Auxiliary, r[1].Turn}, []any{true, -1, false, 0})
}

func TestChatCompletionsRateLimitAndNonStreaming(t *testing.T) {
	s := Start(t, []Turn{{Status: 429, Headers: map[string]string{"retry-after": "1"}}, {Tool: &ToolCall{Command: "ls"}}})
	resp, body := post(t, s, "/v1/chat/completions", chatRequest(true, map[string]any{"role": "user", "content": "go"}))
	wantEq(t, "status", resp.StatusCode, 429)
	wantEq(t, "retry-after", resp.Header.Get("Retry-After"), "1")
	if !strings.Contains(string(body), `"rate_limit_exceeded"`) {
		t.Errorf("body = %s", body)
	}
	req := chatRequest(true, map[string]any{"role": "user", "content": "go"})
	req["stream"] = false
	_, body = post(t, s, "/v1/chat/completions", req)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "object", m["object"], "chat.completion")
	wantEq(t, "finish", get(t, m, "choices", 0, "finish_reason"), "tool_calls")
	wantEq(t, "name", get(t, m, "choices", 0, "message", "tool_calls", 0, "function", "name"), "bash")
}

func geminiRequest(contents ...any) map[string]any {
	return map[string]any{
		"contents": contents,
		"tools": []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "run_shell_command"}, map[string]any{"name": "read_file"}}}},
	}
}

func geminiUser(parts ...any) map[string]any { return map[string]any{"role": "user", "parts": parts} }

func TestGeminiStreamsTextAndFunctionCalls(t *testing.T) {
	s := Start(t, []Turn{{Tool: &ToolCall{Command: "echo hi > marker.txt"}}, {Text: "done"}})
	path := "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
	resp, body := post(t, s, path, geminiRequest(geminiUser(
		map[string]any{"text": "<session_context>\nThis is the Gemini CLI.</session_context>"},
		map[string]any{"text": "make it"})))
	wantEq(t, "content type", resp.Header.Get("Content-Type"), "text/event-stream")
	evs := parseSSE(t, body)
	if len(evs) != 1 || evs[0].name != "" {
		t.Fatalf("events = %v, want one data-only event", evs)
	}
	m := evs[0].json(t)
	part := get(t, m, "candidates", 0, "content", "parts", 0)
	wantEq(t, "functionCall", get(t, part, "functionCall"), map[string]any{
		"name": "run_shell_command", "args": map[string]any{"command": "echo hi > marker.txt"}})
	wantEq(t, "role", get(t, m, "candidates", 0, "content", "role"), "model")
	wantEq(t, "finishReason", get(t, m, "candidates", 0, "finishReason"), "STOP")
	for _, k := range []string{"promptTokenCount", "candidatesTokenCount", "totalTokenCount"} {
		if n, _ := get(t, m, "usageMetadata", k).(float64); n < 1 {
			t.Errorf("usageMetadata.%s = %v", k, n)
		}
	}

	_, body = post(t, s, path, geminiRequest(
		geminiUser(map[string]any{"text": "make it"}),
		map[string]any{"role": "model", "parts": []any{part}},
		geminiUser(map[string]any{"functionResponse": map[string]any{"name": "run_shell_command",
			"response": map[string]any{"output": ""}}})))
	m = parseSSE(t, body)[0].json(t)
	wantEq(t, "text", get(t, m, "candidates", 0, "content", "parts", 0, "text"), "done")
	r := s.Requests()
	wantEq(t, "requests", []any{r[0].API, r[0].Model, r[0].Stream, r[0].UserText, r[0].ToolResult, r[0].Tools, r[1].ToolResult, r[1].UserText},
		[]any{"gemini", "gemini-2.5-pro", true, "make it", false, []string{"run_shell_command", "read_file"}, true, "make it"})
}

func TestGeminiGenerateContentCountTokensAndModels(t *testing.T) {
	s := Start(t, []Turn{{Text: "plain"}, {Status: 429}})
	resp, body := post(t, s, "/v1beta/models/gemini-2.5-pro:generateContent", geminiRequest(geminiUser(map[string]any{"text": "hi"})))
	wantEq(t, "content type", resp.Header.Get("Content-Type"), "application/json")
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "text", get(t, m, "candidates", 0, "content", "parts", 0, "text"), "plain")

	_, body = post(t, s, "/v1beta/models/gemini-2.5-pro:countTokens", geminiRequest(geminiUser(map[string]any{"text": "hi"})))
	m = nil
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if n, _ := m["totalTokens"].(float64); n < 1 {
		t.Errorf("totalTokens = %v", m["totalTokens"])
	}

	resp, body = post(t, s, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", geminiRequest(geminiUser(map[string]any{"text": "hi"})))
	wantEq(t, "status", resp.StatusCode, 429)
	m = nil
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "error status", get(t, m, "error", "status"), "RESOURCE_EXHAUSTED")
	wantEq(t, "error code", get(t, m, "error", "code"), float64(429))

	for _, p := range []string{"/v1beta/models", "/v1/models"} {
		resp, err := http.Get(s.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantEq(t, p+" status", resp.StatusCode, 200)
		m = nil
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if p == "/v1beta/models" {
			wantEq(t, "gemini model", get(t, m, "models", 0, "name"), "models/gemini-2.5-pro")
		} else {
			wantEq(t, "openai list", m["object"], "list")
			wantEq(t, "model id", get(t, m, "data", 0, "id"), "stub-model")
		}
	}
	var turns []int
	for _, r := range s.Requests() {
		turns = append(turns, r.Turn)
	}
	wantEq(t, "turns", turns, []int{0, -1, 1, -1, -1})
}

func TestGeminiJSONRequestsAreAuxiliary(t *testing.T) {
	s := Start(t, []Turn{{Text: "main"}})
	router := map[string]any{
		"contents": []any{geminiUser(map[string]any{"text": "classify"})},
		"generationConfig": map[string]any{
			"responseMimeType": "application/json",
			"responseJsonSchema": map[string]any{"type": "object", "properties": map[string]any{
				"reasoning":    map[string]any{"type": "string"},
				"model_choice": map[string]any{"type": "string", "enum": []any{"flash", "pro"}},
			}, "required": []any{"reasoning", "model_choice"}},
		},
	}
	_, body := post(t, s, "/v1beta/models/gemini-3.5-flash-lite:generateContent", router)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	var answer map[string]any
	if err := json.Unmarshal([]byte(get(t, m, "candidates", 0, "content", "parts", 0, "text").(string)), &answer); err != nil {
		t.Fatalf("the auxiliary answer is not JSON: %v", err)
	}
	wantEq(t, "router answer", answer, map[string]any{"reasoning": "modelserver", "model_choice": "flash"})

	// An OpenAPI-style schema (upper-case types), as the next-speaker check
	// may send.
	next := map[string]any{
		"contents": []any{geminiUser(map[string]any{"text": "who speaks next?"})},
		"generationConfig": map[string]any{"responseMimeType": "application/json",
			"responseSchema": map[string]any{"type": "OBJECT", "properties": map[string]any{
				"next_speaker": map[string]any{"type": "STRING", "enum": []any{"user", "model"}},
				"confidence":   map[string]any{"type": "NUMBER"},
				"score":        map[string]any{"type": "INTEGER"},
				"at_least":     map[string]any{"type": "number", "minimum": 2.5},
				"flags":        map[string]any{"type": "ARRAY"},
			}}},
	}
	_, body = post(t, s, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", next)
	text := get(t, parseSSE(t, body)[0].json(t), "candidates", 0, "content", "parts", 0, "text").(string)
	answer = nil
	if err := json.Unmarshal([]byte(text), &answer); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "next speaker answer", answer, map[string]any{"next_speaker": "user",
		"confidence": float64(0), "score": float64(1), "at_least": 2.5, "flags": []any{}})

	_, body = post(t, s, "/v1beta/models/gemini-2.5-pro:generateContent", geminiRequest(geminiUser(map[string]any{"text": "go"})))
	if !strings.Contains(string(body), `"main"`) {
		t.Errorf("the main request did not get the first turn: %s", body)
	}
	r := s.Requests()
	wantEq(t, "aux", []bool{r[0].Auxiliary, r[1].Auxiliary, r[2].Auxiliary}, []bool{true, true, false})
	wantEq(t, "turns", []int{r[0].Turn, r[1].Turn, r[2].Turn}, []int{-1, -1, 0})
	wantEq(t, "models", []string{r[0].Model, r[1].Model, r[2].Model}, []string{"gemini-3.5-flash-lite", "gemini-2.5-flash", "gemini-2.5-pro"})
}

func TestEchoPrompt(t *testing.T) {
	s := Start(t, []Turn{{EchoPrompt: true}})
	_, body := post(t, s, "/v1/messages", anthropicRequest(false, userMsg("repeat after me")))
	if !strings.Contains(string(body), `"text":"repeat after me"`) {
		t.Errorf("anthropic echo: %s", body)
	}
	_, body = post(t, s, "/v1/chat/completions", chatRequest(true, map[string]any{"role": "user", "content": "chat prompt"}))
	wantEq(t, "chat echo", get(t, chatChunks(t, body)[1], "choices", 0, "delta", "content"), "chat prompt")
	_, body = post(t, s, "/v1/responses", responsesRequest(map[string]any{"role": "user", "content": "codex prompt"}))
	wantEq(t, "responses echo", get(t, parseSSE(t, body)[2].json(t), "delta"), "codex prompt")
	_, body = post(t, s, "/v1beta/models/g:generateContent", geminiRequest(geminiUser(map[string]any{"text": "gemini prompt"})))
	if !strings.Contains(string(body), `"text":"gemini prompt"`) {
		t.Errorf("gemini echo: %s", body)
	}
}

func TestTurnsAreConsumedInOrderAndTheLastRepeats(t *testing.T) {
	s := Start(t, []Turn{{Text: "one"}, {Status: 500}, {Text: "three"}})
	var got []string
	for i := 0; i < 5; i++ {
		resp, body := post(t, s, "/v1/messages", anthropicRequest(false, userMsg(fmt.Sprint("prompt ", i))))
		if resp.StatusCode != 200 {
			got = append(got, fmt.Sprint(resp.StatusCode))
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, get(t, m, "content", 0, "text").(string))
	}
	wantEq(t, "answers", got, []string{"one", "500", "three", "three", "three"})
	wantEq(t, "consumed", s.Consumed(), 5)
	var turns []int
	var users []string
	for _, r := range s.Requests() {
		turns = append(turns, r.Turn)
		users = append(users, r.UserText)
	}
	wantEq(t, "turns", turns, []int{0, 1, 2, 2, 2})
	wantEq(t, "user texts", users[:2], []string{"prompt 0", "prompt 1"})
}

func TestConcurrentRequestsEachConsumeOneTurn(t *testing.T) {
	const n = 20
	turns := make([]Turn, n)
	for i := range turns {
		turns[i] = Turn{Text: fmt.Sprint("t", i)}
	}
	s := Start(t, turns)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(chatRequest(true, map[string]any{"role": "user", "content": "x"}))
			resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			for _, tu := range turns {
				if strings.Contains(string(body), `"content":"`+tu.Text+`"`) {
					mu.Lock()
					seen[tu.Text] = true
					mu.Unlock()
				}
			}
			_ = s.Requests() // reads race with writes under -race
		}()
	}
	wg.Wait()
	wantEq(t, "distinct answers", len(seen), n)
	wantEq(t, "requests", len(s.Requests()), n)
}

func TestUnknownPathsAndProxyAttemptsAreRecorded(t *testing.T) {
	s := Start(t, []Turn{{Text: "x"}})
	resp, _ := post(t, s, "/v2/nothing", map[string]any{})
	wantEq(t, "unknown path status", resp.StatusCode, 404)

	// A client that uses the server as its proxy for another host.
	proxy, _ := url.Parse(s.URL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}
	_, err := client.Get("https://telemetry.example.com/ping")
	if err == nil {
		t.Error("a CONNECT through the server succeeded")
	}
	resp, err = client.Get("http://updates.example.com/latest")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wantEq(t, "absolute-URL status", resp.StatusCode, 403)

	// A client that ignores NO_PROXY reaches the server itself in absolute
	// form: served as usual.
	self := strings.Replace(s.URL, "127.0.0.1", "localhost", 1) + "/v1beta/models"
	resp, err = client.Get(self)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wantEq(t, "self through proxy", resp.StatusCode, 200)

	r := s.Requests()
	if len(r) != 4 {
		t.Fatalf("requests = %+v", r)
	}
	wantEq(t, "unknown", []any{r[0].API, r[0].Path, r[0].Turn, r[0].Status}, []any{"", "/v2/nothing", -1, 404})
	wantEq(t, "connect", []any{r[1].Method, r[1].API, r[1].Path, r[1].Status}, []any{"CONNECT", "proxy", "telemetry.example.com:443", 403})
	wantEq(t, "absolute", []any{r[2].Method, r[2].API, r[2].Path}, []any{"GET", "proxy", "http://updates.example.com/latest"})
	wantEq(t, "self", []any{r[3].API, r[3].Path, r[3].Status}, []any{"models", "/v1beta/models", 200})
	wantEq(t, "consumed", s.Consumed(), 0)
}

func TestServerListensOnLoopbackOnly(t *testing.T) {
	s := Start(t, []Turn{{Text: "x"}})
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	wantEq(t, "host", u.Hostname(), "127.0.0.1")
	if u.Port() == "" || u.Port() == "0" {
		t.Errorf("port = %q", u.Port())
	}
}

func TestTurnValidation(t *testing.T) {
	bad := []Turn{
		{},
		{Text: "a", Status: 429},
		{Tool: &ToolCall{}},
		{Text: "a", Body: "{}"},
		{Status: 200},
		{EchoPrompt: true, Tool: &ToolCall{Command: "ls"}},
	}
	for _, tu := range bad {
		if err := tu.validate(); err == nil {
			t.Errorf("%+v is valid, want an error", tu)
		}
	}
	good := []Turn{{Text: "a"}, {Tool: &ToolCall{Command: "ls"}}, {Status: 429, Body: "{}", Headers: map[string]string{"a": "b"}}, {EchoPrompt: true}}
	for _, tu := range good {
		if err := tu.validate(); err != nil {
			t.Errorf("%+v: %v", tu, err)
		}
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestEnvHelpers(t *testing.T) {
	const base = "http://127.0.0.1:4242"
	home := t.TempDir()

	c := envMap(ClaudeEnv(home, base))
	for k, v := range map[string]string{"HOME": home, "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1", "HTTPS_PROXY": base,
		"NO_PROXY": "127.0.0.1,localhost,::1"} {
		wantEq(t, "claude "+k, c[k], v)
	}

	env, err := CodexEnv(home, base)
	if err != nil {
		t.Fatal(err)
	}
	x := envMap(env)
	wantEq(t, "CODEX_HOME", x["CODEX_HOME"], filepath.Join(home, ".codex"))
	wantEq(t, "STUB_API_KEY", x["STUB_API_KEY"], "dummy")
	cfg, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`model_provider = "modelserver"`, `wire_api = "responses"`,
		`base_url = "http://127.0.0.1:4242/v1"`, `env_key = "STUB_API_KEY"`, `model = "gpt-5.5"`} {
		if !strings.Contains(string(cfg), line+"\n") {
			t.Errorf("config.toml lacks %s:\n%s", line, cfg)
		}
	}

	env, err = OpencodeEnv(home, base)
	if err != nil {
		t.Fatal(err)
	}
	o := envMap(env)
	for _, k := range []string{"OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE",
		"OPENCODE_DISABLE_LSP_DOWNLOAD", "OPENCODE_DISABLE_DEFAULT_PLUGINS"} {
		wantEq(t, k, o[k], "1")
	}
	var oc map[string]any
	b, err := os.ReadFile(o["OPENCODE_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &oc); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "opencode model", oc["model"], "stub/stub-model")
	wantEq(t, "opencode baseURL", get(t, oc, "provider", "stub", "options", "baseURL"), base+"/v1")
	wantEq(t, "opencode npm", get(t, oc, "provider", "stub", "npm"), "@ai-sdk/openai-compatible")

	env, err = GeminiEnv(home, base+"/")
	if err != nil {
		t.Fatal(err)
	}
	g := envMap(env)
	wantEq(t, "GEMINI_API_KEY", g["GEMINI_API_KEY"], "dummy")
	wantEq(t, "GOOGLE_GEMINI_BASE_URL", g["GOOGLE_GEMINI_BASE_URL"], base)
	var gs map[string]any
	b, err = os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &gs); err != nil {
		t.Fatal(err)
	}
	wantEq(t, "auth", get(t, gs, "security", "auth", "selectedType"), "gemini-api-key")
	wantEq(t, "telemetry", get(t, gs, "telemetry", "enabled"), false)
	wantEq(t, "usage statistics", get(t, gs, "privacy", "usageStatisticsEnabled"), false)
}

// TestTurnDelay: a turn with a Delay is answered no sooner than that, the
// requests of agents working in parallel wait side by side (four requests
// of 1 s each take about 1 s, not 4), and a client that hangs up ends the
// wait.
func TestTurnDelay(t *testing.T) {
	const delay = time.Second
	s := Start(t, []Turn{{Text: "thought about it", Delay: delay}})
	const n = 8
	took := make([]time.Duration, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(anthropicRequest(false, userMsg(fmt.Sprint("prompt ", i))))
			resp, err := http.Post(s.URL+"/v1/messages", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took[i] = time.Since(start)
			if !strings.Contains(string(body), "thought about it") {
				t.Errorf("request %d: answer %s", i, body)
			}
		}()
	}
	wg.Wait()
	all := time.Since(start)
	for i, d := range took {
		if d < delay {
			t.Errorf("request %d was answered after %v, before the turn's delay of %v", i, d, delay)
		}
	}
	// Waiting one after another would take n*delay (8 s); together they
	// take one delay. Half of n*delay leaves a loaded machine 3 s of slack
	// and still tells the two apart.
	if all >= n/2*delay {
		t.Errorf("%d concurrent requests with a delay of %v took %v: they waited one after another", n, delay, all)
	}

	// A client that gives up ends the wait: the server records the
	// request's status once its handler returns, long before the delay
	// (five minutes: far beyond the wait below however loaded the machine).
	slow := Start(t, []Turn{{Text: "late", Delay: 5 * time.Minute}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	b, _ := json.Marshal(anthropicRequest(false, userMsg("hurry")))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, slow.URL+"/v1/messages", bytes.NewReader(b))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the request returned before its 5 min delay")
	}
	var r []Request
	answered := func() bool { r = slow.Requests(); return len(r) == 1 && r[0].Status != 0 }
	if !wait.Within(wait.Long, answered) {
		t.Fatalf("the server still waits out the 5 min delay of a request whose client hung up (%d requests recorded, none answered)", len(r))
	}

	if err := (Turn{Text: "a", Delay: -time.Second}).validate(); err == nil {
		t.Error("a turn with a negative delay is valid, want an error")
	}
	if err := (Turn{Tool: &ToolCall{Command: "ls"}, Delay: delay}).validate(); err != nil {
		t.Errorf("a tool turn with a delay: %v", err)
	}
}
