package agent

import "testing"

func TestDroidFixtures(t *testing.T) {
	runFixtures(t, FormatDroid, []fixtureCase{
		{file: "success", want: Result{
			FinalMessage: sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    "s1",
			Usage:        Usage{InputTokens: 900, OutputTokens: 40, CacheReadTokens: 500, CacheWriteTokens: 60},
			ToolCalls:    1,
		}},
		// No completion event: the last assistant message is final, and
		// the prompt read back by a tool is not.
		{file: "killed", want: Result{
			FinalMessage: "Reading the prompt again.",
			SessionID:    "s1",
			ToolCalls:    1,
		}},
		{file: "error", want: Result{
			SessionID: "s1",
			ToolCalls: 1,
			IsError:   true,
			Errors:    []string{"Permission denied: Execute requires --auto medium"},
		}},
	})
}
