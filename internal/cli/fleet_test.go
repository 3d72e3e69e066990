package cli

import (
	"testing"

	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/landing"
)

// A task's moves name the host its work runs on, and never call the host
// that holds its branch the one that lands it: that is the integration
// host ("[US-003] landing on b" was printed for a host that does not
// integrate).
func TestFleetTaskLine(t *testing.T) {
	for _, tc := range []struct {
		task fleet.Task
		want string
	}{
		{fleet.Task{ID: "US-003", State: landing.Working, Host: "b"}, "[US-003] working on b"},
		{fleet.Task{ID: "US-003", State: landing.Queued, Host: "b"}, "[US-003] queued for the integration host (its work from b)"},
		{fleet.Task{ID: "US-003", State: landing.Landing, Host: "b"}, "[US-003] landing by the integration host (its work from b)"},
		{fleet.Task{ID: "US-003", State: landing.Landed, Host: "b", Commit: "4175cae0a1b2c3d4"}, "[US-003] landed · commit 4175cae0"},
		{fleet.Task{ID: "US-003", State: landing.Blocked, Host: "b", Reason: "tests failed 3 times"}, "[US-003] blocked on b: tests failed 3 times"},
		{fleet.Task{ID: "US-003", State: landing.Ready}, "[US-003] ready"},
	} {
		if got := fleetTaskLine(tc.task); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.task.State, tc.task.Host, got, tc.want)
		}
	}
}
