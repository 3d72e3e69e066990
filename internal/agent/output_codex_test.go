package agent

import (
	"testing"
	"time"
)

const codexThread = "01a20298-7c4e-4b1a-9d3f-2e5f6a7b8c9d"

func TestCodexFixtures(t *testing.T) {
	usageAt := "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 11:40 AM."
	usageIn := "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 days 17 hours 14 minutes."
	retry := "exceeded retry limit, last status: 429 Too Many Requests"
	noon := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	runFixtures(t, FormatCodex, []fixtureCase{
		// Two turns: usage is summed, the last agent_message is final, a
		// command reported at start and completion counts once.
		{file: "success", want: Result{
			FinalMessage: "Verified.\n" + sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    codexThread,
			Usage:        Usage{InputTokens: 963, OutputTokens: 27, CacheReadTokens: 428, CacheWriteTokens: 64},
			ToolCalls:    2,
		}},
		{file: "tool_output_signal", want: Result{
			FinalMessage: "Two stories remain open.",
			SessionID:    codexThread,
			Usage:        Usage{InputTokens: 1000, OutputTokens: 50},
			ToolCalls:    2,
		}},
		{file: "usage_limit_at", want: Result{
			SessionID: codexThread,
			IsError:   true,
			Errors:    []string{usageAt},
			Limit:     &Limit{ResetsAt: time.Date(2026, 11, 22, 11, 40, 0, 0, time.UTC), Kind: "usage_limit", Message: usageAt},
		}},
		// At noon, 11:40 AM has passed: the reset is tomorrow's.
		{file: "usage_limit_at", now: noon, want: Result{
			SessionID: codexThread,
			IsError:   true,
			Errors:    []string{usageAt},
			Limit:     &Limit{ResetsAt: time.Date(2026, 11, 23, 11, 40, 0, 0, time.UTC), Kind: "usage_limit", Message: usageAt},
		}},
		{file: "usage_limit_in", want: Result{
			SessionID: codexThread,
			IsError:   true,
			Errors:    []string{usageIn},
			Limit:     &Limit{ResetsAt: testNow.Add(2*24*time.Hour + 17*time.Hour + 14*time.Minute), Kind: "usage_limit", Message: usageIn},
		}},
		{file: "retry_429", want: Result{
			SessionID: codexThread,
			IsError:   true,
			Errors:    []string{retry},
			Limit:     &Limit{Kind: "rate_limit", Message: retry},
		}},
		{file: "malformed", want: Result{
			FinalMessage: sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    codexThread,
			Usage:        Usage{InputTokens: 12},
			IsError:      true,
		}},
	})
}

// TestCodexErrorShownOnce checks that the error and turn.failed events
// carrying the same message show it once.
func TestCodexErrorShownOnce(t *testing.T) {
	_, shown := feed(FormatCodex, "", testNow, readFixture(t, FormatCodex, "retry_429"))
	if len(shown) != 1 {
		t.Errorf("shown %q, want one limit line", shown)
	}
}
