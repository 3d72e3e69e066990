//go:build !linux

package store

import (
	"os"
	"syscall"
)

// Without open file description locks, flock is used. It cannot be queried
// without being taken, so heldFile trusts the holder record instead: held
// while the process it names is alive.

func lockFile(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK {
		return false, nil
	}
	return err == nil, err
}

func heldFile(_ *os.File, path string) bool {
	h := readHolder(path)
	return h != nil && !h.exited()
}
