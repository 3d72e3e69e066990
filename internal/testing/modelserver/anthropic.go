package modelserver

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Anthropic Messages API (Claude Code).

const claudeShellTool = "Bash"

func (s *Server) anthropicMessages(w http.ResponseWriter, req *Request) {
	req.API = "anthropic"
	b := decode(req.Body)
	req.Model = str(b["model"])
	req.Stream, _ = b["stream"].(bool)
	for _, t := range arr(b["tools"]) {
		req.Tools = append(req.Tools, str(obj(t)["name"]))
	}
	msgs := arr(b["messages"])
	if n := len(msgs); n > 0 {
		for _, c := range arr(obj(msgs[n-1])["content"]) {
			if str(obj(c)["type"]) == "tool_result" {
				req.ToolResult = true
			}
		}
	}
	req.UserText = userText(msgs, func(m map[string]any) string { return anthropicText(m["content"]) }, "user")

	tu := s.record(req, true)
	if tu.Status != 0 {
		writeStatusTurn(w, tu, anthropicError(tu.Status))
		return
	}
	model := cmp.Or(req.Model, "claude-opus-4-8")
	n := s.id()
	msgID := fmt.Sprintf("msg_stub_%d", n)
	in := estimateTokens(req.Body)

	var block map[string]any // the complete content block
	stop := "end_turn"
	var out int
	if tu.Tool != nil {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_stub_%d", n),
			"name": claudeShellTool, "input": map[string]any{"command": tu.Tool.Command}}
		out = estimateText(tu.Tool.Command) + 10
	} else {
		text := answerText(tu, req)
		block = map[string]any{"type": "text", "text": text}
		out = estimateText(text)
	}
	usage := map[string]any{"input_tokens": in, "output_tokens": out,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}

	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}

	e := startSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	e.event("ping", map[string]any{"type": "ping"})
	var start, delta map[string]any
	if tu.Tool != nil {
		start = map[string]any{"type": "tool_use", "id": block["id"], "name": claudeShellTool, "input": map[string]any{}}
		args, _ := json.Marshal(block["input"])
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(args)}
	} else {
		start = map[string]any{"type": "text", "text": ""}
		delta = map[string]any{"type": "text_delta", "text": block["text"]}
	}
	e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
	e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicText joins the text blocks of a message content (a string or a
// list of blocks), leaving out context the CLI injected.
func anthropicText(content any) string {
	if s, ok := content.(string); ok {
		return s
	}
	var parts []string
	for _, c := range arr(content) {
		m := obj(c)
		if str(m["type"]) != "text" {
			continue
		}
		if t := str(m["text"]); !injected(t) {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

func anthropicError(status int) any {
	typ, msg := "api_error", "Internal server error (modelserver)"
	switch status {
	case 400:
		typ, msg = "invalid_request_error", "Invalid request (modelserver)"
	case 401:
		typ, msg = "authentication_error", "invalid x-api-key (modelserver)"
	case 429:
		typ, msg = "rate_limit_error", "Rate limit reached (modelserver)"
	case 529:
		typ, msg = "overloaded_error", "Overloaded (modelserver)"
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}
