package agent

import (
	"slices"
	"testing"
)

const cursorSession = "c0ffee00-1111-2222-3333-444455556666"

func TestCursorFixtures(t *testing.T) {
	runFixtures(t, FormatCursor, []fixtureCase{
		// result.result is final; the echoed prompt, the thinking and the
		// tool output all contain the tag and do not count.
		{file: "success", want: Result{
			FinalMessage: "Checking the tests.Tests pass.\n" + sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    cursorSession,
			ToolCalls:    2,
		}},
		// --stream-partial-output without a result event: the deltas and
		// their consolidated copy make one message.
		{file: "partial", want: Result{
			FinalMessage: "Done.\n" + sig,
			Signals:      []string{"COMPLETE"},
			SessionID:    cursorSession,
		}},
		{file: "error", want: Result{
			FinalMessage: "Fetching the spec.",
			SessionID:    cursorSession,
			ToolCalls:    1,
			IsError:      true,
			Errors:       []string{"Connection lost"},
		}},
	})
}

// TestCursorDisplay checks that a partial stream is shown once, as lines,
// and that a result repeating the assistant text is not shown again.
func TestCursorDisplay(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"partial", []string{"Done.", sig}},
		// Whole messages are line-buffered too, since a delta cannot be
		// told from a message; the rest shows with the next event.
		{"success", []string{"Checking the tests.\n→ tool: shell go test ./...", "→ tool: read /work/repo/PROMPT.md", "Tests pass.", sig}},
	}
	for _, tc := range tests {
		_, shown := feed(FormatCursor, "", testNow, readFixture(t, FormatCursor, tc.file))
		if !slices.Equal(shown, tc.want) {
			t.Errorf("%s: shown %q, want %q", tc.file, shown, tc.want)
		}
	}
}
