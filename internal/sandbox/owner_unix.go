//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

// foreignOwner reports whether path belongs to another user than ours.
func foreignOwner(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) != os.Getuid()
}
