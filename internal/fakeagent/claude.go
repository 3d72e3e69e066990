package fakeagent

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
)

// Claude Code stream-json event shapes (see the agents reference, section
// 2.2). Structs keep "type" first on every line, as Claude Code does.

const (
	fakeModel   = "fake-model"
	fakeVersion = "0.0.0-fakeagent"
	fakeCostUSD = 0.0012
)

type initEvent struct {
	Type              string   `json:"type"`
	Subtype           string   `json:"subtype"`
	CWD               string   `json:"cwd"`
	SessionID         string   `json:"session_id"`
	Tools             []string `json:"tools"`
	MCPServers        []any    `json:"mcp_servers"`
	Model             string   `json:"model"`
	PermissionMode    string   `json:"permissionMode"`
	SlashCommands     []string `json:"slash_commands"`
	APIKeySource      string   `json:"apiKeySource"`
	ClaudeCodeVersion string   `json:"claude_code_version"`
	OutputStyle       string   `json:"output_style"`
	Agents            []string `json:"agents"`
	Skills            []string `json:"skills"`
	Plugins           []any    `json:"plugins"`
	UUID              string   `json:"uuid"`
}

type usage struct {
	InputTokens              int    `json:"input_tokens"`
	CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
	OutputTokens             int    `json:"output_tokens"`
	ServiceTier              string `json:"service_tier"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type toolResultBlock struct {
	ToolUseID string `json:"tool_use_id"`
	Type      string `json:"type"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
}

type assistantMessage struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type assistantEvent struct {
	Type            string           `json:"type"`
	Message         assistantMessage `json:"message"`
	ParentToolUseID *string          `json:"parent_tool_use_id"`
	SessionID       string           `json:"session_id"`
	UUID            string           `json:"uuid"`
	Error           string           `json:"error,omitempty"`
}

type userMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type toolUseResult struct {
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	Interrupted bool   `json:"interrupted"`
	IsImage     bool   `json:"isImage"`
}

type userEvent struct {
	Type            string         `json:"type"`
	Message         userMessage    `json:"message"`
	ParentToolUseID *string        `json:"parent_tool_use_id"`
	SessionID       string         `json:"session_id"`
	UUID            string         `json:"uuid"`
	ToolUseResult   *toolUseResult `json:"tool_use_result,omitempty"`
}

type rateLimitInfo struct {
	Status                string `json:"status"`
	ResetsAt              int64  `json:"resetsAt"`
	RateLimitType         string `json:"rateLimitType"`
	OverageStatus         string `json:"overageStatus"`
	OverageDisabledReason string `json:"overageDisabledReason"`
	IsUsingOverage        bool   `json:"isUsingOverage"`
}

type rateLimitEvent struct {
	Type          string        `json:"type"`
	RateLimitInfo rateLimitInfo `json:"rate_limit_info"`
	SessionID     string        `json:"session_id"`
	UUID          string        `json:"uuid"`
}

type modelUsage struct {
	InputTokens              int     `json:"inputTokens"`
	OutputTokens             int     `json:"outputTokens"`
	CacheReadInputTokens     int     `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int     `json:"cacheCreationInputTokens"`
	WebSearchRequests        int     `json:"webSearchRequests"`
	CostUSD                  float64 `json:"costUSD"`
	ContextWindow            int     `json:"contextWindow"`
	MaxOutputTokens          int     `json:"maxOutputTokens"`
}

type resultEvent struct {
	Type              string                `json:"type"`
	Subtype           string                `json:"subtype"`
	IsError           bool                  `json:"is_error"`
	APIErrorStatus    *int                  `json:"api_error_status"`
	DurationMS        int64                 `json:"duration_ms"`
	DurationAPIMS     int64                 `json:"duration_api_ms"`
	NumTurns          int                   `json:"num_turns"`
	Result            string                `json:"result"`
	StopReason        *string               `json:"stop_reason"`
	SessionID         string                `json:"session_id"`
	TotalCostUSD      float64               `json:"total_cost_usd"`
	Usage             usage                 `json:"usage"`
	ModelUsage        map[string]modelUsage `json:"modelUsage"`
	PermissionDenials []any                 `json:"permission_denials"`
	TerminalReason    string                `json:"terminal_reason"`
	UUID              string                `json:"uuid"`
}

// newUUID returns a random version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// toolInput turns a tool step's input into the tool_use input object: a JSON
// object is used as is; otherwise Bash gets {"command": input} and other
// tools {"input": input}.
func toolInput(tool, input string) json.RawMessage {
	var obj map[string]any
	if json.Unmarshal([]byte(input), &obj) == nil && obj != nil {
		return json.RawMessage(input)
	}
	key := "input"
	if tool == "Bash" {
		key = "command"
	}
	data, _ := json.Marshal(map[string]string{key: input})
	return data
}

// tokens is a deterministic stand-in for a token count.
func tokens(s string) int { return len(s)/4 + 1 }
