package fleet

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
)

// hostedUpdate is how an Update a test sent to a session's or a thread's
// workflow in the SDK's test environment went.
type hostedUpdate[S any] struct {
	rejected error
	accepted bool
	status   S
	err      error
	done     bool
}

func (res *hostedUpdate[S]) send(env *testsuite.TestWorkflowEnvironment, name, id string, arg any) {
	env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnReject: func(err error) { res.rejected, res.done = err, true },
		OnAccept: func() { res.accepted = true },
		OnComplete: func(v any, err error) {
			res.done, res.err = true, err
			if st, ok := v.(S); ok {
				res.status = st
			}
		},
	}, arg)
}

// queryHosted is the status a session's or a thread's workflow answers.
func queryHosted[S any](t *testing.T, env *testsuite.TestWorkflowEnvironment) S {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st S
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

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
