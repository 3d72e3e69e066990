package thread

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/ralphloop/ralph/internal/store"
)

// One command at a time works on a thread: it holds threads/<id>/lock
// while it changes the thread. A command that finds the lock held refuses
// and names the holder; pause and abandon instead interrupt the holder.

func (r *Runner) lockPath() string { return r.path("lock") }

// Busy reports whether a ralph, this one included, holds the thread's
// lock now.
func (r *Runner) Busy() bool {
	_, held := store.Held(r.lockPath())
	return held
}

// acquire takes the thread's lock and reads the thread again, since it may
// have moved before the lock was taken.
func (r *Runner) acquire() error {
	l, err := store.TryLock(r.lockPath(), "ralph thread")
	if err != nil {
		var le *store.LockedError
		if errors.As(err, &le) {
			return fmt.Errorf("thread %s is busy in another ralph (%v): wait for it, or `ralph thread pause %s`", r.t.ID, le.Holder, r.t.ID)
		}
		return err
	}
	r.lock = l
	// A spec agent a kill of ralph left running goes first, under the
	// lock (so never a live ralph's) and whatever the command does next:
	// one the command refuses would leave it writing the draft alone.
	r.stopLeftoverAgent()
	if t, err := Load(r.dir, r.t.ID); err == nil {
		r.t = t
		r.chooseWork()
	}
	return nil
}

// Release lets go of the thread's lock if this runner holds it. It may be
// called more than once.
func (r *Runner) Release() {
	if r.lock != nil {
		r.lock.Unlock()
		r.lock = nil
	}
}

// interruptHolder asks the ralph working on the thread to stop, as Ctrl+C
// would, and waits for it to let go. It reports whether one was running.
func (r *Runner) interruptHolder() (bool, error) {
	h, held := store.Held(r.lockPath())
	if !held {
		return false, nil
	}
	if h == nil || h.PID <= 0 {
		return true, fmt.Errorf("thread %s is busy in another ralph that cannot be named: stop it with Ctrl+C", r.t.ID)
	}
	if err := syscall.Kill(h.PID, syscall.SIGINT); err != nil {
		return true, fmt.Errorf("could not interrupt ralph (pid %d): %w", h.PID, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, still := store.Held(r.lockPath()); !still {
			if t, err := Load(r.dir, r.t.ID); err == nil {
				r.t = t
				r.chooseWork()
			}
			return true, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true, fmt.Errorf("ralph (pid %d) did not stop within a minute", h.PID)
}
