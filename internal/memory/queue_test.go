package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var errDown = errors.New("connection refused")

// flaky is a primary that can be made unreachable, and counts the writes
// that reach it.
type flaky struct {
	Store
	mu     sync.Mutex
	down   bool
	writes []string // "add ID" / "link ID key=value", in arrival order
}

func (f *flaky) setDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }
func (f *flaky) isDown() bool   { f.mu.Lock(); defer f.mu.Unlock(); return f.down }

func (f *flaky) Add(ctx context.Context, n Node) (string, error) {
	if f.isDown() {
		return "", errDown
	}
	f.mu.Lock()
	f.writes = append(f.writes, "add "+n.ID)
	f.mu.Unlock()
	return f.Store.Add(ctx, n)
}

func (f *flaky) Link(ctx context.Context, id, k, v string) error {
	if f.isDown() {
		return errDown
	}
	f.mu.Lock()
	f.writes = append(f.writes, "link "+id+" "+k+"="+v)
	f.mu.Unlock()
	return f.Store.Link(ctx, id, k, v)
}

func (f *flaky) Resolve(ctx context.Context, task string, at time.Time) error {
	if f.isDown() {
		return errDown
	}
	f.mu.Lock()
	f.writes = append(f.writes, "resolve "+task)
	f.mu.Unlock()
	return f.Store.Resolve(ctx, task, at)
}

func (f *flaky) AgentContext(ctx context.Context) ([]Node, error) {
	if f.isDown() {
		return nil, errDown
	}
	return f.Store.AgentContext(ctx)
}

func (f *flaky) KnownIssues(ctx context.Context) ([]Node, error) {
	if f.isDown() {
		return nil, errDown
	}
	return f.Store.KnownIssues(ctx)
}

func (f *flaky) List(ctx context.Context, typ string, limit int) ([]Node, error) {
	if f.isDown() {
		return nil, errDown
	}
	return f.Store.List(ctx, typ, limit)
}

// A task blocked, then done while the store was away: the resolve waits
// in the queue behind the blocker and marks it once replayed.
func TestQueuedResolveReplaysAfterTheBlocker(t *testing.T) {
	ctx := context.Background()
	f, q := newFlaky(t)
	at := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	f.setDown(true)
	mustAdd(t, q, Node{ID: "blk-1", Name: "US-001 blocked", MemoryType: TypeBlocker, Date: at.Add(-time.Hour), Props: map[string]string{PropTask: "US-001"}})
	if err := q.Resolve(ctx, "US-001", at); err != nil {
		t.Fatalf("resolve while down: %v, want it queued", err)
	}
	if pending, _ := q.Pending(); len(pending) != 2 || pending[1].Op != "resolve" || pending[1].Task != "US-001" || !pending[1].At.Equal(at) {
		t.Fatalf("queue = %+v", pending)
	}
	f.setDown(false)
	_, issues, err := Load(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(issues) != 0 {
		t.Errorf("known issues after replay = %+v, want none", issues)
	}
	if want := []string{"add blk-1", "resolve US-001"}; !equal(f.writes, want) {
		t.Errorf("writes = %q, want %q", f.writes, want)
	}
	blockers, _ := q.List(ctx, TypeBlocker, 0)
	if len(blockers) != 1 || blockers[0].Props[PropResolvedAt] != "2026-11-03T09:00:00Z" {
		t.Errorf("blockers = %+v, want blk-1 resolved at the time of the resolve", blockers)
	}
}

func newFlaky(t *testing.T) (*flaky, *Queued) {
	dir := t.TempDir()
	sq := &SQLiteStore{Path: filepath.Join(dir, "memory.db")}
	t.Cleanup(func() { sq.Close() })
	f := &flaky{Store: sq}
	return f, &Queued{Primary: f, QueuePath: filepath.Join(dir, "memory-queue.jsonl")}
}

// A run as the loop does it: load, commit (event + link), block; the
// store goes away mid-run and comes back.
func TestQueuedUnreachableMidRunThenReplayedOnce(t *testing.T) {
	ctx := context.Background()
	f, q := newFlaky(t)
	base := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)

	// Iteration 1: reachable.
	if _, _, err := Load(ctx, q); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, q, Node{ID: "evt-r1-1", Name: "US-001 complete", MemoryType: TypeEvent, Date: base, Props: map[string]string{"event": EventTaskComplete}})
	if err := q.Link(ctx, "evt-r1-1", "commit", "c1"); err != nil {
		t.Fatal(err)
	}

	// The store goes away: MEMORY_LOAD fails (the loop falls back), the
	// writes are queued and reported done.
	f.setDown(true)
	if _, _, err := Load(ctx, q); !errors.Is(err, errDown) {
		t.Fatalf("load while down: %v, want the primary's error", err)
	}
	mustAdd(t, q, Node{ID: "evt-r1-2", Name: "US-002 complete", MemoryType: TypeEvent, Date: base.Add(time.Hour), Props: map[string]string{"event": EventTaskComplete}})
	if err := q.Link(ctx, "evt-r1-2", "commit", "c2"); err != nil {
		t.Fatal(err)
	}
	id, err := q.Add(ctx, Node{Name: "US-003 blocked", MemoryType: TypeBlocker, Props: map[string]string{"event": EventTaskBlocker}})
	if err != nil || id == "" {
		t.Fatal(id, err)
	}
	pending, err := q.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 3 || pending[0].Node.ID != "evt-r1-2" || pending[1].Op != "link" || pending[2].Node.ID != id || pending[2].Node.Date.IsZero() {
		t.Fatalf("queue = %+v", pending)
	}
	if _, _, err := Load(ctx, q); err == nil {
		t.Fatal("a load while down must fail")
	}

	// Back: the next operation replays the queue in order, then runs.
	f.setDown(false)
	_, issues, err := Load(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(issues) != 1 || issues[0].ID != id {
		t.Fatalf("issues after replay = %+v", issues)
	}
	want := []string{"add evt-r1-1", "link evt-r1-1 commit=c1", "add evt-r1-2", "link evt-r1-2 commit=c2", "add " + id}
	if !equal(f.writes, want) {
		t.Fatalf("writes = %q\nwant %q", f.writes, want)
	}
	if _, err := os.Stat(q.QueuePath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("queue file still there: %v", err)
	}
	// Exactly once: more operations replay nothing again.
	Load(ctx, q)
	mustAdd(t, q, Node{ID: "evt-r1-4", Name: "US-004 complete", MemoryType: TypeEvent, Date: base.Add(3 * time.Hour)})
	if !equal(f.writes, append(want, "add evt-r1-4")) {
		t.Fatalf("writes = %q", f.writes)
	}
	events, _ := q.List(ctx, TypeEvent, 0)
	if len(events) != 3 || events[1].ID != "evt-r1-2" || events[1].Props["commit"] != "c2" {
		t.Fatalf("events = %+v", events)
	}
}

// New writes wait behind the queue, so that order holds even when the
// primary comes back between them.
func TestQueuedWritesKeepOrderBehindTheQueue(t *testing.T) {
	f, q := newFlaky(t)
	f.setDown(true)
	mustAdd(t, q, Node{ID: "a", Name: "a", MemoryType: TypeBug})
	f.setDown(false)
	mustAdd(t, q, Node{ID: "b", Name: "b", MemoryType: TypeBug})
	if !equal(f.writes, []string{"add a", "add b"}) {
		t.Fatalf("writes = %q", f.writes)
	}
}

// A crash after the primary took an entry and before it left the queue:
// the next process replays that entry again, and the store still holds
// one memory per write.
func TestQueuedReplayAfterCrashDoesNotDuplicate(t *testing.T) {
	ctx := context.Background()
	f, q := newFlaky(t)
	f.setDown(true)
	for _, id := range []string{"e1", "e2", "e3"} {
		mustAdd(t, q, Node{ID: id, Name: id, MemoryType: TypeBlocker, Date: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	}
	q.Link(ctx, "e2", "commit", "c2")
	f.setDown(false)
	crash := errors.New("killed")
	q.afterApply = func(i int) error {
		if i == 1 {
			return crash // e2 reached the store; the queue still lists it
		}
		return nil
	}
	if _, err := q.List(ctx, "", 0); !errors.Is(err, crash) {
		t.Fatalf("replay: %v", err)
	}
	pending, _ := q.Pending()
	if len(pending) != 3 || pending[0].Node.ID != "e2" {
		t.Fatalf("queue after the crash = %+v", pending)
	}
	// A new process over the same files.
	q2 := &Queued{Primary: f, QueuePath: q.QueuePath}
	nodes, err := q2.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("store holds %d memories, want 3: %+v", len(nodes), nodes)
	}
	if n := find(nodes, "e2"); n == nil || n.Props["commit"] != "c2" {
		t.Fatalf("e2 = %+v", n)
	}
	want := []string{"add e1", "add e2", "add e2", "add e3", "link e2 commit=c2"}
	if !equal(f.writes, want) {
		t.Fatalf("writes = %q\nwant %q (e2 replayed again, harmlessly)", f.writes, want)
	}
	if p, _ := q2.Pending(); len(p) != 0 {
		t.Fatalf("queue not empty: %+v", p)
	}
}

func TestQueuedNameIsThePrimarys(t *testing.T) {
	if n := (&Queued{Primary: &SQLiteStore{}}).Name(); n != "sqlite" {
		t.Fatal(n)
	}
}

// The SQLite store reconnects when its file is replaced, and is
// unreachable while a directory stands in its place.
func TestSQLiteUnreachableAndBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "memory.db")
	s := &SQLiteStore{Path: p}
	defer s.Close()
	mustAdd(t, s, Node{ID: "x", Name: "x", MemoryType: TypeBug})
	s.Close()
	os.Rename(p, p+".away")
	os.Remove(p + "-wal")
	os.Remove(p + "-shm")
	os.Mkdir(p, 0o755)
	if _, _, err := Load(ctx, s); err == nil {
		t.Fatal("want an error while a directory stands there")
	}
	os.Remove(p)
	os.Rename(p+".away", p)
	_, issues, err := Load(ctx, s)
	if err != nil || len(issues) != 1 {
		t.Fatal(issues, err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
