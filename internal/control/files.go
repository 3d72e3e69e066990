package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/store"
)

// The control folder (.ralph/control/) holds:
//
//	runs/<run>.lock, runs/<run>.json   a run that takes commands (Attach)
//	pause.json                         the pause in force, until resumed
//	stop.json                          the last stop given
//	queue/<id>.json                    commands waiting for a run's next step
//
// Pause and stop are flags every attached run reads, so that all the
// workers of a parallel build and a session next to them pause together.
// A run heeds only flags given after it attached: a pause or stop that
// outlived its run never holds back the next one. Queued commands are
// taken by exactly one run, which removes them.

// pollEvery is how often an attached run looks at the flags. Commands are
// files so that any process can give them; a fifth of a second is quick
// to a person and nothing to the machine.
var pollEvery = 200 * time.Millisecond

// Run describes a run that takes commands.
type Run struct {
	Run     string    `json:"run"`
	Machine string    `json:"machine"`
	Takes   []Kind    `json:"takes"`
	PID     int       `json:"pid"`
	Since   time.Time `json:"since"`
}

// Folder is a workspace's control folder.
type Folder struct{ Dir string }

func (f Folder) runsDir() string   { return filepath.Join(f.Dir, "runs") }
func (f Folder) queueDir() string  { return filepath.Join(f.Dir, "queue") }
func (f Folder) pausePath() string { return filepath.Join(f.Dir, "pause.json") }
func (f Folder) stopPath() string  { return filepath.Join(f.Dir, "stop.json") }

// Attached lists the runs that take commands now, oldest first. Records
// of runs that ended without letting go (a crash) are removed.
func (f Folder) Attached() []Run {
	entries, _ := os.ReadDir(f.runsDir())
	var runs []Run
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		lock := filepath.Join(f.runsDir(), name+".lock")
		if _, held := store.Held(lock); !held {
			os.Remove(filepath.Join(f.runsDir(), e.Name()))
			os.Remove(lock)
			continue
		}
		var r Run
		if b, err := os.ReadFile(filepath.Join(f.runsDir(), e.Name())); err == nil && json.Unmarshal(b, &r) == nil {
			runs = append(runs, r)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Since.Before(runs[j].Since) })
	return runs
}

// Taker returns the first attached run that takes kind.
func (f Folder) Taker(kind Kind) (Run, bool) {
	for _, r := range f.Attached() {
		if slices.Contains(r.Takes, kind) {
			return r, true
		}
	}
	return Run{}, false
}

// Enqueue leaves cmd for a run to take at its next step boundary.
func (f Folder) Enqueue(cmd Command) error {
	return f.write(filepath.Join(f.queueDir(), cmd.ID+".json"), cmd)
}

// Queued lists the commands waiting in the queue, in the order given.
func (f Folder) Queued() ([]Command, error) {
	entries, err := os.ReadDir(f.queueDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cmds []Command
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var c Command
		if _, err := store.ReadJSON(filepath.Join(f.queueDir(), e.Name()), SchemaVersion, &c); err != nil {
			continue // a half-written or foreign file: not a command
		}
		cmds = append(cmds, c)
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].ID < cmds[j].ID })
	return cmds, nil
}

// SetPause records the pause cmd: every attached run waits after its
// current step until ClearPause.
func (f Folder) SetPause(cmd Command) error { return f.write(f.pausePath(), cmd) }

// ClearPause ends the pause in force; none is no error.
func (f Folder) ClearPause() error {
	err := os.Remove(f.pausePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Paused returns the pause in force, nil when there is none.
func (f Folder) Paused() *Command { return f.read(f.pausePath()) }

// RequestStop records the stop cmd: every run attached before it ends as
// interrupted, as Ctrl+C would end it.
func (f Folder) RequestStop(cmd Command) error { return f.write(f.stopPath(), cmd) }

func (f Folder) read(path string) *Command {
	var c Command
	if _, err := store.ReadJSON(path, SchemaVersion, &c); err != nil {
		return nil
	}
	return &c
}

func (f Folder) write(path string, cmd Command) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return store.WriteJSON(path, cmd)
}

// Attachment is a run's hold on the control folder: while it lasts, the
// run is listed by Attached and takes the commands it named.
type Attachment struct {
	f     Folder
	run   Run
	lock  *store.Lock
	name  string
	since time.Time
}

// Attach makes run one that takes commands. Detach lets go; a crash lets
// go by itself (the lock is the kernel's).
func (f Folder) Attach(run Run) (*Attachment, error) {
	if err := os.MkdirAll(f.runsDir(), 0o755); err != nil {
		return nil, err
	}
	if len(f.Attached()) == 0 {
		// A pause no run heeds any more (its run ended or died while
		// paused) would show in the status as if this run were paused.
		f.ClearPause()
	}
	name := strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(run.Run)
	if name == "" {
		name = fmt.Sprintf("pid-%d", os.Getpid())
	}
	lock, err := store.TryLock(filepath.Join(f.runsDir(), name+".lock"), "ralph "+run.Machine+" "+run.Run)
	if err != nil {
		return nil, err
	}
	if run.Since.IsZero() {
		run.Since = time.Now().UTC()
	}
	run.PID = os.Getpid()
	b, _ := json.Marshal(run)
	if err := store.WriteFileAtomic(filepath.Join(f.runsDir(), name+".json"), b, 0o644); err != nil {
		lock.Unlock()
		return nil, err
	}
	return &Attachment{f: f, run: run, lock: lock, name: name, since: run.Since}, nil
}

// Detach ends the attachment. A nil attachment does nothing.
func (a *Attachment) Detach() {
	if a == nil || a.lock == nil {
		return
	}
	os.Remove(filepath.Join(a.f.runsDir(), a.name+".json"))
	a.lock.Unlock()
	a.lock = nil
}

// Paused returns the pause this run heeds: one given after it attached.
func (a *Attachment) Paused() *Command {
	if a == nil {
		return nil
	}
	if p := a.f.Paused(); p != nil && !p.Time.Before(a.since) {
		return p
	}
	return nil
}

// Stopped returns the stop this run heeds, nil when none was given.
func (a *Attachment) Stopped() *Command {
	if a == nil {
		return nil
	}
	if s := a.f.read(a.f.stopPath()); s != nil && !s.Time.Before(a.since) {
		return s
	}
	return nil
}

// StopError is the cause of a context a stop command ended.
type StopError struct{ Cmd Command }

func (e *StopError) Error() string { return fmt.Sprintf("stopped by %s (ralph stop)", e.Cmd.By) }

// WatchStop returns a context that ends, with a *StopError as its cause,
// when a stop is given to this run, and a function that ends the watch.
func (a *Attachment) WatchStop(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if a == nil {
		return ctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-t.C:
				if s := a.Stopped(); s != nil {
					cancel(&StopError{Cmd: *s})
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// Boundary is where a runner calls in between two steps. While a pause
// given after the run attached is in force, it waits: it calls paused
// once with the pause, and resumed once when it ends. It returns the
// context's error when the run is stopped or interrupted meanwhile.
func (a *Attachment) Boundary(ctx context.Context, paused func(Command), resumed func()) error {
	p := a.Paused()
	if p == nil {
		return ctx.Err()
	}
	if paused != nil {
		paused(*p)
	}
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for a.Paused() != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if resumed != nil {
		resumed()
	}
	return ctx.Err()
}

// Take removes and returns the queued commands of the given kinds, in the
// order they were given. Another run may take one first; it is then not
// returned here.
func (a *Attachment) Take(kinds ...Kind) []Command {
	if a == nil {
		return nil
	}
	cmds, _ := a.f.Queued()
	var taken []Command
	for _, c := range cmds {
		if !slices.Contains(kinds, c.Kind) {
			continue
		}
		// Removal is the claim: of two runs, the one whose remove
		// succeeds takes the command.
		if os.Remove(filepath.Join(a.f.queueDir(), c.ID+".json")) == nil {
			taken = append(taken, c)
		}
	}
	return taken
}

// Run returns what the attachment says of its run.
func (a *Attachment) Run() Run {
	if a == nil {
		return Run{}
	}
	return a.run
}
