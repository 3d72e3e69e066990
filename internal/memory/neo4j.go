package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"github.com/neo4j/neo4j-go-driver/v5/neo4j/config"
)

// The seed's MEMORY_LOAD queries. The agent context query is sent exactly
// as written in seed 000; the known issues query adds one condition to the
// seed's, so that resolved blockers (Store.Resolve) stop being known
// issues. Nodes other tools write carry no status and are all returned,
// as the seed's query returns them.
const (
	CypherAgentContext = "MATCH (n) WHERE n.name CONTAINS 'Brooks' OR n.name CONTAINS 'Developer Agent' RETURN n LIMIT 10"
	CypherKnownIssues  = "MATCH (n) WHERE n.memoryType IN ['blocker', 'bug', 'technical_debt'] AND coalesce(n.status, '') <> 'resolved' RETURN n ORDER BY n.date DESC LIMIT 10"
)

// The writes and the commands' reads: parameterised, never built from data.
const (
	cypherAdd = "MERGE (n:Memory {id: $id}) SET n = $props, n.id = $id, n.name = $name, n.memoryType = $memoryType, n.text = $text, n.date = $date"
	// A link sets the property and, for a commit, joins the node to the
	// commit's node.
	cypherLink       = "MATCH (n:Memory {id: $id}) SET n += $props"
	cypherLinkCommit = "MATCH (n:Memory {id: $id}) SET n += $props MERGE (c:Commit {hash: $value}) MERGE (n)-[:COMMITTED_IN]->(c)"
	cypherSearch     = "MATCH (n:Memory) WHERE toLower(n.name) CONTAINS toLower($text) OR toLower(coalesce(n.text, '')) CONTAINS toLower($text) RETURN n ORDER BY n.date DESC LIMIT $limit"
	cypherList       = "MATCH (n:Memory) WHERE $type = '' OR n.memoryType = $type RETURN n ORDER BY n.date DESC LIMIT $limit"
	// Only ralph's own nodes (label Memory) are marked resolved.
	cypherResolve = "MATCH (n:Memory) WHERE n.memoryType = 'blocker' AND (n.task = $task OR n.task STARTS WITH $prefix) AND coalesce(n.status, '') <> 'resolved' SET n.status = 'resolved', n.resolved_at = $at"
)

// neo4jNoLimit stands for "all" in the LIMIT parameter.
const neo4jNoLimit = 1 << 30

// CypherRunner runs one Cypher statement and returns, for every record,
// the properties of the node in column "n". The driver implements it for a
// server; tests use a recording fake.
type CypherRunner interface {
	Run(ctx context.Context, cypher string, params map[string]any, write bool) ([]map[string]any, error)
	Close(ctx context.Context) error
}

// Neo4jStore keeps memory in Neo4j. Nodes carry the label Memory and the
// properties id, name, memoryType, text, date (a DateTime) and the node's
// free properties; the seed's queries match any node, so memory written by
// other tools (Brooks agents) is read too.
type Neo4jStore struct {
	Runner CypherRunner
	Now    func() time.Time
	// Timeout bounds one statement when the caller's context has no
	// deadline (3s, as MEMORY_LOAD's).
	Timeout time.Duration
}

// OpenNeo4j makes a store on the official driver. It does not connect: an
// unreachable server shows as an error from the first query.
func OpenNeo4j(uri, user, password, database string) (*Neo4jStore, error) {
	auth := neo4j.NoAuth()
	if user != "" || password != "" {
		auth = neo4j.BasicAuth(user, password, "")
	}
	d, err := neo4j.NewDriverWithContext(uri, auth, func(c *config.Config) {
		c.SocketConnectTimeout = 3 * time.Second
		c.ConnectionAcquisitionTimeout = 3 * time.Second
		c.MaxTransactionRetryTime = 100 * time.Millisecond // MEMORY_LOAD has its own retry
	})
	if err != nil {
		return nil, fmt.Errorf("neo4j memory %s: %w", uri, err)
	}
	return &Neo4jStore{Runner: &driverRunner{driver: d, database: database}}, nil
}

type driverRunner struct {
	driver   neo4j.DriverWithContext
	database string
}

func (r *driverRunner) Run(ctx context.Context, cypher string, params map[string]any, write bool) ([]map[string]any, error) {
	opts := []neo4j.ExecuteQueryConfigurationOption{}
	if !write {
		opts = append(opts, neo4j.ExecuteQueryWithReadersRouting())
	}
	if r.database != "" {
		opts = append(opts, neo4j.ExecuteQueryWithDatabase(r.database))
	}
	res, err := neo4j.ExecuteQuery(ctx, r.driver, cypher, params, neo4j.EagerResultTransformer, opts...)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, rec := range res.Records {
		v, ok := rec.Get("n")
		if !ok {
			continue
		}
		if node, ok := v.(neo4j.Node); ok {
			out = append(out, node.Props)
		}
	}
	return out, nil
}

func (r *driverRunner) Close(ctx context.Context) error { return r.driver.Close(ctx) }

// Name implements Store.
func (s *Neo4jStore) Name() string { return "neo4j" }

// Close implements Store.
func (s *Neo4jStore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return s.Runner.Close(ctx)
}

func (s *Neo4jStore) run(ctx context.Context, cypher string, params map[string]any, write bool) ([]map[string]any, error) {
	if _, ok := ctx.Deadline(); !ok {
		t := s.Timeout
		if t <= 0 {
			t = 3 * time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	recs, err := s.Runner.Run(ctx, cypher, params, write)
	if err != nil {
		return nil, fmt.Errorf("neo4j memory: %w", err)
	}
	return recs, nil
}

func (s *Neo4jStore) nodes(ctx context.Context, cypher string, params map[string]any) ([]Node, error) {
	recs, err := s.run(ctx, cypher, params, false)
	if err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(recs))
	for _, p := range recs {
		out = append(out, nodeFromProps(p))
	}
	return out, nil
}

// AgentContext implements Store (seed query A).
func (s *Neo4jStore) AgentContext(ctx context.Context) ([]Node, error) {
	return s.nodes(ctx, CypherAgentContext, nil)
}

// KnownIssues implements Store (seed query B).
func (s *Neo4jStore) KnownIssues(ctx context.Context) ([]Node, error) {
	return s.nodes(ctx, CypherKnownIssues, nil)
}

// Search implements Store.
func (s *Neo4jStore) Search(ctx context.Context, text string, limit int) ([]Node, error) {
	return s.nodes(ctx, cypherSearch, map[string]any{"text": text, "limit": neo4jLimit(limit)})
}

// List implements Store.
func (s *Neo4jStore) List(ctx context.Context, typ string, limit int) ([]Node, error) {
	return s.nodes(ctx, cypherList, map[string]any{"type": typ, "limit": neo4jLimit(limit)})
}

// Add implements Store: a MERGE on the id, so that the same id written
// twice is one node.
func (s *Neo4jStore) Add(ctx context.Context, n Node) (string, error) {
	if n.ID == "" {
		n.ID = NewID()
	}
	if n.Date.IsZero() {
		if s.Now != nil {
			n.Date = s.Now()
		} else {
			n.Date = time.Now()
		}
	}
	_, err := s.run(ctx, cypherAdd, addParams(n), true)
	if err != nil {
		return "", err
	}
	return n.ID, nil
}

func addParams(n Node) map[string]any {
	props := map[string]any{}
	for k, v := range n.Props {
		props[k] = v
	}
	return map[string]any{"id": n.ID, "name": n.Name, "memoryType": n.MemoryType, "text": n.Text,
		"date": n.Date.UTC(), "props": props}
}

// Link implements Store.
func (s *Neo4jStore) Link(ctx context.Context, id, key, value string) error {
	q := cypherLink
	if key == "commit" {
		q = cypherLinkCommit
	}
	_, err := s.run(ctx, q, map[string]any{"id": id, "props": map[string]any{key: value}, "value": value}, true)
	return err
}

// Resolve implements Store.
func (s *Neo4jStore) Resolve(ctx context.Context, task string, at time.Time) error {
	_, err := s.run(ctx, cypherResolve, map[string]any{"task": task, "prefix": task + "/", "at": resolvedAt(at)}, true)
	return err
}

// coreProps are the node properties that are Node fields, not Props.
var coreProps = map[string]bool{"id": true, "name": true, "memoryType": true, "text": true, "date": true}

func nodeFromProps(p map[string]any) Node {
	n := Node{ID: str(p["id"]), Name: str(p["name"]), MemoryType: str(p["memoryType"]), Text: str(p["text"])}
	switch d := p["date"].(type) {
	case time.Time:
		n.Date = d.UTC()
	case neo4j.LocalDateTime:
		n.Date = d.Time().UTC()
	case neo4j.Date:
		n.Date = d.Time().UTC()
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
			if t, err := time.Parse(layout, d); err == nil {
				n.Date = t.UTC()
				break
			}
		}
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		if !coreProps[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n.Props == nil {
			n.Props = map[string]string{}
		}
		n.Props[k] = str(p[k])
	}
	return n
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = str(e)
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v)
}

func neo4jLimit(limit int) int64 {
	if limit <= 0 {
		return neo4jNoLimit
	}
	return int64(limit)
}
