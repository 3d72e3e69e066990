package agent

import "strings"

// Bounds of the plain parser. Only the tail of the output matters for the
// final message, and an agent may write without end, so the parser keeps a
// fixed window of the last non-empty lines.
const (
	plainMaxLines   = 200
	plainMaxBytes   = 256 << 10
	plainFinalLines = 20
)

// plainParser reads the plain text stdout of an agent that has no
// structured output. Its final message is the last non-empty lines after
// any echo of the prompt. Some agents (Codex in text mode) print the prompt
// before working on it; since prompts usually contain the completion tag,
// a naive reading of the tail would find the signal in the echo.
type plainParser struct {
	echo echoMatcher
	// echoed holds the prompt's lines when it has a signal line: a partial
	// echo the matcher cannot recognise must still not raise its signals.
	echoed map[string]bool

	// ring holds the last non-empty lines after the last complete echo,
	// oldest at start; size is the sum of their lengths.
	ring  [plainMaxLines]string
	start int
	n     int
	size  int
}

func newPlainParser(prompt string) *plainParser {
	var pat []string
	for line := range strings.Lines(prompt) {
		if key := strings.TrimSpace(stripANSI(line)); key != "" {
			pat = append(pat, key)
		}
	}
	return &plainParser{echo: newEchoMatcher(pat), echoed: promptLines(prompt)}
}

func (p *plainParser) Line(line []byte) string {
	show := string(line)
	s := strings.TrimRight(stripANSI(show), " \t\r")
	key := strings.TrimSpace(s)
	if key == "" {
		return show
	}
	if p.echo.feed(key) {
		// Everything up to and including a complete echo is the prompt,
		// or output written before the agent read it.
		p.reset()
		return show
	}
	p.push(s)
	return show
}

func (p *plainParser) Result() Result {
	lines := p.lines()
	// A tail that is the start of the prompt, matched so far and never
	// diverged, is an echo that was cut short (the agent was killed while
	// printing it); it must not become the final message.
	lines = lines[:len(lines)-min(p.echo.matched(), len(lines))]
	if len(lines) > plainFinalLines {
		lines = lines[len(lines)-plainFinalLines:]
	}
	final := strings.Join(lines, "\n")
	return Result{FinalMessage: final, Signals: signalsNotIn(final, p.echoed)}
}

// push appends a line to the ring, evicting the oldest lines to stay within
// both bounds. A line longer than the byte bound keeps only its end.
func (p *plainParser) push(s string) {
	s = keepTail(s, plainMaxBytes)
	// Copy, so that a short line cut from a long one does not pin it.
	s = strings.Clone(s)
	if p.n == plainMaxLines {
		p.evict()
	}
	p.ring[(p.start+p.n)%plainMaxLines] = s
	p.n++
	p.size += len(s)
	for p.size > plainMaxBytes && p.n > 1 {
		p.evict()
	}
}

func (p *plainParser) evict() {
	p.size -= len(p.ring[p.start])
	p.ring[p.start] = ""
	p.start = (p.start + 1) % plainMaxLines
	p.n--
}

func (p *plainParser) reset() {
	for p.n > 0 {
		p.evict()
	}
	p.start = 0
}

// lines returns the retained lines, oldest first.
func (p *plainParser) lines() []string {
	out := make([]string, p.n)
	for i := range out {
		out[i] = p.ring[(p.start+i)%plainMaxLines]
	}
	return out
}

// echoMatcher finds the prompt's non-empty lines as a consecutive run in a
// stream of non-empty lines. It is Knuth-Morris-Pratt over lines instead of
// characters, so it needs no buffer of the output and never backtracks.
type echoMatcher struct {
	pat  []string
	fail []int // fail[i]: length of the longest proper border of pat[:i+1]
	k    int   // lines of pat matched by the end of the stream
}

func newEchoMatcher(pat []string) echoMatcher {
	fail := make([]int, len(pat))
	k := 0
	for i := 1; i < len(pat); i++ {
		for k > 0 && pat[i] != pat[k] {
			k = fail[k-1]
		}
		if pat[i] == pat[k] {
			k++
		}
		fail[i] = k
	}
	return echoMatcher{pat: pat, fail: fail}
}

// feed consumes one trimmed non-empty line and reports whether it completes
// an echo of the whole prompt.
func (m *echoMatcher) feed(line string) bool {
	if len(m.pat) == 0 {
		return false
	}
	for m.k > 0 && m.pat[m.k] != line {
		m.k = m.fail[m.k-1]
	}
	if m.pat[m.k] == line {
		m.k++
	}
	if m.k == len(m.pat) {
		m.k = m.fail[m.k-1]
		return true
	}
	return false
}

// matched is how many of the stream's last lines are the prompt's first
// lines.
func (m *echoMatcher) matched() int {
	return m.k
}

// stripANSI removes terminal escape sequences, which colourful agents put
// around their text and which would otherwise hide a signal line.
func stripANSI(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != 0x1b {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(s) {
			break
		}
		switch s[i+1] {
		case '[': // CSI: parameters, then one final byte in 0x40..0x7e
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
		case ']': // OSC: ends with BEL or ESC \
			j := i + 2
			for j < len(s) && s[j] != 0x07 && !(s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\') {
				j++
			}
			if j < len(s) && s[j] == 0x1b {
				j++
			}
			i = j
		default: // intermediate bytes in 0x20..0x2f, then one final byte
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
				j++
			}
			i = j
		}
	}
	return b.String()
}
