package fakeagent

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSelectionByMatchAndTimes(t *testing.T) {
	path, _ := setup(t, Scenario{Invocations: []Invocation{
		{Match: "US-002", Times: 1, Steps: []Step{say("two")}},
		{Times: 2, Steps: []Step{say("any")}},
		{Match: "US-009", Steps: []Step{say("nine")}},
	}})
	steps := []struct {
		prompt string
		code   int
		out    string
	}{
		{"work on US-002 please", 0, "two\n"},
		{"work on US-002 please", 0, "any\n"}, // first entry used up
		{"work on US-001", 0, "any\n"},
		{"work on US-001", ExitNoMatch, ""}, // second used up, third does not match
		{"work on US-009", 0, "nine\n"},
		{"work on US-009", 0, "nine\n"}, // times 0 = unlimited
	}
	for i, s := range steps {
		r := call(t, s.prompt)
		if r.code != s.code || r.stdout != s.out {
			t.Fatalf("call %d (%q): code %d stdout %q, want %d %q (stderr %q)", i+1, s.prompt, r.code, r.stdout, s.code, s.out, r.stderr)
		}
		if s.code == ExitNoMatch && r.stderr != "fakeagent: no invocation matches the prompt\n" {
			t.Fatalf("stderr = %q", r.stderr)
		}
	}
	st, err := ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	want := State{Calls: 5, Used: []int{1, 2, 2}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("state = %+v, want %+v", st, want)
	}
	// The state file is plain JSON next to the scenario.
	if _, err := os.Stat(path + ".state.json"); err != nil {
		t.Fatal(err)
	}
	// Rewriting the scenario resets the counts.
	if err := WriteScenario(path, Scenario{Invocations: []Invocation{{Times: 1, Steps: []Step{say("again")}}}}); err != nil {
		t.Fatal(err)
	}
	mustCall(t, 0, "x")
	mustCall(t, ExitNoMatch, "x")
}

func TestMatchIsSubstringNotRegexp(t *testing.T) {
	setup(t, Scenario{Invocations: []Invocation{
		{Match: "a.c", Steps: []Step{say("literal")}},
		{Steps: []Step{say("fallback")}},
	}})
	if r := mustCall(t, 0, "abc"); r.stdout != "fallback\n" {
		t.Fatalf("stdout = %q", r.stdout)
	}
	if r := mustCall(t, 0, "x a.c y"); r.stdout != "literal\n" {
		t.Fatalf("stdout = %q", r.stdout)
	}
}

func TestPromptSources(t *testing.T) {
	_, work := setup(t, Scenario{Invocations: []Invocation{
		{Match: "FROM-FILE", Steps: []Step{say("file")}},
		{Match: "FROM-STDIN", Steps: []Step{say("stdin")}},
	}})
	pf := filepath.Join(work, "prompt.md")
	if err := os.WriteFile(pf, []byte("FROM-FILE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"flag", []string{"-p", "--prompt-file", pf}, "file\n"},
		{"flag=", []string{"--prompt-file=" + pf}, "file\n"},
		{"positional file", []string{"exec", "--json", pf}, "file\n"},
		{"positional text", []string{"-p", "do the thing"}, "stdin\n"},
		{"no args", nil, "stdin\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustCall(t, 0, "FROM-STDIN", c.args...)
			if r.stdout != c.want {
				t.Fatalf("stdout = %q, want %q", r.stdout, c.want)
			}
		})
	}
	r := mustCall(t, ExitBadInput, "FROM-STDIN", "--prompt-file", filepath.Join(work, "missing.md"))
	if !strings.Contains(r.stderr, "read prompt") {
		t.Fatalf("stderr = %q", r.stderr)
	}
	mustCall(t, ExitBadInput, "", "--prompt-file")
}

func TestWriteAppendReplace(t *testing.T) {
	_, work := setup(t, Scenario{Invocations: []Invocation{
		{Match: "edit", Steps: []Step{
			{Write: "src/deep/a.txt", Content: "one two one\n"},
			{Append: "src/deep/a.txt", Content: "three\n"},
			{Append: "new.txt", Content: "created"},
			{Replace: "src/deep/a.txt", Old: "one", New: "ONE"},
			{Write: "over.txt", Content: "old content that is long"},
			{Write: "over.txt", Content: "short"},
		}},
		{Match: "bad", Steps: []Step{
			{Replace: "src/deep/a.txt", Old: "absent", New: "x"},
			{Write: "after.txt", Content: "must not exist"},
		}},
	}})
	mustCall(t, 0, "edit")
	if got, want := readFile(t, filepath.Join(work, "src/deep/a.txt")), "ONE two one\nthree\n"; got != want {
		t.Fatalf("a.txt = %q, want %q", got, want)
	}
	if got := readFile(t, filepath.Join(work, "new.txt")); got != "created" {
		t.Fatalf("new.txt = %q", got)
	}
	if got := readFile(t, filepath.Join(work, "over.txt")); got != "short" {
		t.Fatalf("over.txt = %q", got)
	}
	r := mustCall(t, ExitStepFailed, "bad")
	if !strings.Contains(r.stderr, `does not contain "absent"`) || !strings.Contains(r.stderr, "step 1 (replace)") {
		t.Fatalf("stderr = %q", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "after.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("steps after a failed replace ran: %v", err)
	}
}

func TestStderrAndSleep(t *testing.T) {
	setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{
		{Stderr: "warning: something"},
		{Sleep: "60ms"},
		say("done"),
	}}}})
	start := time.Now()
	r := mustCall(t, 0, "")
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("sleep took %v", d)
	}
	if r.stderr != "warning: something\n" || r.stdout != "done\n" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
}

func TestExitCodes(t *testing.T) {
	_, work := setup(t, Scenario{Invocations: []Invocation{
		{Match: "seven", Steps: []Step{say("bye")}, Exit: 7},
		{Match: "early", Steps: []Step{say("a"), ExitStep(9), {Write: "late.txt", Content: "x"}}, Exit: 1},
		{Match: "zero", Steps: []Step{ExitStep(0), say("never")}, Exit: 6},
		{Steps: nil},
	}})
	if r := mustCall(t, 7, "seven"); r.stdout != "bye\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if r := mustCall(t, 9, "early"); r.stdout != "a\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(work, "late.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("steps after exit ran")
	}
	if r := mustCall(t, 0, "zero"); r.stdout != "" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if r := mustCall(t, 0, "anything"); r.stdout != "" || r.stderr != "" {
		t.Fatalf("empty invocation printed %q %q", r.stdout, r.stderr)
	}
}

func TestInvalidScenario(t *testing.T) {
	cases := map[string]string{
		"not json":         `{"invocations": [`,
		"unknown key":      `{"invocations": [{"steps": [{"say": "x", "colour": "red"}]}]}`,
		"unknown inv key":  `{"invocations": [{"matches": "x"}]}`,
		"two actions":      `{"invocations": [{"steps": [{"say": "x", "final": "y"}]}]}`,
		"no action":        `{"invocations": [{"steps": [{"content": "x"}]}]}`,
		"foreign option":   `{"invocations": [{"steps": [{"say": "x", "content": "y"}]}]}`,
		"bad duration":     `{"invocations": [{"steps": [{"sleep": "soon"}]}]}`,
		"bad limit time":   `{"invocations": [{"steps": [{"limit": "tomorrow"}]}]}`,
		"bad format":       `{"format": "xml", "invocations": [{}]}`,
		"no invocations":   `{"invocations": []}`,
		"hang false":       `{"invocations": [{"steps": [{"hang": false}]}]}`,
		"empty write path": `{"invocations": [{"steps": [{"write": "", "content": "x"}]}]}`,
		"empty old":        `{"invocations": [{"steps": [{"replace": "f", "old": "", "new": "x"}]}]}`,
		"negative times":   `{"invocations": [{"times": -1}]}`,
		"trailing data":    `{"invocations": [{}]} {}`,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			setupJSON(t, raw)
			r := mustCall(t, ExitBadInput, "prompt")
			if !strings.HasPrefix(r.stderr, "fakeagent: scenario ") {
				t.Fatalf("stderr = %q", r.stderr)
			}
			if r.stdout != "" {
				t.Fatalf("stdout = %q", r.stdout)
			}
		})
	}
	t.Run("env unset", func(t *testing.T) {
		t.Setenv(EnvScenario, "")
		r := mustCall(t, ExitBadInput, "prompt")
		if !strings.Contains(r.stderr, EnvScenario+" is not set") {
			t.Fatalf("stderr = %q", r.stderr)
		}
	})
	t.Run("file missing", func(t *testing.T) {
		t.Setenv(EnvScenario, filepath.Join(t.TempDir(), "nope.json"))
		r := mustCall(t, ExitBadInput, "prompt")
		if !strings.Contains(r.stderr, "nope.json") {
			t.Fatalf("stderr = %q", r.stderr)
		}
	})
}

func TestScenarioRoundTrip(t *testing.T) {
	sc := Scenario{Format: FormatClaude, Invocations: []Invocation{
		{Match: "US-001", Times: 2, Exit: 1, Steps: []Step{
			{Write: "a", Content: "b"},
			{Replace: "a", Old: "b", New: "c"},
			{CheckStory: "US-001", PRD: "prd.md"},
			{Run: "true", IgnoreError: true},
			{Tool: "Bash", Input: "ls", Output: "x"},
			{Flood: 10, Newlines: true},
			{Limit: "2026-11-22T10:40:00Z"},
			ExitStep(0),
		}},
	}}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := WriteScenario(path, sc); err != nil {
		t.Fatal(err)
	}
	got, err := LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	// Loaded steps remember their action key; compare through JSON.
	a, _ := jsonString(sc)
	b, _ := jsonString(got)
	if a != b {
		t.Fatalf("round trip changed the scenario:\n%s\n%s", a, b)
	}
	// An action whose value is a zero value survives a round trip.
	parsed, err := ParseScenario([]byte(`{"invocations":[{"steps":[{"final":""},{"flood":0}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteScenario(path, parsed); err != nil {
		t.Fatal(err)
	}
	data := readFile(t, path)
	if !strings.Contains(data, `"final": ""`) || !strings.Contains(data, `"flood": 0`) {
		t.Fatalf("zero-valued actions lost:\n%s", data)
	}
	// Steps built in Go need exactly one action.
	if err := WriteScenario(path, Scenario{Invocations: []Invocation{{Steps: []Step{{}}}}}); err == nil {
		t.Fatal("a step without an action was accepted")
	}
	if err := WriteScenario(path, Scenario{Invocations: []Invocation{{Steps: []Step{{Say: "a", Final: "b"}}}}}); err == nil {
		t.Fatal("a step with two actions was accepted")
	}
}

func TestFloodWithoutNewlinesIsExact(t *testing.T) {
	const size = 5 * 1024 * 1024
	setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{{Flood: size}}}}})
	w := &countingWriter{}
	code := Main(nil, strings.NewReader(""), w, io.Discard)
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if w.n != size {
		t.Fatalf("flood wrote %d bytes, want %d", w.n, size)
	}
	if w.newlines != 0 {
		t.Fatalf("flood without newlines wrote %d newlines", w.newlines)
	}
	if w.maxWrite > 1<<20 {
		t.Fatalf("flood wrote a %d-byte chunk; it should stream", w.maxWrite)
	}
	if w.writes < 2 {
		t.Fatalf("flood wrote in %d writes; it should stream in chunks", w.writes)
	}
}

func TestFloodWithNewlines(t *testing.T) {
	setup(t, Scenario{Invocations: []Invocation{{Steps: []Step{{Flood: 80*1000 + 30, Newlines: true}}}}})
	r := mustCall(t, 0, "")
	if len(r.stdout) != 80*1000+30 {
		t.Fatalf("len = %d", len(r.stdout))
	}
	lines := strings.Split(r.stdout, "\n")
	if len(lines) != 1001 {
		t.Fatalf("%d lines, want 1000 full lines and a 30-byte tail", len(lines))
	}
	for i, l := range lines[:1000] {
		if len(l) != 79 {
			t.Fatalf("line %d has %d bytes before its newline, want 79", i+1, len(l))
		}
	}
	if len(lines[1000]) != 30 {
		t.Fatalf("tail = %d bytes", len(lines[1000]))
	}
}

type countingWriter struct {
	n, newlines, writes, maxWrite int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	w.writes++
	w.maxWrite = max(w.maxWrite, len(p))
	w.newlines += strings.Count(string(p), "\n")
	return len(p), nil
}
