//go:build !(linux || darwin || freebsd)

package store

import (
	"errors"
	"fmt"
)

// FreeBytes is not implemented on this system; the error wraps
// errors.ErrUnsupported, so a caller can skip its disk check rather than
// refuse to run.
func FreeBytes(path string) (uint64, error) {
	return 0, fmt.Errorf("free disk space of %s: %w", path, errors.ErrUnsupported)
}
