package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// countingChecks runs the queue's checks as the user would, counting the
// runs (the rig's workers run none).
type countingChecks struct {
	mu sync.Mutex
	n  int
	// seen, when set, is called at each run.
	seen func()
}

func (c *countingChecks) RunCheck(ctx context.Context, dir string, ch check.Check) check.Result {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	if c.seen != nil {
		c.seen()
	}
	return runkit.ExecChecks{}.RunCheck(ctx, dir, ch)
}

// Three workers finish together: a task that is alone in the queue lands
// at once (no wait to fill a batch), and the two waiting together land
// together, checked once: fewer check runs than one per story, each story
// still one commit; their landing events and their records while they
// land (what status shows) name the batch.
func TestTasksWaitingTogetherLandAsOneBatch(t *testing.T) {
	r := newRig(t, stories(3, nil))
	r.opts.MaxBatch = 8
	// What `ralph status` reads while the queue checks: the tasks landing
	// together, marked with their batch.
	var landingNow []string
	counter := &countingChecks{seen: func() {
		reg, _, _ := LoadRegistry(r.ws.Dir())
		for _, tr := range reg.Sorted() {
			if tr.State == landing.Landing {
				landingNow = append(landingNow, tr.ID+":"+tr.Batch)
			}
		}
		landingNow = append(landingNow, "|")
	}}
	r.opts.Checker = counter
	r.opts.Checks = []check.Check{{Name: "slow", Run: "sleep 1"}}
	var mu sync.Mutex
	began := 0
	r.edit = func(dir, story string, attempt int, feedback string) {
		mu.Lock()
		began++
		mu.Unlock()
		wait.Within(wait.Long, func() bool { mu.Lock(); defer mu.Unlock(); return began >= 3 })
		os.WriteFile(filepath.Join(dir, strings.ToLower(story)+".txt"), []byte(story+"\n"), 0o644)
	}
	rep, err := r.run()
	if err != nil || rep.Landed != 3 {
		t.Fatalf("Run = %+v, %v; want 3 landed", rep, err)
	}
	if subj := r.subjects(); len(subj) != 3 {
		t.Fatalf("main: %v; want one commit per story", subj)
	}
	// The start's tip, the first story, the batch of the other two.
	if counter.n != 3 {
		t.Errorf("the queue ran the checks %d times; want 3 (the tip, the first story, one batch of two)", counter.n)
	}
	// One story's landing alone (no batch), and the batch of two, in the
	// order the workers happened to finish.
	if got := strings.Join(landingNow, " "); strings.Count(got, ":b1") != 2 || !strings.Contains(got, ":b1 |") {
		t.Errorf("tasks landing as the checks ran: %s; want the last two marked b1", got)
	}
	if reg, _, _ := LoadRegistry(r.ws.Dir()); reg.Batches != 1 || reg.Tasks["US-002"].Batch != "" {
		t.Errorf("registry at the end: %d batches, US-002's batch %q; want 1 and none (landed)", reg.Batches, reg.Tasks["US-002"].Batch)
	}
	var batched []string
	for _, ev := range r.events {
		if c, ok := ev.Data.(report.Commit); ok && c.State == "landed" && c.Batch != nil {
			batched = append(batched, ev.Task+" in "+c.Batch.ID+" of "+strings.Join(c.Batch.Members, "+"))
		}
	}
	if len(batched) != 2 || !strings.Contains(batched[0], " in b1 of US-00") {
		t.Errorf("landing events with a batch: %v; want the two of b1", batched)
	}
	said := ""
	for _, ev := range r.events {
		said += ev.Text
	}
	if !strings.Contains(said, "] checking US-00") || !strings.Contains(said, "[queue batch b1] checking US-00") {
		t.Errorf("said:\n%s", said)
	}
}

// chainRig is a rig whose last run was killed while the merge queue
// landed US-001 and US-002 as one batch: both landing commits made and on
// record (tokens t1, t2), as a chain on the start, with the task branches
// still there. moved says the target had moved to the chain's head.
func chainRig(t *testing.T, moved bool) (*rig, string, []string) {
	r := newRig(t, stories(2, nil))
	start := r.git("rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "integration")
	r.git("worktree", "add", "-q", "--detach", wt, start)
	reg := &Registry{RunID: "r1", Target: "main", Start: start, Checkout: start, Workers: 2, WorktreeRoot: filepath.Join(r.opts.WorktreeRoot, "r1"),
		Tasks: map[string]*TaskRecord{}}
	var commits []string
	for i, id := range []string{"US-001", "US-002"} {
		file := strings.ToLower(id) + ".txt"
		branch := "ralph/r1/" + id
		r.git("branch", branch, start)
		bt := filepath.Join(t.TempDir(), id)
		r.git("worktree", "add", "-q", bt, branch)
		os.WriteFile(filepath.Join(bt, file), []byte(id+"\n"), 0o644)
		gitT(t, bt, "add", "-A")
		gitT(t, bt, "commit", "-q", "-m", id+": work")
		r.git("worktree", "remove", "--force", bt)

		os.WriteFile(filepath.Join(wt, file), []byte(id+"\n"), 0o644)
		prd, _ := os.ReadFile(filepath.Join(wt, "PRD.md"))
		os.WriteFile(filepath.Join(wt, "PRD.md"), []byte(strings.Replace(string(prd), "### [ ] "+id, "### [x] "+id, 1)), 0o644)
		tok := "t" + string(rune('1'+i))
		gitT(t, wt, "add", "-A")
		gitT(t, wt, "commit", "-q", "-m", id+": story "+string(rune('1'+i))+"\n\nRalph-Task: "+id+"\nRalph-Commit: "+tok)
		commits = append(commits, gitT(t, wt, "rev-parse", "HEAD"))
		reg.Tasks[id] = &TaskRecord{ID: id, Title: "story " + string(rune('1'+i)), State: landing.Landing, Branch: branch, Base: start,
			Commit: commits[i], Token: tok, Attempt: 1, Worker: "w1"}
	}
	r.git("worktree", "remove", "--force", wt)
	if moved {
		r.git("merge", "-q", "--ff-only", commits[1])
	}
	if err := reg.save(r.ws.Dir()); err != nil {
		t.Fatal(err)
	}
	return r, start, commits
}

// Killed after the batch moved the target: both members are found landed
// (the first below the head, not only the head), none lands twice and
// neither is worked again.
func TestBatchKilledAfterTheMoveIsRecordedLanded(t *testing.T) {
	r, _, commits := chainRig(t, true)
	rep, err := r.run()
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.Landed != 2 {
		t.Fatalf("Run = %+v, %v; want both recorded landed", rep, err)
	}
	if head := r.git("rev-parse", "main"); head != commits[1] {
		t.Errorf("main = %s; want the batch's head %s (nothing landed twice)", head, commits[1])
	}
	reg, _, _ := LoadRegistry(r.ws.Dir())
	for i, id := range []string{"US-001", "US-002"} {
		if tr := reg.Tasks[id]; tr.State != landing.Landed || tr.Commit != commits[i] || r.attempts[id] != 0 {
			t.Errorf("%s: %+v, worked %d times; want landed at %s, not worked again", id, tr, r.attempts[id], commits[i])
		}
	}
}

// Killed after both members' commits were made but before the target
// moved: the chain never reached main, so both land again, once each.
func TestBatchKilledBeforeTheMoveLandsAgainOnce(t *testing.T) {
	r, start, commits := chainRig(t, false)
	rep, err := r.run()
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.Landed != 2 {
		t.Fatalf("Run = %+v, %v; want both landed", rep, err)
	}
	if subj := r.subjects(); len(subj) != 2 || !strings.HasPrefix(subj[0], "US-001") || !strings.HasPrefix(subj[1], "US-002") {
		t.Errorf("main after the start: %v; want US-001 and US-002 once each", subj)
	}
	if got := r.git("rev-parse", "main~2"); got != start {
		t.Errorf("main~2 = %s; want the start %s", got, start)
	}
	if head := r.git("rev-parse", "main"); head == commits[1] {
		t.Error("main is at the killed batch's commit, which was never checked")
	}
	for _, id := range []string{"US-001", "US-002"} {
		if r.attempts[id] != 0 {
			t.Errorf("%s was worked again (%d attempts); its verified branch lands", id, r.attempts[id])
		}
	}
}

// The batch starts at 2, doubles while batches land whole, halves after
// one that sent a task back, and stays within 1 and max_batch; a
// max_batch of 0 or 1 lands one task at a time.
func TestBatchSizeAdapts(t *testing.T) {
	whole := []landing.Outcome{{Landed: true}, {Landed: true}}
	split := []landing.Outcome{{Landed: true}, {Reason: "a check failed"}}
	e := &engine{o: Options{MaxBatch: 8}, batch: 2}
	var sizes []string
	for _, outs := range [][]landing.Outcome{whole, whole, whole, split, split, split, split, whole} {
		e.adapt(outs)
		sizes = append(sizes, fmt.Sprint(e.batch))
	}
	if got := strings.Join(sizes, " "); got != "4 8 8 4 2 1 1 2" {
		t.Errorf("batch sizes = %s; want 4 8 8 4 2 1 1 2", got)
	}
	one := &engine{o: Options{}, batch: 1}
	one.adapt(whole)
	if one.batch != 1 {
		t.Errorf("with max_batch unset the batch grew to %d; want 1", one.batch)
	}
}
