package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/landing"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/memory"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/testing/wait"
	"github.com/ralphloop/ralph/internal/workspace"
)

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// rig is a repository with a markdown PRD and a fake worker: Build does
// what a worker's loop does once the agent is done (the story's edits,
// the story ticked in the worktree's PRD, one commit on the branch),
// without any agent.
type rig struct {
	t    *testing.T
	ws   *workspace.Workspace
	opts Options
	// edit is what each story's "agent" writes, by story id and attempt.
	edit func(dir, story string, attempt int, feedback string)
	// outcome overrides a story's loop outcome (default complete).
	outcome map[string]loop.Outcome

	mu        sync.Mutex
	running   int
	maxActive int
	// overlapGaveUp: a hold for a second worker came to its deadline.
	overlapGaveUp bool
	// holdForOverlap makes the first worker wait for a second one; only
	// the test that asserts concurrency sets it.
	holdForOverlap bool
	started        []string          // story ids in the order workers began
	feedback       map[string]string // the feedback each story's last attempt got
	attempts       map[string]int
	events         []report.Event
}

func newRig(t *testing.T, prd string) *rig {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the engine tests but is not in PATH: %v", err)
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "repo")
	os.MkdirAll(dir, 0o755)
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "config", "user.name", "Ralph Test")
	gitT(t, dir, "config", "user.email", "ralph@example.com")
	os.WriteFile(filepath.Join(dir, "PRD.md"), []byte(prd), 0o644)
	os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("one\ntwo\nthree\n"), 0o644)
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.EnsureStateFiles(time.Now()); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	r := &rig{t: t, ws: ws, feedback: map[string]string{}, attempts: map[string]int{}, outcome: map[string]loop.Outcome{}}
	r.edit = func(dir, story string, attempt int, feedback string) {
		os.WriteFile(filepath.Join(dir, strings.ToLower(story)+".txt"), []byte(story+"\n"), 0o644)
	}
	r.opts = Options{
		Workers:      3,
		WS:           ws,
		Source:       tasks.Open(tasks.KindMarkdown, filepath.Join(dir, "PRD.md")),
		WorktreeRoot: filepath.Join(base, "worktrees"),
		MinFreeDisk:  1,
		LoopOptions:  func(ws *workspace.Workspace, src tasks.Source) loop.Options { return loop.Options{} },
		Build:        r.build,
		Sink:         r,
	}
	return r
}

func (r *rig) Emit(ev report.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *rig) build(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
	id := opts.OnlyStory
	r.mu.Lock()
	r.running++
	r.maxActive = max(r.maxActive, r.running)
	r.started = append(r.started, id)
	r.attempts[id]++
	n := r.attempts[id]
	r.feedback[id] = opts.Feedback
	out := r.outcome[id]
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.running--; r.mu.Unlock() }()
	if r.holdForOverlap {
		r.awaitOverlap()
	}
	if out == loop.OutcomeNeedsHuman {
		// As the loop ends a run of one story it blocked: the error, its
		// reason for ending, and the story's blocker.
		return loop.Report{Outcome: out, Iterations: 1, Reason: "1 story blocked or waiting on blocked stories",
			Blockers: map[string]string{id: "tests failed 3 times: TestLogin"}}, loop.ErrNeedsHuman
	}
	if out != "" && out != loop.OutcomeComplete {
		return loop.Report{Outcome: out, Iterations: 1, Reason: "blocked by the test"}, nil
	}
	if opts.Home == "" || !strings.HasPrefix(ws.Root, r.opts.WorktreeRoot) {
		r.t.Errorf("%s: worker in %s with home %q; want a worktree under %s and a home of its own", id, ws.Root, opts.Home, r.opts.WorktreeRoot)
	}
	r.edit(ws.Root, id, n, opts.Feedback)
	if err := opts.Source.MarkDone(id, "", time.Now()); err != nil {
		return loop.Report{}, err
	}
	// A worker's loop also appends to progress.md: the queue must not
	// let that make tasks conflict.
	f, _ := os.OpenFile(filepath.Join(ws.Root, ".ralph", "progress.md"), os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "%s done by its worker\n", id)
	f.Close()
	gitT(r.t, ws.Root, "add", "-A")
	gitT(r.t, ws.Root, "commit", "-q", "-m", id+": work")
	return loop.Report{Outcome: loop.OutcomeComplete, Iterations: 1}, nil
}

// awaitOverlap holds a worker until a second one is running: a fixed
// sleep was not enough on a slow 2-core machine, where setting up the next
// worktree took longer than the first worker ran. Once two ran at once
// nobody waits. A serial engine never overlaps: the first hold gives up at
// the deadline, later workers are not held, and the test's count of
// workers at once fails it.
func (r *rig) awaitOverlap() {
	r.mu.Lock()
	gaveUp := r.overlapGaveUp
	r.mu.Unlock()
	if gaveUp {
		return
	}
	if !wait.Within(wait.Long, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.maxActive >= 2 }) {
		r.mu.Lock()
		r.overlapGaveUp = true
		r.mu.Unlock()
	}
}

func (r *rig) run() (Report, error) {
	r.t.Helper()
	return Run(context.Background(), r.opts)
}

func (r *rig) git(args ...string) string { return gitT(r.t, r.ws.Root, args...) }

// subjects lists the target's commits after the initial one, oldest
// first.
func (r *rig) subjects() []string {
	out := r.git("log", "--reverse", "--format=%s", "main")
	lines := strings.Split(out, "\n")
	return lines[1:]
}

func stories(n int, depends map[int]string) string {
	var b strings.Builder
	b.WriteString("# PRD\n\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "### [ ] US-%03d: story %d\n- [ ] works\n", i, i)
		if d, ok := depends[i]; ok {
			fmt.Fprintf(&b, "Depends: %s\n", d)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Eight stories, two of them depending on a third, three workers: every
// story lands as exactly one commit, no dependent starts before what it
// depends on landed, the checkout ends clean on main with everything, and
// no worktree or branch is left.
func TestEightStoriesThreeWorkers(t *testing.T) {
	r := newRig(t, stories(8, map[int]string{7: "US-003", 8: "US-003"}))
	mem := &memory.FileStore{Path: filepath.Join(t.TempDir(), "memory.jsonl")}
	r.opts.Memory = mem
	r.holdForOverlap = true
	rep, err := r.run()
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.Landed != 8 || rep.Left != 0 {
		t.Fatalf("Run = %+v, %v; want all 8 landed", rep, err)
	}
	subj := r.subjects()
	if len(subj) != 8 {
		t.Fatalf("main has %d commits after the initial one, want 8:\n%s", len(subj), strings.Join(subj, "\n"))
	}
	landedAt := map[string]int{}
	for i, s := range subj {
		id, _, _ := strings.Cut(s, ":")
		if _, dup := landedAt[id]; dup {
			t.Errorf("%s landed twice", id)
		}
		landedAt[id] = i
	}
	for _, dep := range []string{"US-007", "US-008"} {
		if landedAt[dep] < landedAt["US-003"] {
			t.Errorf("%s landed before US-003, which it depends on", dep)
		}
		if i := slices.Index(r.started, dep); i < 0 {
			t.Errorf("%s never started", dep)
		}
	}
	if r.maxActive < 2 || r.maxActive > 3 {
		t.Errorf("at most %d workers ran at once; want 2-3 of 3", r.maxActive)
	}
	if st := r.git("status", "--porcelain"); st != "" {
		t.Errorf("the checkout is not clean:\n%s", st)
	}
	if b := r.git("rev-parse", "--abbrev-ref", "HEAD"); b != "main" {
		t.Errorf("the checkout is on %s, want main", b)
	}
	for i := 1; i <= 8; i++ {
		if _, err := os.Stat(filepath.Join(r.ws.Root, fmt.Sprintf("us-%03d.txt", i))); err != nil {
			t.Errorf("the checkout lacks story %d's work: %v", i, err)
		}
	}
	prd, _ := os.ReadFile(filepath.Join(r.ws.Root, "PRD.md"))
	if strings.Contains(string(prd), "### [ ]") {
		t.Errorf("the PRD on main still has open stories:\n%s", prd)
	}
	if b := r.git("branch", "--list", "ralph/*"); b != "" {
		t.Errorf("branches left: %s", b)
	}
	if wl := r.git("worktree", "list", "--porcelain"); strings.Count(wl, "worktree ") != 1 {
		t.Errorf("worktrees left:\n%s", wl)
	}
	progress, _ := os.ReadFile(filepath.Join(r.ws.Root, ".ralph", "progress.md"))
	if n := strings.Count(string(progress), "landed by ralph's merge queue"); n != 8 {
		t.Errorf("progress.md has %d landing entries, want 8", n)
	}
	if strings.Contains(string(progress), "done by its worker") {
		t.Error("a worker's own progress.md lines reached main")
	}
	// The memory store has one task-complete event per landed story,
	// each linked to the commit that landed it.
	events, err := mem.Search(context.Background(), " complete: story", 0)
	if err != nil || len(events) != 8 {
		t.Fatalf("memory has %d task-complete events (%v); want 8", len(events), err)
	}
	for _, ev := range events {
		if c := ev.Props["commit"]; c == "" || r.git("log", "-1", "--format=%s", c) != ev.Props["task"]+": "+strings.TrimPrefix(ev.Name, ev.Props["task"]+" complete: ") {
			t.Errorf("memory event %s: commit %q does not hold its story", ev.Name, c)
		}
	}
	for _, ev := range r.events {
		if strings.Contains(ev.Text, "outside ralph") {
			t.Errorf("a run where nothing acted outside its worktree said: %s", ev.Text)
		}
	}
}

// Two stories that change the same line: one lands, the other is sent
// back with the conflict in its prompt, redone on the new tip, and lands.
func TestConflictIsRetriedOnTheNewTip(t *testing.T) {
	r := newRig(t, stories(2, nil))
	r.edit = conflictingEdit
	rep, err := r.run()
	if err != nil || rep.Landed != 2 {
		t.Fatalf("Run = %+v, %v; want both landed", rep, err)
	}
	retried := ""
	for id, n := range r.attempts {
		if n == 2 {
			retried = id
		}
	}
	if retried == "" || !strings.Contains(r.feedback[retried], "conflict") || !strings.Contains(r.feedback[retried], "shared.txt") {
		t.Errorf("attempts %v, feedback %q; want one story retried with the conflict in shared.txt in its prompt", r.attempts, r.feedback[retried])
	}
	if subj := r.subjects(); len(subj) != 2 {
		t.Errorf("main: %v; want one commit per story", subj)
	}
	shared, _ := os.ReadFile(filepath.Join(r.ws.Root, "shared.txt"))
	if !strings.Contains(string(shared), "US-001") || !strings.Contains(string(shared), "US-002") {
		t.Errorf("shared.txt = %q; want both stories' lines", shared)
	}
}

// conflictingEdit changes line two of shared.txt on a first attempt; a
// retry (which starts from the tip with the other story's line) adds its
// own line after it.
func conflictingEdit(dir, story string, attempt int, feedback string) {
	p := filepath.Join(dir, "shared.txt")
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if attempt == 1 {
		lines[1] = "two, says " + story
	} else {
		lines = append(lines, story+" too")
	}
	os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// With a retry limit of 1 the conflicting story needs review at once: its
// branch is kept with its work, the run goes on, and status can say why.
func TestConflictNeedsReviewAtTheLimit(t *testing.T) {
	r := newRig(t, stories(3, nil))
	r.opts.RetryLimit = 1
	r.edit = func(dir, story string, attempt int, feedback string) {
		if story == "US-003" {
			os.WriteFile(filepath.Join(dir, "us-003.txt"), []byte("x\n"), 0o644)
			return
		}
		conflictingEdit(dir, story, attempt, feedback)
	}
	rep, err := r.run()
	if err != nil || rep.Landed != 2 || len(rep.NeedsReview) != 1 || rep.Outcome != loop.OutcomeNeedsHuman {
		t.Fatalf("Run = %+v, %v; want 2 landed and 1 needing review", rep, err)
	}
	id := rep.NeedsReview[0]
	reg, _, _ := LoadRegistry(r.ws.Dir())
	tr := reg.Tasks[id]
	if tr.State != landing.NeedsReview || !slices.Equal(tr.Conflicts, []string{"shared.txt"}) {
		t.Errorf("registry: %+v; want needs_review with the conflict in shared.txt", tr)
	}
	if msg := r.git("log", "-1", "--format=%s", tr.Branch); msg != id+": work" {
		t.Errorf("branch %s holds %q; want its work kept", tr.Branch, msg)
	}
	if _, err := os.Stat(tr.Worktree); !os.IsNotExist(err) {
		t.Errorf("the worktree of a task that needs review is left: %v", err)
	}
}

// A check that fails after integration with a long output sends the task
// back with a one-line reason (what the terminal and the registry show)
// and hands the next attempt the failed check in the one feedback format.
func TestIntegrationFailureFeedbackReachesTheNextAttempt(t *testing.T) {
	r := newRig(t, stories(2, nil))
	r.opts.Workers = 2
	r.opts.RetryLimit = 2
	r.opts.Checks = []check.Check{{Name: "not-both", Run: `test ! -f us-001.txt || test ! -f us-002.txt || { i=0; while [ $i -lt 3000 ]; do echo "looking at file $i"; i=$((i+1)); done; echo "us-001.txt and us-002.txt are both here"; exit 1; }`}}
	if _, err := r.run(); err != nil {
		t.Fatal(err)
	}
	reg, _, _ := LoadRegistry(r.ws.Dir())
	var sentBack string
	for id, fb := range r.feedback {
		if fb != "" {
			sentBack = id
		}
	}
	if sentBack == "" {
		t.Fatalf("no attempt was told of a landing sent back: %v", r.feedback)
	}
	fb := r.feedback[sentBack]
	tr := reg.Tasks[sentBack]
	if strings.Contains(tr.Reason, "\n") || !strings.HasPrefix(tr.Reason, `check "not-both" failed after integration on main`) {
		t.Errorf("reason %q; want one line naming the check", tr.Reason)
	}
	for _, want := range []string{
		"An earlier attempt at " + sentBack + " was verified on its own branch but could not land on main: " + tr.Reason + ".\n\n",
		"Check \"not-both\" (`test ! -f", "exited with code 1.\n",
		"lines above left out\n",
		"us-001.txt and us-002.txt are both here\n```\nYour branch starts from the current tip of main",
	} {
		if !strings.Contains(fb, want) {
			t.Errorf("the next attempt's feedback lacks %q:\n%s", want, fb)
		}
	}
	if strings.Contains(fb, "looking at file 0\n") {
		t.Errorf("the feedback keeps the start of a long output")
	}
	for _, ev := range r.events {
		if strings.Contains(ev.Text, "sent back to a worker") && strings.Count(strings.TrimRight(ev.Text, "\n"), "\n") > 0 {
			t.Errorf("the sent-back line is more than one line: %q", ev.Text)
		}
	}
}

// A story whose check passes alone but fails once integrated never lands:
// main never moves to a commit whose checks did not pass.
func TestCheckThatFailsOnlyAfterIntegrationNeverLands(t *testing.T) {
	r := newRig(t, stories(2, nil))
	r.opts.Workers = 2
	r.opts.RetryLimit = 2
	// Each story alone adds one file; both together break the check.
	r.opts.Checks = []check.Check{{Name: "not-both", Run: "test ! -f us-001.txt || test ! -f us-002.txt"}}
	rep, err := r.run()
	if err != nil || rep.Landed != 1 || len(rep.NeedsReview) != 1 {
		t.Fatalf("Run = %+v, %v; want one landed, one needing review", rep, err)
	}
	reg, _, _ := LoadRegistry(r.ws.Dir())
	tr := reg.Tasks[rep.NeedsReview[0]]
	if !strings.Contains(tr.Reason, `check "not-both" failed after integration`) || tr.Attempt != 2 {
		t.Errorf("needs review: %+v; want the failing check as the reason after 2 attempts", tr)
	}
	if subj := r.subjects(); len(subj) != 1 {
		t.Errorf("main: %v; want only the story that passed", subj)
	}
	for _, c := range strings.Split(r.git("rev-list", "main"), "\n") {
		out, err := exec.Command("git", "-C", r.ws.Root, "ls-tree", "--name-only", c).CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "us-001.txt") && strings.Contains(string(out), "us-002.txt") {
			t.Errorf("main reached %s, whose check fails", c)
		}
	}
}

// A blocked story does not stop the others; the run ends needing a person
// and says which.
func TestBlockedStoryLetsTheOthersLand(t *testing.T) {
	r := newRig(t, stories(3, nil))
	r.outcome["US-002"] = loop.OutcomeNeedsHuman
	rep, err := r.run()
	if err != nil || rep.Landed != 2 || !slices.Equal(rep.Blocked, []string{"US-002"}) || rep.Outcome != loop.OutcomeNeedsHuman {
		t.Fatalf("Run = %+v, %v; want 2 landed and US-002 blocked", rep, err)
	}
	// Its reason is its own failure, not the worker loop's "only blocked
	// tasks are left".
	if reg, _, _ := LoadRegistry(r.ws.Dir()); reg.Tasks["US-002"].Reason != "tests failed 3 times: TestLogin" {
		t.Errorf("US-002's reason = %q; want its blocker's", reg.Tasks["US-002"].Reason)
	}
}

// Bad input changes nothing.
func TestRefusals(t *testing.T) {
	r := newRig(t, stories(1, nil))
	r.opts.Workers = 0
	if _, err := r.run(); err == nil || !strings.Contains(err.Error(), "--workers must be at least 1") {
		t.Errorf("workers 0: %v", err)
	}
	r.opts.Workers = 2
	os.WriteFile(filepath.Join(r.ws.Root, "shared.txt"), []byte("mine\n"), 0o644)
	if _, err := r.run(); err == nil || !strings.Contains(err.Error(), "uncommitted changes (shared.txt)") {
		t.Errorf("dirty tree: %v", err)
	}
	r.git("checkout", "-q", "--", "shared.txt")
	r.opts.MinFreeDisk = 1 << 62
	if _, err := r.run(); err == nil || !strings.Contains(err.Error(), "min_free_disk") {
		t.Errorf("no disk: %v", err)
	}
	r.opts.MinFreeDisk = 1
	r.git("checkout", "-q", "--detach")
	if _, err := r.run(); err == nil || !strings.Contains(err.Error(), "detached") {
		t.Errorf("detached: %v", err)
	}
	if _, err := os.Stat(RegistryPath(r.ws.Dir())); !os.IsNotExist(err) {
		t.Errorf("a refused run left a registry: %v", err)
	}
}

// The target moves outside ralph while a task is being integrated (a
// person commits on main during the checks): ralph integrates again on
// the new tip, says so, and keeps the person's commit.
func TestTargetMovedDuringLandingIsIntegratedAgain(t *testing.T) {
	r := newRig(t, stories(1, nil))
	once := filepath.Join(t.TempDir(), "moved")
	r.opts.Checks = []check.Check{{Name: "someone commits", Run: fmt.Sprintf(
		"test -f %s || { touch %s && git -C %s commit -q --allow-empty -m 'someone else'; }", once, once, r.ws.Root)}}
	rep, err := r.run()
	if err != nil || rep.Landed != 1 {
		t.Fatalf("Run = %+v, %v; want the story landed", rep, err)
	}
	if subj := r.subjects(); !slices.Equal(subj, []string{"someone else", "US-001: story 1"}) {
		t.Errorf("main: %v; want the person's commit kept and the story on top", subj)
	}
	said := false
	for _, ev := range r.events {
		said = said || strings.Contains(ev.Text, "moved outside ralph while US-001 was integrated: integrating again on the new tip")
	}
	if !said {
		t.Error("ralph did not say that it integrated again on the moved target")
	}
	if st := r.git("status", "--porcelain"); st != "" {
		t.Errorf("checkout not clean:\n%s", st)
	}
}

// A task whose branch was deleted by hand before it landed is sent back
// and redone, not lost or landed empty.
func TestDeletedBranchIsRedone(t *testing.T) {
	r := newRig(t, stories(1, nil))
	inner := r.opts.Build
	deleted := false
	r.opts.Build = func(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
		rep, err := inner(ctx, ws, opts)
		if !deleted {
			deleted = true
			gitT(t, ws.Root, "checkout", "-q", "--detach")
			gitT(t, r.ws.Root, "branch", "-D", strings.TrimSpace(gitT(t, ws.Root, "for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/")))
		}
		return rep, err
	}
	rep, err := r.run()
	if err != nil || rep.Landed != 1 || r.attempts["US-001"] != 2 {
		reg, _, _ := LoadRegistry(r.ws.Dir())
		t.Fatalf("Run = %+v, %v, attempts %v (%+v); want US-001 redone and landed", rep, err, r.attempts, reg.Tasks["US-001"])
	}
	if !strings.Contains(r.feedback["US-001"], "is gone") {
		t.Errorf("feedback = %q", r.feedback["US-001"])
	}
}

// A kill in the middle of a fast-forward (the checkout's files and index
// already at the landed commit, the branch not yet moved) is finished on
// the next start instead of being refused as uncommitted work.
func TestKilledFastForwardIsFinished(t *testing.T) {
	r := newRig(t, stories(1, nil))
	ctx := context.Background()
	old := r.git("rev-parse", "HEAD")
	// What the queue made: a landing commit on top of main, in a
	// detached worktree.
	wt := filepath.Join(t.TempDir(), "integration")
	r.git("worktree", "add", "-q", "--detach", wt, old)
	os.WriteFile(filepath.Join(wt, "us-001.txt"), []byte("US-001\n"), 0o644)
	prd, _ := os.ReadFile(filepath.Join(wt, "PRD.md"))
	os.WriteFile(filepath.Join(wt, "PRD.md"), []byte(strings.Replace(string(prd), "### [ ] US-001", "### [x] US-001", 1)), 0o644)
	gitT(t, wt, "add", "-A")
	gitT(t, wt, "commit", "-q", "-m", "US-001: story 1\n\nRalph-Task: US-001\nRalph-Commit: t0k")
	landed := gitT(t, wt, "rev-parse", "HEAD")
	reg := &Registry{RunID: "r1", Target: "main", Start: old, Checkout: old, Workers: 2, WorktreeRoot: filepath.Join(r.opts.WorktreeRoot, "r1"),
		Tasks: map[string]*TaskRecord{"US-001": {ID: "US-001", Title: "story 1", State: landing.Landing, Branch: "ralph/r1/US-001", Commit: landed, Token: "t0k", Attempt: 1}}}
	if err := reg.save(r.ws.Dir()); err != nil {
		t.Fatal(err)
	}
	// The kill: the checkout's files moved, the branch did not.
	r.git("read-tree", "-m", "-u", old, landed)
	if st := r.git("status", "--porcelain"); st == "" {
		t.Fatal("setup: the checkout should look changed")
	}
	rep, err := Run(ctx, r.opts)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %+v, %v; want the interrupted landing finished", rep, err)
	}
	if head := r.git("rev-parse", "main"); head != landed {
		t.Errorf("main = %s; want the landed commit %s", head, landed)
	}
	if st := r.git("status", "--porcelain"); st != "" {
		t.Errorf("checkout not clean:\n%s", st)
	}
	if r.attempts["US-001"] != 0 {
		t.Errorf("US-001 was worked again (%d attempts) although it had landed", r.attempts["US-001"])
	}
	if reg, _, _ := LoadRegistry(r.ws.Dir()); reg.Tasks["US-001"].State != landing.Landed {
		t.Errorf("US-001 is %s; want landed", reg.Tasks["US-001"].State)
	}
}

// A check that hangs on the integration worktree is stopped at its
// timeout and the task goes back to a worker: the queue never waits
// forever and the target never moves.
func TestHangingCheckOnIntegrationSendsTheTaskBack(t *testing.T) {
	r := newRig(t, stories(1, nil))
	r.opts.RetryLimit = 1
	// It passes on the tip and hangs once the story's work is in: a check
	// that failed on the tip too would not hold the landing back.
	r.opts.Checks = []check.Check{{Name: "hangs", Run: "test ! -f us-001.txt || sleep 30", Timeout: 300 * time.Millisecond}}
	start := time.Now()
	rep, err := r.run()
	if err != nil || rep.Landed != 0 || !slices.Equal(rep.NeedsReview, []string{"US-001"}) {
		t.Fatalf("Run = %+v, %v; want US-001 needing review", rep, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the run took %s: the hanging check was not stopped at its timeout", d)
	}
	reg, _, _ := LoadRegistry(r.ws.Dir())
	if !strings.Contains(reg.Tasks["US-001"].Reason, `check "hangs" failed after integration`) {
		t.Errorf("reason = %q", reg.Tasks["US-001"].Reason)
	}
	if subj := r.subjects(); len(subj) != 0 {
		t.Errorf("main moved: %v", subj)
	}
}

// An agent moves the target outside ralph to a commit whose check fails
// (git update-ref from its worktree): ralph stops before it judges any
// landing against it, names the old and the new commit and says how to
// put the branch back, rather than send every good task back until it
// needs review.
func TestTargetMovedToAFailingCommitStopsTheRun(t *testing.T) {
	r := newRig(t, stories(2, nil))
	r.opts.Workers = 1
	r.opts.Checks = []check.Check{{Name: "not broken", Run: "test ! -f broken.txt"}}
	start := r.git("rev-parse", "main")
	var bad string
	r.edit = func(dir, story string, attempt int, feedback string) {
		os.WriteFile(filepath.Join(dir, strings.ToLower(story)+".txt"), []byte(story+"\n"), 0o644)
		if bad != "" {
			return
		}
		// In the worker's worktree, as an agent would: never the
		// repository this test runs in.
		cmd := exec.Command("sh", "-c", `set -e
blob=$(echo broken | git hash-object -w --stdin)
tree=$( (git ls-tree main; printf '100644 blob %s\tbroken.txt\n' "$blob") | git mktree)
c=$(git commit-tree "$tree" -p main -m 'moved by an agent')
git update-ref refs/heads/main "$c"
echo "$c"`)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("moving main: %v\n%s", err, out) // not Fatal: a worker's goroutine
			return
		}
		bad = strings.TrimSpace(string(out))
	}
	rep, err := r.run()
	var moved *MovedError
	if !errors.As(err, &moved) || moved.From != start || moved.To != bad || !slices.Equal(moved.Failing, []string{"not broken"}) {
		t.Fatalf("Run = %+v, %v; want a MovedError from %s to %s naming the check", rep, err, start, bad)
	}
	if msg := err.Error(); !strings.Contains(msg, "git update-ref refs/heads/main "+start+" "+bad) || !strings.Contains(msg, "moved outside ralph") {
		t.Errorf("message %q; want it to say how to put main back", msg)
	}
	if got := r.attempts["US-001"]; got != 1 {
		t.Errorf("US-001 was worked %d times; the move must not send it back", got)
	}
	reg, _, _ := LoadRegistry(r.ws.Dir())
	if tr := reg.Tasks["US-001"]; tr == nil || tr.State != landing.Queued {
		t.Errorf("US-001 = %+v; want it still queued to land once main is put back", tr)
	}
	if tip := r.git("rev-parse", "main"); tip != bad {
		t.Errorf("main at %s; ralph does not move it itself (want %s)", tip, bad)
	}
}

// An agent switches the person's checkout to another branch: the tasks
// still land on the target, and the run counts them from the target,
// not from the checkout's task file, and says where the checkout is.
func TestLandingsAreCountedOnTheTarget(t *testing.T) {
	r := newRig(t, stories(2, nil))
	r.opts.Workers = 1
	switched := false
	r.edit = func(dir, story string, attempt int, feedback string) {
		os.WriteFile(filepath.Join(dir, strings.ToLower(story)+".txt"), []byte(story+"\n"), 0o644)
		if !switched {
			switched = true
			gitT(t, r.ws.Root, "switch", "-q", "-c", "elsewhere")
		}
	}
	rep, err := r.run()
	if err != nil || rep.Landed != 2 || rep.Left != 0 || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %+v, %v; want both landed and none left", rep, err)
	}
	if subj := r.subjects(); len(subj) != 2 {
		t.Errorf("main: %v; want both stories", subj)
	}
	said := false
	for _, ev := range r.events {
		said = said || strings.Contains(ev.Text, "your checkout is on branch elsewhere, not on main") && strings.Contains(ev.Text, "git switch main")
	}
	if !said {
		t.Error("ralph did not say the checkout was switched away from main")
	}
}

// An agent writes into the person's checkout instead of its worktree:
// ralph says which files changed there and which task's agent ran when
// they appeared, leaves them for the person, and still lands the tasks.
func TestWritesIntoTheCheckoutAreReported(t *testing.T) {
	r := newRig(t, stories(2, map[int]string{2: "US-001"}))
	r.opts.Workers = 2
	r.edit = func(dir, story string, attempt int, feedback string) {
		os.WriteFile(filepath.Join(dir, strings.ToLower(story)+".txt"), []byte(story+"\n"), 0o644)
		if story == "US-001" {
			os.WriteFile(filepath.Join(r.ws.Root, "stray.txt"), []byte("oops\n"), 0o644)
		}
	}
	rep, err := r.run()
	if err != nil || rep.Landed != 2 {
		t.Fatalf("Run = %+v, %v; want both landed", rep, err)
	}
	var said []string
	for _, ev := range r.events {
		if strings.Contains(ev.Text, "changed in your checkout outside ralph") {
			said = append(said, ev.Text)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "stray.txt changed in your checkout outside ralph (the agent of US-001 ran meanwhile)") {
		t.Fatalf("reports %q; want one naming stray.txt and US-001", said)
	}
	if b, err := os.ReadFile(filepath.Join(r.ws.Root, "stray.txt")); err != nil || string(b) != "oops\n" {
		t.Errorf("stray.txt = %q, %v; want it left for the person", b, err)
	}
}

// An agent writes into the worktree of a sibling task whose worker is
// back (here blocked): ralph names the files, the sibling and the task
// whose agent ran, and the sibling's work stays its commits.
func TestWritesIntoASiblingWorktreeAreReported(t *testing.T) {
	r := newRig(t, stories(2, nil))
	r.opts.Workers = 2
	r.outcome["US-002"] = loop.OutcomeNeedsHuman
	r.edit = func(dir, story string, attempt int, feedback string) {
		os.WriteFile(filepath.Join(dir, strings.ToLower(story)+".txt"), []byte(story+"\n"), 0o644)
		if story != "US-001" {
			return
		}
		// Wait until US-002's worker is back and on record, then write
		// into its worktree, as an agent with the whole disk in reach.
		var worktree string
		back := func() bool {
			reg, ok, _ := LoadRegistry(r.ws.Dir())
			tr := reg.Tasks["US-002"]
			if ok && tr != nil && tr.State == landing.Blocked && tr.Worktree != "" {
				worktree = tr.Worktree
				return true
			}
			return false
		}
		if !wait.Within(wait.Long, back) {
			t.Error("US-002 never came back blocked")
			return
		}
		os.WriteFile(filepath.Join(worktree, "sibling.txt"), []byte("not mine\n"), 0o644)
	}
	rep, err := r.run()
	if err != nil || rep.Landed != 1 || !slices.Equal(rep.Blocked, []string{"US-002"}) {
		t.Fatalf("Run = %+v, %v; want US-001 landed, US-002 blocked as its loop said", rep, err)
	}
	said := false
	for _, ev := range r.events {
		said = said || strings.Contains(ev.Text, "sibling.txt changed in the worktree of US-002 after its worker finished (the agent of US-001 ran meanwhile)")
	}
	if !said {
		t.Error("ralph did not name the write into US-002's worktree and US-001's agent")
	}
}
