package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Holder describes the process that holds a workspace lock. It is written
// into the lock file so that a refused second process can name the holder.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s, %q, since %s", h.PID, h.Host, h.Command, h.Since.Format("2006-01-02 15:04:05"))
}

// exited reports whether the holder is known to be gone: it ran on this
// host and no process has its pid any more. A holder on another host, or
// one we may not signal, is taken to be alive.
func (h Holder) exited() bool {
	if host, _ := os.Hostname(); h.PID <= 0 || h.Host != host {
		return false
	}
	return errors.Is(syscall.Kill(h.PID, 0), syscall.ESRCH)
}

// LockedError is returned when another process holds the lock.
type LockedError struct {
	Path   string
	Holder *Holder // nil when the holder could not be read
}

func (e *LockedError) Error() string {
	switch {
	case e.Holder == nil:
		return fmt.Sprintf("another ralph holds %s: wait for it to finish or stop it", e.Path)
	case e.Holder.exited():
		// The kernel drops the lock when the last descriptor of it closes,
		// so a dead holder means something else still has that descriptor.
		return fmt.Sprintf("%s is still held although the ralph that took it (%s) has exited: a process it left behind holds it; find it with `fuser -v %s`, stop it and retry", e.Path, e.Holder, e.Path)
	}
	return fmt.Sprintf("another ralph is running in this workspace (%s): wait for it to finish or stop it", e.Holder)
}

// Lock is an exclusive advisory lock on a file. The kernel drops it when the
// last descriptor of it is closed, so a crash never leaves a stale lock
// behind. The lock file is never unlinked: the lock is keyed by inode, and
// deleting the file would let two processes hold "the" lock on two
// different inodes.
type Lock struct {
	f *os.File
}

// lockRecheck is how long a refused TryLock waits before it asks once more.
// A lock can be held for a moment by someone who is letting go: a ralph
// that is exiting, or a child of a killed ralph between fork and exec,
// which holds every descriptor until exec closes them.
var lockRecheck = 750 * time.Millisecond

// TryLock takes the lock at path without blocking for long. When another
// process holds it, it asks once more after a short wait and then returns a
// *LockedError naming the holder.
func TryLock(path, command string) (*Lock, error) {
	l, err := tryLockOnce(path, command)
	if IsLocked(err) {
		time.Sleep(lockRecheck)
		l, err = tryLockOnce(path, command)
	}
	return l, err
}

func tryLockOnce(path, command string) (*Lock, error) {
	// O_CLOEXEC: a child ralph starts must never inherit the locked
	// descriptor, or the lock would outlive ralph for as long as the child.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	ok, err := lockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		f.Close()
		return nil, &LockedError{Path: path, Holder: readHolder(path)}
	}
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, Command: command, Since: time.Now().UTC()}
	b, _ := json.Marshal(h)
	// The holder record is written through the locked descriptor;
	// truncation happens only while we hold the lock.
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock and clears the holder record.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close()
	l.f = nil
	return err
}

func readHolder(path string) *Holder {
	b, err := os.ReadFile(path)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil {
		return nil
	}
	return &h
}

// IsLocked reports whether err says a lock is held by someone else.
func IsLocked(err error) bool {
	var le *LockedError
	return errors.As(err, &le)
}

// Held reports whether any process, this one included, holds the lock at
// path, and names the holder when it can. It only looks: it never takes
// the lock, not even for an instant, so asking (as `ralph status` does)
// can never make a starting ralph find the lock busy. A missing lock file
// is not held and is not created.
func Held(path string) (*Holder, bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if !heldFile(f, path) {
		return nil, false
	}
	return readHolder(path), true
}
