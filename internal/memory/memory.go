// Package memory is what outlives runs: lessons, blockers and task events,
// queried at the start of every iteration (seed 000's MEMORY_LOAD) and
// written at COMMIT and BLOCKER. A task's blockers are marked resolved
// when it is committed or unblocked, so that they leave the known issues
// of later prompts while staying in the store.
//
// Store has three implementations that pass one contract suite: SQLite
// (embedded, the default), Neo4j (when configured) and a JSON-lines file.
// Queued wraps any of them so that writes made while it is unreachable are
// kept on disk and replayed, in order, once it is back. Writes are best
// effort for the loop: a memory failure never fails a task.
package memory

import (
	"context"
	"sort"
	"strings"
	"time"
)

// Memory types the seed's known-issues query selects.
const (
	TypeBlocker       = "blocker"
	TypeBug           = "bug"
	TypeTechnicalDebt = "technical_debt"
	TypeLesson        = "lesson"
	TypeEvent         = "event"
	TypeAgentContext  = "agent_context"
)

// A resolved blocker keeps its node, with these properties set: the
// memory of what went wrong stays, but it is no longer a known issue.
const (
	PropTask       = "task"
	PropStatus     = "status"
	PropResolvedAt = "resolved_at"
	StatusResolved = "resolved"
)

// Event types logged by the loop (seed 000).
const (
	EventTaskComplete = "BROOKS_TASK_COMPLETE"
	EventTaskBlocker  = "BROOKS_TASK_BLOCKER"
)

// Node is one memory: a name, a type, text, a date and free properties.
type Node struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	MemoryType string            `json:"memoryType"`
	Text       string            `json:"text,omitempty"`
	Date       time.Time         `json:"date"`
	Props      map[string]string `json:"props,omitempty"`
}

// Store is a memory backend.
type Store interface {
	// AgentContext returns up to 10 nodes whose name contains "Brooks" or
	// "Developer Agent" (seed 000 query A).
	AgentContext(ctx context.Context) ([]Node, error)
	// KnownIssues returns up to 10 nodes of type blocker, bug or
	// technical_debt that are not resolved, newest first (seed 000 query
	// B, without the resolved ones: a blocker of a task that was done
	// since is history, not an issue to warn the next agent about).
	KnownIssues(ctx context.Context) ([]Node, error)
	// Resolve marks the unresolved blockers of task, and of its subtasks
	// ("task/..."), resolved at at: status=resolved and resolved_at are
	// set on them. The nodes stay; a task with no blocker is no error.
	Resolve(ctx context.Context, task string, at time.Time) error
	// Add stores a node and returns its id.
	Add(ctx context.Context, n Node) (string, error)
	// Link records a property on an existing node, such as the commit
	// hash of a task-complete event.
	Link(ctx context.Context, id, key, value string) error
	// Search returns up to limit nodes (all when limit <= 0) whose name or
	// text contains text, ignoring case, newest first.
	Search(ctx context.Context, text string, limit int) ([]Node, error)
	// List returns up to limit nodes (all when limit <= 0) of memoryType
	// typ (any type when typ is empty), newest first.
	List(ctx context.Context, typ string, limit int) ([]Node, error)
	// Name says which backend this is, for status output.
	Name() string
	Close() error
}

// Load runs the two MEMORY_LOAD queries.
func Load(ctx context.Context, s Store) (agentCtx, issues []Node, err error) {
	if agentCtx, err = s.AgentContext(ctx); err != nil {
		return nil, nil, err
	}
	issues, err = s.KnownIssues(ctx)
	return agentCtx, issues, err
}

// resolves reports whether resolving task resolves n: an unresolved
// blocker of the task or of one of its subtasks.
func resolves(n Node, task string) bool {
	t := n.Props[PropTask]
	return n.MemoryType == TypeBlocker && n.Props[PropStatus] != StatusResolved &&
		(t == task || strings.HasPrefix(t, task+"/"))
}

// resolvedAt is how resolved_at is written: RFC 3339 in UTC.
func resolvedAt(at time.Time) string { return at.UTC().Format(time.RFC3339) }

// Lists bounded by the seed's queries.
const queryLimit = 10

// matchesText is Search's predicate, shared by the stores that filter in Go.
func matchesText(n Node, text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(strings.ToLower(n.Name), t) || strings.Contains(strings.ToLower(n.Text), t)
}

// newestFirst sorts nodes by date, newest first; ties keep their order.
func newestFirst(nodes []Node) {
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].Date.After(nodes[j].Date) })
}

func limitNodes(nodes []Node, limit int) []Node {
	if limit > 0 && len(nodes) > limit {
		return nodes[:limit]
	}
	return nodes
}
