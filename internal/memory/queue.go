package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/ralphloop/ralph/internal/store"
)

// Queued wraps a store so that no write is lost while it is unreachable
// (seed 000: "queue Neo4j backfill for next successful connection").
//
// A write the primary refuses is appended to the queue file (JSON lines)
// and reported as done. Every later operation first replays the queue, in
// order; while the queue is not empty new writes join its end, so that
// the primary sees every write in the order it was made. Each replayed
// entry is removed from the file atomically right after the primary took
// it. A crash between the two replays that one entry again, which is
// harmless: ids are fixed before an entry is queued, Add is an upsert on
// the id, Link sets a property and Resolve skips what is resolved, so
// each write takes effect once.
//
// Reads that fail return the error; the loop then goes on with file-only
// context.
type Queued struct {
	Primary   Store
	QueuePath string
	// File is the local primary's file (memory.db, memory.jsonl), "" for
	// a server. Until it exists there is nothing to read, and a read must
	// not create it.
	File string
	Now  func() time.Time

	mu sync.Mutex
	// afterApply is a test hook run after the primary took entry i and
	// before it leaves the queue; an error stops the replay there, as a
	// crash would.
	afterApply func(i int) error
}

// QueueEntry is one write waiting for the primary.
type QueueEntry struct {
	Op    string `json:"op"` // "add", "link" or "resolve"
	Node  *Node  `json:"node,omitempty"`
	ID    string `json:"id,omitempty"`
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
	// Task and At are a resolve's.
	Task   string    `json:"task,omitempty"`
	At     time.Time `json:"at,omitzero"`
	Queued time.Time `json:"queued"`
}

// Name implements Store: the primary's name.
func (q *Queued) Name() string { return q.Primary.Name() }

// Close implements Store.
func (q *Queued) Close() error { return q.Primary.Close() }

func (q *Queued) now() time.Time {
	if q.Now != nil {
		return q.Now()
	}
	return time.Now()
}

// lock serialises queue changes between ralph processes too (a build and
// `ralph memory add`).
func (q *Queued) lock() (func(), error) {
	q.mu.Lock()
	fl := flock.New(q.QueuePath + ".lock")
	if err := fl.Lock(); err != nil {
		q.mu.Unlock()
		return nil, fmt.Errorf("cannot lock the memory queue (%w): check that %s is a folder ralph may write to", err, filepath.Dir(q.QueuePath))
	}
	return func() { fl.Unlock(); q.mu.Unlock() }, nil
}

// Pending returns the writes waiting in the queue, oldest first.
func (q *Queued) Pending() ([]QueueEntry, error) { return readQueue(q.QueuePath) }

func readQueue(path string) ([]QueueEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []QueueEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e QueueEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || (e.Op != "add" && e.Op != "link" && e.Op != "resolve") {
			continue // a torn last line after a crash
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// flush replays the queue; it stops at the first write the primary
// refuses and returns that error. The caller holds the lock.
func (q *Queued) flush(ctx context.Context) error {
	entries, err := readQueue(q.QueuePath)
	if err != nil || len(entries) == 0 {
		return err
	}
	for i, e := range entries {
		switch e.Op {
		case "add":
			_, err = q.Primary.Add(ctx, *e.Node)
		case "link":
			err = q.Primary.Link(ctx, e.ID, e.Key, e.Value)
		case "resolve":
			err = q.Primary.Resolve(ctx, e.Task, e.At)
		}
		if err != nil {
			return err
		}
		if q.afterApply != nil {
			if err := q.afterApply(i); err != nil {
				return err
			}
		}
		if err := writeQueue(q.QueuePath, entries[i+1:]); err != nil {
			return fmt.Errorf("memory queue: %w", err)
		}
	}
	return nil
}

func writeQueue(path string, entries []QueueEntry) error {
	if len(entries) == 0 {
		err := os.Remove(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	var buf bytes.Buffer
	for _, e := range entries {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	return store.WriteFileAtomic(path, buf.Bytes(), 0o644)
}

// write replays the queue, then applies the write; if either fails, the
// write joins the queue.
func (q *Queued) write(ctx context.Context, e QueueEntry, apply func() error) error {
	unlock, err := q.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := q.flush(ctx); err == nil {
		if err := apply(); err == nil {
			return nil
		}
	}
	e.Queued = q.now().UTC()
	if err := store.AppendJSONLine(q.QueuePath, e); err != nil {
		return fmt.Errorf("memory unreachable and not queued: %w", err)
	}
	return nil
}

// Add implements Store. The id and date are fixed here, before the write
// can be queued, so that a replay writes the same node.
func (q *Queued) Add(ctx context.Context, n Node) (string, error) {
	if n.ID == "" {
		n.ID = NewID()
	}
	if n.Date.IsZero() {
		n.Date = q.now().UTC()
	}
	err := q.write(ctx, QueueEntry{Op: "add", Node: &n}, func() error {
		_, err := q.Primary.Add(ctx, n)
		return err
	})
	return n.ID, err
}

// Link implements Store.
func (q *Queued) Link(ctx context.Context, id, key, value string) error {
	return q.write(ctx, QueueEntry{Op: "link", ID: id, Key: key, Value: value}, func() error {
		return q.Primary.Link(ctx, id, key, value)
	})
}

// Resolve implements Store. A queued resolve replays in order, after
// the blockers queued before it, so that it marks them too.
func (q *Queued) Resolve(ctx context.Context, task string, at time.Time) error {
	return q.write(ctx, QueueEntry{Op: "resolve", Task: task, At: at.UTC()}, func() error {
		return q.Primary.Resolve(ctx, task, at)
	})
}

// read replays the queue (a read that reaches the primary should see every
// earlier write), then reads. A read with nothing queued creates nothing:
// it takes no lock (whose file it would create), and a local store whose
// file does not exist yet holds no memories.
func (q *Queued) read(ctx context.Context, f func() ([]Node, error)) ([]Node, error) {
	pending, err := readQueue(q.QueuePath)
	if err != nil {
		return nil, err
	}
	if len(pending) == 0 {
		if q.File != "" {
			if _, err := os.Stat(q.File); errors.Is(err, os.ErrNotExist) {
				return nil, nil
			}
		}
		return f()
	}
	unlock, err := q.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := q.flush(ctx); err != nil {
		return nil, err
	}
	return f()
}

// AgentContext implements Store.
func (q *Queued) AgentContext(ctx context.Context) ([]Node, error) {
	return q.read(ctx, func() ([]Node, error) { return q.Primary.AgentContext(ctx) })
}

// KnownIssues implements Store.
func (q *Queued) KnownIssues(ctx context.Context) ([]Node, error) {
	return q.read(ctx, func() ([]Node, error) { return q.Primary.KnownIssues(ctx) })
}

// Search implements Store.
func (q *Queued) Search(ctx context.Context, text string, limit int) ([]Node, error) {
	return q.read(ctx, func() ([]Node, error) { return q.Primary.Search(ctx, text, limit) })
}

// List implements Store.
func (q *Queued) List(ctx context.Context, typ string, limit int) ([]Node, error) {
	return q.read(ctx, func() ([]Node, error) { return q.Primary.List(ctx, typ, limit) })
}
