package agent

import (
	"slices"
	"strings"
)

const (
	promiseOpen  = "<promise>"
	promiseClose = "</promise>"
)

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
