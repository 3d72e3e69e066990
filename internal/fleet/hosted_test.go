package fleet

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A session's and a thread's workflow inputs are in the histories of the
// runs in flight: the Placement they share keeps its fields at the top
// level of the JSON, where inputs written before it had them, so that a
// new ralph reads those runs' inputs as they were written.
func TestHostedInputsKeepTheirPlacementAtTheTop(t *testing.T) {
	old := []byte(`{"SessionID":"s1","ThreadID":"t1","Host":"h1","Shared":"ralph","Heartbeat":2000000000}`)
	var s SessionInput
	var th ThreadInput
	if err := json.Unmarshal(old, &s); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(old, &th); err != nil {
		t.Fatal(err)
	}
	want := Placement{Host: "h1", Shared: "ralph", Heartbeat: 2 * time.Second}
	if s.Placement != want || th.Placement != want || s.SessionID != "s1" || th.ThreadID != "t1" {
		t.Errorf("inputs read from an old history: %+v, %+v", s, th)
	}
	b, err := json.Marshal(SessionInput{SessionID: "s1", Placement: want})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"Host":"h1","Shared":"ralph","Heartbeat":2000000000`) || strings.Contains(string(b), "Placement") {
		t.Errorf("a session's input is written as %s", b)
	}
}
