package agent

import (
	"slices"
	"testing"
)

const geminiSession = "2829e6b8-4f1a-4c3b-9d2e-7a6b5c4d3e2f"

func TestGeminiFixtures(t *testing.T) {
	runFixtures(t, FormatGemini, []fixtureCase{
		// The echoed user message and the tool output both contain the
		// tag; only the deltas after the last tool event form the reply.
		{file: "success", want: Result{
			FinalMessage: "All done.\n" + sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    geminiSession,
			Usage:        Usage{InputTokens: 642, OutputTokens: 18, CacheReadTokens: 100},
			ToolCalls:    1,
		}},
		{file: "tool_output_signal", want: Result{
			FinalMessage: "The tests still fail.",
			SessionID:    geminiSession,
			Usage:        Usage{InputTokens: 90, OutputTokens: 10},
			ToolCalls:    1,
		}},
		{file: "quota_429", want: Result{
			SessionID: geminiSession,
			IsError:   true,
			Errors:    []string{"API Error: got status 429 Too Many Requests", "Resource exhausted: quota exceeded"},
			Limit:     &Limit{Kind: "rate_limit", Message: "Resource exhausted: quota exceeded"},
		}},
		{file: "malformed", want: Result{
			FinalMessage: sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    geminiSession,
		}},
	})
}

// TestGeminiDisplayJoinsDeltas checks that deltas are shown as whole lines
// and that the rest of a reply is shown when the next event arrives.
func TestGeminiDisplayJoinsDeltas(t *testing.T) {
	_, shown := feed(FormatGemini, "", testNow, readFixture(t, FormatGemini, "success"))
	want := []string{
		"Let me create the marker.\n→ tool: run_shell_command touch marker",
		"All done.",
		sig,
	}
	if !slices.Equal(shown, want) {
		t.Errorf("shown %q, want %q", shown, want)
	}
}

// Gemini CLI 0.61 reports a daily quota failure as a result error without a
// code; it is still a limit read from the structured event.
func TestGeminiQuotaResultIsALimit(t *testing.T) {
	p := NewParser(FormatGemini, "")
	p.Line([]byte(`{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: You exceeded your current quota, please check your plan. Quota exceeded for metric: generate_content_requests, limit: 0]\nPlease wait and try again later."}}`))
	r := p.Result()
	if r.Limit == nil || r.Limit.Kind != "quota" {
		t.Fatalf("limit = %+v", r.Limit)
	}
}
