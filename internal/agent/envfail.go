package agent

import (
	"errors"
	"fmt"
	"strings"
)

// EnvKind names why an agent cannot run at all.
type EnvKind string

// The kinds of environment failure.
const (
	EnvAuth    EnvKind = "auth"    // not logged in, key refused (401/403)
	EnvModel   EnvKind = "model"   // the model name is unknown to the CLI or the API
	EnvFlags   EnvKind = "flags"   // the CLI refused its own command line
	EnvMissing EnvKind = "missing" // the program is not installed
)

// EnvError is an agent that cannot run at all. It is the environment's
// failure, not the task's: it must stop the run and never count as an
// attempt, a retry, a blocker or a breaker trip, because every other task
// would fail the same way.
type EnvError struct {
	Agent  string
	Kind   EnvKind
	Detail string // the CLI's own words, on one line
	Hint   string // what to do
}

func (e *EnvError) Error() string {
	what := map[EnvKind]string{
		EnvAuth:    "it is not logged in or its credentials were refused",
		EnvModel:   "it does not know the model it was given",
		EnvFlags:   "it refused its command line",
		EnvMissing: "it is not installed",
	}[e.Kind]
	msg := fmt.Sprintf("agent %s cannot run: %s", e.Agent, what)
	if e.Detail != "" {
		msg += " (it said: " + e.Detail + ")"
	}
	return msg + ". " + e.Hint + "; then run ralph again. No task was charged for this run."
}

// envPatterns are what the agent CLIs print when they cannot run at all,
// lower case, per kind (see the reference on the CLIs' messages). They are
// searched only in a run that failed without doing any work.
var envPatterns = []struct {
	kind EnvKind
	pats []string
}{
	{EnvAuth, []string{
		"failed to authenticate", "api error: 401", "api error: 403", "authentication_error",
		"invalid api key", "invalid x-api-key", "incorrect api key", "api key not valid",
		"please run /login", "not logged in", "invalid auth method", "oauth token has expired",
		"no api key", "missing api key", "401 unauthorized", "403 forbidden",
	}},
	{EnvModel, []string{
		"model not found", "model_not_found", "invalid model", "unknown model",
		"model is not supported", "not a valid model", "does not exist or you do not have access",
	}},
	{EnvFlags, []string{
		"unknown option", "unexpected argument", "unrecognized option", "unknown argument",
		"unrecognized arguments", "unknown flag", "unknown shorthand flag",
	}},
}

// EnvironmentFailure reports a run of spec that failed because the agent
// cannot run at all: its program is missing (runErr from Run), or it exited
// with an error, did no work (no tool call), hit no usage limit, and said
// it is not logged in, does not know its model or refused its options. It
// returns nil for every other run, which the caller judges as the task's.
func EnvironmentFailure(spec Spec, out Outcome, runErr error) *EnvError {
	var missing *MissingError
	if errors.As(runErr, &missing) {
		hint := "install it"
		if spec.InstallHint != "" {
			hint = "install it with `" + spec.InstallHint + "`"
		}
		return &EnvError{Agent: spec.Name, Kind: EnvMissing, Detail: missing.Program + " not found on PATH",
			Hint: hint + ", or choose another agent with --agent"}
	}
	if runErr != nil || out.Interrupted || out.TimedOut || out.Idle {
		return nil
	}
	res := out.Result
	if (out.ExitCode == 0 && !res.IsError) || res.ToolCalls > 0 || res.Limit != nil {
		return nil
	}
	// Only the end of the final message: a plain-text agent's final
	// message may quote tool output (a test's "401 Unauthorized") from
	// earlier in its work.
	texts := append([]string{out.StderrTail}, res.Errors...)
	texts = append(texts, lastLines(res.FinalMessage, 5))
	for _, kp := range envPatterns {
		for _, t := range texts {
			if line := matchLine(t, kp.pats); line != "" {
				return &EnvError{Agent: spec.Name, Kind: kp.kind, Detail: line, Hint: envHint(spec, kp.kind)}
			}
		}
	}
	return nil
}

// matchLine returns the first line of text holding one of pats, trimmed
// and cut short, or "".
func matchLine(text string, pats []string) string {
	for line := range strings.Lines(text) {
		l := strings.ToLower(line)
		for _, p := range pats {
			if strings.Contains(l, p) {
				return oneLine(line, 200)
			}
		}
	}
	return ""
}

func envHint(spec Spec, kind EnvKind) string {
	switch kind {
	case EnvAuth:
		if spec.LoginHint != "" {
			return "Log in: " + spec.LoginHint
		}
		return "Log the agent's CLI in (or set its API key) and run it once by hand to check"
	case EnvModel:
		return fmt.Sprintf("Check the model name given to %s ([roles.*] model, or the model option in its command in .ralph/config.toml) against the models it offers", spec.Name)
	default:
		hint := fmt.Sprintf("Check the agent's command (%s) against `%s --help`", strings.Join(spec.Headless, " "), firstWord(spec.Headless))
		if spec.Builtin && spec.InstallHint != "" {
			hint += "; an older CLI may lack an option ralph uses: update it with `" + spec.InstallHint + "`"
		} else {
			hint += " and fix [agents." + spec.Name + "] command in .ralph/config.toml"
		}
		return hint
	}
}

func firstWord(argv []string) string {
	if len(argv) == 0 {
		return "agent"
	}
	return argv[0]
}

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) string {
	var lines []string
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) != "" {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
