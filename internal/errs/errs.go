// Package errs holds the error kinds that every layer shares and the
// command line maps to exit codes: a run cut short by the user, and a
// command called with input it cannot work with. They live below the
// machines so that loop, thread and session return the same ones and the
// CLI checks one of each.
package errs

import (
	"errors"
	"fmt"
)

// ErrInterrupted is what every error of a run or command cut short by
// Ctrl+C or SIGTERM wraps. What was done before is saved; the command line
// exits with 130 on it.
var ErrInterrupted = errors.New("interrupted")

// UsageError is an error in how ralph was called: a bad flag, argument or
// input it cannot work with. Nothing has changed when it is returned; the
// command line exits with 2 on it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}
