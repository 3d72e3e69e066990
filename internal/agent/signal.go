package agent

import (
	"slices"
	"strings"
)

const (
	promiseOpen  = "<promise>"
	promiseClose = "</promise>"
)

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

// promptLines returns the set of trimmed lines of prompt when one of them
// is a signal line, and nil otherwise (nothing can be echoed then).
func promptLines(prompt string) map[string]bool {
	lines := map[string]bool{}
	signal := false
	for line := range strings.Lines(prompt) {
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		lines[t] = true
		if _, ok := signalLine(t); ok {
			signal = true
		}
	}
	if !signal {
		return nil
	}
	return lines
}

// signalsNotIn returns the signals of final, leaving out those echoed from
// a prompt whose lines are prompt (nil: none).
func signalsNotIn(final string, prompt map[string]bool) []string {
	var lines []string
	for line := range strings.Lines(final) {
		if t := strings.TrimSpace(line); t != "" {
			lines = append(lines, t)
		}
	}
	var out []string
	for i, line := range lines {
		name, ok := signalLine(line)
		if !ok || slices.Contains(out, name) || (prompt[line] && echoed(lines, i, prompt)) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// echoed reports whether the nearest line before or after lines[i] that is
// not a signal line is a line of the prompt.
func echoed(lines []string, i int, prompt map[string]bool) bool {
	for _, step := range []int{-1, 1} {
		for j := i + step; j >= 0 && j < len(lines); j += step {
			if _, sig := signalLine(lines[j]); sig {
				continue
			}
			if prompt[lines[j]] {
				return true
			}
			break
		}
	}
	return false
}

// signalLine reports the signal name when line is exactly one promise tag.
func signalLine(line string) (string, bool) {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, promiseOpen) || !strings.HasSuffix(s, promiseClose) {
		return "", false
	}
	name := s[len(promiseOpen) : len(s)-len(promiseClose)]
	if !isSignalName(name) {
		return "", false
	}
	return name, true
}

// isSignalName reports whether name matches [A-Z_]+.
func isSignalName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'A' || c > 'Z') && c != '_' {
			return false
		}
	}
	return true
}
