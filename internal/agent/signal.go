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
// line that also stands as a line of its own in the prompt is discarded.
// Task text is rendered into the prompt, so a PRD holding
// "<promise>CONTEXT_EXHAUSTED</promise>" on a line would otherwise let an
// agent that echoes its story raise that signal without meaning it.
// ralph's own templates never put a signal on a line of its own.
func SignalsAfter(final, prompt string) []string {
	return signalsNotIn(final, promptSignalLines(prompt))
}

// promptSignalLines returns the trimmed signal lines of prompt, nil for
// none.
func promptSignalLines(prompt string) map[string]bool {
	var lines map[string]bool
	for line := range strings.Lines(prompt) {
		if _, ok := signalLine(line); ok {
			if lines == nil {
				lines = map[string]bool{}
			}
			lines[strings.TrimSpace(line)] = true
		}
	}
	return lines
}

func signalsNotIn(final string, echoed map[string]bool) []string {
	var out []string
	for line := range strings.Lines(final) {
		name, ok := signalLine(line)
		if !ok || slices.Contains(out, name) || echoed[strings.TrimSpace(line)] {
			continue
		}
		out = append(out, name)
	}
	return out
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
