package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gofrs/flock"
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

// LockedError is returned when another process holds the lock.
type LockedError struct {
	Path   string
	Holder *Holder // nil when the holder could not be read
}

func (e *LockedError) Error() string {
	if e.Holder == nil {
		return fmt.Sprintf("another ralph holds %s: wait for it to finish or stop it", e.Path)
	}
	return fmt.Sprintf("another ralph is running in this workspace (%s): wait for it to finish or stop it", e.Holder)
}

// Lock is an exclusive advisory lock on a file. The kernel drops it when the
// process dies, so a crash never leaves a stale lock behind. The lock file
// is never unlinked: flock is keyed by inode, and deleting the file would let
// two processes hold "the" lock on two different inodes.
type Lock struct {
	f *flock.Flock
}

// TryLock takes the lock at path without waiting. When another process
// holds it, it returns a *LockedError naming the holder.
func TryLock(path, command string) (*Lock, error) {
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		return nil, &LockedError{Path: path, Holder: readHolder(path)}
	}
	host, _ := os.Hostname()
	h := Holder{PID: os.Getpid(), Host: host, Command: command, Since: time.Now().UTC()}
	b, _ := json.Marshal(h)
	// The holder record is written through the locked descriptor's path;
	// truncation happens only while we hold the lock.
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		fl.Unlock()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: fl}, nil
}

// Unlock releases the lock and clears the holder record.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = os.Truncate(l.f.Path(), 0)
	return l.f.Unlock()
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

// Held reports whether another process holds the lock at path, and names
// the holder when it can. It takes the lock for an instant to find out.
func Held(path string) (*Holder, bool) {
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, false
	}
	if ok {
		fl.Unlock()
		return nil, false
	}
	return readHolder(path), true
}
