package fakeagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"
)

// EnvScenario names the environment variable that holds the scenario path.
const EnvScenario = "FAKEAGENT_SCENARIO"

// Output formats of a scenario.
const (
	FormatPlain  = "plain"
	FormatClaude = "claude"
)

// Exit codes of the fake agent itself (an invocation's own exit code comes
// from the scenario).
const (
	ExitBadInput      = 2 // bad prompt source, missing or invalid scenario
	ExitNoMatch       = 3 // no invocation matches the prompt
	ExitStepFailed    = 4 // a file step (write, append, replace, check_story) failed
	ExitCommandFailed = 5 // a run or commit step failed
)

// Scenario is the script the fake agent follows.
type Scenario struct {
	// Format is "plain" (default) or "claude" (Claude Code stream-json).
	Format      string       `json:"format,omitempty"`
	Invocations []Invocation `json:"invocations"`
}

// Invocation is what one agent process does.
type Invocation struct {
	// Match is a substring (not a regexp) that must occur in the prompt.
	// Empty matches every prompt.
	Match string `json:"match,omitempty"`
	// Times is how many times this entry may be used; 0 = unlimited.
	Times int    `json:"times,omitempty"`
	Steps []Step `json:"steps,omitempty"`
	// Exit is the process exit code once all steps ran.
	Exit int `json:"exit,omitempty"`
}

// Step is one action. Exactly one action field is set; the others are that
// action's options. Exit is a pointer: exit code 0 is meaningful.
type Step struct {
	Write      string `json:"write,omitempty"`
	Append     string `json:"append,omitempty"`
	Content    string `json:"content,omitempty"` // write, append
	Replace    string `json:"replace,omitempty"`
	Old        string `json:"old,omitempty"` // replace
	New        string `json:"new,omitempty"` // replace
	CheckStory string `json:"check_story,omitempty"`
	PRD        string `json:"prd,omitempty"` // check_story
	Run        string `json:"run,omitempty"`
	Commit     string `json:"commit,omitempty"`
	// IgnoreError keeps going when a run or commit step fails.
	IgnoreError bool   `json:"ignore_error,omitempty"`
	Say         string `json:"say,omitempty"`
	Tool        string `json:"tool,omitempty"`
	Input       string `json:"input,omitempty"`  // tool
	Output      string `json:"output,omitempty"` // tool
	EchoPrompt  bool   `json:"echo_prompt,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
	Sleep       string `json:"sleep,omitempty"`
	Hang        bool   `json:"hang,omitempty"`
	Flood       int64  `json:"flood,omitempty"`
	Newlines    bool   `json:"newlines,omitempty"` // flood
	// IgnoreSigterm makes the process ignore SIGTERM from this step on.
	IgnoreSigterm bool   `json:"ignore_sigterm,omitempty"`
	Limit         string `json:"limit,omitempty"` // RFC 3339 reset time
	Final         string `json:"final,omitempty"`
	Exit          *int   `json:"exit,omitempty"`

	// kind is the action key as read from JSON, so that actions whose value
	// is a zero value ({"final": ""}, {"flood": 0}) survive a round trip.
	kind string
}

// actionKeys lists every action key with the option keys it accepts.
var actionKeys = map[string][]string{
	"write":          {"content"},
	"append":         {"content"},
	"replace":        {"old", "new"},
	"check_story":    {"prd"},
	"run":            {"ignore_error"},
	"commit":         {"ignore_error"},
	"say":            nil,
	"tool":           {"input", "output"},
	"echo_prompt":    nil,
	"stderr":         nil,
	"sleep":          nil,
	"hang":           nil,
	"flood":          {"newlines"},
	"ignore_sigterm": nil,
	"limit":          nil,
	"final":          nil,
	"exit":           nil,
}

// setKeys lists, in field order, the JSON keys of the fields of s that
// hold a non-zero value: its actions (actions true) or its options.
func (s Step) setKeys(actions bool) []string {
	v := reflect.ValueOf(s)
	var keys []string
	for i := range v.NumField() {
		key := jsonKey(v.Type().Field(i))
		if _, action := actionKeys[key]; key != "" && action == actions && !v.Field(i).IsZero() {
			keys = append(keys, key)
		}
	}
	return keys
}

// field is the field of s whose JSON key is key.
func (s Step) field(key string) reflect.Value {
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if jsonKey(v.Type().Field(i)) == key {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

func jsonKey(f reflect.StructField) string {
	key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return key
}

// Action returns the step's action key ("write", "say", ...) or an error if
// the step does not have exactly one action or its options are invalid.
func (s Step) Action() (string, error) {
	set := s.setKeys(true)
	kind := s.kind
	if kind == "" {
		switch len(set) {
		case 0:
			return "", errors.New("step has no action (want one of " + strings.Join(sortedActionKeys(), ", ") + ")")
		case 1:
			kind = set[0]
		default:
			return "", fmt.Errorf("step has several actions (%s); want exactly one", strings.Join(set, ", "))
		}
	} else {
		for _, k := range set {
			if k != kind {
				return "", fmt.Errorf("step has several actions (%s, %s); want exactly one", kind, k)
			}
		}
	}
	// Options of other actions are refused, so typos do not pass silently.
	allowed := map[string]bool{kind: true}
	for _, o := range actionKeys[kind] {
		allowed[o] = true
	}
	for _, o := range s.setKeys(false) {
		if !allowed[o] {
			return "", fmt.Errorf("%s step does not take option %q", kind, o)
		}
	}
	switch kind {
	case "write", "append", "replace", "check_story", "run", "commit", "tool", "sleep", "limit":
		if s.field(kind).String() == "" {
			return "", fmt.Errorf("%s step needs a non-empty value", kind)
		}
	case "echo_prompt", "hang", "ignore_sigterm":
		if !s.field(kind).Bool() {
			return "", fmt.Errorf("%s step must be true", kind)
		}
	case "flood":
		if s.Flood < 0 {
			return "", fmt.Errorf("flood step needs a byte count >= 0, got %d", s.Flood)
		}
	}
	switch kind {
	case "replace":
		if s.Old == "" {
			return "", errors.New(`replace step needs a non-empty "old"`)
		}
	case "sleep":
		if _, err := time.ParseDuration(s.Sleep); err != nil {
			return "", fmt.Errorf("sleep step: %v", err)
		}
	case "limit":
		if _, err := time.Parse(time.RFC3339, s.Limit); err != nil {
			return "", fmt.Errorf("limit step: want an RFC 3339 time such as 2026-11-22T10:40:00Z: %v", err)
		}
	}
	return kind, nil
}

func sortedActionKeys() []string {
	keys := make([]string, 0, len(actionKeys))
	for k := range actionKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type stepAlias Step

// UnmarshalJSON reads a step, refusing unknown keys and steps without
// exactly one action key.
func (s *Step) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	var kinds []string
	for k := range raw {
		if _, ok := actionKeys[k]; ok {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	switch len(kinds) {
	case 0:
		return errors.New("step has no action (want one of " + strings.Join(sortedActionKeys(), ", ") + ")")
	case 1:
	default:
		return fmt.Errorf("step has several actions (%s); want exactly one", strings.Join(kinds, ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var a stepAlias
	if err := dec.Decode(&a); err != nil {
		return fmt.Errorf("%s step: %v", kinds[0], err)
	}
	*s = Step(a)
	s.kind = kinds[0]
	return nil
}

// MarshalJSON writes a step; an action read from JSON with a zero value
// (such as {"final": ""}) keeps its key.
func (s Step) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(stepAlias(s))
	if err != nil || s.kind == "" {
		return data, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if _, ok := raw[s.kind]; ok {
		return data, nil
	}
	var zero any
	switch s.kind {
	case "echo_prompt", "hang", "ignore_sigterm":
		zero = false
	case "flood":
		zero = 0
	default:
		zero = ""
	}
	z, _ := json.Marshal(zero)
	raw[s.kind] = z
	return json.Marshal(raw)
}

// Validate reports the first problem in the scenario.
func (sc Scenario) Validate() error {
	switch sc.Format {
	case "", FormatPlain, FormatClaude:
	default:
		return fmt.Errorf("format %q: want %q or %q", sc.Format, FormatPlain, FormatClaude)
	}
	if len(sc.Invocations) == 0 {
		return errors.New("scenario has no invocations")
	}
	for i, inv := range sc.Invocations {
		if inv.Times < 0 {
			return fmt.Errorf("invocation %d: times must be >= 0, got %d", i+1, inv.Times)
		}
		for j, st := range inv.Steps {
			if _, err := st.Action(); err != nil {
				return fmt.Errorf("invocation %d, step %d: %v", i+1, j+1, err)
			}
		}
	}
	return nil
}

// ParseScenario decodes and validates a scenario.
func ParseScenario(data []byte) (Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return Scenario{}, err
	}
	if dec.More() {
		return Scenario{}, errors.New("extra data after the scenario object")
	}
	if err := sc.Validate(); err != nil {
		return Scenario{}, err
	}
	return sc, nil
}

// LoadScenario reads and validates the scenario file at path.
func LoadScenario(path string) (Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, err
	}
	sc, err := ParseScenario(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %v", path, err)
	}
	return sc, nil
}

// WriteScenario validates s and writes it to path atomically. It also
// removes the scenario's state file, so use counts start again from zero.
func WriteScenario(path string, s Scenario) error {
	if err := s.Validate(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if err := writeFileAtomic(path, data, 0o644); err != nil {
		return err
	}
	if err := os.Remove(StatePath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
