// Package text holds the small string helpers that ralph's messages share:
// clipping long output, putting text on one line, naming an empty value.
// It imports nothing of ralph's, so every package can use it.
package text

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Clip keeps at most the first n bytes of s, ending in "…" when it cut.
// It never cuts inside a UTF-8 sequence: output shown to a person or
// written to a JSON record must stay valid text.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// OneLine collapses every run of white space in s, newlines included, to
// one space and trims the ends.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// OrNone returns s, or word when s is empty or only white space: "(none)",
// "(detached)", whatever reads right where the value is shown.
func OrNone(s, word string) string {
	if strings.TrimSpace(s) == "" {
		return word
	}
	return s
}

// ShortHash is the 7-character form of a git commit hash that git itself
// shows; shorter input is returned as it is.
func ShortHash(h string) string {
	if len(h) > 7 {
		return h[:7]
	}
	return h
}

// ClipList keeps the first n items of l and says how many more there were:
// a list of files or tasks in a message stays short.
func ClipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(append([]string{}, l[:n]...), fmt.Sprintf("and %d more", len(l)-n))
}
