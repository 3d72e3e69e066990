package loop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
)

// A build on the success path makes no more durable writes per iteration
// than its state needs (3 of state.json: the attempt, with the
// transitions of the previous iteration's end that waited for it; the
// agent's process group; and the agent's end with the transition into
// TEST and the commit token, so that a kill during the checks never runs
// the agent again and a kill after the commit finds it). The
// records (the prompt, iter-N.json, run.json) are written atomically
// without fsync (store.WriteRecord), activity.log's summary line is an
// append, and the records written off the critical path (the prompt while
// the agent runs, run.json in the background) are all there when the run
// ends.
func TestWritesPerIterationAndRecordsWrittenLater(t *testing.T) {
	// A build of one story and one of five: the difference is four
	// iterations' writes, without the run's setup and end.
	build := func(stories int) (Report, int64, int64, int64) {
		ws, opts := newSuccessBuild(t, stories)
		w0, s0 := store.WriteCounts()
		r0 := store.RecordCounts()
		rep, err := Build(context.Background(), ws, opts)
		if err != nil || rep.StoriesDone != stories {
			t.Fatalf("outcome %s, %d done: %v", rep.Outcome, rep.StoriesDone, err)
		}
		w1, s1 := store.WriteCounts()
		return rep, w1 - w0, s1 - s0, store.RecordCounts() - r0
	}
	const stories = 5
	_, w1, s1, r1 := build(1)
	rep, w5, s5, r5 := build(stories)
	writes, syncs, records := float64(w5-w1)/(stories-1), float64(s5-s1)/(stories-1), float64(r5-r1)/(stories-1)
	t.Logf("%.1f durable atomic writes, %.1f fsyncs and %.1f records per iteration", writes, syncs, records)
	if writes > 3 {
		t.Errorf("%.1f durable atomic writes per iteration, want at most 3", writes)
	}
	if records < 3 {
		t.Errorf("%.1f records per iteration written without fsync, want the prompt, iter-N.json and run.json (3)", records)
	}
	var rr RunRecord
	if _, err := store.ReadJSON(filepath.Join(rep.RunDir, "run.json"), 1, &rr); err != nil || rr.Iterations != stories || rr.Outcome != OutcomeComplete {
		t.Errorf("run.json: %+v, %v; want %d iterations, complete", rr, err, stories)
	}
	// Transitions that wait for a save still come before what is said in
	// the state they enter: in the journal each iteration reads as it
	// happened, the transition into IMPLEMENT (saved with the attempt)
	// before the heading, and the verdict after the transition into
	// VALIDATE (saved with the commit token).
	f, err := os.Open(filepath.Join(rep.RunDir, "..", "..", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e report.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Run != rep.RunID {
			continue
		}
		switch {
		case e.Kind == report.KindTransition && e.To == string(StateImplement), e.Kind == report.KindTransition && e.To == string(StateTest),
			e.Kind == report.KindTransition && e.To == string(StateValidate), e.Kind == report.KindTransition && e.To == string(StateCommit):
			order = append(order, "→"+e.To)
		case e.Kind == report.KindIteration && strings.Contains(e.Text, "── iteration"):
			order = append(order, "heading")
		case e.Kind == report.KindCheck, e.Kind == report.KindVerdict, e.Kind == report.KindCommit:
			order = append(order, string(e.Kind))
		}
	}
	// (The run's first lines are the baseline checks of the start.)
	if want := "check check " + strings.Repeat("→IMPLEMENT heading →TEST check →VALIDATE verdict verdict →COMMIT commit ", stories); strings.Join(order, " ")+" " != want {
		t.Errorf("journal order\n%v\nwant each iteration's transitions before what is said in the state they enter:\n%s", order, want)
	}
	for n := 1; n <= stories; n++ {
		b, err := os.ReadFile(filepath.Join(rep.RunDir, fmt.Sprintf("iter-%d.prompt.md", n)))
		if err != nil || !strings.Contains(string(b), fmt.Sprintf("US-%03d", n)) {
			t.Errorf("iter-%d.prompt.md: %v, does not name US-%03d:\n%.300s", n, err, n, b)
		}
	}
}

// COMMIT starts from the tree read after the agent when HEAD and the
// branch are still what that read saw: what the checks changed since is
// still committed and recorded (git add --verbose names it). A check that
// commits moves HEAD, and COMMIT asks git for the tree instead.
func TestCommitTakesInWhatTheChecksChanged(t *testing.T) {
	for _, tc := range []struct{ name, check string }{
		{"check writes a file", "echo made by the check >> generated.txt"},
		{"check commits", "echo made by the check >> generated.txt && git add -A && git commit -qm 'by the check'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, opts := newSuccessBuild(t, 2)
			opts.Checks[0].Run = tc.check
			rep, err := Build(context.Background(), ws, opts)
			if err != nil || rep.StoriesDone != 2 {
				t.Fatalf("outcome %s, %d done: %v", rep.Outcome, rep.StoriesDone, err)
			}
			for n := 1; n <= 2; n++ {
				rec := readIteration(t, rep.RunDir, n)
				if !slices.Contains(rec.ChangedFiles, "generated.txt") || !slices.Contains(rec.ChangedFiles, "prd.md") || len(rec.UncommittedFiles) != 0 {
					t.Errorf("iteration %d: changed %q, uncommitted %q; want generated.txt and prd.md changed, nothing left", n, rec.ChangedFiles, rec.UncommittedFiles)
				}
			}
			out, err := exec.Command("git", "-C", ws.Root, "status", "--porcelain").CombinedOutput()
			if err != nil || len(out) != 0 {
				t.Errorf("the tree after the build: %v\n%s", err, out)
			}
			out, _ = exec.Command("git", "-C", ws.Root, "log", "-1", "--name-only", "--format=%s").CombinedOutput()
			if !strings.HasPrefix(string(out), "US-002") || !strings.Contains(string(out), ".ralph/progress.md") {
				t.Errorf("ralph's last commit is not US-002's with its progress note:\n%s", out)
			}
		})
	}
}

// After ralph's commit the tree is the commit, with nothing dirty, only
// when git vouches for it; otherwise COMMIT reads the tree, and the
// iteration's record lists what the commit left: a file a commit hook
// wrote, or an embedded repository with changes inside it, which no
// staging takes in. A tree taken for clean would lose them from the
// records and from the next iteration's starting point.
func TestTheTreeAfterTheCommitIsReadWhenGitCannotVouchForIt(t *testing.T) {
	nest := `[ -d nest ] || (mkdir nest && cd nest && git init -q && echo b > b && git add b && ` +
		`git -c user.name=T -c user.email=t@example.com commit -qm b) && date +%s%N > nest/inside.txt; `
	for _, tc := range []struct {
		name, left string
		setup      func(t *testing.T, root string, opts *Options)
	}{
		{"a commit hook writes a file", "hooked.txt", func(t *testing.T, root string, opts *Options) {
			hook := filepath.Join(root, ".git", "hooks", "post-commit")
			if err := os.WriteFile(hook, []byte("#!/bin/sh\ndate +%s%N > hooked.txt\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"an embedded repository changes inside", "nest", func(t *testing.T, root string, opts *Options) {
			opts.Agent.Headless[2] = nest + opts.Agent.Headless[2]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, opts := newSuccessBuild(t, 2)
			tc.setup(t, ws.Root, &opts)
			rep, err := Build(context.Background(), ws, opts)
			if err != nil || rep.StoriesDone != 2 {
				t.Fatalf("outcome %s, %d done: %v", rep.Outcome, rep.StoriesDone, err)
			}
			for n := 1; n <= 2; n++ {
				rec := readIteration(t, rep.RunDir, n)
				if !slices.Equal(rec.UncommittedFiles, []string{tc.left}) {
					t.Errorf("iteration %d: uncommitted %q, want %s", n, rec.UncommittedFiles, tc.left)
				}
			}
		})
	}
}

// readIteration reads iteration n's record from a run's folder.
func readIteration(t *testing.T, runDir string, n int) IterationRecord {
	t.Helper()
	var rec IterationRecord
	if _, err := store.ReadJSON(filepath.Join(runDir, fmt.Sprintf("iter-%d.json", n)), 1, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// The transition into VALIDATE waits for the next save only when VALIDATE
// is quick work of ralph's own. A criterion's verify command (or a
// reviewer) is not: the transition is saved at once, before the command
// runs. The criteria are those of the machine's task on the board, the
// story's for a subtask, as STORY_SELECT chose it or a resume found it.
func TestIntoValidateWaitsForSaveOnlyWithoutCommands(t *testing.T) {
	b := &builder{run: &run{}, board: &tasks.Board{Stories: []tasks.Story{
		{ID: "US-001", Criteria: []tasks.Criterion{{Text: "it works"}}},
		{ID: "US-002", Criteria: []tasks.Criterion{{Text: "it works", Verify: "make check"}}, Subtasks: []tasks.Subtask{{ID: "T1"}}},
	}}}
	waits := func(task string) bool {
		return b.waitsForSave(Machine{State: StateTest, TaskID: task}, Machine{State: StateValidate, TaskID: task})
	}
	for task, want := range map[string]bool{"US-001": true, "US-002": false, "US-002/T1": false} {
		if got := waits(task); got != want {
			t.Errorf("into VALIDATE with %s: waits for the save = %v, want %v", task, got, want)
		}
	}
	b.opts.Reviewer = &agent.Spec{Name: "reviewer"}
	if waits("US-001") {
		t.Error("into VALIDATE with a reviewer to run: the transition waits for the save")
	}
}
