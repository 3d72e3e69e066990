package agent

import (
	"testing"
	"time"
)

const opencodeSession = "ses_3a9f7c2d1e0bffe1"

func TestOpencodeFixtures(t *testing.T) {
	limit := "APIError: Rate limit reached for requests (stub)"
	runFixtures(t, FormatOpencode, []fixtureCase{
		// Only the text of the last step is final; usage and cost are
		// summed over the steps.
		{file: "success", want: Result{
			FinalMessage: "Created the marker.\n" + sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    opencodeSession,
			Usage:        Usage{InputTokens: 661, OutputTokens: 21, CacheReadTokens: 400, CacheWriteTokens: 20},
			CostUSD:      0.0036, CostKnown: true,
			ToolCalls: 1,
		}},
		// A signal in an earlier step and in tool output does not count;
		// a repeated report of one call counts once.
		{file: "tool_output_signal", want: Result{
			FinalMessage: "Tests fail in pkg/store; more work is needed.",
			SessionID:    opencodeSession,
			Usage:        Usage{InputTokens: 1100, OutputTokens: 45},
			CostKnown:    true,
			ToolCalls:    2,
		}},
		{file: "rate_limit", want: Result{
			SessionID: opencodeSession,
			IsError:   true,
			Errors:    []string{limit},
			Limit:     &Limit{ResetsAt: testNow.Add(30 * time.Second), Kind: "rate_limit", Message: limit},
		}},
		{file: "malformed", want: Result{
			FinalMessage: sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    opencodeSession,
			IsError:      true,
			Errors:       []string{"unknown error"},
		}},
	})
}
