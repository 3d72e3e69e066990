package cli

import (
	"errors"
	"strings"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/loop"
)

// Exit codes. They are part of ralph's interface: scripts and CI jobs branch
// on them, so they never change meaning.
const (
	ExitOK         = 0 // all done
	ExitFailure    = 1 // an error; the message says what to do
	ExitUsage      = 2 // bad flag, argument or command
	ExitNeedsHuman = 3 // blocked or stuck: a person must decide
	ExitLimit      = 4 // iteration limit reached with work left
	// ExitChecksFailing: every story is done, but a check still fails on
	// the final tree (one that failed before the run, say): the run is
	// not complete, and no story is left whose work would fix it.
	ExitChecksFailing = 5
	ExitInterrupted   = 130 // Ctrl+C or SIGTERM
)

// exitStatusHelp is printed by `ralph --help`.
const exitStatusHelp = `Exit status:
  0    all done (every story checked and verified, or the command succeeded)
  1    error; the message says what went wrong and what to do
  2    usage error: unknown command, bad flag or argument
  3    blocked or stuck: a person must decide
  4    iteration limit or a budget reached with work left
  5    every story done, but a check still fails on the final tree
  130  interrupted (Ctrl+C or SIGTERM)`

// UsageError is an error in how ralph was called. It exits with code 2.
// It is the one type of package errs, which the machines return too.
type UsageError = errs.UsageError

var usageErrorf = errs.Usagef

// ExitError carries an exit code for an outcome that is not a failure of
// ralph itself, such as reaching the iteration limit. Its message has
// already been printed when Silent is set.
type ExitError struct {
	Code   int
	Msg    string
	Silent bool
}

func (e *ExitError) Error() string { return e.Msg }

// exitCode maps an error to the documented exit code. It is the only place
// that does so.
func exitCode(err error) int {
	var ue *UsageError
	var ee *ExitError
	var unknown *agent.UnknownError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, errs.ErrInterrupted):
		return ExitInterrupted
	case errors.As(err, new(*loop.HistoryError)):
		return ExitNeedsHuman
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &unknown) && unknown.Source == "--agent":
		return ExitUsage
	case isCobraUsage(err):
		return ExitUsage
	}
	return ExitFailure
}

// isCobraUsage recognises the argument errors cobra makes itself, which
// are plain errors rather than a type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "accepts ", "requires at least", "requires at most", "bad flag syntax"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
