package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ralphloop/ralph/internal/sandbox"
)

// Format names the shape of an agent CLI's standard output.
type Format string

// The output formats ralph can parse.
const (
	FormatPlain    Format = "plain"    // plain text stdout
	FormatClaude   Format = "claude"   // Claude Code --output-format stream-json --verbose; also Amp --stream-json
	FormatCodex    Format = "codex"    // codex exec --json
	FormatOpencode Format = "opencode" // opencode run --format json
	FormatGemini   Format = "gemini"   // gemini -o stream-json
	FormatDroid    Format = "droid"    // droid exec -o stream-json
	FormatCursor   Format = "cursor"   // cursor-agent --output-format stream-json
)

// Formats returns every known format in a stable order, for help texts and
// validation messages.
func Formats() []Format {
	return []Format{FormatPlain, FormatClaude, FormatCodex, FormatOpencode, FormatGemini, FormatDroid, FormatCursor}
}

// ParseFormat returns the format named by s. Case and surrounding white space
// are ignored because the name usually comes from a config file or a flag.
func ParseFormat(s string) (Format, error) {
	want := Format(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(Formats(), want) {
		return want, nil
	}
	names := make([]string, 0, len(Formats()))
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return "", fmt.Errorf("unknown output format %q: valid formats are %s", s, strings.Join(names, ", "))
}

// Usage counts the tokens an agent reported.
type Usage struct {
	InputTokens      int64 `json:"input"`
	OutputTokens     int64 `json:"output"`
	CacheReadTokens  int64 `json:"cache_read"`
	CacheWriteTokens int64 `json:"cache_write"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
}

// Limit is a usage or rate limit reported by the agent CLI in structured form.
type Limit struct {
	ResetsAt time.Time // zero if unknown
	Kind     string    // e.g. "five_hour", "usage_limit", "rate_limit"
	Message  string
}

// Result is what ralph learns from one agent run's output.
type Result struct {
	FinalMessage      string   // text of the last assistant message (plain: the last lines of stdout after any prompt echo)
	Signals           []string // signal names found in FinalMessage, e.g. "COMPLETE"
	SessionID         string
	Usage             Usage
	CostUSD           float64 // an estimate reported by the CLI
	CostKnown         bool
	ToolCalls         int
	PermissionDenials int
	IsError           bool     // the CLI reported the run as an error (result.is_error, turn.failed, error event)
	Errors            []string // error messages reported in structured events, the last maxErrors of them
	Limit             *Limit   // non-nil when a structured limit event was seen
	// ContextTokens is the size of the context at the last assistant
	// message (input plus cached tokens), and ContextWindow the model's
	// window, where the CLI reports them; 0 when unknown.
	ContextTokens int64
	ContextWindow int64
	// Denied are the connections the sandbox's allow-list proxy refused
	// (network "proxy"); Run sets them, not the parser.
	Denied []sandbox.Denied
}

// ContextPercent is the share of the context window in use at the end of
// the run, or -1 when the CLI does not report enough to tell.
func (r Result) ContextPercent() int {
	if r.ContextTokens <= 0 || r.ContextWindow <= 0 {
		return -1
	}
	return int(r.ContextTokens * 100 / r.ContextWindow)
}

// Parser consumes an agent's stdout one line at a time.
type Parser interface {
	// Line consumes one line of output without its newline. Lines may be
	// truncated by the caller when huge.
	//
	// It returns the human-readable text to show on the terminal for this
	// line, "" for nothing. The text has no trailing newline but may span
	// several lines. For plain output it is the line itself; for JSON formats
	// it is assistant text, a one-line "→ tool: <name> <short input>" for tool
	// calls, and error and limit messages, never raw JSON. A non-JSON line in
	// a JSON stream (a stray diagnostic) is shown as it is but never changes
	// the Result.
	Line(line []byte) string
	// Result returns what has been parsed so far. It may be called at any
	// time, also mid-stream, and does not change the parser's state.
	Result() Result
}

// Flusher is implemented by parsers that hold back display text until a
// line is complete (Gemini and Cursor stream replies as small deltas). A
// caller may call Flush once the output has ended to show the rest.
type Flusher interface {
	// Flush returns the display text still held back, "" for none.
	Flush() string
}

// NewParser returns a parser for format f. prompt is the exact prompt text
// sent to the agent; the plain parser uses it to discard an echo of it. An
// unknown format gets the plain parser, since treating output as text is the
// only interpretation that cannot misread it.
func NewParser(f Format, prompt string) Parser {
	return NewParserWithClock(f, prompt, time.Now)
}

// NewParserWithClock is NewParser with an injected clock. The clock turns
// relative reset times such as "try again at 11:40 AM" into instants; tests
// pass a fixed one. A nil now means time.Now.
func NewParserWithClock(f Format, prompt string, now func() time.Time) Parser {
	if now == nil {
		now = time.Now
	}
	b := base{now: now, echoed: promptLines(prompt)}
	switch f {
	case FormatClaude:
		return &claudeParser{base: b}
	case FormatCodex:
		return &codexParser{base: b, started: map[string]bool{}}
	case FormatOpencode:
		return &opencodeParser{base: b, calls: map[string]bool{}}
	case FormatGemini:
		return &geminiParser{base: b}
	case FormatDroid:
		return &droidParser{base: b}
	case FormatCursor:
		return &cursorParser{base: b, started: map[string]bool{}}
	default:
		return newPlainParser(prompt)
	}
}

// Bounds that keep a parser's memory independent of how much an agent writes.
const (
	maxErrors       = 10        // Result.Errors keeps the last this many
	maxErrorBytes   = 4 << 10   // one error message is cut to this size
	maxMessageBytes = 256 << 10 // an accumulated assistant message keeps its last this many bytes
	maxOpenCalls    = 4096      // tool call ids remembered to avoid double counting
	maxToolInput    = 80        // runes of tool input shown on a "→ tool:" line
)

// base holds the state that every JSON parser shares.
type base struct {
	now func() time.Time
	res Result // FinalMessage and Signals are filled in by result
	// echoed holds the prompt's lines when it has a signal line: a signal
	// quoted from the prompt is not the agent's (see signalsNotIn).
	echoed map[string]bool
}

// result returns a copy of the accumulated result with final as its final
// message. Slices and the limit are copied so that callers cannot change the
// parser's state through them.
func (b *base) result(final string) Result {
	r := b.res
	r.FinalMessage = final
	r.Signals = signalsNotIn(final, b.echoed)
	r.Errors = slices.Clone(b.res.Errors)
	if b.res.Limit != nil {
		l := *b.res.Limit
		r.Limit = &l
	}
	return r
}

// addError records msg as an error. It reports false when msg repeats the
// last recorded error (Codex sends the same text in "error" and then in
// "turn.failed"), so that callers can avoid showing it twice.
func (b *base) addError(msg string) bool {
	msg = truncateBytes(strings.TrimSpace(msg), maxErrorBytes)
	if msg == "" {
		return false
	}
	if n := len(b.res.Errors); n > 0 && b.res.Errors[n-1] == msg {
		return false
	}
	b.res.Errors = append(b.res.Errors, msg)
	if len(b.res.Errors) > maxErrors {
		b.res.Errors = slices.Delete(b.res.Errors, 0, len(b.res.Errors)-maxErrors)
	}
	return true
}

// errorLine marks the run as an error, records msg and returns the line to
// show for it: "" when it repeats the previous error.
func (b *base) errorLine(msg string) string {
	b.res.IsError = true
	if msg == "" {
		msg = "unknown error"
	}
	if !b.addError(msg) {
		return ""
	}
	return "error: " + oneLine(msg, 0)
}

// setLimit records l, merged with any limit seen before. A CLI often reports
// one limit several times (Claude: rate_limit_event, then a result with
// status 429); the first report usually has the most specific kind and reset
// time, a later one the most readable message.
func (b *base) setLimit(l Limit) (changed bool) {
	l.Message = truncateBytes(strings.TrimSpace(l.Message), maxErrorBytes)
	if b.res.Limit == nil {
		b.res.Limit = &l
		return true
	}
	old := *b.res.Limit
	m := old
	if !l.ResetsAt.IsZero() {
		m.ResetsAt = l.ResetsAt
	}
	if m.Kind == "" {
		m.Kind = l.Kind
	}
	if l.Message != "" {
		m.Message = l.Message
	}
	*b.res.Limit = m
	return m != old
}

func (b *base) setSession(id string) {
	if id != "" && b.res.SessionID == "" {
		b.res.SessionID = id
	}
}

// limitDisplay is the terminal line for a limit.
func limitDisplay(l *Limit) string {
	var sb strings.Builder
	sb.WriteString("limit: ")
	kind := l.Kind
	if kind == "" {
		kind = "rate_limit"
	}
	sb.WriteString(kind)
	if !l.ResetsAt.IsZero() {
		sb.WriteString(", resets ")
		sb.WriteString(l.ResetsAt.Format("2006-01-02 15:04 MST"))
	}
	if l.Message != "" {
		sb.WriteString(": ")
		sb.WriteString(oneLine(l.Message, 0))
	}
	return sb.String()
}

// jsonLine classifies a line of a JSON stream. It returns the decoded object,
// or the text to show for a line that is not JSON at all. A line that looks
// like JSON but does not decode (for example one the caller truncated) is
// dropped silently, because showing it would put raw JSON on the terminal.
func jsonLine(line []byte) (obj jobj, text string) {
	t := bytes.TrimSpace(line)
	t = bytes.TrimPrefix(t, []byte("\ufeff"))
	if len(t) == 0 {
		return nil, ""
	}
	if t[0] != '{' && t[0] != '[' {
		return nil, strings.ToValidUTF8(string(t), "\uFFFD")
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, ""
	}
	return jobj(m), ""
}

// jobj is a decoded JSON object. Its accessors return zero values for
// missing fields and for fields of an unexpected type, so that one odd field
// never costs the rest of an event.
type jobj map[string]any

func (o jobj) str(key string) string {
	s, _ := o[key].(string)
	return s
}

// firstStr returns the first non-empty string among keys; CLIs name the same
// field differently across versions.
func (o jobj) firstStr(keys ...string) string {
	for _, k := range keys {
		if s := o.str(k); s != "" {
			return s
		}
	}
	return ""
}

func (o jobj) obj(key string) jobj {
	m, _ := o[key].(map[string]any)
	return jobj(m)
}

func (o jobj) arr(key string) []any {
	a, _ := o[key].([]any)
	return a
}

func (o jobj) boolean(key string) bool {
	v, _ := o[key].(bool)
	return v
}

// num returns a numeric field. Numbers written as strings are accepted too.
func (o jobj) num(key string) (float64, bool) {
	return toFloat(o[key])
}

// integer returns the first of keys that holds a number, truncated to int64.
func (o jobj) integer(keys ...string) int64 {
	for _, k := range keys {
		if v, ok := o[k]; ok {
			switch n := v.(type) {
			case json.Number:
				if i, err := n.Int64(); err == nil {
					return i
				}
			}
			if f, ok := toFloat(v); ok {
				return int64(f)
			}
		}
	}
	return 0
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil
	}
	return 0, false
}

// toolLine is the terminal line for a tool call.
func toolLine(name string, input any) string {
	name = oneLine(name, 60)
	if name == "" {
		name = "tool"
	}
	if in := shortInput(input); in != "" {
		return "→ tool: " + name + " " + in
	}
	return "→ tool: " + name
}

// inputKeys are the tool arguments that best say what a call does, in order
// of preference.
var inputKeys = []string{
	"command", "cmd", "file_path", "filePath", "path", "paths", "pattern", "query",
	"url", "description", "prompt", "subagent_type", "name",
}

// shortInput renders a tool's input as one short line of text, never as
// JSON: the most telling argument's value, or else the first string argument.
func shortInput(input any) string {
	switch v := input.(type) {
	case string:
		s := strings.TrimSpace(v)
		if strings.HasPrefix(s, "{") {
			// Some CLIs (Codex MCP calls, Cursor functions) pass the
			// arguments as a JSON string.
			var m map[string]any
			if json.Unmarshal([]byte(s), &m) == nil {
				return shortInput(m)
			}
			return ""
		}
		return oneLine(s, maxToolInput)
	case map[string]any:
		for _, k := range inputKeys {
			if s := scalarText(v[k]); s != "" {
				return oneLine(s, maxToolInput)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if s, ok := v[k].(string); ok && strings.TrimSpace(s) != "" {
				return oneLine(s, maxToolInput)
			}
		}
	case jobj:
		return shortInput(map[string]any(v))
	case []any:
		return oneLine(scalarText(v), maxToolInput)
	}
	return ""
}

// scalarText returns a string, or the strings of a list joined by spaces
// (Codex and others may pass argv as a list).
func scalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// oneLine collapses white space runs, including newlines, to single spaces
// and cuts the result to max runes with an ellipsis; max <= 0 means no cut.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// truncateBytes cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncateBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// keepTail returns the last n bytes of s, cut at a line start when one is
// near, so that a bounded message still ends with its complete last lines.
func keepTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < 4096 {
		return s[i+1:]
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// tailBuffer accumulates assistant text and keeps about its last
// maxMessageBytes. It trims only when it has grown to twice that, so that a
// reply streamed as many small deltas costs amortised constant time per
// delta instead of a copy of the whole reply each time.
type tailBuffer struct {
	buf []byte
}

func (t *tailBuffer) reset() {
	t.buf = t.buf[:0]
}

func (t *tailBuffer) set(s string) {
	t.buf = append(t.buf[:0], s...)
	t.trim()
}

// add appends part. A non-empty sep is put between the old text and part
// unless the old text ends with a newline or part starts with one.
func (t *tailBuffer) add(part, sep string) {
	if len(t.buf) > 0 && sep != "" && t.buf[len(t.buf)-1] != '\n' && !strings.HasPrefix(part, "\n") {
		t.buf = append(t.buf, sep...)
	}
	t.buf = append(t.buf, part...)
	t.trim()
}

func (t *tailBuffer) trim() {
	if len(t.buf) > 2*maxMessageBytes {
		t.buf = append(t.buf[:0], keepTail(string(t.buf), maxMessageBytes)...)
	}
}

// equal reports whether the text is exactly s, without copying it.
func (t *tailBuffer) equal(s string) bool {
	return string(t.buf) == s
}

func (t *tailBuffer) empty() bool {
	return len(t.buf) == 0
}

func (t *tailBuffer) String() string {
	return keepTail(string(t.buf), maxMessageBytes)
}

// joinDisplay joins non-empty display fragments with newlines.
func joinDisplay(parts ...string) string {
	out := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n")
}

// textDisplay prepares assistant text for the terminal.
func textDisplay(s string) string {
	return strings.TrimRight(s, " \t\r\n")
}

// lineBuf turns streamed text deltas into whole lines for the terminal, so
// that a delta of one word is not shown as a line of its own.
type lineBuf struct {
	pending []byte
}

// add appends s and returns the complete lines now available.
func (b *lineBuf) add(s string) string {
	old := len(b.pending)
	b.pending = append(b.pending, s...)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		// A line that never ends is shown in pieces rather than held
		// without bound.
		if len(b.pending) > maxMessageBytes {
			return b.flush()
		}
		return ""
	}
	out := textDisplay(string(b.pending[:old+i]))
	b.pending = append(b.pending[:0], b.pending[old+i+1:]...)
	return out
}

// flush returns whatever text is pending.
func (b *lineBuf) flush() string {
	out := textDisplay(string(b.pending))
	b.pending = b.pending[:0]
	return out
}

// Reset times in limit messages.
var (
	resetInRE   = regexp.MustCompile(`(?i)try again in\s+((?:\d+\s*[a-z]+[\s,]*(?:and\s+)?)+)`)
	durationRE  = regexp.MustCompile(`(?i)(\d+)\s*(days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|d|h|m|s)\b`)
	resetAtRE   = regexp.MustCompile(`(?i)try again at\s+(?:([a-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}),?\s+(?:at\s+)?)?(\d{1,2})(?::(\d{2}))?\s*([ap])?\.?(m\.?)?`)
	statusRE429 = regexp.MustCompile(`\b429\b`)
)

// ParseResetTime finds a reset time in a limit message and returns it as an
// instant. It understands the forms Codex uses: "try again at 11:40 AM"
// (today, or tomorrow when that time has passed, in now's location), "try
// again at Sep 1st, 2026 3:14 PM" and "try again in 2 days 17 hours 14
// minutes". It is exported so that pattern-based limit detection over plain
// text can reuse it.
func ParseResetTime(msg string, now time.Time) (time.Time, bool) {
	if m := resetInRE.FindStringSubmatch(msg); m != nil {
		var d time.Duration
		for _, p := range durationRE.FindAllStringSubmatch(m[1], -1) {
			n, err := strconv.Atoi(p[1])
			if err != nil {
				continue
			}
			switch u := strings.ToLower(p[2]); {
			case strings.HasPrefix(u, "d"):
				d += time.Duration(n) * 24 * time.Hour
			case strings.HasPrefix(u, "h"):
				d += time.Duration(n) * time.Hour
			case strings.HasPrefix(u, "m"):
				d += time.Duration(n) * time.Minute
			case strings.HasPrefix(u, "s"):
				d += time.Duration(n) * time.Second
			}
		}
		if d > 0 {
			return now.Add(d), true
		}
	}
	m := resetAtRE.FindStringSubmatch(msg)
	if m == nil {
		return time.Time{}, false
	}
	hour, _ := strconv.Atoi(m[4])
	minute := 0
	if m[5] != "" {
		minute, _ = strconv.Atoi(m[5])
	}
	switch {
	case m[6] != "" && m[7] != "": // 12-hour clock
		if hour < 1 || hour > 12 {
			return time.Time{}, false
		}
		hour %= 12
		if strings.EqualFold(m[6], "p") {
			hour += 12
		}
	case m[5] == "": // a bare number is not a time
		return time.Time{}, false
	}
	if hour > 23 || minute > 59 {
		return time.Time{}, false
	}
	loc := now.Location()
	if m[1] != "" {
		month, ok := parseMonth(m[1])
		day, _ := strconv.Atoi(m[2])
		year, _ := strconv.Atoi(m[3])
		if !ok || day < 1 || day > 31 {
			return time.Time{}, false
		}
		return time.Date(year, month, day, hour, minute, 0, 0, loc), true
	}
	t := time.Date(now.Year(), now.Month(), now.Day(), hour, minute, 0, 0, loc)
	// The message names a minute, not a second: a reset a few seconds in
	// the past is today's, not tomorrow's.
	if t.Before(now.Add(-time.Minute)) {
		t = time.Date(now.Year(), now.Month(), now.Day()+1, hour, minute, 0, 0, loc)
	}
	return t, true
}

func parseMonth(s string) (time.Month, bool) {
	s = strings.ToLower(s)
	if len(s) < 3 {
		return 0, false
	}
	for m := time.January; m <= time.December; m++ {
		name := strings.ToLower(m.String())
		if strings.HasPrefix(name, s) {
			return m, true
		}
	}
	return 0, false
}

// retryAfter reads a reset time from HTTP response headers that a CLI passes
// through (opencode does): retry-after in seconds or as an HTTP date,
// retry-after-ms, or Anthropic's unified reset epoch.
func retryAfter(headers jobj, now time.Time) time.Time {
	h := make(map[string]any, len(headers))
	for k, v := range headers {
		h[strings.ToLower(k)] = v
	}
	hdr := jobj(h)
	if v, ok := hdr.num("retry-after-ms"); ok && v > 0 {
		return now.Add(time.Duration(v * float64(time.Millisecond)))
	}
	if v, ok := hdr.num("retry-after"); ok && v > 0 {
		return now.Add(time.Duration(v * float64(time.Second)))
	}
	if s := hdr.str("retry-after"); s != "" {
		if t, err := time.Parse(time.RFC1123, s); err == nil {
			return t.In(now.Location())
		}
	}
	if v, ok := hdr.num("anthropic-ratelimit-unified-reset"); ok && v > 0 {
		return time.Unix(int64(v), 0).In(now.Location())
	}
	return time.Time{}
}
