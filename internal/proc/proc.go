// Package proc runs child processes that ralph can always stop.
//
// Every child runs in its own process group so that a timeout, an idle
// timeout or a user interrupt reaches everything the child started, not just
// the direct child. Run never returns while the child is still running, and it
// never hangs forever on output pipes held open by stray descendants.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// DefaultGrace is the pause between SIGTERM and SIGKILL when Spec.Grace is
// zero.
const DefaultGrace = 3 * time.Second

// drainBound limits how long Run waits for output after the whole group has
// been sent SIGKILL. Only processes that left the group (setsid daemons) can
// still hold the pipes by then, and they must not keep Run waiting.
const drainBound = 500 * time.Millisecond

// Spec describes one child process. Args[0] is the program; proc never runs
// it through a shell.
type Spec struct {
	// Args is the program followed by its arguments; it must not be empty.
	// A program without a slash is looked up in the PATH of Env (or of the
	// parent when Env is nil).
	Args []string
	// Dir is the working directory; "" means the parent's.
	Dir string
	// Env is the full environment; nil means os.Environ().
	Env []string
	// Stdin is the child's standard input; nil means /dev/null, never the
	// parent's terminal.
	Stdin io.Reader
	// Stdout receives standard output; nil discards it. When Stdout and
	// Stderr are the same writer, both streams share one pipe, so their
	// order is kept and Write is never called concurrently.
	Stdout io.Writer
	// Stderr receives standard error; nil discards it.
	Stderr io.Writer
	// Timeout is the wall-clock limit; 0 means none.
	Timeout time.Duration
	// IdleTimeout stops the child when neither stdout nor stderr produced a
	// byte for this long; 0 means none.
	IdleTimeout time.Duration
	// Grace is the pause between SIGTERM to the group and SIGKILL to the
	// group; 0 (or less) means DefaultGrace.
	Grace time.Duration
	// OnStart, when set, is called with the child's pid (which is also its
	// process group id) right after it starts, so that a caller can record
	// it and stop a group that outlived a crashed parent.
	OnStart func(pid int)
}

// Outcome reports how a child ended. At most one of TimedOut, Idle and
// Interrupted is set, naming the reason ralph stopped the child; none is set
// when the child exited on its own.
type Outcome struct {
	// ExitCode is the child's exit status, or -1 when it was killed by a
	// signal or never started.
	ExitCode int
	// Duration is the wall-clock time from start until the child was reaped
	// and its output copied.
	Duration time.Duration
	// TimedOut reports that Spec.Timeout expired and ralph killed the child.
	TimedOut bool
	// Idle reports that Spec.IdleTimeout expired and ralph killed the child.
	Idle bool
	// Interrupted reports that ctx was cancelled and ralph killed the child
	// (or did not start it).
	Interrupted bool
	// NotFound reports that the program does not exist or is not
	// executable; the child never started.
	NotFound bool
}

// Run starts the child described by s and waits for it.
//
// A non-zero exit status is not an error: it is reported in Outcome.ExitCode
// with a nil error, and so are timeouts and interrupts. Run returns an error
// only when the child could not be started (a missing or non-executable
// program returns an error matching exec.ErrNotFound, with Outcome.NotFound
// set) or when writing its output to Stdout or Stderr failed.
//
// When the child exits, times out, goes idle or ctx is cancelled, its whole
// process group gets SIGTERM and, after Grace, SIGKILL: stray descendants never
// outlive Run. Run returns only after the child is reaped and every byte
// copied, except that after the SIGKILL it waits at most a short bound for
// pipes held by processes that escaped the group.
func Run(ctx context.Context, s Spec) (Outcome, error) {
	out := Outcome{ExitCode: -1}
	if len(s.Args) == 0 {
		return out, errors.New("proc: empty Args")
	}
	if ctx.Err() != nil {
		out.Interrupted = true
		return out, nil
	}
	if s.Dir != "" {
		// Checked here because a failed chdir in the child is reported like
		// a missing program, which would be misleading.
		if fi, err := os.Stat(s.Dir); err != nil {
			return out, fmt.Errorf("proc: working directory: %w", err)
		} else if !fi.IsDir() {
			return out, fmt.Errorf("proc: working directory %s: not a directory", s.Dir)
		}
	}
	path, err := lookPath(s.Args[0], s.Env, s.Dir)
	if err != nil {
		out.NotFound = true
		return out, err
	}

	r := &runner{spec: s}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        s.Args,
		Dir:         s.Dir,
		Env:         s.Env,
		Stdin:       s.Stdin,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		// Only a non-file Stdin makes exec start a copying goroutine; this
		// keeps an endless Stdin reader from blocking Wait.
		WaitDelay: drainBound,
	}
	if err := r.openPipes(cmd); err != nil {
		return out, err
	}
	start := time.Now()
	r.start = start
	if err := cmd.Start(); err != nil {
		r.closeAll()
		if notExecutable(err) {
			out.NotFound = true
			return out, fmt.Errorf("proc: start %s: %w (%w)", s.Args[0], exec.ErrNotFound, err)
		}
		return out, fmt.Errorf("proc: start %s: %w", s.Args[0], err)
	}
	r.closeChildEnds()
	r.startCopies()

	pid := cmd.Process.Pid
	if s.OnStart != nil {
		s.OnStart(pid)
	}
	exited := make(chan struct{})
	go func() {
		waitExited(pid)
		close(exited)
	}()

	reason := r.watch(ctx, exited)
	switch reason {
	case stopTimeout:
		out.TimedOut = true
	case stopIdle:
		out.Idle = true
	case stopInterrupt:
		out.Interrupted = true
	}

	// The leader is not reaped until after the SIGKILL below, so its pid
	// still names this group and the signals cannot hit an unrelated group
	// that reused the number. Signalling after a normal exit too cleans up
	// descendants left behind, which would otherwise hold the pipes open and
	// accumulate across loop iterations.
	signalGroup(pid, syscall.SIGTERM)
	r.settle(exited, graceOf(s))
	signalGroup(pid, syscall.SIGKILL)
	<-exited
	waitErr := cmd.Wait()
	r.drain()
	out.Duration = time.Since(start)

	if cmd.ProcessState != nil {
		out.ExitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return out, fmt.Errorf("proc: wait %s: %w", s.Args[0], waitErr)
	}
	if r.writeErr != nil {
		return out, fmt.Errorf("proc: copying output of %s: %w", s.Args[0], r.writeErr)
	}
	return out, nil
}

type stopReason int

const (
	stopNone stopReason = iota
	stopTimeout
	stopIdle
	stopInterrupt
)

func graceOf(s Spec) time.Duration {
	if s.Grace <= 0 {
		return DefaultGrace
	}
	return s.Grace
}

// runner holds the plumbing of one Run call.
type runner struct {
	spec  Spec
	start time.Time

	// lastOutput is the time since start of the latest output byte, in
	// nanoseconds; the idle timer reads it without locking.
	lastOutput atomic.Int64

	readers []*os.File  // parent ends, closed by drain
	dsts    []io.Writer // destination of each reader; nil discards
	writers []*os.File  // child ends, closed right after Start
	copies  sync.WaitGroup
	done    chan struct{} // closed when every copy has finished

	writeMu  sync.Mutex // serialises writes and guards writeErr
	writeErr error
}

// openPipes gives each output stream that needs watching or copying its own
// pipe, or one shared pipe when both streams go to the same writer. A stream
// nobody reads and no idle timer watches goes to /dev/null.
func (r *runner) openPipes(cmd *exec.Cmd) error {
	s := r.spec
	watch := s.IdleTimeout > 0
	if s.Stdout != nil && sameWriter(s.Stdout, s.Stderr) {
		w, err := r.pipe(s.Stdout)
		cmd.Stdout, cmd.Stderr = w, w
		return err
	}
	if s.Stdout != nil || watch {
		w, err := r.pipe(s.Stdout)
		if err != nil {
			return err
		}
		cmd.Stdout = w
	}
	if s.Stderr != nil || watch {
		w, err := r.pipe(s.Stderr)
		if err != nil {
			r.closeAll()
			return err
		}
		cmd.Stderr = w
	}
	return nil
}

// pipe opens a pipe whose read end will be copied to dst (nil discards).
func (r *runner) pipe(dst io.Writer) (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("proc: pipe: %w", err)
	}
	r.readers = append(r.readers, pr)
	r.writers = append(r.writers, pw)
	r.dsts = append(r.dsts, dst)
	return pw, nil
}

// closeChildEnds drops the parent's copies of the child's pipe ends, so that
// EOF arrives once every process holding them is gone.
func (r *runner) closeChildEnds() {
	for _, w := range r.writers {
		w.Close()
	}
	r.writers = nil
}

func (r *runner) closeAll() {
	r.closeChildEnds()
	for _, rd := range r.readers {
		rd.Close()
	}
}

func (r *runner) startCopies() {
	r.done = make(chan struct{})
	for i, rd := range r.readers {
		r.copies.Add(1)
		go r.copy(rd, r.dsts[i])
	}
	go func() {
		r.copies.Wait()
		close(r.done)
	}()
}

// copy moves bytes from one pipe to its destination. After a write error it
// keeps reading and discards, so the child never blocks on a full pipe.
func (r *runner) copy(src *os.File, dst io.Writer) {
	defer r.copies.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.lastOutput.Store(int64(time.Since(r.start)))
			if dst != nil {
				r.writeMu.Lock()
				if r.writeErr == nil {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						r.writeErr = werr
					}
				}
				r.writeMu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

// watch waits until the leader exits or a reason to stop it arises.
func (r *runner) watch(ctx context.Context, exited <-chan struct{}) stopReason {
	var wallC, idleC <-chan time.Time
	if r.spec.Timeout > 0 {
		t := time.NewTimer(r.spec.Timeout)
		defer t.Stop()
		wallC = t.C
	}
	var idle *time.Timer
	if r.spec.IdleTimeout > 0 {
		idle = time.NewTimer(r.spec.IdleTimeout)
		defer idle.Stop()
		idleC = idle.C
	}
	for {
		var reason stopReason
		select {
		case <-exited:
			return stopNone
		case <-wallC:
			reason = stopTimeout
		case <-ctx.Done():
			reason = stopInterrupt
		case <-idleC:
			quiet := time.Since(r.start) - time.Duration(r.lastOutput.Load())
			if quiet < r.spec.IdleTimeout {
				idle.Reset(r.spec.IdleTimeout - quiet)
				continue
			}
			reason = stopIdle
		}
		// A child that finished just as a timer fired finished on its own.
		select {
		case <-exited:
			return stopNone
		default:
			return reason
		}
	}
}

// settle waits, at most grace, for the leader to exit and for the output
// pipes to reach EOF: the polite part of stopping the group.
func (r *runner) settle(exited <-chan struct{}, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	done := r.done
	for exited != nil || done != nil {
		select {
		case <-exited:
			exited = nil
		case <-done:
			done = nil
		case <-t.C:
			return
		}
	}
}

// drain waits for the copies to finish; past drainBound it closes the read
// ends so that descendants outside the group cannot keep Run waiting.
func (r *runner) drain() {
	t := time.NewTimer(drainBound)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
	}
	for _, rd := range r.readers {
		rd.Close()
	}
	// Waiting again guarantees no Write to the caller's writers happens
	// after Run returns.
	<-r.done
}

// signalGroup sends sig to the process group led by pid. Errors are ignored:
// ESRCH only means the group is already gone.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}

// waitExited blocks until the child pid has exited without reaping it
// (WNOWAIT), so that the pid, and with it the process group id, stays
// reserved until cmd.Wait.
func waitExited(pid int) {
	const pPID = 1 // P_PID from <sys/wait.h>
	// waitid needs room for a siginfo_t, 128 bytes on Linux; its contents
	// are not needed.
	var info [16]uint64
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			// Any other error (ECHILD when SIGCHLD is ignored and the
			// kernel reaped it) also means the child is gone.
			return
		}
	}
}

// sameWriter reports whether a and b are the same writer, tolerating
// writers whose dynamic types are not comparable.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// lookPath resolves name like a shell would, but in the PATH of env when env
// is given, so a caller's PATH override also decides which program runs.
// Missing programs yield an error matching exec.ErrNotFound.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", notFound(name, err)
		}
		return name, nil
	}
	if env == nil {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", notFound(name, err)
		}
		return p, nil
	}
	pathVar := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v // the last one wins, as in exec.Cmd
		}
	}
	for _, d := range filepath.SplitList(pathVar) {
		// Relative PATH entries would make the result depend on Dir in
		// surprising ways; exec.LookPath refuses them too.
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", notFound(name, fs.ErrNotExist)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

func notFound(name string, err error) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("proc: %s: %w", name, err)
	}
	return fmt.Errorf("proc: %s: %w (%w)", name, exec.ErrNotFound, err)
}

// notExecutable reports whether a Start error means the program itself is
// missing or not executable (the path may vanish after lookPath).
func notExecutable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, exec.ErrNotFound)
}
