package thread

import (
	"errors"
	"fmt"

	"github.com/ralphloop/ralph/internal/errs"
)

// ErrInterrupted is what every error of a command cut short by Ctrl+C or
// SIGTERM wraps: the one sentinel of package errs, so that the command line
// knows one. What was done before is saved, and the message names the
// command that goes on from there.
var ErrInterrupted = errs.ErrInterrupted

// interruptedError is ErrInterrupted with a message that says how the
// thread goes on.
type interruptedError struct{ msg string }

func (e *interruptedError) Error() string { return e.msg }
func (e *interruptedError) Unwrap() error { return ErrInterrupted }

func interruptedf(format string, args ...any) error {
	return &interruptedError{msg: fmt.Sprintf(format, args...)}
}

// UsageError is a command given input it cannot work with, such as
// request-changes without saying what to fix: the one usage error type of
// package errs. Nothing has changed when it is returned.
type UsageError = errs.UsageError

var usageErrorf = errs.Usagef

// ErrResetDeclined is returned when the person did not confirm resetting
// the workspace to the baseline; the thread and the workspace are as they
// were.
var ErrResetDeclined = errors.New("not reset, nothing changed: confirm with --yes (or answer y on a terminal)")
