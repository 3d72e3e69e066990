package thread

import (
	"errors"
	"fmt"
)

// ErrInterrupted is what every error of a command cut short by Ctrl+C or
// SIGTERM wraps. What was done before is saved, and the message names the
// command that goes on from there. The command line exits with 130 on it.
var ErrInterrupted = errors.New("interrupted")

// interruptedError is ErrInterrupted with a message that says how the
// thread goes on.
type interruptedError struct{ msg string }

func (e *interruptedError) Error() string { return e.msg }
func (e *interruptedError) Unwrap() error { return ErrInterrupted }

func interruptedf(format string, args ...any) error {
	return &interruptedError{msg: fmt.Sprintf(format, args...)}
}

// UsageError is a command given input it cannot work with, such as
// request-changes without saying what to fix. Nothing has changed when it
// is returned. The command line exits with 2 on it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ErrResetDeclined is returned when the person did not confirm resetting
// the workspace to the baseline; the thread and the workspace are as they
// were.
var ErrResetDeclined = errors.New("not reset, nothing changed: confirm with --yes (or answer y on a terminal)")
