package fakeagent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func jsonString(v any) (string, error) {
	data, err := json.Marshal(v)
	return string(data), err
}

func TestPlainOutput(t *testing.T) {
	setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{
		say("Looking at the code."),
		{Tool: "Bash", Input: "ls", Output: "a.go\nb.go"},
		{Tool: "Bash", Input: "true"},
		final("<promise>COMPLETE</promise>"),
	}}}})
	r := mustCall(t, 0, "prompt")
	want := "Looking at the code.\n$ ls\na.go\nb.go\n$ true\n<promise>COMPLETE</promise>\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%q\nwant:\n%q", r.stdout, want)
	}
	if r.stderr != "" {
		t.Fatalf("stderr = %q", r.stderr)
	}
}

func TestEchoPrompt(t *testing.T) {
	prompt := "You are working on US-001.\nPRD: prd.md\n"
	t.Run("plain", func(t *testing.T) {
		setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{{EchoPrompt: true}, say("ok")}}}})
		r := mustCall(t, 0, prompt)
		if r.stdout != prompt+"ok\n" {
			t.Fatalf("stdout = %q", r.stdout)
		}
	})
	t.Run("claude", func(t *testing.T) {
		setup(t, Scenario{Format: FormatClaude, Invocations: []Invocation{{Steps: []Step{{EchoPrompt: true}}}}})
		evs := events(t, mustCall(t, 0, prompt).stdout)
		if got := strings.Join(types(evs), ","); got != "system,user,result" {
			t.Fatalf("types = %s", got)
		}
		if got := get(t, evs[1], "message", "role"); got != "user" {
			t.Fatalf("role = %v", got)
		}
		if got := get(t, evs[1], "message", "content", 0, "type"); got != "text" {
			t.Fatalf("content type = %v", got)
		}
		if got := get(t, evs[1], "message", "content", 0, "text"); got != prompt {
			t.Fatalf("text = %q", got)
		}
	})
}

func TestClaudeStream(t *testing.T) {
	setup(t, Scenario{Format: FormatClaude, Invocations: []Invocation{{Steps: []Step{
		say("I will run the tests."),
		{Tool: "Bash", Input: "go test ./...", Output: "ok\n<promise>COMPLETE</promise>"},
		final("All done. <promise>COMPLETE</promise>"),
	}}}})
	r := mustCall(t, 0, "the prompt")
	// One flushable line per event; "<" is not HTML-escaped, as in Claude Code.
	if !strings.Contains(r.stdout, `"result":"All done. <promise>COMPLETE</promise>"`) {
		t.Fatalf("result text is escaped or missing:\n%s", r.stdout)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasPrefix(line, `{"type":"`) {
			t.Fatalf("line does not start with its type: %s", line)
		}
	}
	evs := events(t, r.stdout)
	if got, want := strings.Join(types(evs), ","), "system,assistant,assistant,user,assistant,result"; got != want {
		t.Fatalf("types = %s, want %s", got, want)
	}

	ini := evs[0]
	if get(t, ini, "subtype") != "init" || get(t, ini, "session_id") != "fake-1" || get(t, ini, "model") != "fake-model" {
		t.Fatalf("init = %v", ini)
	}
	if _, ok := get(t, ini, "tools").([]any); !ok {
		t.Fatalf("init tools = %v", get(t, ini, "tools"))
	}

	say := evs[1]
	if get(t, say, "message", "role") != "assistant" || get(t, say, "message", "type") != "message" {
		t.Fatalf("assistant = %v", say)
	}
	if get(t, say, "message", "content", 0, "type") != "text" || get(t, say, "message", "content", 0, "text") != "I will run the tests." {
		t.Fatalf("assistant content = %v", get(t, say, "message", "content"))
	}
	if get(t, say, "session_id") != "fake-1" || get(t, say, "parent_tool_use_id") != nil {
		t.Fatalf("assistant envelope = %v", say)
	}
	if _, ok := get(t, say, "message", "usage", "input_tokens").(float64); !ok {
		t.Fatalf("assistant usage = %v", get(t, say, "message", "usage"))
	}

	use := get(t, evs[2], "message", "content", 0).(map[string]any)
	if use["type"] != "tool_use" || use["name"] != "Bash" || get(t, use, "input", "command") != "go test ./..." {
		t.Fatalf("tool_use = %v", use)
	}
	id, _ := use["id"].(string)
	if id == "" {
		t.Fatalf("tool_use has no id: %v", use)
	}
	res := get(t, evs[3], "message", "content", 0).(map[string]any)
	if get(t, evs[3], "message", "role") != "user" || res["type"] != "tool_result" || res["tool_use_id"] != id ||
		res["content"] != "ok\n<promise>COMPLETE</promise>" || res["is_error"] != false {
		t.Fatalf("tool_result = %v", evs[3])
	}
	if get(t, evs[3], "tool_use_result", "stdout") != "ok\n<promise>COMPLETE</promise>" {
		t.Fatalf("tool_use_result = %v", evs[3])
	}

	if get(t, evs[4], "message", "content", 0, "text") != "All done. <promise>COMPLETE</promise>" {
		t.Fatalf("final assistant = %v", evs[4])
	}

	result := evs[5]
	checks := map[string]any{
		"subtype":          "success",
		"is_error":         false,
		"result":           "All done. <promise>COMPLETE</promise>",
		"session_id":       "fake-1",
		"total_cost_usd":   0.0012,
		"num_turns":        3.0,
		"api_error_status": nil,
	}
	for k, want := range checks {
		if got := get(t, result, k); got != want {
			t.Errorf("result.%s = %#v, want %#v", k, got, want)
		}
	}
	if d, ok := get(t, result, "permission_denials").([]any); !ok || len(d) != 0 {
		t.Errorf("permission_denials = %#v", get(t, result, "permission_denials"))
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} {
		if _, ok := get(t, result, "usage", k).(float64); !ok {
			t.Errorf("result.usage.%s missing", k)
		}
	}
	if get(t, result, "modelUsage", "fake-model", "costUSD") != 0.0012 {
		t.Errorf("modelUsage = %v", get(t, result, "modelUsage"))
	}

	// The session id counts invocations of the scenario.
	evs = events(t, mustCall(t, 0, "again").stdout)
	if get(t, evs[0], "session_id") != "fake-2" || get(t, evs[len(evs)-1], "session_id") != "fake-2" {
		t.Fatalf("second session = %v", evs[0])
	}
}

func TestClaudeResultWithoutFinal(t *testing.T) {
	setup(t, Scenario{Format: FormatClaude, Invocations: []Invocation{
		{Match: "talk", Steps: []Step{say("first"), say("last words"), {Stderr: "noise"}}, Exit: 1},
		{Match: "quiet"},
		{Match: "die", Steps: []Step{say("x"), ExitStep(3)}},
	}})
	r := mustCall(t, 1, "talk")
	evs := events(t, r.stdout)
	if got := strings.Join(types(evs), ","); got != "system,assistant,assistant,result" {
		t.Fatalf("types = %s", got)
	}
	if get(t, evs[3], "result") != "last words" || get(t, evs[3], "is_error") != false {
		t.Fatalf("result = %v", evs[3])
	}
	if r.stderr != "noise\n" {
		t.Fatalf("stderr = %q", r.stderr)
	}

	evs = events(t, mustCall(t, 0, "quiet").stdout)
	if got := strings.Join(types(evs), ","); got != "system,result" {
		t.Fatalf("types = %s", got)
	}
	if get(t, evs[1], "result") != "" {
		t.Fatalf("result = %v", evs[1])
	}

	// An exit step ends the stream at once, with no result, like a crash.
	evs = events(t, mustCall(t, 3, "die").stdout)
	if got := strings.Join(types(evs), ","); got != "system,assistant" {
		t.Fatalf("types = %s", got)
	}
}

func TestLimit(t *testing.T) {
	const reset = "2026-11-22T10:40:00Z"
	resetAt, _ := time.Parse(time.RFC3339, reset)
	t.Run("claude", func(t *testing.T) {
		setup(t, Scenario{Format: FormatClaude, Invocations: []Invocation{{Steps: []Step{say("working"), {Limit: reset}}, Exit: 1}}})
		evs := events(t, mustCall(t, 1, "prompt").stdout)
		if got := strings.Join(types(evs), ","); got != "system,assistant,rate_limit_event,assistant,result" {
			t.Fatalf("types = %s (no second result may follow the limit)", got)
		}
		rl := evs[2]
		if get(t, rl, "rate_limit_info", "status") != "rejected" {
			t.Fatalf("rate_limit_info = %v", rl)
		}
		if got := get(t, rl, "rate_limit_info", "resetsAt"); got != float64(resetAt.Unix()) {
			t.Fatalf("resetsAt = %v, want %d", got, resetAt.Unix())
		}
		msg := "You've hit your session limit · resets 10:40am (UTC)"
		if get(t, evs[3], "message", "content", 0, "text") != msg || get(t, evs[3], "error") != "rate_limit" {
			t.Fatalf("limit message = %v", evs[3])
		}
		res := evs[4]
		if get(t, res, "is_error") != true || get(t, res, "api_error_status") != 429.0 || get(t, res, "result") != msg {
			t.Fatalf("result = %v", res)
		}
	})
	t.Run("plain", func(t *testing.T) {
		setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{{Limit: reset}}, Exit: 1}}})
		r := mustCall(t, 1, "prompt")
		if want := "You've hit your usage limit. Try again at 2026-11-22T10:40:00Z.\n"; r.stdout != want {
			t.Fatalf("stdout = %q, want %q", r.stdout, want)
		}
	})
}

func TestToolInputShapes(t *testing.T) {
	cases := []struct{ tool, input, want string }{
		{"Bash", "ls -la", `{"command":"ls -la"}`},
		{"Edit", `{"file_path":"a.go","old_string":"x","new_string":"y"}`, `{"file_path":"a.go","old_string":"x","new_string":"y"}`},
		{"Read", "a.go", `{"input":"a.go"}`},
	}
	for _, c := range cases {
		if got := string(toolInput(c.tool, c.input)); got != c.want {
			t.Errorf("toolInput(%q, %q) = %s, want %s", c.tool, c.input, got, c.want)
		}
	}
}

// ExitStep returns a step that exits at once with code.
func ExitStep(code int) Step { return Step{Exit: &code} }

// A step built in Go is checked as one read from JSON: exactly one
// action, only that action's options, and a value the action can use.
func TestStepActionRefusesWhatItCannotDo(t *testing.T) {
	for _, c := range []struct {
		step Step
		want string
	}{
		{Step{}, "step has no action"},
		{Step{Write: "a", Say: "b", Final: "c"}, "step has several actions (write, say, final)"},
		{Step{Say: "x", Content: "c", Old: "o"}, `say step does not take option "content"`},
		{Step{Tool: "Bash", Newlines: true}, `tool step does not take option "newlines"`},
		{Step{Replace: "f"}, `replace step needs a non-empty "old"`},
		{Step{Sleep: "soon"}, "sleep step: "},
		{Step{Limit: "tomorrow"}, "limit step: want an RFC 3339 time"},
		{Step{Flood: -1}, "flood step needs a byte count >= 0"},
		{Step{kind: "hang"}, "hang step must be true"},
		{Step{kind: "run"}, "run step needs a non-empty value"},
	} {
		if _, err := c.step.Action(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.step, err, c.want)
		}
	}
	for _, c := range []struct {
		step Step
		want string
	}{
		{Step{Write: "f", Content: "x"}, "write"},
		{Step{Tool: "Bash", Input: "ls", Output: "a"}, "tool"},
		{Step{Flood: 10, Newlines: true}, "flood"},
		{Step{IgnoreSigterm: true}, "ignore_sigterm"},
		{ExitStep(0), "exit"},
		{Step{kind: "final"}, "final"},
	} {
		if got, err := c.step.Action(); err != nil || got != c.want {
			t.Errorf("%+v: %q %v, want %q", c.step, got, err, c.want)
		}
	}
}
