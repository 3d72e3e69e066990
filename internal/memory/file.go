package memory

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/store"
)

// FileStore keeps memory as JSON lines in one append-only file. It needs
// no server, so it is what ralph falls back to when a configured store is
// unreachable. Links are appended as records too; reading folds them in.
type FileStore struct {
	Path string
	Now  func() time.Time
}

type fileRecord struct {
	Node
	// LinkTo, when set, makes the record a property update of that node.
	LinkTo string `json:"link_to,omitempty"`
	// Resolve, when set, marks the blockers of that task written before
	// this record resolved (Store.Resolve); the time is in Date.
	Resolve string `json:"resolve,omitempty"`
}

// Name implements Store.
func (f *FileStore) Name() string { return "file" }

// Close implements Store.
func (f *FileStore) Close() error { return nil }

func (f *FileStore) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Add implements Store.
func (f *FileStore) Add(ctx context.Context, n Node) (string, error) {
	if n.ID == "" {
		var b [6]byte
		rand.Read(b[:])
		n.ID = "mem-" + hex.EncodeToString(b[:])
	}
	if n.Date.IsZero() {
		n.Date = f.now().UTC()
	}
	return n.ID, store.AppendJSONLine(f.Path, fileRecord{Node: n})
}

// Link implements Store.
func (f *FileStore) Link(ctx context.Context, id, key, value string) error {
	return store.AppendJSONLine(f.Path, fileRecord{LinkTo: id, Node: Node{Props: map[string]string{key: value}}})
}

// Resolve implements Store.
func (f *FileStore) Resolve(ctx context.Context, task string, at time.Time) error {
	return store.AppendJSONLine(f.Path, fileRecord{Resolve: task, Node: Node{Date: at.UTC()}})
}

// withResolved returns a copy of props with the resolved mark.
func withResolved(props map[string]string, at time.Time) map[string]string {
	out := make(map[string]string, len(props)+2)
	for k, v := range props {
		out[k] = v
	}
	out[PropStatus], out[PropResolvedAt] = StatusResolved, resolvedAt(at)
	return out
}

func (f *FileStore) all() ([]Node, error) {
	fh, err := inputlimit.Open(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var nodes []Node
	index := map[string]int{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var r fileRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue // a torn last line after a crash is skipped, not fatal
		}
		if r.Resolve != "" {
			for i := range nodes {
				if resolves(nodes[i], r.Resolve) {
					nodes[i].Props = withResolved(nodes[i].Props, r.Date)
				}
			}
			continue
		}
		if r.LinkTo != "" {
			if i, ok := index[r.LinkTo]; ok {
				if nodes[i].Props == nil {
					nodes[i].Props = map[string]string{}
				}
				for k, v := range r.Props {
					nodes[i].Props[k] = v
				}
			}
			continue
		}
		if i, ok := index[r.ID]; ok {
			// The same id written again (a step repeated after a crash)
			// is one memory, the latest version.
			nodes[i] = r.Node
			continue
		}
		index[r.ID] = len(nodes)
		nodes = append(nodes, r.Node)
	}
	return nodes, sc.Err()
}

// AgentContext implements Store.
func (f *FileStore) AgentContext(ctx context.Context) ([]Node, error) {
	nodes, err := f.all()
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, n := range nodes {
		if strings.Contains(n.Name, "Brooks") || strings.Contains(n.Name, "Developer Agent") {
			out = append(out, n)
			if len(out) == 10 {
				break
			}
		}
	}
	return out, nil
}

// KnownIssues implements Store.
func (f *FileStore) KnownIssues(ctx context.Context) ([]Node, error) {
	nodes, err := f.all()
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, n := range nodes {
		if n.Props[PropStatus] == StatusResolved {
			continue
		}
		switch n.MemoryType {
		case TypeBlocker, TypeBug, TypeTechnicalDebt:
			out = append(out, n)
		}
	}
	newestFirst(out)
	return limitNodes(out, queryLimit), nil
}

// Search implements Store.
func (f *FileStore) Search(ctx context.Context, text string, limit int) ([]Node, error) {
	nodes, err := f.all()
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, n := range nodes {
		if matchesText(n, text) {
			out = append(out, n)
		}
	}
	newestFirst(out)
	return limitNodes(out, limit), nil
}

// List implements Store.
func (f *FileStore) List(ctx context.Context, typ string, limit int) ([]Node, error) {
	nodes, err := f.all()
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, n := range nodes {
		if typ == "" || n.MemoryType == typ {
			out = append(out, n)
		}
	}
	newestFirst(out)
	return limitNodes(out, limit), nil
}
