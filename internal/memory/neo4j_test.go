package memory

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

type sent struct {
	cypher string
	params map[string]any
	write  bool
}

// recorder is a CypherRunner that records what would go to the server and
// answers with canned node properties.
type recorder struct {
	calls  []sent
	answer []map[string]any
	err    error
	closed bool
}

func (r *recorder) Run(ctx context.Context, cypher string, params map[string]any, write bool) ([]map[string]any, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("no deadline on the query context")
	}
	r.calls = append(r.calls, sent{cypher, params, write})
	return r.answer, r.err
}

func (r *recorder) Close(context.Context) error { r.closed = true; return nil }

func TestNeo4jMemoryLoadSendsTheSeedCypher(t *testing.T) {
	r := &recorder{}
	s := &Neo4jStore{Runner: r}
	if _, _, err := Load(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	want := []sent{
		{"MATCH (n) WHERE n.name CONTAINS 'Brooks' OR n.name CONTAINS 'Developer Agent' RETURN n LIMIT 10", nil, false},
		// The seed's query B, less the blockers ralph marked resolved.
		{"MATCH (n) WHERE n.memoryType IN ['blocker', 'bug', 'technical_debt'] AND coalesce(n.status, '') <> 'resolved' RETURN n ORDER BY n.date DESC LIMIT 10", nil, false},
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("sent %#v\nwant %#v", r.calls, want)
	}
}

func TestNeo4jAddIsAParameterisedMerge(t *testing.T) {
	r := &recorder{}
	s := &Neo4jStore{Runner: r}
	date := time.Date(2026, 11, 2, 10, 0, 0, 0, time.FixedZone("x", 3600))
	id, err := s.Add(context.Background(), Node{ID: "evt-1", Name: "US-001 complete: it's done", MemoryType: TypeEvent, Text: "t",
		Date: date, Props: map[string]string{"event": EventTaskComplete, "task": "US-001"}})
	if err != nil || id != "evt-1" {
		t.Fatal(id, err)
	}
	want := sent{
		"MERGE (n:Memory {id: $id}) SET n = $props, n.id = $id, n.name = $name, n.memoryType = $memoryType, n.text = $text, n.date = $date",
		map[string]any{"id": "evt-1", "name": "US-001 complete: it's done", "memoryType": "event", "text": "t", "date": date.UTC(),
			"props": map[string]any{"event": "BROOKS_TASK_COMPLETE", "task": "US-001"}},
		true,
	}
	if !reflect.DeepEqual(r.calls, []sent{want}) {
		t.Fatalf("sent %#v\nwant %#v", r.calls, want)
	}
}

func TestNeo4jLinkCommitMergesTheCommitNode(t *testing.T) {
	r := &recorder{}
	s := &Neo4jStore{Runner: r}
	ctx := context.Background()
	if err := s.Link(ctx, "evt-1", "commit", "abc123"); err != nil {
		t.Fatal(err)
	}
	if err := s.Link(ctx, "evt-1", "note", "x"); err != nil {
		t.Fatal(err)
	}
	want := []sent{
		{"MATCH (n:Memory {id: $id}) SET n += $props MERGE (c:Commit {hash: $value}) MERGE (n)-[:COMMITTED_IN]->(c)",
			map[string]any{"id": "evt-1", "props": map[string]any{"commit": "abc123"}, "value": "abc123"}, true},
		{"MATCH (n:Memory {id: $id}) SET n += $props",
			map[string]any{"id": "evt-1", "props": map[string]any{"note": "x"}, "value": "x"}, true},
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("sent %#v\nwant %#v", r.calls, want)
	}
}

func TestNeo4jResolveMarksOnlyOpenBlockersOfTheTask(t *testing.T) {
	r := &recorder{}
	s := &Neo4jStore{Runner: r}
	at := time.Date(2026, 11, 2, 10, 0, 0, 0, time.FixedZone("x", 3600))
	if err := s.Resolve(context.Background(), "US-001' OR 1=1", at); err != nil {
		t.Fatal(err)
	}
	want := []sent{{
		"MATCH (n:Memory) WHERE n.memoryType = 'blocker' AND (n.task = $task OR n.task STARTS WITH $prefix) AND coalesce(n.status, '') <> 'resolved' SET n.status = 'resolved', n.resolved_at = $at",
		map[string]any{"task": "US-001' OR 1=1", "prefix": "US-001' OR 1=1/", "at": "2026-11-02T09:00:00Z"},
		true,
	}}
	if !reflect.DeepEqual(r.calls, want) {
		t.Fatalf("sent %#v\nwant %#v", r.calls, want)
	}
}

func TestNeo4jSearchAndListParameters(t *testing.T) {
	r := &recorder{}
	s := &Neo4jStore{Runner: r}
	ctx := context.Background()
	s.Search(ctx, "flaky' OR 1=1 //", 5)
	s.List(ctx, TypeBug, 0)
	if r.calls[0].params["text"] != "flaky' OR 1=1 //" || r.calls[0].params["limit"] != int64(5) || r.calls[0].cypher != cypherSearch {
		t.Errorf("search sent %#v", r.calls[0])
	}
	if r.calls[1].params["type"] != "bug" || r.calls[1].params["limit"] != int64(neo4jNoLimit) || r.calls[1].write {
		t.Errorf("list sent %#v", r.calls[1])
	}
}

func TestNeo4jReadsNodesBack(t *testing.T) {
	date := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	r := &recorder{answer: []map[string]any{
		{"id": "blk-1", "name": "US-002 blocked", "memoryType": "blocker", "text": "tried x", "date": date,
			"event": "BROOKS_TASK_BLOCKER", "fix_sources_tried": "checks"},
		{"name": "Brooks (written by another tool)", "date": "2026-10-01", "tags": []any{"a", "b"}},
	}}
	s := &Neo4jStore{Runner: r}
	got, err := s.KnownIssues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got[0].ID != "blk-1" || !got[0].Date.Equal(date) || got[0].Props["event"] != EventTaskBlocker || got[0].Props["fix_sources_tried"] != "checks" || got[0].Text != "tried x" {
		t.Errorf("node 0 = %+v", got[0])
	}
	if !got[1].Date.Equal(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)) || got[1].Props["tags"] != "a, b" {
		t.Errorf("node 1 = %+v", got[1])
	}
}

func TestNeo4jUnreachableIsAnError(t *testing.T) {
	s := &Neo4jStore{Runner: &recorder{err: errors.New("ConnectivityError: connection refused")}}
	if _, _, err := Load(context.Background(), s); err == nil {
		t.Fatal("want an error")
	}
}

// The real driver against a closed port: a clean, quick error.
func TestNeo4jDriverRefusedQuickly(t *testing.T) {
	s, err := OpenNeo4j("bolt://127.0.0.1:1", "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	if _, err := s.AgentContext(context.Background()); err == nil {
		t.Fatal("want an error from a closed port")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v, want within the 3s timeout", d)
	}
}
