package memory

import (
	"fmt"
	"path/filepath"
	"time"
)

// Settings choose and reach a memory store ([memory] in config.toml).
type Settings struct {
	// Store is "sqlite" (the default), "neo4j" or "file".
	Store       string
	URI         string
	User        string
	PasswordEnv string
	Database    string
}

// Open returns the chosen store, wrapped in Queued with its queue in dir
// (.ralph). NEO4J_URI in the environment selects neo4j and overrides the
// configured uri; NEO4J_USER (or NEO4J_USERNAME) overrides the user. Open
// never connects: an unreachable store shows at its first query.
func Open(dir string, s Settings, getenv func(string) string, now func() time.Time) (*Queued, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	kind, uri := s.Store, s.URI
	if env := getenv("NEO4J_URI"); env != "" {
		kind, uri = "neo4j", env
	}
	var primary Store
	file := ""
	switch kind {
	case "", "sqlite":
		file = filepath.Join(dir, "memory.db")
		primary = &SQLiteStore{Path: file, Now: now}
	case "file":
		file = filepath.Join(dir, "memory.jsonl")
		primary = &FileStore{Path: file, Now: now}
	case "neo4j":
		if uri == "" {
			return nil, fmt.Errorf("memory store neo4j needs a uri: set [memory] uri in .ralph/config.toml or NEO4J_URI")
		}
		user := s.User
		for _, k := range []string{"NEO4J_USERNAME", "NEO4J_USER"} {
			if v := getenv(k); v != "" {
				user = v
			}
		}
		pwEnv := s.PasswordEnv
		if pwEnv == "" {
			pwEnv = "NEO4J_PASSWORD"
		}
		n, err := OpenNeo4j(uri, user, getenv(pwEnv), s.Database)
		if err != nil {
			return nil, err
		}
		n.Now = now
		primary = n
	default:
		return nil, fmt.Errorf("unknown memory store %q: use sqlite, neo4j or file", kind)
	}
	return &Queued{Primary: primary, QueuePath: filepath.Join(dir, "memory-queue.jsonl"), File: file, Now: now}, nil
}
