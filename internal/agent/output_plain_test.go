package agent

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// plainPrompt contains the completion tag inline and on a line of its own,
// as ralph's prompts do.
const plainPrompt = `Implement story US-001.
When everything is done, print <promise>COMPLETE</promise> on its own line.

<promise>COMPLETE</promise>

  Do not print it before the tests pass.
`

// runPlain feeds text line by line to a plain parser.
func runPlain(prompt, text string) (*plainParser, []string) {
	p := newPlainParser(prompt)
	var shown []string
	for line := range strings.Lines(text) {
		shown = append(shown, p.Line([]byte(strings.TrimSuffix(line, "\n"))))
	}
	return p, shown
}

func TestPlain(t *testing.T) {
	var numbered strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&numbered, "line %d\n", i)
	}
	var last20 []string
	for i := 11; i <= 30; i++ {
		last20 = append(last20, fmt.Sprintf("line %d", i))
	}
	tests := []struct {
		name      string
		prompt    string
		output    string
		wantFinal string
		wantSigs  []string
	}{
		{
			name:   "echo only",
			prompt: plainPrompt,
			output: plainPrompt,
		},
		{
			name:      "echo then the real signal",
			prompt:    plainPrompt,
			output:    plainPrompt + "\n" + sig + "\n",
			wantFinal: sig,
			wantSigs:  []string{"COMPLETE"},
		},
		{
			name:   "codex transcript",
			prompt: plainPrompt,
			output: "OpenAI Codex v0.169.0\n--------\nworkdir: /work/repo\n--------\nuser\n" + plainPrompt +
				"\nthinking\nI will run the tests.\nexec\nbash -lc 'go test ./...' succeeded in 1.2s:\nok\ncodex\nAll tests pass.\n" + sig + "\ntokens used\n1,234\n",
			wantFinal: "thinking\nI will run the tests.\nexec\nbash -lc 'go test ./...' succeeded in 1.2s:\nok\ncodex\nAll tests pass.\n" + sig + "\ntokens used\n1,234",
			wantSigs:  []string{"COMPLETE"},
		},
		{
			name:      "echo with other indentation and blank lines",
			prompt:    plainPrompt,
			output:    "banner\n\n    Implement story US-001.\n\n\nWhen everything is done, print <promise>COMPLETE</promise> on its own line.\n<promise>COMPLETE</promise>\nDo not print it before the tests pass.\t\nWorking on it.\n",
			wantFinal: "Working on it.",
		},
		{
			name:      "output after the last of two echoes",
			prompt:    plainPrompt,
			output:    plainPrompt + "first attempt\n" + plainPrompt + "second attempt\n",
			wantFinal: "second attempt",
		},
		{
			// The agent was killed while printing the prompt: the tail is
			// the start of the prompt, up to its signal line.
			name:      "partial echo at the end",
			prompt:    plainPrompt,
			output:    "banner\nImplement story US-001.\nWhen everything is done, print <promise>COMPLETE</promise> on its own line.\n\n<promise>COMPLETE</promise>\n",
			wantFinal: "banner",
		},
		{
			// A prompt line printed by chance, followed by real output, is
			// not an echo.
			name:      "diverged prefix is output",
			prompt:    "Fix the bug.\nPrint <promise>COMPLETE</promise> when done.\n",
			output:    "Fix the bug.\nI fixed it.\n" + sig + "\n",
			wantFinal: "Fix the bug.\nI fixed it.\n" + sig,
			wantSigs:  []string{"COMPLETE"},
		},
		{
			name:      "no prompt",
			output:    "done\n" + sig + "\n\n",
			wantFinal: "done\n" + sig,
			wantSigs:  []string{"COMPLETE"},
		},
		{
			name:      "inline tag only",
			prompt:    plainPrompt,
			output:    "I will print " + sig + " when the tests pass.\n",
			wantFinal: "I will print " + sig + " when the tests pass.",
		},
		{
			name:      "last 20 non-empty lines",
			output:    numbered.String() + "\n\n",
			wantFinal: strings.Join(last20, "\n"),
		},
		{
			name:      "signal beyond the last 20 lines",
			output:    sig + "\n" + numbered.String(),
			wantFinal: strings.Join(last20, "\n"),
		},
		{
			name:      "colours stripped",
			prompt:    plainPrompt,
			output:    "\x1b[1m\x1b[32m" + sig + "\x1b[0m\r\n",
			wantFinal: sig,
			wantSigs:  []string{"COMPLETE"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := runPlain(tc.prompt, tc.output)
			r := p.Result()
			if r.FinalMessage != tc.wantFinal {
				t.Errorf("FinalMessage = %q, want %q", r.FinalMessage, tc.wantFinal)
			}
			if !reflect.DeepEqual(r.Signals, tc.wantSigs) {
				t.Errorf("Signals = %q, want %q", r.Signals, tc.wantSigs)
			}
		})
	}
}

// TestPlainDisplaysLines checks that plain output is shown as it is,
// the echo included.
func TestPlainDisplaysLines(t *testing.T) {
	_, shown := runPlain(plainPrompt, plainPrompt+"\x1b[31mred\x1b[0m\n")
	want := strings.Split(plainPrompt+"\x1b[31mred\x1b[0m", "\n")
	if !reflect.DeepEqual(shown, want) {
		t.Errorf("shown %q, want %q", shown, want)
	}
}

// TestPlainFloodThenSignal writes 10 MB of output after an echo of the
// prompt, then the signal: the signal is found and the parser keeps no
// more than its bound.
func TestPlainFloodThenSignal(t *testing.T) {
	p, _ := runPlain(plainPrompt, plainPrompt)
	line := []byte(strings.Repeat("build output ", 8)) // about 100 bytes
	for written := 0; written < 10<<20; written += len(line) + 1 {
		p.Line(line)
		if p.retainedBytes() > plainMaxBytes || p.n > plainMaxLines {
			t.Fatalf("retained %d bytes in %d lines after %d bytes", p.retainedBytes(), p.n, written)
		}
	}
	p.Line([]byte(sig))
	if r := p.Result(); !reflect.DeepEqual(r.Signals, []string{"COMPLETE"}) {
		t.Errorf("Signals = %q, want COMPLETE", r.Signals)
	}
}

// TestPlainHugeLines feeds lines of 1 MiB, the most the caller passes, and
// checks that the parser's memory stays bounded.
func TestPlainHugeLines(t *testing.T) {
	p := newPlainParser(plainPrompt)
	huge := []byte(strings.Repeat("x", 1<<20))
	for range 12 {
		p.Line(huge)
		if p.retainedBytes() > plainMaxBytes {
			t.Fatalf("retained %d bytes, bound is %d", p.retainedBytes(), plainMaxBytes)
		}
	}
	p.Line([]byte(sig))
	r := p.Result()
	if !reflect.DeepEqual(r.Signals, []string{"COMPLETE"}) {
		t.Errorf("Signals = %q, want COMPLETE", r.Signals)
	}
	if len(r.FinalMessage) > plainMaxBytes+len(sig)+1 {
		t.Errorf("FinalMessage is %d bytes", len(r.FinalMessage))
	}
}

// TestEchoMatcherOverlap checks the matcher on a prompt whose lines repeat,
// where restarting the match from scratch would miss an echo.
func TestEchoMatcherOverlap(t *testing.T) {
	m := newEchoMatcher([]string{"a", "a", "b"})
	var full []int
	for i, line := range []string{"a", "a", "a", "b", "a", "a", "b"} {
		if m.feed(line) {
			full = append(full, i)
		}
	}
	if !reflect.DeepEqual(full, []int{3, 6}) {
		t.Errorf("complete echoes end at %v, want [3 6]", full)
	}
}

func TestStripANSI(t *testing.T) {
	tests := map[string]string{
		"plain":                  "plain",
		"\x1b[1;32mgreen\x1b[0m": "green",
		"\x1b]0;title\x07text":   "text",
		"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\": "link",
		"a\x1b(Bb":     "ab",
		"dangling\x1b": "dangling",
	}
	for in, want := range tests {
		if got := stripANSI(in); got != want {
			t.Errorf("stripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

// retainedBytes is the size of the retained output, for tests of the bound.
func (p *plainParser) retainedBytes() int {
	return p.size
}
