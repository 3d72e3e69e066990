package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/report"
)

// steerRepo is a committed workspace with a two-story PRD.
func steerRepo(t *testing.T) string {
	t.Helper()
	dir := newTestRepo(t)
	if r := run(t, dir, nil, false, "init"); r.code != ExitOK {
		t.Fatalf("init:\n%s", r)
	}
	prd := "# PRD\n\n### [ ] US-001: First\n- [ ] works\n\n### [ ] US-002: Second\n- [ ] works\n"
	os.MkdirAll(filepath.Join(dir, ".agents", "tasks"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, ".agents", "tasks", "prd.md"), []byte(prd), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	return dir
}

func steerDo(t *testing.T, dir string, cmd control.Command) (control.Result, error) {
	t.Helper()
	env, _, _ := testEnv(dir, nil, false)
	src, err := openLive(context.Background(), env, "")
	if err != nil {
		t.Fatal(err)
	}
	if cmd.By == "" {
		cmd.By = control.ByWeb
	}
	return src.Steer(context.Background(), cmd)
}

// controlEvents returns the journal's control records.
func controlEvents(t *testing.T, dir string) []report.Event {
	t.Helper()
	var out []report.Event
	err := (&report.JournalReader{Path: filepath.Join(dir, ".ralph", "events.jsonl")}).Scan(func(ev report.Event) error {
		if ev.Kind == report.KindControl {
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A hint from any front end lands in context.md for the next prompt, and
// the journal says who gave it.
func TestSteerHintIsQueuedAndJournaledWithWhoGaveIt(t *testing.T) {
	dir := steerRepo(t)
	res, err := steerDo(t, dir, control.Command{Kind: control.Hint, Text: "  use the helper\nin util.sh  "})
	if err != nil || res.Status != control.Applied || res.ID == "" {
		t.Fatalf("hint = %+v, %v", res, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".ralph", "context.md"))
	if !strings.Contains(string(b), "web) use the helper in util.sh\n") {
		t.Errorf("context.md = %q; want the hint on one line, given by web", b)
	}
	evs := controlEvents(t, dir)
	if len(evs) != 1 || evs[0].Data.(report.Control).By != "web" || evs[0].Data.(report.Control).Command != "hint" || evs[0].Data.(report.Control).ID != res.ID {
		t.Errorf("journal control events = %+v; want one hint by web with the result's id", evs)
	}
}

// Pause, stop and skip need a run that takes them; with none they are
// refused with what to do, and nothing is written.
func TestSteerRunCommandsWithNoRunChangeNothing(t *testing.T) {
	dir := steerRepo(t)
	before := gitStatus(t, dir)
	for _, c := range []control.Command{
		{Kind: control.Pause}, {Kind: control.Stop}, {Kind: control.Resume}, {Kind: control.Skip, Task: "US-001"},
	} {
		if _, err := steerDo(t, dir, c); err == nil {
			t.Errorf("%s with no run going succeeded", c.Kind)
		}
	}
	if after := gitStatus(t, dir); after != before {
		t.Errorf("refused commands changed the workspace:\n%s", after)
	}
	if _, err := os.Stat(filepath.Join(dir, ".ralph", "control")); err == nil {
		t.Error("refused commands created .ralph/control")
	}
	if evs := controlEvents(t, dir); len(evs) != 0 {
		t.Errorf("refused commands were journaled: %+v", evs)
	}
}

// Bad input is an InputError (exit 2 from the CLI), not a failure.
func TestSteerBadInputIsTheCallersMistake(t *testing.T) {
	dir := steerRepo(t)
	for _, c := range []control.Command{
		{Kind: "explode"},
		{Kind: control.Hint, Text: "   "},
		{Kind: control.Block},
		{Kind: control.Answer, Question: "q-1"},
		{Kind: control.Checkpoint, Step: "merge-everything"},
		{Kind: control.Checkpoint, Step: "request-changes"},
	} {
		_, err := steerDo(t, dir, c)
		var ie *control.InputError
		if !errors.As(err, &ie) {
			t.Errorf("%+v: err = %v; want an InputError", c, err)
		}
	}
	r := run(t, dir, nil, false, "block")
	if r.code != ExitUsage {
		t.Errorf("ralph block with no task: want exit 2:\n%s", r)
	}
	r = run(t, dir, nil, false, "pause", "extra")
	if r.code != ExitUsage {
		t.Errorf("ralph pause extra: want exit 2:\n%s", r)
	}
}

// With no run going, block and unblock are applied at once: the task file
// and the status say so.
func TestSteerBlockAndUnblockWithNoRun(t *testing.T) {
	dir := steerRepo(t)
	res, err := steerDo(t, dir, control.Command{Kind: control.Block, Task: "US-002", Text: "waits for the API key"})
	if err != nil || res.Status != control.Applied {
		t.Fatalf("block = %+v, %v", res, err)
	}
	r := run(t, dir, nil, false, "status", "--json")
	var rep StatusReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	if len(rep.Board) != 2 || rep.Board[1].State != "blocked" || !strings.Contains(rep.Board[1].Reason, "waits for the API key") {
		t.Errorf("board = %+v; want US-002 blocked with the reason", rep.Board)
	}
	if _, err := steerDo(t, dir, control.Command{Kind: control.Block, Task: "US-009"}); err == nil {
		t.Error("block of a task the PRD lacks succeeded")
	}
	if r := run(t, dir, nil, false, "unblock", "US-002"); r.code != ExitOK {
		t.Fatalf("unblock:\n%s", r)
	}
	r = run(t, dir, nil, false, "status", "--json")
	json.Unmarshal([]byte(r.out), &rep)
	if rep.Board[1].State != "todo" {
		t.Errorf("after unblock the board = %+v; want US-002 todo", rep.Board)
	}
	evs := controlEvents(t, dir)
	if len(evs) != 2 || evs[0].Data.(report.Control).By != "web" || evs[1].Data.(report.Control).By != "cli" || evs[1].Data.(report.Control).Command != "unblock" {
		t.Errorf("journal = %+v; want block by web, then unblock by cli", evs)
	}
}

// With a run attached, run commands are left for it: pause is a flag the
// status shows, block waits in the queue, resume lifts the pause, stop
// is recorded for the run to take.
func TestSteerCommandsForARunThatIsGoing(t *testing.T) {
	dir := steerRepo(t)
	f := control.Folder{Dir: filepath.Join(dir, ".ralph", "control")}
	att, err := f.Attach(control.Run{Run: "r1", Machine: "build", Takes: []control.Kind{control.Skip, control.Block, control.Unblock},
		Since: testNow.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Detach()

	res, err := steerDo(t, dir, control.Command{Kind: control.Pause})
	if err != nil || res.Status != control.Queued || !strings.Contains(res.Message, "run r1") {
		t.Fatalf("pause = %+v, %v", res, err)
	}
	r := run(t, dir, nil, false, "status", "--json")
	var rep StatusReport
	json.Unmarshal([]byte(r.out), &rep)
	if rep.Paused == nil || rep.Paused.By != "web" || len(rep.Steerable) != 1 || rep.Steerable[0].Run != "r1" {
		t.Errorf("status: paused %+v, steerable %+v; want paused by web and run r1", rep.Paused, rep.Steerable)
	}
	if att.Paused() == nil {
		t.Error("the attached run does not see the pause")
	}
	if r := run(t, dir, nil, false, "status"); !strings.Contains(r.out, "paused by web since ") {
		t.Errorf("ralph status does not say the run is paused:\n%s", r)
	}

	res, err = steerDo(t, dir, control.Command{Kind: control.Block, Task: "US-001", Text: "not now"})
	if err != nil || res.Status != control.Queued {
		t.Fatalf("block = %+v, %v", res, err)
	}
	if taken := att.Take(control.Block); len(taken) != 1 || taken[0].Task != "US-001" || taken[0].By != "web" {
		t.Errorf("the run took %+v; want the block of US-001 by web", taken)
	}
	if again := att.Take(control.Block); len(again) != 0 {
		t.Errorf("a taken command was taken again: %+v", again)
	}

	if r := run(t, dir, nil, false, "resume"); r.code != ExitOK || !strings.Contains(r.out, "resumed") {
		t.Errorf("resume:\n%s", r)
	}
	if att.Paused() != nil {
		t.Error("the run is still paused after resume")
	}
	if r := run(t, dir, nil, false, "stop", "--json"); r.code != ExitOK || !strings.Contains(r.out, `"status": "queued"`) {
		t.Errorf("stop --json:\n%s", r)
	}
	if att.Stopped() == nil {
		t.Error("the run does not see the stop")
	}
}
