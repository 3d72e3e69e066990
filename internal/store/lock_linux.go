package store

import (
	"errors"
	"os"
	"syscall"
)

// Open file description locks (Linux 3.15+). Like flock they belong to the
// open file description, so two descriptors in one process conflict and the
// lock goes away with its last descriptor; unlike flock they can be queried
// (F_OFD_GETLK) without being taken. The values are the same on every
// Linux architecture; the syscall package does not name them.
const (
	fOFDGetLk = 36
	fOFDSetLk = 37
)

func wholeFile(typ int16) *syscall.Flock_t {
	return &syscall.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 0}
}

// lockFile takes an exclusive lock on f without waiting; false means
// someone else holds it.
func lockFile(f *os.File) (bool, error) {
	err := syscall.FcntlFlock(f.Fd(), fOFDSetLk, wholeFile(syscall.F_WRLCK))
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return false, nil
	}
	return err == nil, err
}

// heldFile asks the kernel whether an exclusive lock on f would conflict
// with one already held, without taking it.
func heldFile(f *os.File, _ string) bool {
	lk := wholeFile(syscall.F_WRLCK)
	if err := syscall.FcntlFlock(f.Fd(), fOFDGetLk, lk); err != nil {
		return false
	}
	return lk.Type != syscall.F_UNLCK
}
