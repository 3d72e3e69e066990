package fakeagent

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// envTestMain switches the test binary into the fake agent itself, so tests
// can run it as a real subprocess (signals, concurrency).
const envTestMain = "FAKEAGENT_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envTestMain) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// setup writes sc to a scenario file outside a fresh working directory,
// points FAKEAGENT_SCENARIO at it and changes into the working directory.
// It returns the scenario path and the working directory.
func setup(t *testing.T, sc Scenario) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := WriteScenario(path, sc); err != nil {
		t.Fatalf("WriteScenario: %v", err)
	}
	return path, enter(t, path)
}

// setupJSON is setup for a scenario given as raw JSON (not validated).
func setupJSON(t *testing.T, raw string) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.json")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, enter(t, path)
}

func enter(t *testing.T, scenarioPath string) string {
	t.Helper()
	t.Setenv(EnvScenario, scenarioPath)
	work := t.TempDir()
	t.Chdir(work)
	return work
}

type result struct {
	code           int
	stdout, stderr string
}

// call runs Main in process with prompt on stdin.
func call(t *testing.T, prompt string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(prompt), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// mustCall is call that fails the test unless the exit code is want.
func mustCall(t *testing.T, want int, prompt string, args ...string) result {
	t.Helper()
	r := call(t, prompt, args...)
	if r.code != want {
		t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, want, r.stdout, r.stderr)
	}
	return r
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// events parses claude stream-json output: one JSON object per line.
func events(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	if !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("stream does not end with a newline: %q", stdout)
	}
	var evs []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d is not one JSON object: %v\n%s", i+1, err, line)
		}
		evs = append(evs, ev)
	}
	return evs
}

func types(evs []map[string]any) []string {
	var ts []string
	for _, ev := range evs {
		ts = append(ts, ev["type"].(string))
	}
	return ts
}

// get walks nested maps and slices: get(ev, "message", "content", 0, "text").
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: not an object: %#v", k, v)
			}
			v, ok = m[k]
			if !ok {
				t.Fatalf("missing key %q in %#v", k, m)
			}
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				t.Fatalf("at [%d]: not an array long enough: %#v", k, v)
			}
			v = s[k]
		}
	}
	return v
}

func say(s string) Step   { return Step{Say: s} }
func final(s string) Step { return Step{Final: s} }
