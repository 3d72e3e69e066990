package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/control"
)

// A thread's human checkpoint given from the page goes through the
// control API to `ralph thread STEP`, the one way a thread moves: a
// checkpoint the thread's phase does not allow is refused with the
// thread's own words and moves nothing; one it allows moves it, and the
// journal says the web gave it.
func TestThreadCheckpointFromTheWeb(t *testing.T) {
	r := newRepo(t, "10ms")
	spec := "# Greeting\n\n### [ ] US-001: Write hello\n- [ ] hello.txt says hello\n"
	if err := os.WriteFile(filepath.Join(r.dir, "spec.md"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{{"thread", "new", "--id", "feat1", "Add a greeting"}, {"thread", "spec", "spec.md"}} {
		if out, err := r.ralphCmd(ctx, args...).CombinedOutput(); err != nil {
			t.Fatalf("ralph %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	s := r.serve(t)
	phase := func() string {
		var th struct {
			Phase struct {
				Type string `json:"type"`
			} `json:"phase"`
		}
		b, _ := os.ReadFile(filepath.Join(r.dir, ".ralph", "threads", "feat1", "thread.json"))
		json.Unmarshal(b, &th)
		return th.Phase.Type
	}

	code, out := s.control(t, s.Token, `{"command":"checkpoint","step":"approve","thread":"feat1"}`)
	if code != 409 || !strings.Contains(fmt.Sprint(out["error"]), "does not accept `approve`") {
		t.Errorf("approve of a drafting thread: %d %v; want 409 with the thread's refusal", code, out)
	}
	if p := phase(); p != "Drafting" {
		t.Fatalf("a refused checkpoint moved the thread to %s", p)
	}

	code, out = s.control(t, s.Token, `{"command":"checkpoint","step":"finalize","thread":"feat1"}`)
	if code != 200 || out["status"] != control.Applied {
		t.Fatalf("finalize from the web: %d %v", code, out)
	}
	if p := phase(); p != "Finalized" {
		t.Errorf("after finalize from the web the thread is %s, want Finalized", p)
	}
	journal, _ := os.ReadFile(filepath.Join(r.dir, ".ralph", "events.jsonl"))
	if !strings.Contains(string(journal), `"by":"web","command":"checkpoint"`) || !strings.Contains(string(journal), `"step":"finalize"`) {
		t.Errorf("the journal has no checkpoint by web:\n%s", journal)
	}
}
