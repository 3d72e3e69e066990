package agent

import (
	"testing"
	"time"
)

const claudeSession = "8f0c2a43-0d5e-4a39-9a57-5d1e1b2c3d4e"

func TestClaudeFixtures(t *testing.T) {
	limitMsg := "You've hit your session limit · resets 10:40am (UTC)"
	apiMsg := "API Error: Request rejected (429) · Rate limited by stub"
	runFixtures(t, FormatClaude, []fixtureCase{
		{file: "success", want: Result{
			FinalMessage: "All stories pass.\n" + sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    claudeSession,
			Usage:        Usage{InputTokens: 1200, OutputTokens: 85, CacheReadTokens: 4000, CacheWriteTokens: 300},
			CostUSD:      0.0421, CostKnown: true,
			ToolCalls: 1,
		}},
		// The prompt is read back by a tool and the signal sits in tool
		// output; the final answer only mentions the tag in prose.
		{file: "tool_output_signal", want: Result{
			FinalMessage:      "Story US-001 still fails its tests; I will print " + sig + " when done.",
			SessionID:         claudeSession,
			Usage:             Usage{InputTokens: 123, OutputTokens: 7},
			CostUSD:           0.00079,
			CostKnown:         true,
			ToolCalls:         2,
			PermissionDenials: 2,
		}},
		// A subagent's reply is tool output, not the final message; usage
		// comes from the top-level messages because there is no result.
		{file: "subagent", want: Result{
			FinalMessage: "The subagent found open work.",
			SessionID:    claudeSession,
			Usage:        Usage{InputTokens: 246, OutputTokens: 2},
			ToolCalls:    2,
		}},
		{file: "rate_limit_event", want: Result{
			FinalMessage: limitMsg,
			SessionID:    claudeSession,
			CostKnown:    true,
			IsError:      true,
			Errors:       []string{limitMsg},
			Limit:        &Limit{ResetsAt: time.Unix(1795344045, 0), Kind: "five_hour", Message: limitMsg},
		}},
		{file: "api_429", want: Result{
			FinalMessage: apiMsg,
			SessionID:    claudeSession,
			CostKnown:    true,
			IsError:      true,
			Errors:       []string{apiMsg},
			Limit:        &Limit{Kind: "rate_limit", Message: apiMsg},
		}},
		// The signal came before a tool call in the same message, so the
		// agent went on working: it is not the final answer.
		{file: "max_turns", want: Result{
			SessionID: claudeSession,
			Usage:     Usage{InputTokens: 10, OutputTokens: 5},
			CostUSD:   0.002, CostKnown: true,
			ToolCalls: 1,
			IsError:   true,
			Errors:    []string{"error_max_turns"},
		}},
		// Killed after a tool call: the last assistant event has no text.
		{file: "killed", want: Result{
			SessionID: claudeSession,
			Usage:     Usage{InputTokens: 110, OutputTokens: 7, CacheReadTokens: 7, CacheWriteTokens: 2},
			ToolCalls: 1,
		}},
		{file: "malformed", want: Result{
			FinalMessage: "Finished.\n" + sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    claudeSession,
			Usage:        Usage{InputTokens: 123, OutputTokens: 1},
			ToolCalls:    1,
		}},
		// Amp: the same envelope, usage only per assistant message, no cost.
		{file: "amp", want: Result{
			FinalMessage: sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    "T-5f1c8a9e-2b7d-4c3a-8e6f-0a1b2c3d4e5f",
			Usage:        Usage{InputTokens: 300, OutputTokens: 28, CacheReadTokens: 100, CacheWriteTokens: 5},
			ToolCalls:    1,
		}},
	})
}

// TestClaudeSplitMessage checks that text blocks sent as separate events of
// one message id form one final message.
func TestClaudeSplitMessage(t *testing.T) {
	p := NewParser(FormatClaude, "")
	p.Line([]byte(`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"All done."}]}}`))
	p.Line([]byte(`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"<promise>COMPLETE</promise>"}]}}`))
	r := p.Result()
	if r.FinalMessage != "All done.\n"+sig || len(r.Signals) != 1 {
		t.Errorf("Result = %q %q, want both blocks and COMPLETE", r.FinalMessage, r.Signals)
	}
}

// TestClaudeErrorResultIgnoresResultText checks that an error result's
// text never becomes the final message, even when it looks like a signal.
func TestClaudeErrorResultIgnoresResultText(t *testing.T) {
	p := NewParser(FormatClaude, "")
	p.Line([]byte(`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Working."}]}}`))
	p.Line([]byte(`{"type":"result","subtype":"success","is_error":true,"result":"<promise>COMPLETE</promise>"}`))
	r := p.Result()
	if r.FinalMessage != "Working." || r.Signals != nil || !r.IsError {
		t.Errorf("Result = %+v", r)
	}
}

// Where Claude reports it, the context in use at the last message and the
// model's window give the share of the window used.
func TestClaudeContextUsage(t *testing.T) {
	p := NewParser(FormatClaude, "")
	p.Line([]byte(`{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1000,"cache_read_input_tokens":150000,"cache_creation_input_tokens":9000,"output_tokens":5}}}`))
	p.Line([]byte(`{"type":"result","subtype":"success","is_error":false,"result":"hi","usage":{"input_tokens":1000,"output_tokens":5},"modelUsage":{"claude-x":{"inputTokens":1000,"contextWindow":200000}}}`))
	r := p.Result()
	if r.ContextTokens != 160000 || r.ContextWindow != 200000 || r.ContextPercent() != 80 {
		t.Fatalf("context %d/%d = %d%%", r.ContextTokens, r.ContextWindow, r.ContextPercent())
	}
	if (Result{}).ContextPercent() != -1 {
		t.Fatal("unknown context must be -1")
	}
}
