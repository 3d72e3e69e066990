package text

import (
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer line", 8, "a longer…"},
		// A cut inside "é" (2 bytes) or "✓" (3 bytes) backs off to the
		// character's start instead of leaving half of it.
		{"caféine", 4, "caf…"},
		{"✓✓", 4, "✓…"},
	} {
		got := Clip(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestOneLineOrNoneShortHash(t *testing.T) {
	if got := OneLine("  two\n\tlines  here \n"); got != "two lines here" {
		t.Errorf("OneLine = %q", got)
	}
	if OrNone(" \n", "(none)") != "(none)" || OrNone("main", "(detached)") != "main" {
		t.Error("OrNone")
	}
	if ShortHash("0123456789abcdef") != "0123456" || ShortHash("abc") != "abc" {
		t.Error("ShortHash")
	}
}
