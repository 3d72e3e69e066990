package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The contract every Store passes. Each implementation gets a fresh, empty
// store from its constructor.
func runContract(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	base := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	// A unique tag keeps the suite's nodes apart on a shared server.
	tag := fmt.Sprintf("ct%d", time.Now().UnixNano())

	t.Run("MemoryLoadQueries", func(t *testing.T) {
		s := open(t)
		mustAdd(t, s, Node{ID: tag + "-ctx", Name: "Brooks principles " + tag, MemoryType: TypeAgentContext, Date: base})
		mustAdd(t, s, Node{ID: tag + "-dev", Name: "Developer Agent notes " + tag, MemoryType: TypeLesson, Date: base})
		mustAdd(t, s, Node{ID: tag + "-lower", Name: "brooks lowercase " + tag, MemoryType: TypeLesson, Date: base})
		for i := 0; i < 12; i++ {
			mustAdd(t, s, Node{ID: fmt.Sprintf("%s-issue-%02d", tag, i), Name: fmt.Sprintf("issue %d %s", i, tag),
				MemoryType: []string{TypeBlocker, TypeBug, TypeTechnicalDebt}[i%3], Date: base.Add(time.Duration(i) * time.Hour)})
		}
		mustAdd(t, s, Node{ID: tag + "-lesson", Name: "a lesson " + tag, MemoryType: TypeLesson, Date: base.Add(100 * time.Hour)})
		agentCtx, issues, err := Load(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, n := range agentCtx {
			names[n.Name] = true
		}
		if !names["Brooks principles "+tag] || !names["Developer Agent notes "+tag] || names["brooks lowercase "+tag] {
			t.Errorf("agent context = %v: want the Brooks and Developer Agent nodes, CONTAINS is case-sensitive", names)
		}
		if len(agentCtx) > 10 {
			t.Errorf("agent context has %d nodes, limit is 10", len(agentCtx))
		}
		if len(issues) != 10 {
			t.Fatalf("known issues = %d nodes, want the limit 10", len(issues))
		}
		for i, n := range issues {
			want := fmt.Sprintf("issue %d %s", 11-i, tag)
			if n.Name != want {
				t.Errorf("issue %d = %q, want %q (newest first)", i, n.Name, want)
			}
			if !n.Date.Equal(base.Add(time.Duration(11-i) * time.Hour)) {
				t.Errorf("issue %d date = %v", i, n.Date)
			}
		}
	})

	t.Run("AddIsIdempotentOnID", func(t *testing.T) {
		s := open(t)
		n := Node{ID: tag + "-same", Name: "first " + tag, MemoryType: TypeBug, Date: base, Text: "v1", Props: map[string]string{"k": "v"}}
		mustAdd(t, s, n)
		n.Name, n.Text = "second "+tag, "v2"
		mustAdd(t, s, n)
		got, err := s.Search(ctx, tag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Name != "second "+tag || got[0].Text != "v2" || got[0].Props["k"] != "v" {
			t.Fatalf("after two writes of one id: %+v", got)
		}
	})

	t.Run("LinkSetsProperty", func(t *testing.T) {
		s := open(t)
		id := mustAdd(t, s, Node{ID: tag + "-evt", Name: "US-001 complete " + tag, MemoryType: TypeEvent, Date: base,
			Props: map[string]string{"event": EventTaskComplete}})
		if err := s.Link(ctx, id, "commit", "abc123"); err != nil {
			t.Fatal(err)
		}
		if err := s.Link(ctx, id, "commit", "abc123"); err != nil { // a replayed link
			t.Fatal(err)
		}
		got, err := s.List(ctx, TypeEvent, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := find(got, id)
		if n == nil || n.Props["commit"] != "abc123" || n.Props["event"] != EventTaskComplete {
			t.Fatalf("linked event = %+v", n)
		}
		if err := s.Link(ctx, tag+"-nobody", "commit", "x"); err != nil {
			t.Errorf("link to a missing node: %v, want it dropped", err)
		}
	})

	t.Run("SearchAndList", func(t *testing.T) {
		s := open(t)
		mustAdd(t, s, Node{ID: tag + "-a", Name: "Flaky TEST in CI " + tag, MemoryType: TypeBug, Date: base})
		mustAdd(t, s, Node{ID: tag + "-b", Name: "slow build " + tag, Text: "the flaky test again", MemoryType: TypeTechnicalDebt, Date: base.Add(time.Hour)})
		mustAdd(t, s, Node{ID: tag + "-c", Name: "unrelated " + tag, MemoryType: TypeLesson, Date: base.Add(2 * time.Hour)})
		got, err := s.Search(ctx, "flaky test", 0)
		if err != nil {
			t.Fatal(err)
		}
		got = only(got, tag)
		if len(got) != 2 || got[0].ID != tag+"-b" || got[1].ID != tag+"-a" {
			t.Fatalf("search = %v, want b then a (name or text, any case, newest first)", ids(got))
		}
		got, _ = s.Search(ctx, tag, 1)
		if len(got) != 1 {
			t.Errorf("search limit 1 gave %d", len(got))
		}
		got, err = s.List(ctx, TypeLesson, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got = only(got, tag); len(got) != 1 || got[0].ID != tag+"-c" {
			t.Errorf("list lesson = %v", ids(got))
		}
		got, _ = s.List(ctx, "", 0)
		if got = only(got, tag); len(got) != 3 || got[0].ID != tag+"-c" || got[2].ID != tag+"-a" {
			t.Errorf("list all = %v, want newest first", ids(got))
		}
	})

	// Blockers of a task that was done or unblocked since are history:
	// they stay in the store, marked resolved, and are no known issue.
	t.Run("ResolvedBlockersLeaveKnownIssues", func(t *testing.T) {
		s := open(t)
		blocker := func(id, task string, h int) Node {
			return Node{ID: tag + "-" + id, Name: task + " blocked " + tag, MemoryType: TypeBlocker, Date: base.Add(time.Duration(h) * time.Hour),
				Props: map[string]string{"event": EventTaskBlocker, PropTask: task}}
		}
		mustAdd(t, s, blocker("story", "US-001", 1))
		mustAdd(t, s, blocker("sub", "US-001/T-2", 2))
		mustAdd(t, s, blocker("other", "US-0010", 3)) // not a subtask of US-001
		mustAdd(t, s, blocker("next", "US-002", 4))
		mustAdd(t, s, Node{ID: tag + "-bug", Name: "a bug " + tag, MemoryType: TypeBug, Date: base})
		at := base.Add(10 * time.Hour)
		if err := s.Resolve(ctx, "US-001", at); err != nil {
			t.Fatal(err)
		}
		if err := s.Resolve(ctx, "US-001", at.Add(time.Hour)); err != nil { // again, later: no change
			t.Fatal(err)
		}
		if err := s.Resolve(ctx, "US-404", at); err != nil {
			t.Errorf("resolving a task without blockers: %v", err)
		}
		issues, err := s.KnownIssues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ids(only(issues, tag)), []string{tag + "-next", tag + "-other", tag + "-bug"}; !reflect.DeepEqual(got, want) {
			t.Errorf("known issues = %v, want %v: the blockers of US-001 and its subtask are resolved", got, want)
		}
		all, err := s.List(ctx, TypeBlocker, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"story", "sub"} {
			n := find(all, tag+"-"+id)
			if n == nil {
				t.Fatalf("resolved blocker %s left the store: %v", id, ids(all))
			}
			if n.Props[PropStatus] != StatusResolved || n.Props[PropResolvedAt] != "2026-11-01T19:00:00Z" || n.Props[PropTask] == "" || n.Props["event"] != EventTaskBlocker {
				t.Errorf("resolved blocker %s props = %v, want status=resolved, the first resolved_at, and its own props kept", id, n.Props)
			}
		}
		if n := find(all, tag+"-other"); n == nil || n.Props[PropStatus] != "" {
			t.Errorf("US-0010's blocker = %+v, want it untouched", n)
		}
		// The task blocked again later: the new blocker is a known issue.
		mustAdd(t, s, blocker("again", "US-001", 11))
		issues, _ = s.KnownIssues(ctx)
		if got := ids(only(issues, tag)); len(got) == 0 || got[0] != tag+"-again" {
			t.Errorf("known issues = %v, want the new blocker of US-001 first", got)
		}
	})

	t.Run("EmptyStore", func(t *testing.T) {
		s := open(t)
		if _, _, err := Load(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(ctx, "", 0); err != nil {
			t.Fatal(err)
		}
	})
}

func mustAdd(t *testing.T, s Store, n Node) string {
	t.Helper()
	id, err := s.Add(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	if n.ID != "" && id != n.ID {
		t.Fatalf("Add returned id %q, want %q", id, n.ID)
	}
	return id
}

func find(nodes []Node, id string) *Node {
	for i := range nodes {
		if nodes[i].ID == id {
			return &nodes[i]
		}
	}
	return nil
}

func only(nodes []Node, tag string) []Node {
	var out []Node
	for _, n := range nodes {
		if strings.HasPrefix(n.ID, tag) {
			out = append(out, n)
		}
	}
	return out
}

func ids(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

func TestContractFileStore(t *testing.T) {
	runContract(t, func(t *testing.T) Store {
		return &FileStore{Path: filepath.Join(t.TempDir(), "memory.jsonl")}
	})
}

func TestContractSQLite(t *testing.T) {
	runContract(t, func(t *testing.T) Store {
		s := &SQLiteStore{Path: filepath.Join(t.TempDir(), "memory.db")}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The queue wrapper is a Store too: over a reachable primary it is
// invisible.
func TestContractQueuedSQLite(t *testing.T) {
	runContract(t, func(t *testing.T) Store {
		dir := t.TempDir()
		s := &Queued{Primary: &SQLiteStore{Path: filepath.Join(dir, "memory.db")}, QueuePath: filepath.Join(dir, "memory-queue.jsonl")}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// CI has no Neo4j server and none is installable here; the Neo4j store's
// Cypher is covered by neo4j_test.go, and this runs it against a real
// server when one is given.
func TestContractNeo4j(t *testing.T) {
	uri := os.Getenv("NEO4J_URI")
	if uri == "" {
		t.Skip("NEO4J_URI is not set: no Neo4j server to run the contract against (CI has none)")
	}
	user := os.Getenv("NEO4J_USER")
	if user == "" {
		user = os.Getenv("NEO4J_USERNAME")
	}
	runContract(t, func(t *testing.T) Store {
		s, err := OpenNeo4j(uri, user, os.Getenv("NEO4J_PASSWORD"), os.Getenv("NEO4J_DATABASE"))
		if err != nil {
			t.Fatal(err)
		}
		s.Timeout = 10 * time.Second
		t.Cleanup(func() {
			// The suite's nodes all have ids starting with "ct".
			s.run(context.Background(), "MATCH (n:Memory) WHERE n.id STARTS WITH 'ct' DETACH DELETE n", nil, true)
			s.Close()
		})
		return s
	})
}
