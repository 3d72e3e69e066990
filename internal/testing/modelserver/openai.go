package modelserver

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// OpenAI Responses API (Codex) and Chat Completions API (opencode).

const (
	codexShellTool    = "exec_command"
	opencodeShellTool = "bash"
)

func (s *Server) responses(w http.ResponseWriter, req *Request) {
	req.API = "responses"
	b := decode(req.Body)
	req.Model = str(b["model"])
	req.Stream, _ = b["stream"].(bool)
	for _, t := range arr(b["tools"]) {
		m := obj(t)
		name := str(m["name"])
		if name == "" {
			name = str(m["type"]) // built-in tools such as web_search
		}
		req.Tools = append(req.Tools, name)
	}
	switch in := b["input"].(type) {
	case string:
		req.UserText = in
	case []any:
		if n := len(in); n > 0 {
			t := str(obj(in[n-1])["type"])
			req.ToolResult = strings.HasSuffix(t, "_call_output")
		}
		req.UserText = userText(in, messageText, "user")
	}

	tu := s.record(req, true)
	if tu.Status != 0 {
		writeStatusTurn(w, tu, openAIError(tu.Status))
		return
	}
	model := cmp.Or(req.Model, "stub-model")
	n := s.id()
	respID := fmt.Sprintf("resp_stub_%d", n)
	in := estimateTokens(req.Body)

	var item map[string]any // the complete output item
	var text string
	var out int
	if tu.Tool != nil {
		args, _ := json.Marshal(map[string]any{"cmd": tu.Tool.Command})
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_stub_%d", n),
			"call_id": fmt.Sprintf("call_stub_%d", n), "name": codexShellTool,
			"arguments": string(args), "status": "completed"}
		out = estimateText(tu.Tool.Command) + 10
	} else {
		text = answerText(tu, req)
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_stub_%d", n),
			"role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
		out = estimateText(text)
	}
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(),
			"status": status, "model": model, "output": output, "usage": usage}
	}
	usage := map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": in + out,
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, response("completed", []any{item}, usage))
		return
	}

	e := startSSE(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		e.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	if tu.Tool != nil {
		added["arguments"] = ""
	} else {
		added["content"] = []any{}
	}
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
	if tu.Tool == nil {
		ev("response.output_text.delta", map[string]any{"item_id": item["id"],
			"output_index": 0, "content_index": 0, "delta": text})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": response("completed", []any{item}, usage)})
}

func (s *Server) chatCompletions(w http.ResponseWriter, req *Request) {
	req.API = "chat"
	b := decode(req.Body)
	req.Model = str(b["model"])
	req.Stream, _ = b["stream"].(bool)
	for _, t := range arr(b["tools"]) {
		req.Tools = append(req.Tools, str(obj(obj(t)["function"])["name"]))
	}
	msgs := arr(b["messages"])
	if n := len(msgs); n > 0 {
		req.ToolResult = str(obj(msgs[n-1])["role"]) == "tool"
	}
	req.UserText = userText(msgs, messageText, "user")

	// A request that offers no tools is auxiliary (opencode's title).
	req.Auxiliary = len(req.Tools) == 0
	tu := s.record(req, !req.Auxiliary)
	if req.Auxiliary {
		tu = Turn{Text: AuxiliaryText}
	}
	if tu.Status != 0 {
		writeStatusTurn(w, tu, openAIError(tu.Status))
		return
	}
	model := cmp.Or(req.Model, "stub-model")
	n := s.id()
	id := fmt.Sprintf("chatcmpl-stub-%d", n)
	created := time.Now().Unix()
	in := estimateTokens(req.Body)

	var text string
	var call map[string]any
	finish := "stop"
	var out int
	if tu.Tool != nil {
		finish = "tool_calls"
		args, _ := json.Marshal(map[string]any{"command": tu.Tool.Command, "description": "Run a shell command"})
		call = map[string]any{"id": fmt.Sprintf("call_stub_%d", n), "type": "function",
			"function": map[string]any{"name": opencodeShellTool, "arguments": string(args)}}
		out = estimateText(tu.Tool.Command) + 10
	} else {
		text = answerText(tu, req)
		out = estimateText(text)
	}
	usage := map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}

	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": text}
		if call != nil {
			msg["content"] = nil
			msg["tool_calls"] = []any{call}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion",
			"created": created, "model": model, "usage": usage,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
		return
	}

	e := startSSE(w)
	chunk := func(delta map[string]any, finishReason any) {
		e.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}}})
	}
	if call != nil {
		f := obj(call["function"])
		chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": call["id"], "type": "function",
			"function": map[string]any{"name": f["name"], "arguments": ""}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "function": map[string]any{"arguments": f["arguments"]}}}}, nil)
	} else {
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		chunk(map[string]any{"content": text}, nil)
	}
	chunk(map[string]any{}, finish)
	e.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
		"model": model, "choices": []any{}, "usage": usage})
	e.event("", "[DONE]")
}

// openAIText returns the text of an OpenAI message content: a string or a
// list of parts ({"type":"text"|"input_text"|"output_text","text":...}).
func messageText(m map[string]any) string { return openAIText(m["content"]) }

func openAIText(content any) string {
	if s, ok := content.(string); ok {
		if injected(s) {
			return ""
		}
		return s
	}
	var parts []string
	for _, c := range arr(content) {
		m := obj(c)
		switch str(m["type"]) {
		case "text", "input_text", "output_text":
			if t := str(m["text"]); !injected(t) {
				parts = append(parts, t)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func openAIError(status int) any {
	typ, code, msg := "server_error", "server_error", "The server had an error (modelserver)"
	switch status {
	case 400:
		typ, code, msg = "invalid_request_error", "invalid_request", "Invalid request (modelserver)"
	case 401:
		typ, code, msg = "invalid_request_error", "invalid_api_key", "Incorrect API key provided (modelserver)"
	case 429:
		typ, code, msg = "rate_limit_exceeded", "rate_limit_exceeded", "Rate limit reached for requests (modelserver)"
	}
	return map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg, "param": nil}}
}
