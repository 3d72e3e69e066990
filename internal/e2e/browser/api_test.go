package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/control"
)

// TestControlAPIWithTheRealSteerer gives commands over HTTP to a real
// workspace through the built ralph: the token guards them, a hint lands
// where the next prompt takes it from, and commands racing the end of a
// run are refused or stay queued for the next run.
func TestControlAPIWithTheRealSteerer(t *testing.T) {
	r := newRepo(t, "10ms")
	s := r.serve(t)
	context := filepath.Join(r.dir, ".ralph", "context.md")

	// Without the token, or with a wrong one: 401, and nothing changes.
	for _, tok := range []string{"", strings.Repeat("0", 64), s.Token[:63]} {
		if code, out := s.control(t, tok, `{"command":"hint","text":"sneaky"}`); code != 401 {
			t.Errorf("token %q: %d %v, want 401", tok, code, out)
		}
	}
	if _, err := os.Stat(context); !os.IsNotExist(err) {
		b, _ := os.ReadFile(context)
		t.Fatalf("a hint without the token changed .ralph/context.md: %q", b)
	}

	code, out := s.control(t, s.Token, `{"command":"hint","text":"use the existing HTTP client"}`)
	if code != 200 || out["status"] != control.Applied {
		t.Fatalf("hint with the token: %d %v", code, out)
	}
	b, _ := os.ReadFile(context)
	if !strings.Contains(string(b), "web) use the existing HTTP client") {
		t.Fatalf(".ralph/context.md after a hint from the web: %q", b)
	}

	// No run is going: there is nothing to pause.
	code, out = s.control(t, s.Token, `{"command":"pause"}`)
	if code != 409 || !strings.Contains(fmt.Sprint(out["error"]), "nothing to pause") {
		t.Errorf("pause with no run going: %d %v, want 409 saying there is nothing to pause", code, out)
	}
	// A malformed command is the caller's mistake.
	if code, out = s.control(t, s.Token, `{"command":"block"}`); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "task") {
		t.Errorf("block without a task: %d %v, want 400", code, out)
	}

	// A run takes blocks; a block is queued for it; the run ends before
	// its next step: the block stays in the queue for the next run.
	folder := control.Folder{Dir: filepath.Join(r.dir, ".ralph", "control")}
	att, err := folder.Attach(control.Run{Run: "run-racing", Machine: "loop", Takes: []control.Kind{control.Block, control.Skip, control.Unblock, control.Pause, control.Stop}})
	if err != nil {
		t.Fatal(err)
	}
	code, out = s.control(t, s.Token, `{"command":"block","task":"US-003","text":"needs a key"}`)
	att.Detach()
	if code != 200 || out["status"] != control.Queued {
		t.Fatalf("block while a run is attached: %d %v, want 200 queued", code, out)
	}
	id, _ := out["id"].(string)
	raw, err := os.ReadFile(filepath.Join(folder.Dir, "queue", id+".json"))
	if err != nil {
		t.Fatalf("the queued block is not in .ralph/control/queue after its run ended: %v", err)
	}
	var queued control.Command
	json.Unmarshal(raw, &queued)
	if queued.Kind != control.Block || queued.Task != "US-003" || queued.By != control.ByWeb {
		t.Errorf("queued command: %s", raw)
	}

	// Both commands are in the journal, with who gave them.
	var st map[string]any
	s.get(t, "/api/status", &st)
	if _, ok := st["board"]; !ok {
		t.Errorf("status without a board: %v", st)
	}
}

// TestStatusIsWhatRalphStatusPrints compares /api/status with `ralph
// status --json` of the same workspace after a build.
func TestStatusIsWhatRalphStatusPrints(t *testing.T) {
	r := newRepo(t, "10ms")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := r.ralphCmd(ctx, "build", "10").CombinedOutput(); err != nil {
		t.Fatalf("ralph build: %v\n%s", err, out)
	}
	s := r.serve(t)
	var api any
	s.get(t, "/api/status", &api)
	out, err := r.ralphCmd(ctx, "status", "--json").Output()
	if err != nil {
		t.Fatalf("ralph status --json: %v", err)
	}
	var cli any
	if err := json.Unmarshal(out, &cli); err != nil {
		t.Fatal(err)
	}
	// Elapsed time of a finished run does not move; anything that does
	// would show as a difference here.
	if !reflect.DeepEqual(api, cli) {
		a, _ := json.MarshalIndent(api, "", " ")
		t.Errorf("/api/status differs from ralph status --json:\napi %s\ncli %s", a, out)
	}
}

func TestServeRefusesAnOpenAddressWithoutATokenFile(t *testing.T) {
	r := newRepo(t, "10ms")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := r.ralphCmd(ctx, "serve", "--addr", "0.0.0.0:0").CombinedOutput()
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--token-file") {
		t.Fatalf("ralph serve --addr 0.0.0.0:0: %v\n%s\nwant exit 2 asking for --token-file", err, out)
	}
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}
