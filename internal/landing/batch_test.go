package landing

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/tasks"
)

// countingChecks runs the checks as the user would, counting the runs.
type countingChecks struct {
	mu sync.Mutex
	n  int
}

func (c *countingChecks) RunCheck(ctx context.Context, dir string, ch check.Check) check.Result {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return runkit.ExecChecks{}.RunCheck(ctx, dir, ch)
}

// newBatchFixture is newFixture with four stories in the task file and
// a counted check.
func newBatchFixture(t *testing.T, checks ...check.Check) (*fixture, *countingChecks) {
	t.Helper()
	f := newFixture(t, checks...)
	var prd strings.Builder
	prd.WriteString("# PRD\n")
	for i := 1; i <= 4; i++ {
		prd.WriteString("\n### [ ] US-00" + string(rune('0'+i)) + ": Story " + string(rune('0'+i)) + "\n- [ ] it exists\n")
	}
	write(t, filepath.Join(f.root, "prd.md"), prd.String())
	git(t, f.root, "commit", "-qam", "four stories")
	f.base = git(t, f.root, "rev-parse", "HEAD")
	counter := &countingChecks{}
	f.q.Checker = counter
	return f, counter
}

// story is a task branch cut from the fixture's base that writes each
// of files (name, content), and its job.
func (f *fixture) story(t *testing.T, id string, files ...string) Job {
	t.Helper()
	git(t, f.root, "switch", "-q", "-C", "ralph/r1/"+id, f.base)
	for k := 0; k+1 < len(files); k += 2 {
		write(t, filepath.Join(f.root, files[k]), files[k+1])
	}
	git(t, f.root, "add", "-A")
	git(t, f.root, "commit", "-q", "-m", id+" work")
	head := git(t, f.root, "rev-parse", "HEAD")
	git(t, f.root, "switch", "-q", "main")
	return Job{Run: "r1", Task: id, Title: "Story " + id[len(id)-1:], Worker: "w1", Attempt: 1, Base: f.base, Head: head, PRD: "prd.md", Kind: tasks.KindForPath("prd.md")}
}

func (f *fixture) subjects(t *testing.T, n int) string {
	return git(t, f.root, "log", "--format=%s", "-n", string(rune('0'+n)), "--reverse", "main")
}

// Three compatible stories land as one batch: the checks run once on
// the chain (and once on the tip it is judged against), the target moves
// once, and each story keeps its own commit, in order, marked done.
func TestLandBatchChecksOnceAndMovesOnce(t *testing.T) {
	f, counter := newBatchFixture(t, check.Check{Name: "tests", Run: "true", Format: check.FormatNone})
	jobs := []Job{f.story(t, "US-001", "a.txt", "a\n"), f.story(t, "US-002", "b.txt", "b\n"), f.story(t, "US-003", "c.txt", "c\n")}
	var committed []string
	for i := range jobs {
		jobs[i].Committed = func(hash string) error { committed = append(committed, hash); return nil }
	}
	outs, err := f.q.LandBatch(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if want := git(t, f.root, "rev-parse", "main~"+string(rune('0'+2-i))); !o.Landed || o.Commit != want || committed[i] != want {
			t.Errorf("%s: %+v (committed %v); want landed at %s", jobs[i].Task, o, committed, want)
		}
	}
	if counter.n != 2 || f.target.n != 1 {
		t.Errorf("checks ran %d times and the target moved %d times; want 2 (the tip, the batch) and 1", counter.n, f.target.n)
	}
	if got := f.subjects(t, 4); got != "four stories\nUS-001: Story 1\nUS-002: Story 2\nUS-003: Story 3" {
		t.Errorf("main's history:\n%s", got)
	}
	if prd := git(t, f.root, "show", "main:prd.md"); strings.Count(prd, "### [x]") != 3 || strings.Contains(prd, "[x] US-004") {
		t.Errorf("task file on main:\n%s", prd)
	}
	if said := strings.Join(f.said, "\n"); !strings.Contains(said, "checking US-001, US-002, US-003 integrated on "+f.base[:7]) {
		t.Errorf("said:\n%s", said)
	}
}

// Two stories that each pass alone and fail together: the batch is
// bisected, the first lands and the second is sent back with the check's
// feedback, never both; the target only moved to the checked commit.
func TestLandBatchBisectsAnIncompatiblePair(t *testing.T) {
	f, _ := newBatchFixture(t, check.Check{Name: "not both", Run: "echo a.txt and b.txt together; ! { test -f a.txt && test -f b.txt; }", Format: check.FormatNone})
	jobs := []Job{f.story(t, "US-001", "a.txt", "a\n"), f.story(t, "US-002", "b.txt", "b\n")}
	outs, err := f.q.LandBatch(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if !outs[0].Landed || outs[1].Landed || !strings.Contains(outs[1].Reason, `check "not both" failed after integration on main`) || !strings.Contains(outs[1].Feedback, "together") {
		t.Fatalf("outcomes = %+v; want US-001 landed and US-002 sent back with the check's feedback", outs)
	}
	if tip := git(t, f.root, "rev-parse", "main"); tip != outs[0].Commit || git(t, f.root, "rev-parse", "main^") != f.base {
		t.Errorf("main at %s; want US-001's commit %s on the start", tip, outs[0].Commit)
	}
	if said := strings.Join(f.said, "\n"); !strings.Contains(said, "the checks fail with US-001, US-002 together: trying US-001 first, then US-002") {
		t.Errorf("said:\n%s", said)
	}
}

// A conflict in the middle of a batch sends back only that story; the
// others land as one batch, checked once.
func TestLandBatchSendsBackOnlyTheConflict(t *testing.T) {
	f, counter := newBatchFixture(t, check.Check{Name: "tests", Run: "true", Format: check.FormatNone})
	jobs := []Job{f.story(t, "US-001", "a.txt", "a\n"), f.story(t, "US-002", "shared.txt", "from US-002\n"), f.story(t, "US-003", "c.txt", "c\n")}
	write(t, filepath.Join(f.root, "shared.txt"), "landed meanwhile\n")
	git(t, f.root, "commit", "-qam", "meanwhile")
	outs, err := f.q.LandBatch(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if !outs[0].Landed || outs[1].Landed || !outs[2].Landed || !strings.Contains(outs[1].Reason, "conflict with work landed on main meanwhile, in shared.txt") {
		t.Fatalf("outcomes = %+v; want US-002 alone sent back for its conflict", outs)
	}
	if got := f.subjects(t, 3); got != "meanwhile\nUS-001: Story 1\nUS-003: Story 3" {
		t.Errorf("main's history:\n%s", got)
	}
	if counter.n != 2 || f.target.n != 1 {
		t.Errorf("checks ran %d times, the target moved %d times; want 2 and 1", counter.n, f.target.n)
	}
}

// A batch of four whose checks fail because of one story lands the
// other three and sends back only the culprit; main never holds it.
func TestLandBatchLandsAllButTheCulprit(t *testing.T) {
	f, _ := newBatchFixture(t, check.Check{Name: "no bad", Run: "test ! -f bad.txt", Format: check.FormatNone})
	jobs := []Job{f.story(t, "US-001", "a.txt", "a\n"), f.story(t, "US-002", "b.txt", "b\n"),
		f.story(t, "US-003", "bad.txt", "bad\n"), f.story(t, "US-004", "d.txt", "d\n")}
	outs, err := f.q.LandBatch(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if o.Landed == (i == 2) {
			t.Errorf("%s: %+v; want only US-003 sent back", jobs[i].Task, o)
		}
	}
	if got := f.subjects(t, 4); got != "four stories\nUS-001: Story 1\nUS-002: Story 2\nUS-004: Story 4" {
		t.Errorf("main's history:\n%s", got)
	}
	if files := git(t, f.root, "ls-tree", "--name-only", "main"); strings.Contains(files, "bad.txt") {
		t.Errorf("main holds bad.txt:\n%s", files)
	}
}

// A member's landing commit is on the target once the batch moved it
// there, below the head; a commit of a chain that never reached the
// target is not, and its task lands again.
func TestLandedInFindsBatchMembersBelowTheHead(t *testing.T) {
	f, _ := newBatchFixture(t)
	jobs := []Job{f.story(t, "US-001", "a.txt", "a\n"), f.story(t, "US-002", "b.txt", "b\n")}
	tokens := make([]string, 2)
	for i := range jobs {
		jobs[i].Committing = func(tok string) error { tokens[i] = tok; return nil }
	}
	outs, err := f.q.LandBatch(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, o := range outs {
		if !LandedIn(ctx, f.q.Repo, "main", o.Commit, tokens[i]) {
			t.Errorf("%s's commit %s is not found landed on main", jobs[i].Task, o.Commit)
		}
	}
	if _, ok := LandedBefore(ctx, f.q.Repo, "main", tokens[0]); ok {
		t.Error("LandedBefore finds the first member at the head; the test does not tell the two apart")
	}
	if LandedIn(ctx, f.q.Repo, "main", f.head, tokens[0]) || LandedIn(ctx, f.q.Repo, f.base, outs[0].Commit, tokens[0]) {
		t.Error("a commit that is not on the target was found landed")
	}
}

// A story that conflicts only with a batch member whose checks fail is
// not sent back for it: the bisection tries it again without that member,
// and it lands.
func TestLandBatchRetriesAConflictWithAFailingMember(t *testing.T) {
	f, _ := newBatchFixture(t, check.Check{Name: "no bad", Run: "test ! -f bad.txt", Format: check.FormatNone})
	jobs := []Job{f.story(t, "US-001", "shared.txt", "from US-001\n", "bad.txt", "bad\n"), f.story(t, "US-002", "shared.txt", "from US-002\n")}
	outs, err := f.q.LandBatch(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].Landed || !strings.Contains(outs[0].Reason, `check "no bad" failed`) || !outs[1].Landed {
		t.Fatalf("outcomes = %+v; want US-001 sent back for its check and US-002 landed", outs)
	}
	if got := git(t, f.root, "show", "main:shared.txt"); got != "from US-002" {
		t.Errorf("shared.txt on main = %q; want US-002's", got)
	}
}
