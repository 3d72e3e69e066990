package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Turn is one answer of the model. Set exactly one of Text, Tool, Status or
// EchoPrompt; Headers and Body go with Status only.
type Turn struct {
	// Text is the final assistant text of this turn.
	Text string
	// Tool is one shell tool call: the CLI's own shell tool runs Command.
	Tool *ToolCall
	// Status is an HTTP error status to answer with, e.g. 429.
	Status int
	// Headers are extra response headers for a Status turn (retry-after,
	// anthropic-ratelimit-unified-*, ...).
	Headers map[string]string
	// Body is the JSON error body of a Status turn. Empty means a default
	// error body in the shape of the API that was called.
	Body string
	// EchoPrompt answers with the text of the last user message, like a
	// model that repeats the prompt.
	EchoPrompt bool
	// Delay is how long the server waits before it answers this turn, as
	// a real model takes its time; it goes with any of the above. Requests
	// wait side by side, not one after another, so that a benchmark of
	// agents working in parallel sees the model's latency once per request.
	// A client that hangs up ends the wait.
	Delay time.Duration
}

// ToolCall is a call of the CLI's shell tool.
type ToolCall struct {
	Command string
}

// Text returns a turn that answers with the final text s.
func Text(s string) Turn { return Turn{Text: s} }

// Tool returns a turn that runs command through the CLI's shell tool.
func Tool(command string) Turn { return Turn{Tool: &ToolCall{Command: command}} }

// Request is what the server received, one per HTTP request.
type Request struct {
	Method string
	// Path is the URL path without the query; for a refused proxy CONNECT it
	// is the host:port the client wanted.
	Path  string
	Query string
	// API names the API the request was for: "anthropic", "responses",
	// "chat", "gemini", "count_tokens", "models", "proxy" (a refused
	// attempt to reach another host) or "" (unknown path, answered 404).
	API    string
	Model  string
	Stream bool
	// Tools lists the names of the tools the request offered the model.
	Tools []string
	// ToolResult reports whether the newest input of the conversation (the
	// last message or input item) carries a tool result, i.e. the request
	// answers an earlier tool call.
	ToolResult bool
	// UserText is the text of the last user message that has text, without
	// the context blocks CLIs add to it (<system-reminder>, ...).
	UserText string
	// Turn is the index in the script of the turn this request consumed,
	// or -1 if it consumed none.
	Turn int
	// Auxiliary marks a completion request answered without consuming a
	// turn (see the package doc).
	Auxiliary bool
	// Status is the HTTP status the server answered with.
	Status int
	Body   []byte

	seq int             // 1 + the index in Server.requests; 0 before it is recorded
	ctx context.Context // the HTTP request's context, which ends a turn's Delay
}

// AuxiliaryText is the text answered to auxiliary text requests.
const AuxiliaryText = "Modelserver session"

// Server is a running scripted model server.
type Server struct {
	// URL is the base URL, http://127.0.0.1:port, without a trailing slash.
	URL string

	host  string
	turns []Turn
	srv   *http.Server

	mu       sync.Mutex
	next     int
	requests []Request
	ids      int
}

// Start starts a server for the script turns on 127.0.0.1 and stops it when
// the test ends. It fails the test if the script is empty or a turn does not
// set exactly one of Text, Tool, Status or EchoPrompt.
func Start(t testing.TB, turns []Turn) *Server {
	t.Helper()
	if len(turns) == 0 {
		t.Fatal("modelserver: empty script")
	}
	for i, tu := range turns {
		if err := tu.validate(); err != nil {
			t.Fatalf("modelserver: turn %d: %v", i, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("modelserver: listen on loopback: %v", err)
	}
	s := &Server{
		URL:   "http://" + ln.Addr().String(),
		host:  ln.Addr().String(),
		turns: append([]Turn(nil), turns...),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = s.srv.Close()
		<-done
	})
	return s
}

func (tu Turn) validate() error {
	n := 0
	if tu.Text != "" {
		n++
	}
	if tu.Tool != nil {
		n++
		if tu.Tool.Command == "" {
			return fmt.Errorf("tool call without a command")
		}
	}
	if tu.Status != 0 {
		n++
		if tu.Status < 400 || tu.Status > 599 {
			return fmt.Errorf("status %d is not an HTTP error status", tu.Status)
		}
	}
	if tu.EchoPrompt {
		n++
	}
	if n != 1 {
		return fmt.Errorf("set exactly one of Text, Tool, Status, EchoPrompt (%d set)", n)
	}
	if tu.Delay < 0 {
		return fmt.Errorf("negative Delay %v", tu.Delay)
	}
	if tu.Status == 0 && (len(tu.Headers) > 0 || tu.Body != "") {
		return fmt.Errorf("Headers and Body go with Status only")
	}
	return nil
}

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// Consumed returns how many turns the requests so far consumed.
func (s *Server) Consumed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// record appends req and, when consume is set, gives it the next turn,
// returning after the turn's Delay.
func (s *Server) record(req *Request, consume bool) Turn {
	tu := s.take(req, consume)
	if tu.Delay > 0 {
		ctx := req.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		// Outside the lock: concurrent requests wait side by side.
		t := time.NewTimer(tu.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return tu
}

// take appends req and, when consume is set, gives it the next turn.
func (s *Server) take(req *Request, consume bool) Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Turn = -1
	var tu Turn
	if consume {
		i := min(s.next, len(s.turns)-1)
		s.next++
		req.Turn = i
		tu = s.turns[i]
	}
	kept := *req
	kept.ctx = nil
	s.requests = append(s.requests, kept)
	req.seq = len(s.requests)
	return tu
}

// setStatus stores the status the server answered req with.
func (s *Server) setStatus(req *Request, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.seq > 0 {
		s.requests[req.seq-1].Status = status
	}
}

// id returns a fresh number for response, message and call ids.
func (s *Server) id() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return s.ids
}

// ServeHTTP routes a request to the API it is for.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect || (r.URL.Host != "" && !s.isSelf(r.URL.Host)) {
		s.refuseProxy(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body, ctx: r.Context()}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() { s.setStatus(req, sw.status) }()

	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/v1/messages":
		s.anthropicMessages(sw, req)
	case r.Method == http.MethodPost && p == "/v1/messages/count_tokens":
		req.API = "count_tokens"
		s.record(req, false)
		writeJSON(sw, http.StatusOK, map[string]any{"input_tokens": estimateTokens(body)})
	case r.Method == http.MethodPost && p == "/v1/responses":
		s.responses(sw, req)
	case r.Method == http.MethodPost && p == "/v1/chat/completions":
		s.chatCompletions(sw, req)
	case r.Method == http.MethodPost && strings.Contains(p, "/models/") && strings.Contains(p, ":"):
		s.gemini(sw, req)
	case r.Method == http.MethodGet && (p == "/v1/models" || p == "/models"):
		req.API = "models"
		s.record(req, false)
		writeJSON(sw, http.StatusOK, openAIAndAnthropicModels())
	case r.Method == http.MethodGet && (p == "/v1beta/models" || p == "/v1/models/"):
		req.API = "models"
		s.record(req, false)
		writeJSON(sw, http.StatusOK, geminiModels())
	default:
		s.record(req, false)
		writeJSON(sw, http.StatusNotFound, map[string]any{
			"error": map[string]any{"type": "not_found_error", "code": 404,
				"message": fmt.Sprintf("modelserver: no route for %s %s", r.Method, p)},
		})
	}
}

// isSelf reports whether hostport names this server: a client that ignores
// NO_PROXY sends its model requests here in absolute form, and they are
// served as usual.
func (s *Server) isSelf(hostport string) bool {
	h, p, err := net.SplitHostPort(hostport)
	_, port, _ := net.SplitHostPort(s.host)
	if err != nil || p != port {
		return false
	}
	return h == "127.0.0.1" || h == "localhost" || h == "::1"
}

// refuseProxy answers a request that tried to use the server as a proxy to
// reach another host: it is recorded and refused.
func (s *Server) refuseProxy(w http.ResponseWriter, r *http.Request) {
	req := &Request{Method: r.Method, API: "proxy", Path: r.Host, Status: http.StatusForbidden}
	if r.Method != http.MethodConnect {
		req.Path = r.URL.String()
	}
	s.record(req, false)
	http.Error(w, "modelserver: refused: a test must not reach "+r.Host, http.StatusForbidden)
}

// writeStatusTurn answers with the status turn tu, using def as the body
// when the turn has none.
func writeStatusTurn(w http.ResponseWriter, tu Turn, def any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	for k, v := range tu.Headers {
		h.Set(k, v)
	}
	w.WriteHeader(tu.Status)
	if tu.Body != "" {
		_, _ = io.WriteString(w, tu.Body)
		return
	}
	_ = json.NewEncoder(w).Encode(def)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events, flushing after each.
type sse struct {
	w http.ResponseWriter
}

func startSSE(w http.ResponseWriter) sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	return sse{w: w}
}

// event writes one event; an empty name writes a data-only event.
func (e sse) event(name string, data any) {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		b, _ = json.Marshal(d)
	}
	var buf bytes.Buffer
	if name != "" {
		fmt.Fprintf(&buf, "event: %s\n", name)
	}
	fmt.Fprintf(&buf, "data: %s\n\n", b)
	_, _ = e.w.Write(buf.Bytes())
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// estimateTokens is a rough token count (4 bytes a token) for usage fields.
func estimateTokens(b []byte) int { return len(b)/4 + 1 }

func estimateText(s string) int { return len(s)/4 + 1 }

// injectedPrefixes open the context blocks that CLIs add to the user's
// message: Claude Code's system reminders, Gemini CLI's session context,
// Codex's environment context and instructions.
var injectedPrefixes = []string{"<system-reminder>", "<session_context>",
	"<environment_context>", "<user_instructions>", "# AGENTS.md instructions"}

// injected reports whether a user text part is context a CLI added rather
// than the prompt; Request.UserText leaves such parts out.
func injected(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range injectedPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// answerText is the text a text or echo turn answers with.
func answerText(tu Turn, req *Request) string {
	if tu.EchoPrompt {
		return req.UserText
	}
	return tu.Text
}

func openAIAndAnthropicModels() map[string]any {
	var data []map[string]any
	for _, m := range []string{"stub-model", "claude-opus-4-8", "claude-sonnet-4-5"} {
		data = append(data, map[string]any{
			"id": m, "object": "model", "created": 0, "owned_by": "modelserver",
			"type": "model", "display_name": m, "created_at": "2025-01-01T00:00:00Z",
		})
	}
	return map[string]any{"object": "list", "data": data, "has_more": false,
		"first_id": "stub-model", "last_id": "claude-sonnet-4-5"}
}

func geminiModels() map[string]any {
	var models []map[string]any
	for _, m := range []string{"gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"} {
		models = append(models, map[string]any{
			"name": "models/" + m, "displayName": m, "version": "001",
			"inputTokenLimit": 1048576, "outputTokenLimit": 65536,
			"supportedGenerationMethods": []string{"generateContent", "streamGenerateContent", "countTokens"},
		})
	}
	return map[string]any{"models": models}
}

// JSON helpers over decoded request bodies.

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func arr(v any) []any          { a, _ := v.([]any); return a }
func str(v any) string         { s, _ := v.(string); return s }

func decode(body []byte) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	return m
}

// userText is the text of the last message in msgs from the user (its
// role one of roles) that has any, as text reads a message: the request's
// prompt, whatever the API's shape of a conversation.
func userText(msgs []any, text func(m map[string]any) string, roles ...string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := obj(msgs[i]); slices.Contains(roles, str(m["role"])) {
			if t := text(m); t != "" {
				return t
			}
		}
	}
	return ""
}
