package beads_test

import (
	"context"
	"testing"

	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/beads/beadstest"
)

// A finished molecule: bd v1.0.5 answers `bd ready --mol` with
// "steps": null (recorded from the real bd), which is no ready step, not
// one issue without an id.
func TestReadyFinishedMolecule(t *testing.T) {
	c := client(t,
		beadstest.Call{Args: "ready --limit 0 --mol rl-mol-dxh --json", Stdout: `{"molecule_id":"rl-mol-dxh","molecule_title":"two-step","parallel_groups":{"group-1":["rl-mol-dxh","rl-mol-6mz","rl-mol-qdh"]},"ready_steps":0,"schema_version":1,"steps":null,"total_steps":3}`},
	)
	got, err := c.Ready(context.Background(), beads.ReadyOptions{Mol: "rl-mol-dxh"})
	if err != nil || len(got) != 0 {
		t.Fatalf("finished molecule: %+v %v", got, err)
	}
}
