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
	var out []string
	for line := range strings.Lines(final) {
		name, ok := signalLine(line)
		if !ok || slices.Contains(out, name) {
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
