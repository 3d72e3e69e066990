package agent

import (
	"reflect"
	"strings"
	"testing"
)

func TestSignals(t *testing.T) {
	tests := []struct {
		final string
		want  []string
	}{
		{"<promise>COMPLETE</promise>", []string{"COMPLETE"}},
		{"All done.\n  <promise>COMPLETE</promise>  \r\n", []string{"COMPLETE"}},
		{"\t<promise>NEEDS_REVIEW</promise>", []string{"NEEDS_REVIEW"}},
		{"<promise>BLOCKED</promise>\n<promise>COMPLETE</promise>\n<promise>BLOCKED</promise>", []string{"BLOCKED", "COMPLETE"}},
		{"print <promise>COMPLETE</promise> when done", nil},
		{"<promise>COMPLETE</promise> done", nil},
		{"`<promise>COMPLETE</promise>`", nil},
		{"<promise>complete</promise>", nil},
		{"<promise>COMPLETE-1</promise>", nil},
		{"<promise> COMPLETE </promise>", nil},
		{"<promise></promise>", nil},
		{"<promise>COMPLETE</promise><promise>COMPLETE</promise>", nil},
		{"<promise>COMPLETE", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := Signals(tc.final); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Signals(%q) = %q, want %q", tc.final, got, tc.want)
		}
	}
}

// A signal line that the prompt itself carries (task text rendered into
// it) is an echo, never the agent's signal, in every output format.
func TestSignalsEchoedFromPromptAreDiscarded(t *testing.T) {
	prompt := "## Story: US-001\nWhen the context runs out the tool prints\n<promise>CONTEXT_EXHAUSTED</promise>\nand stops.\n"
	final := "Working on US-001:\nWhen the context runs out the tool prints\n  <promise>CONTEXT_EXHAUSTED</promise>\nI implemented it.\n<promise>COMPLETE</promise>"
	if got := SignalsAfter(final, prompt); !reflect.DeepEqual(got, []string{"COMPLETE"}) {
		t.Errorf("SignalsAfter = %q, want only COMPLETE", got)
	}
	if got := SignalsAfter("<promise>COMPLETE</promise>", "say `<promise>COMPLETE</promise>` on a line of its own"); !reflect.DeepEqual(got, []string{"COMPLETE"}) {
		t.Errorf("a tag inside a prompt sentence must not hide the real signal: got %q", got)
	}
	// A user's template may show the tag on a line of its own; the agent
	// writing it after its own words still signals.
	template := "Implement the story.\nWhen all is done, end with:\n<promise>COMPLETE</promise>\n"
	if got := SignalsAfter("Implemented and tested.\n<promise>COMPLETE</promise>", template); !reflect.DeepEqual(got, []string{"COMPLETE"}) {
		t.Errorf("the agent's own signal after its own words: got %q, want COMPLETE", got)
	}
	if got := SignalsAfter("When all is done, end with:\n<promise>COMPLETE</promise>", template); got != nil {
		t.Errorf("the template's example echoed: got %q, want none", got)
	}
	lines := map[Format][]string{
		FormatPlain:  {"Working on US-001:", "When the context runs out the tool prints", "<promise>CONTEXT_EXHAUSTED</promise>", "and stops.", "Done."},
		FormatClaude: {`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"The story says:\nWhen the context runs out the tool prints\n<promise>CONTEXT_EXHAUSTED</promise>"}]}}`},
		FormatCodex:  {`{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"Quoting it:\n<promise>CONTEXT_EXHAUSTED</promise>\nand stops.\nDone."}}`},
	}
	for f, out := range lines {
		p := NewParser(f, prompt)
		for _, l := range out {
			p.Line([]byte(l))
		}
		res := p.Result()
		if !strings.Contains(res.FinalMessage, "CONTEXT_EXHAUSTED") {
			t.Errorf("%s: final message %q lost the echoed text; the test does not test", f, res.FinalMessage)
		}
		if len(res.Signals) != 0 {
			t.Errorf("%s: Signals = %q from an echoed story, want none", f, res.Signals)
		}
	}
}

// Signals returns the names of the promise signals in a final message.
//
// A signal counts only when a whole line, trimmed of surrounding white space,
// is exactly <promise>NAME</promise> where NAME matches [A-Z_]+. A tag inside
// prose ("print <promise>COMPLETE</promise> when done") does not count, because
// agents often quote their instructions back while explaining what they will
// do. Names are returned in order of first appearance without duplicates; the
// result is nil when there are none.
func Signals(final string) []string {
	return signalsNotIn(final, nil)
}

// SignalsAfter is Signals for a final message answering prompt: a signal
// line that is part of an echo of the prompt is discarded. Task text is
// rendered into the prompt, so a PRD holding
// "<promise>CONTEXT_EXHAUSTED</promise>" on a line would otherwise let an
// agent that quotes its story raise that signal without meaning it.
//
// A signal line counts as echoed when it also stands as a line of its own in
// the prompt and the nearest other line before or after it in the final
// message is a prompt line too: it sits inside quoted prompt text. The same
// line written by the agent after its own words still counts, so that a
// user's prompt template that shows the tag on a line of its own keeps
// working.
func SignalsAfter(final, prompt string) []string {
	return signalsNotIn(final, promptLines(prompt))
}
