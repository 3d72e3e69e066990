package agent

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// testNow is the fixed clock of the parser tests, so that relative reset
// times ("try again at 11:40 AM") have one right answer.
var testNow = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// sig is the completion tag the fixtures use.
const sig = "<promise>COMPLETE</promise>"

// fixtureCase is one fixture file under testdata/output/<format>/ and the
// Result expected after feeding all of it.
type fixtureCase struct {
	file string    // name without .jsonl
	now  time.Time // zero means testNow
	want Result
}

// readFixture returns the lines of a fixture file without their newlines.
func readFixture(t *testing.T, f Format, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "output", string(f), file+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	return lines
}

// feed runs lines through a new parser and returns the parser and every
// non-empty display string.
func feed(f Format, prompt string, now time.Time, lines [][]byte) (Parser, []string) {
	p := NewParserWithClock(f, prompt, func() time.Time { return now })
	var shown []string
	for _, l := range lines {
		if s := p.Line(l); s != "" {
			shown = append(shown, s)
		}
	}
	return p, shown
}

// runFixtures checks each case of one format's table.
func runFixtures(t *testing.T, f Format, cases []fixtureCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = testNow
			}
			p, _ := feed(f, "", now, readFixture(t, f, tc.file))
			checkResult(t, p.Result(), tc.want)
		})
	}
}

// checkResult compares results field by field so that a failure names the
// field. Costs are compared with a tolerance because they are sums of
// floats.
func checkResult(t *testing.T, got, want Result) {
	t.Helper()
	if got.FinalMessage != want.FinalMessage {
		t.Errorf("FinalMessage = %q, want %q", got.FinalMessage, want.FinalMessage)
	}
	if !reflect.DeepEqual(got.Signals, want.Signals) {
		t.Errorf("Signals = %q, want %q", got.Signals, want.Signals)
	}
	if got.SessionID != want.SessionID {
		t.Errorf("SessionID = %q, want %q", got.SessionID, want.SessionID)
	}
	if got.Usage != want.Usage {
		t.Errorf("Usage = %+v, want %+v", got.Usage, want.Usage)
	}
	if math.Abs(got.CostUSD-want.CostUSD) > 1e-9 || got.CostKnown != want.CostKnown {
		t.Errorf("cost = %v (known %v), want %v (known %v)", got.CostUSD, got.CostKnown, want.CostUSD, want.CostKnown)
	}
	if got.ToolCalls != want.ToolCalls {
		t.Errorf("ToolCalls = %d, want %d", got.ToolCalls, want.ToolCalls)
	}
	if got.PermissionDenials != want.PermissionDenials {
		t.Errorf("PermissionDenials = %d, want %d", got.PermissionDenials, want.PermissionDenials)
	}
	if got.IsError != want.IsError {
		t.Errorf("IsError = %v, want %v", got.IsError, want.IsError)
	}
	if !reflect.DeepEqual(got.Errors, want.Errors) {
		t.Errorf("Errors = %q, want %q", got.Errors, want.Errors)
	}
	switch {
	case got.Limit == nil && want.Limit == nil:
	case got.Limit == nil || want.Limit == nil:
		t.Errorf("Limit = %+v, want %+v", got.Limit, want.Limit)
	default:
		if !got.Limit.ResetsAt.Equal(want.Limit.ResetsAt) || got.Limit.Kind != want.Limit.Kind || got.Limit.Message != want.Limit.Message {
			t.Errorf("Limit = %+v, want %+v", *got.Limit, *want.Limit)
		}
	}
}

// TestFixturesNeverShowRawJSON feeds every fixture of every JSON format and
// checks that no display text is raw JSON, which would flood the terminal
// with events instead of the agent's words.
func TestFixturesNeverShowRawJSON(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join("testdata", "output"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, d := range dirs {
		f, err := ParseFormat(d.Name())
		if err != nil || f == FormatPlain {
			continue
		}
		files, _ := filepath.Glob(filepath.Join("testdata", "output", d.Name(), "*.jsonl"))
		for _, path := range files {
			name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
			_, shown := feed(f, "", testNow, readFixture(t, f, name))
			for _, s := range shown {
				seen++
				for _, line := range strings.Split(s, "\n") {
					l := strings.TrimSpace(line)
					if strings.HasPrefix(l, "{") || strings.HasPrefix(l, "[") || strings.Contains(l, `"type":`) {
						t.Errorf("%s/%s: display shows raw JSON: %q", f, name, line)
					}
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no fixture produced display text; the fixtures are missing")
	}
}

// TestDisplay checks the terminal text for single events of each format.
func TestDisplay(t *testing.T) {
	long := strings.Repeat("x", 200)
	tests := []struct {
		name string
		f    Format
		line string
		want string
	}{
		{"claude tool call", FormatClaude, `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"go test ./...","description":"Run the tests"}}]}}`, "→ tool: Bash go test ./..."},
		{"claude read", FormatClaude, `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/work/repo/main.go"}}]}}`, "→ tool: Read /work/repo/main.go"},
		{"claude text", FormatClaude, `{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Hello.\n"}]}}`, "Hello."},
		{"claude tool result hidden", FormatClaude, `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"secret output"}]}}`, ""},
		{"claude init hidden", FormatClaude, `{"type":"system","subtype":"init","session_id":"s"}`, ""},
		{"claude retry", FormatClaude, `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":1000,"error_status":429,"error":"rate_limit"}`, "retrying API request (attempt 1 of 1, status 429, rate_limit)"},
		{"claude limit", FormatClaude, `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795344045,"rateLimitType":"five_hour"}}`, "limit: five_hour, resets 2026-11-22 10:40 UTC: five_hour limit reached"},
		{"claude limit with overage", FormatClaude, `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795344045,"rateLimitType":"five_hour","overageStatus":"allowed","isUsingOverage":true}}`, "warning: the five_hour limit is reached; using extra usage"},
		{"claude limit allowed", FormatClaude, `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1795344045}}`, ""},
		{"claude json mode result", FormatClaude, `{"type":"result","subtype":"success","is_error":false,"result":"All done."}`, "All done."},
		{"claude error result", FormatClaude, `{"type":"result","subtype":"error_during_execution","is_error":true}`, "error: error_during_execution"},
		{"codex command", FormatCodex, `{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'touch marker'","aggregated_output":"","status":"in_progress"}}`, "→ tool: shell /bin/bash -lc 'touch marker'"},
		{"codex command argv", FormatCodex, `{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":["bash","-lc","ls"]}}`, "→ tool: shell bash -lc ls"},
		{"codex mcp", FormatCodex, `{"type":"item.started","item":{"id":"i","type":"mcp_tool_call","server":"beads","tool":"ready","arguments":"{\"query\":\"next\"}"}}`, "→ tool: beads.ready next"},
		{"codex output hidden", FormatCodex, `{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"x","aggregated_output":"<promise>COMPLETE</promise>","status":"completed"}}`, "→ tool: shell x"},
		{"codex message", FormatCodex, `{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Done."}}`, "Done."},
		{"codex warning", FormatCodex, `{"type":"item.completed","item":{"id":"item_3","type":"error","message":"Model metadata not found"}}`, "warning: Model metadata not found"},
		{"codex error", FormatCodex, `{"type":"error","message":"stream disconnected"}`, "error: stream disconnected"},
		{"codex usage limit", FormatCodex, `{"type":"error","message":"You’ve hit your usage limit. Try again at 11:40 AM."}`, "limit: usage_limit, resets 2026-11-22 11:40 UTC: You’ve hit your usage limit. Try again at 11:40 AM."},
		{"opencode tool", FormatOpencode, `{"type":"tool_use","part":{"type":"tool","tool":"bash","callID":"c1","state":{"status":"completed","input":{"command":"touch marker"},"output":"done\n"}}}`, "→ tool: bash touch marker"},
		{"opencode text", FormatOpencode, `{"type":"text","part":{"type":"text","text":"Working."}}`, "Working."},
		{"opencode step hidden", FormatOpencode, `{"type":"step_finish","part":{"tokens":{"input":1,"output":2}}}`, ""},
		{"gemini tool", FormatGemini, `{"type":"tool_use","tool_name":"run_shell_command","tool_id":"x","parameters":{"command":"touch marker","description":"marker"}}`, "→ tool: run_shell_command touch marker"},
		{"gemini partial delta held", FormatGemini, `{"type":"message","role":"assistant","content":"half a sent","delta":true}`, ""},
		{"gemini whole line delta", FormatGemini, `{"type":"message","role":"assistant","content":"a line\n","delta":true}`, "a line"},
		{"gemini user hidden", FormatGemini, `{"type":"message","role":"user","content":"the prompt"}`, ""},
		{"droid tool", FormatDroid, `{"type":"tool_call","id":"c","toolName":"Execute","parameters":{"command":"go test ./..."}}`, "→ tool: Execute go test ./..."},
		{"droid result hidden", FormatDroid, `{"type":"tool_result","id":"c","isError":false,"value":"ok"}`, ""},
		{"cursor shell", FormatCursor, `{"type":"tool_call","subtype":"started","call_id":"c1","tool_call":{"shellToolCall":{"args":{"command":"go test ./..."}}}}`, "→ tool: shell go test ./..."},
		{"cursor function", FormatCursor, `{"type":"tool_call","subtype":"started","call_id":"c1","tool_call":{"function":{"name":"web_fetch","arguments":"{\"url\":\"https://example.com\"}"}}}`, "→ tool: web_fetch https://example.com"},
		{"cursor thinking hidden", FormatCursor, `{"type":"thinking","subtype":"delta","text":"hmm"}`, ""},
		{"long input cut", FormatClaude, `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash","input":{"command":"echo ` + long + `"}}]}}`, "→ tool: Bash echo " + strings.Repeat("x", 74) + "…"},
		{"multi-line input on one line", FormatClaude, `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash","input":{"command":"cd /x &&\n  make\ttest"}}]}}`, "→ tool: Bash cd /x && make test"},
		{"input without known keys", FormatClaude, `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Custom","input":{"zeta":"z","alpha":"a","n":3}}]}}`, "→ tool: Custom a"},
		{"input that is not text", FormatClaude, `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Custom","input":{"n":3,"list":[1,2]}}]}}`, "→ tool: Custom"},
		{"non-JSON line shown", FormatCodex, `Reading additional input from stdin...`, "Reading additional input from stdin..."},
		{"truncated JSON hidden", FormatCodex, `{"type":"item.completed","item":{"id":"item_2","type":"agent_mess`, ""},
		{"JSON array hidden", FormatGemini, `[{"type":"message"}]`, ""},
		{"unknown event hidden", FormatOpencode, `{"type":"future_event","text":"x"}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParserWithClock(tc.f, "", func() time.Time { return testNow })
			if got := p.Line([]byte(tc.line)); got != tc.want {
				t.Errorf("Line() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats() {
		got, err := ParseFormat(string(f))
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if got, err := ParseFormat(" Claude "); err != nil || got != FormatClaude {
		t.Errorf("ParseFormat(\" Claude \") = %q, %v; want claude", got, err)
	}
	_, err := ParseFormat("stream-json")
	if err == nil {
		t.Fatal("ParseFormat(\"stream-json\") succeeded, want an error")
	}
	for _, f := range Formats() {
		if !strings.Contains(err.Error(), string(f)) {
			t.Errorf("error %q does not list %q", err, f)
		}
	}
}

// TestUnknownFormatIsPlain checks that an unknown format still yields a
// working parser, the safe plain one.
func TestUnknownFormatIsPlain(t *testing.T) {
	p := NewParser(Format("bogus"), "")
	if got := p.Line([]byte(sig)); got != sig {
		t.Errorf("Line() = %q, want the line itself", got)
	}
	if got := p.Result().Signals; !reflect.DeepEqual(got, []string{"COMPLETE"}) {
		t.Errorf("Signals = %q", got)
	}
}

// TestResultIsACopy checks that a caller changing a Result cannot change
// the parser's state.
func TestResultIsACopy(t *testing.T) {
	p, _ := feed(FormatCodex, "", testNow, readFixture(t, FormatCodex, "usage_limit_at"))
	r := p.Result()
	r.Errors[0] = "changed"
	r.Limit.Kind = "changed"
	again := p.Result()
	if again.Errors[0] == "changed" || again.Limit.Kind == "changed" {
		t.Errorf("Result shares state with the parser: %+v", again)
	}
}

// TestErrorsBounded checks that only the last maxErrors messages are kept.
func TestErrorsBounded(t *testing.T) {
	p := NewParser(FormatCodex, "")
	for i := range 15 {
		p.Line(fmt.Appendf(nil, `{"type":"error","message":"failure %d"}`, i))
	}
	got := p.Result().Errors
	if len(got) != maxErrors || got[0] != "failure 5" || got[maxErrors-1] != "failure 14" {
		t.Errorf("Errors = %q, want failures 5..14", got)
	}
}

// TestStreamedReplyBounded floods each delta-streaming format with 10 MB of
// reply text and checks that the final message stays bounded and still
// ends with the signal.
func TestStreamedReplyBounded(t *testing.T) {
	chunk := strings.Repeat("lorem ipsum dolor sit amet ", 40) + "\n" // about 1 KiB
	tests := []struct {
		f     Format
		delta func(s string) string
	}{
		{FormatGemini, func(s string) string {
			return fmt.Sprintf(`{"type":"message","role":"assistant","content":%q,"delta":true}`, s)
		}},
		{FormatCursor, func(s string) string {
			return fmt.Sprintf(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":%q}]}}`, s)
		}},
		{FormatOpencode, func(s string) string {
			return fmt.Sprintf(`{"type":"text","part":{"type":"text","text":%q}}`, s)
		}},
		{FormatClaude, func(s string) string {
			return fmt.Sprintf(`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":%q}]}}`, s)
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.f), func(t *testing.T) {
			p := NewParser(tc.f, "")
			for range 10 << 10 {
				p.Line([]byte(tc.delta(chunk)))
			}
			p.Line([]byte(tc.delta(sig)))
			r := p.Result()
			if len(r.FinalMessage) > maxMessageBytes {
				t.Errorf("FinalMessage is %d bytes, want at most %d", len(r.FinalMessage), maxMessageBytes)
			}
			if !reflect.DeepEqual(r.Signals, []string{"COMPLETE"}) {
				t.Errorf("Signals = %q, want COMPLETE", r.Signals)
			}
		})
	}
}

func TestParseResetTime(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 11, 22, h, m, 0, 0, time.UTC) }
	tests := []struct {
		msg  string
		now  time.Time
		want time.Time // zero: no time found
	}{
		{"or try again at 11:40 AM.", testNow, at(11, 40)},
		{"or try again at 11:40 AM.", at(12, 0), at(11, 40).AddDate(0, 0, 1)},
		{"or try again at 11:40 AM.", at(11, 40).Add(30 * time.Second), at(11, 40)},
		{"try again at 12:05 AM", testNow, at(0, 5).AddDate(0, 0, 1)},
		{"try again at 12:30 PM", testNow, at(12, 30)},
		{"try again at 3pm", testNow, at(15, 0)},
		{"try again at 14:05", testNow, at(14, 5)},
		{"try again at Sep 1st, 2026 3:14 PM.", testNow, time.Date(2026, 9, 1, 15, 14, 0, 0, time.UTC)},
		{"try again at Jul 9th, 2026 1:47 AM.", testNow, time.Date(2026, 7, 9, 1, 47, 0, 0, time.UTC)},
		{"try again at Aug 10, 2026, 11:12 AM.", testNow, time.Date(2026, 8, 10, 11, 12, 0, 0, time.UTC)},
		{"try again at December 3rd, 2026 9:00 AM", testNow, time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)},
		{"or try again in 2 days 17 hours 14 minutes.", testNow, testNow.Add(65*time.Hour + 14*time.Minute)},
		{"try again in 45 seconds", testNow, testNow.Add(45 * time.Second)},
		{"try again in 1 day, 2 hours and 3 minutes", testNow, testNow.Add(26*time.Hour + 3*time.Minute)},
		{"try again at 13:00 PM", testNow, time.Time{}},
		{"try again at 11 and then", testNow, time.Time{}},
		{"try again later", testNow, time.Time{}},
		{"no time here", testNow, time.Time{}},
	}
	for _, tc := range tests {
		got, ok := ParseResetTime(tc.msg, tc.now)
		if ok != !tc.want.IsZero() || !got.Equal(tc.want) {
			t.Errorf("ParseResetTime(%q, %s) = %s, %v; want %s", tc.msg, tc.now.Format(time.TimeOnly), got, ok, tc.want)
		}
	}
}

// TestRetryAfter checks reset times read from passed-through HTTP headers.
func TestRetryAfter(t *testing.T) {
	tests := []struct {
		headers jobj
		want    time.Time
	}{
		{jobj{"Retry-After": "30"}, testNow.Add(30 * time.Second)},
		{jobj{"retry-after-ms": "1500"}, testNow.Add(1500 * time.Millisecond)},
		{jobj{"retry-after": "Sun, 22 Nov 2026 10:00:00 GMT"}, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)},
		{jobj{"anthropic-ratelimit-unified-reset": "1795344045"}, time.Unix(1795344045, 0)},
		{jobj{"content-type": "application/json"}, time.Time{}},
		{nil, time.Time{}},
	}
	for _, tc := range tests {
		if got := retryAfter(tc.headers, testNow); !got.Equal(tc.want) {
			t.Errorf("retryAfter(%v) = %s, want %s", tc.headers, got, tc.want)
		}
	}
}

// FuzzParsers feeds arbitrary lines to every parser: none may panic, and
// JSON formats must never show a line that starts like JSON.
func FuzzParsers(f *testing.F) {
	seeds := []string{
		`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}}]}}`,
		`{"type":"result","is_error":true,"api_error_status":429,"result":"x"}`,
		`{"type":"item.completed","item":{"type":"agent_message","text":"<promise>COMPLETE</promise>"}}`,
		`{"type":"error","error":{"name":"APIError","data":{"statusCode":429,"responseHeaders":{"retry-after":"x"}}}}`,
		`{"type":"message","role":"assistant","content":"a\nb","delta":true}`,
		`{"type":"tool_call","subtype":"completed","tool_call":{"xToolCall":7}}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1e300}}`,
		"\x1b[31m<promise>COMPLETE</promise>\x1b[0m",
		`{"type":"error","message":"usage limit, try again at 99:99 PM"}`,
		`{`,
		"",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, fm := range Formats() {
			p := NewParserWithClock(fm, "prompt line\n"+sig, func() time.Time { return testNow })
			for _, l := range strings.Split(line, "\n") {
				out := p.Line([]byte(l))
				if fm != FormatPlain && strings.HasPrefix(strings.TrimSpace(out), "{") && strings.HasPrefix(strings.TrimSpace(l), "{") && strings.TrimSpace(out) == strings.TrimSpace(l) {
					t.Errorf("%s showed a raw JSON line: %q", fm, out)
				}
			}
			r := p.Result()
			if len(r.Errors) > maxErrors {
				t.Errorf("%s kept %d errors", fm, len(r.Errors))
			}
		}
	})
}

// TestFlush checks that a reply cut off without a closing event can still
// be shown in full.
func TestFlush(t *testing.T) {
	for _, f := range []Format{FormatGemini, FormatCursor} {
		p := NewParser(f, "")
		var line string
		if f == FormatGemini {
			line = `{"type":"message","role":"assistant","content":"cut off","delta":true}`
		} else {
			line = `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"cut off"}]}}`
		}
		if got := p.Line([]byte(line)); got != "" {
			t.Errorf("%s: Line() = %q, want the partial line held back", f, got)
		}
		fl, ok := p.(Flusher)
		if !ok {
			t.Fatalf("%s parser is not a Flusher", f)
		}
		if got := fl.Flush(); got != "cut off" {
			t.Errorf("%s: Flush() = %q, want %q", f, got, "cut off")
		}
		if got := fl.Flush(); got != "" {
			t.Errorf("%s: second Flush() = %q, want nothing", f, got)
		}
	}
}

// TestJSONModeResults checks the single result object that "-o json"
// style output prints (droid, cursor): it is shown and is the final
// message; an error result is neither.
func TestJSONModeResults(t *testing.T) {
	tests := []struct {
		f         Format
		line      string
		wantShow  string
		wantFinal string
		wantErr   bool
	}{
		{FormatDroid, `{"type":"result","subtype":"success","is_error":false,"result":"<promise>COMPLETE</promise>","session_id":"s2","usage":{"input_tokens":5}}`, sig, sig, false},
		{FormatDroid, `{"type":"result","subtype":"error","is_error":true,"result":"Exec failed"}`, "error: Exec failed", "", true},
		{FormatCursor, `{"type":"result","subtype":"success","is_error":false,"result":"<promise>COMPLETE</promise>","session_id":"c"}`, sig, sig, false},
		{FormatClaude, `{"type":"result","subtype":"success","is_error":false,"result":"<promise>COMPLETE</promise>","session_id":"c"}`, sig, sig, false},
		{FormatGemini, `{"type":"result","status":"error","stats":{"input_tokens":1}}`, "error: run ended with status error", "", true},
	}
	for _, tc := range tests {
		p := NewParser(tc.f, "")
		if got := p.Line([]byte(tc.line)); got != tc.wantShow {
			t.Errorf("%s: Line() = %q, want %q", tc.f, got, tc.wantShow)
		}
		r := p.Result()
		if r.FinalMessage != tc.wantFinal || r.IsError != tc.wantErr {
			t.Errorf("%s: FinalMessage %q IsError %v, want %q %v", tc.f, r.FinalMessage, r.IsError, tc.wantFinal, tc.wantErr)
		}
	}
}

// TestClaudeLimitWarning checks that a limit that is only near shows a
// warning and sets no Limit.
func TestClaudeLimitWarning(t *testing.T) {
	p := NewParser(FormatClaude, "")
	got := p.Line([]byte(`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","rateLimitType":"seven_day"}}`))
	if got != "warning: approaching the seven_day usage limit" {
		t.Errorf("Line() = %q", got)
	}
	if r := p.Result(); r.Limit != nil {
		t.Errorf("Limit = %+v, want nil", r.Limit)
	}
}

// TestLongErrorCut checks that an error message is bounded without
// splitting a UTF-8 sequence.
func TestLongErrorCut(t *testing.T) {
	p := NewParser(FormatDroid, "")
	p.Line(fmt.Appendf(nil, `{"type":"error","message":%q}`, strings.Repeat("é", 5000)))
	errs := p.Result().Errors
	if len(errs) != 1 || len(errs[0]) > maxErrorBytes || !utf8.ValidString(errs[0]) {
		t.Errorf("error of %d bytes, valid UTF-8 %v", len(errs[0]), utf8.ValidString(errs[0]))
	}
}
