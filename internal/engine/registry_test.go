package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ids of the registry name folders (the run's, each worker's): one edited
// into a path is refused when the registry is read, with the file named,
// before the run's records or a worktree go outside the repository.
func TestLoadRegistryRefusesAnIdThatIsAPath(t *testing.T) {
	for name, doc := range map[string]string{
		"run_id": `{"schema_version": 1, "run_id": "../../../../tmp/x", "tasks": {}}`,
		"task":   `{"schema_version": 1, "run_id": "20260101-000000-abcdef", "tasks": {"../../x": {"id": "../../x"}}}`,
		"id":     `{"schema_version": 1, "run_id": "20260101-000000-abcdef", "tasks": {"US-001": {"id": "../US-001"}}}`,
	} {
		home := t.TempDir()
		os.WriteFile(filepath.Join(home, RegistryFile), []byte(doc), 0o644)
		_, ok, err := LoadRegistry(home)
		if err == nil || ok || !strings.Contains(err.Error(), RegistryFile) || !strings.Contains(err.Error(), "cannot go on from it") {
			t.Errorf("%s: LoadRegistry = %v, %v; want an error naming %s", name, ok, err, RegistryFile)
		}
	}
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, RegistryFile), []byte(`{"schema_version": 1, "run_id": "20260101-000000-abcdef", "tasks": {"US-001": {"id": "US-001"}}}`), 0o644)
	if reg, ok, err := LoadRegistry(home); err != nil || !ok || reg.Tasks["US-001"] == nil {
		t.Errorf("a registry ralph writes: %v, %v", ok, err)
	}
}
