package memory

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// SQLiteStore is the default memory: an embedded graph of nodes and edges
// in one SQLite file (.ralph/memory.db), no server needed. It runs in WAL
// mode with one writer connection; transactions take the write lock at
// BEGIN (_txlock=immediate) and wait for it (busy_timeout) rather than
// failing when another ralph process writes.
//
// The database is opened on first use and reopened when the file at Path
// is no longer the one that was opened (moved away, replaced): a store
// that cannot be opened is unreachable, and is retried on the next call.
type SQLiteStore struct {
	Path string
	Now  func() time.Time

	mu     sync.Mutex
	db     *sql.DB
	opened os.FileInfo
}

// The schema: nodes with the columns the seed's queries filter on, free
// properties as JSON, and typed edges between nodes.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS nodes (
	id          TEXT PRIMARY KEY,
	name        TEXT NOT NULL DEFAULT '',
	memory_type TEXT NOT NULL DEFAULT '',
	text        TEXT NOT NULL DEFAULT '',
	date        TEXT NOT NULL DEFAULT '',
	props       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS nodes_type_date ON nodes(memory_type, date);
CREATE INDEX IF NOT EXISTS nodes_date ON nodes(date);
CREATE TABLE IF NOT EXISTS edges (
	src   TEXT NOT NULL,
	dst   TEXT NOT NULL,
	type  TEXT NOT NULL,
	props TEXT NOT NULL DEFAULT '{}',
	PRIMARY KEY (src, dst, type)
);
CREATE INDEX IF NOT EXISTS edges_dst ON edges(dst, type);
`

// The SQL equivalents of the seed's two MEMORY_LOAD queries. instr() is
// case-sensitive like Cypher's CONTAINS; rowid keeps insertion order
// (upserts keep a node's rowid), which is what an unordered MATCH returns
// on the file store. Known issues leave out what is resolved (see
// Store.KnownIssues).
const (
	sqlAgentContext = `SELECT id, name, memory_type, text, date, props FROM nodes
WHERE instr(name, 'Brooks') > 0 OR instr(name, 'Developer Agent') > 0
ORDER BY rowid LIMIT 10`
	sqlKnownIssues = `SELECT id, name, memory_type, text, date, props FROM nodes
WHERE memory_type IN ('blocker', 'bug', 'technical_debt')
AND coalesce(json_extract(props, '$.status'), '') <> 'resolved'
ORDER BY date DESC, rowid LIMIT 10`
	// sqlResolve marks a task's open blockers, and its subtasks' (task
	// "US-001/T-1" for "US-001"), resolved.
	sqlResolve = `UPDATE nodes SET props = json_set(props, '$.status', 'resolved', '$.resolved_at', ?2)
WHERE memory_type = 'blocker'
AND (json_extract(props, '$.task') = ?1 OR substr(json_extract(props, '$.task'), 1, length(?1) + 1) = ?1 || '/')
AND coalesce(json_extract(props, '$.status'), '') <> 'resolved'`
	sqlSearch = `SELECT id, name, memory_type, text, date, props FROM nodes
WHERE memory_type <> 'commit' AND (instr(lower(name), lower(?1)) > 0 OR instr(lower(text), lower(?1)) > 0)
ORDER BY date DESC, rowid LIMIT ?2`
	sqlList = `SELECT id, name, memory_type, text, date, props FROM nodes
WHERE memory_type <> 'commit' AND (?1 = '' OR memory_type = ?1)
ORDER BY date DESC, rowid LIMIT ?2`
	sqlUpsert = `INSERT INTO nodes (id, name, memory_type, text, date, props) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT(id) DO UPDATE SET name = excluded.name, memory_type = excluded.memory_type,
	text = excluded.text, date = excluded.date, props = excluded.props`
)

// dateLayout is fixed-width UTC so that dates sort as text.
const dateLayout = "2006-01-02T15:04:05.000000000Z"

// Name implements Store.
func (s *SQLiteStore) Name() string { return "sqlite" }

// Close implements Store.
func (s *SQLiteStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked()
}

func (s *SQLiteStore) closeLocked() error {
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db, s.opened = nil, nil
	return err
}

func (s *SQLiteStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// conn returns the open database, opening (or reopening) it as needed.
func (s *SQLiteStore) conn(ctx context.Context) (*sql.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, statErr := os.Stat(s.Path)
	if s.db != nil {
		if statErr == nil && os.SameFile(fi, s.opened) {
			return s.db, nil
		}
		s.closeLocked() // the file was moved or replaced: reconnect
	}
	if statErr == nil && fi.IsDir() {
		return nil, fmt.Errorf("sqlite memory %s: is a directory", s.Path)
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return nil, fmt.Errorf("sqlite memory: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+s.Path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite memory %s: %w", s.Path, err)
	}
	// One connection: one writer, and no reader that sees an older
	// snapshot than the last write of this process.
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite memory %s: %w", s.Path, err)
	}
	fi, err = os.Stat(s.Path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite memory %s: %w", s.Path, err)
	}
	s.db, s.opened = db, fi
	return db, nil
}

// NewID returns a fresh random memory id.
func NewID() string {
	var b [6]byte
	rand.Read(b[:])
	return "mem-" + hex.EncodeToString(b[:])
}

// Add implements Store. The same id written twice is one node, the later
// version.
func (s *SQLiteStore) Add(ctx context.Context, n Node) (string, error) {
	db, err := s.conn(ctx)
	if err != nil {
		return "", err
	}
	if n.ID == "" {
		n.ID = NewID()
	}
	if n.Date.IsZero() {
		n.Date = s.now()
	}
	props, err := json.Marshal(orEmpty(n.Props))
	if err != nil {
		return "", err
	}
	_, err = db.ExecContext(ctx, sqlUpsert, n.ID, n.Name, n.MemoryType, n.Text, n.Date.UTC().Format(dateLayout), string(props))
	if err != nil {
		return "", fmt.Errorf("sqlite memory: %w", err)
	}
	return n.ID, nil
}

// Link implements Store: it sets the property on the node and, for a
// commit, adds an edge to the commit's node (created if new).
func (s *SQLiteStore) Link(ctx context.Context, id, key, value string) error {
	db, err := s.conn(ctx)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite memory: %w", err)
	}
	defer tx.Rollback()
	var raw string
	err = tx.QueryRowContext(ctx, `SELECT props FROM nodes WHERE id = ?`, id).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // as on the other stores, a link to no node is dropped
	}
	if err != nil {
		return fmt.Errorf("sqlite memory: %w", err)
	}
	props := map[string]string{}
	json.Unmarshal([]byte(raw), &props)
	props[key] = value
	b, _ := json.Marshal(props)
	if _, err := tx.ExecContext(ctx, `UPDATE nodes SET props = ? WHERE id = ?`, string(b), id); err != nil {
		return fmt.Errorf("sqlite memory: %w", err)
	}
	dst, edge := key+":"+value, "HAS_"+key
	if key == "commit" {
		edge = "COMMITTED_IN"
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, name, memory_type, date) VALUES (?, ?, 'commit', ?) ON CONFLICT(id) DO NOTHING`,
		dst, key+" "+value, s.now().UTC().Format(dateLayout)); err != nil {
		return fmt.Errorf("sqlite memory: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO edges (src, dst, type) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, id, dst, edge); err != nil {
		return fmt.Errorf("sqlite memory: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite memory: %w", err)
	}
	return nil
}

func (s *SQLiteStore) query(ctx context.Context, q string, args ...any) ([]Node, error) {
	db, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite memory: %w", err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		var n Node
		var date, props string
		if err := rows.Scan(&n.ID, &n.Name, &n.MemoryType, &n.Text, &date, &props); err != nil {
			return nil, fmt.Errorf("sqlite memory: %w", err)
		}
		n.Date, _ = time.Parse(dateLayout, date)
		if props != "" && props != "{}" && props != "null" {
			json.Unmarshal([]byte(props), &n.Props)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite memory: %w", err)
	}
	return out, nil
}

// AgentContext implements Store (seed query A).
func (s *SQLiteStore) AgentContext(ctx context.Context) ([]Node, error) {
	return s.query(ctx, sqlAgentContext)
}

// KnownIssues implements Store (seed query B).
func (s *SQLiteStore) KnownIssues(ctx context.Context) ([]Node, error) {
	return s.query(ctx, sqlKnownIssues)
}

// Resolve implements Store.
func (s *SQLiteStore) Resolve(ctx context.Context, task string, at time.Time) error {
	db, err := s.conn(ctx)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, sqlResolve, task, resolvedAt(at)); err != nil {
		return fmt.Errorf("sqlite memory: %w", err)
	}
	return nil
}

// Search implements Store.
func (s *SQLiteStore) Search(ctx context.Context, text string, limit int) ([]Node, error) {
	return s.query(ctx, sqlSearch, text, sqlLimit(limit))
}

// List implements Store.
func (s *SQLiteStore) List(ctx context.Context, typ string, limit int) ([]Node, error) {
	return s.query(ctx, sqlList, typ, sqlLimit(limit))
}

// Edges returns the edges leaving node id as type → destination.
func (s *SQLiteStore) Edges(ctx context.Context, id string) (map[string]string, error) {
	db, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT type, dst FROM edges WHERE src = ? ORDER BY type`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var t, d string
		if err := rows.Scan(&t, &d); err != nil {
			return nil, err
		}
		out[t] = d
	}
	return out, rows.Err()
}

func sqlLimit(limit int) int {
	if limit <= 0 {
		return -1 // SQLite: no limit
	}
	return limit
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
