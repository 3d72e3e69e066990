package modelserver

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Gemini API (Gemini CLI): /v1beta/models/{model}:{method}.

const geminiShellTool = "run_shell_command"

func (s *Server) gemini(w http.ResponseWriter, req *Request) {
	req.API = "gemini"
	rest := req.Path[strings.Index(req.Path, "/models/")+len("/models/"):]
	model, method, _ := strings.Cut(rest, ":")
	req.Model = model
	b := decode(req.Body)

	if method == "countTokens" {
		req.API = "count_tokens"
		s.record(req, false)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": estimateTokens(req.Body)})
		return
	}
	if method != "generateContent" && method != "streamGenerateContent" {
		s.record(req, false)
		writeJSON(w, http.StatusNotFound, geminiError(http.StatusNotFound))
		return
	}
	req.Stream = method == "streamGenerateContent"
	for _, t := range arr(b["tools"]) {
		for _, f := range arr(obj(t)["functionDeclarations"]) {
			req.Tools = append(req.Tools, str(obj(f)["name"]))
		}
	}
	contents := arr(b["contents"])
	if n := len(contents); n > 0 {
		for _, p := range arr(obj(contents[n-1])["parts"]) {
			if obj(p)["functionResponse"] != nil {
				req.ToolResult = true
			}
		}
	}
	req.UserText = userText(contents, func(c map[string]any) string {
		var parts []string
		for _, p := range arr(c["parts"]) {
			if t, ok := obj(p)["text"].(string); ok && !injected(t) {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	}, "user", "")

	// JSON-mode requests are auxiliary (router, next-speaker and loop checks).
	gc := obj(b["generationConfig"])
	req.Auxiliary = str(gc["responseMimeType"]) == "application/json"
	tu := s.record(req, !req.Auxiliary)
	if req.Auxiliary {
		schema := gc["responseJsonSchema"]
		if schema == nil {
			schema = gc["responseSchema"]
		}
		j, _ := json.Marshal(fillSchema(schema, 0))
		tu = Turn{Text: string(j)}
	}
	if tu.Status != 0 {
		writeStatusTurn(w, tu, geminiError(tu.Status))
		return
	}

	var part map[string]any
	var out int
	if tu.Tool != nil {
		part = map[string]any{"functionCall": map[string]any{"name": geminiShellTool,
			"args": map[string]any{"command": tu.Tool.Command}}}
		out = estimateText(tu.Tool.Command) + 10
	} else {
		text := answerText(tu, req)
		part = map[string]any{"text": text}
		out = estimateText(text)
	}
	in := estimateTokens(req.Body)
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": "STOP", "index": 0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": in, "candidatesTokenCount": out,
			"totalTokenCount": in + out},
		"modelVersion": model,
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	e := startSSE(w)
	e.event("", resp)
}

// fillSchema returns a small value that fits a JSON schema (or a Gemini
// OpenAPI-style schema with upper-case types): every property of an object,
// the first value of an enum, the string "modelserver", false, [], and for
// numbers their minimum, else 0 for a number (Gemini CLI's loop check reads it
// as "no loop") and 1 for an integer (its router's complexity score must be
// 1 to 100).
func fillSchema(schema any, depth int) any {
	sc := obj(schema)
	if sc == nil || depth > 8 {
		return map[string]any{}
	}
	if e := arr(sc["enum"]); len(e) > 0 {
		return e[0]
	}
	typ := strings.ToLower(str(sc["type"]))
	if typ == "" && sc["properties"] != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		o := map[string]any{}
		for k, v := range obj(sc["properties"]) {
			o[k] = fillSchema(v, depth+1)
		}
		return o
	case "array":
		return []any{}
	case "string":
		return "modelserver"
	case "number", "integer":
		if m, ok := sc["minimum"].(float64); ok {
			return m
		}
		if typ == "integer" {
			return 1
		}
		return 0
	case "boolean":
		return false
	}
	return map[string]any{}
}

func geminiError(status int) any {
	st, msg := "INTERNAL", "Internal error (modelserver)"
	switch status {
	case 400:
		st, msg = "INVALID_ARGUMENT", "Invalid request (modelserver)"
	case 401, 403:
		st, msg = "PERMISSION_DENIED", "API key not valid (modelserver)"
	case 404:
		st, msg = "NOT_FOUND", "Not found (modelserver)"
	case 429:
		st, msg = "RESOURCE_EXHAUSTED", "Resource has been exhausted (modelserver)"
	case 503:
		st, msg = "UNAVAILABLE", "The model is overloaded (modelserver)"
	}
	return map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
}
