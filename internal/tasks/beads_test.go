package tasks

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/beads"
	"github.com/ralphloop/ralph/internal/beads/beadstest"
)

func beadsFixture(t *testing.T, calls ...beadstest.Call) (*BeadsSource, *beadstest.Runner) {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, ".beads"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := beadstest.New(t, calls...)
	return OpenBeads(root, "", &beads.Client{Dir: root, Runner: r}), r
}

func TestBeadsLoadMapsReadyAndWaiting(t *testing.T) {
	src, _ := beadsFixture(t,
		beadstest.Call{Args: "version --json", Stdout: `{"version":"1.0.5","schema_version":1}`},
		beadstest.Call{Args: "list --limit 0 --all --json", Stdout: `[
			{"id":"rl-e","title":"Epic","issue_type":"epic","status":"open","priority":1},
			{"id":"rl-b","title":"B","issue_type":"task","status":"open","priority":2,"dependencies":[{"issue_id":"rl-b","depends_on_id":"rl-a","type":"blocks"},{"issue_id":"rl-b","depends_on_id":"rl-c","type":"blocks"},{"issue_id":"rl-b","depends_on_id":"rl-e","type":"parent-child"}]},
			{"id":"rl-a","title":"A","issue_type":"task","status":"open","priority":2,"acceptance_criteria":"- a.txt exists (verify: ` + "`test -f a.txt`" + `)"},
			{"id":"rl-c","title":"C","issue_type":"task","status":"closed","priority":0},
			{"id":"rl-d","title":"D","issue_type":"task","status":"blocked","priority":0},
			{"id":"rl-f","title":"F","issue_type":"task","status":"deferred","priority":0}]`},
		beadstest.Call{Args: "ready --limit 0 --include-ephemeral --json", Stdout: `[{"id":"rl-e","issue_type":"epic"},{"id":"rl-a","title":"A","issue_type":"task","status":"open","priority":2}]`},
	)
	b, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range b.Stories {
		got = append(got, s.ID+"="+string(s.Status)+"<"+strings.Join(s.DependsOn, ","))
	}
	want := "rl-a=not_started< rl-b=not_started<rl-a rl-c=complete< rl-d=blocked< rl-f=blocked<"
	if strings.Join(got, " ") != want {
		t.Fatalf("board\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if c := b.Stories[0].Criteria; len(c) != 1 || c[0].Verify != "test -f a.txt" || c[0].Text != "a.txt exists" {
		t.Errorf("criteria %+v", c)
	}
	sel, _, ok, _ := b.Select()
	if !ok || sel.TaskID() != "rl-a" {
		t.Errorf("selected %v %v", sel.TaskID(), ok)
	}
	if b.Remaining() != 4 {
		t.Errorf("remaining %d", b.Remaining())
	}
}

func TestBeadsMissingDatabase(t *testing.T) {
	src := OpenBeads(t.TempDir(), "", &beads.Client{Runner: beadstest.New(t)})
	if _, err := src.Load(); err == nil || !strings.Contains(err.Error(), "bd init") {
		t.Fatalf("err = %v", err)
	}
}

func TestBeadsMarkDoneAndBlock(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	src, _ := beadsFixture(t,
		beadstest.Call{Args: "show rl-a --json", Stdout: `[{"id":"rl-a","status":"in_progress"}]`},
		beadstest.Call{Args: "close rl-a --reason ralph: done (ralph's comment says how it was accepted) --json", Stdout: `[{"id":"rl-a","status":"closed"}]`},
		// Closed by this process just now: it holds no note of ralph's
		// yet, so no bd comments to read first.
		beadstest.Call{Args: "comments add rl-a ralph: rl-a done and verified at 2026-11-22T10:00:00Z · run r1 iteration 2 · agent fake · commit abc --json", Stdout: `{"id":"x"}`},
		// The same iteration audited again (COMMIT after a crash): no second note.
		beadstest.Call{Args: "comments rl-a --json", Stdout: `[{"id":1,"issue_id":"rl-a","text":"ralph: rl-a done and verified at 2026-11-22T10:00:00Z · run r1 iteration 2 · agent fake · commit abc"}]`},
		beadstest.Call{Args: "show rl-a --json", Stdout: `[{"id":"rl-a","status":"closed"}]`},
		beadstest.Call{Args: "show rl-b --json", Stdout: `[{"id":"rl-b","status":"in_progress"}]`},
		beadstest.Call{Args: "comments add rl-b Stuck: tests failed: exit 1 --json", Stdout: `{"id":"y"}`},
		beadstest.Call{Args: "update rl-b --status=blocked --json", Stdout: `[{"id":"rl-b","status":"blocked"}]`},
		beadstest.Call{Args: "show rl-z --json", Stdout: `{"error":"no issues found matching the provided IDs"}`, Exit: 1},
	)
	if err := src.MarkDone("rl-a", "", now); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := src.Audit(context.Background(), "rl-a", "run r1 iteration 2", "ralph: rl-a done and verified at 2026-11-22T10:00:00Z · run r1 iteration 2 · agent fake · commit abc\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.MarkDone("rl-a", "", now); err != nil { // idempotent
		t.Fatal(err)
	}
	if err := src.SetState("rl-b", StatusBlocked, 2, &Blocker{Reason: "tests failed:\n exit 1"}, now); err != nil {
		t.Fatal(err)
	}
	if err := src.SetState("rl-z", StatusBlocked, 2, nil, now); err == nil || !strings.Contains(err.Error(), ErrStoryNotFound.Error()) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestParseBeadsSource(t *testing.T) {
	for in, want := range map[string]string{"beads": "", "beads:rl-mol-1": "rl-mol-1"} {
		if mol, ok := ParseBeadsSource(in); !ok || mol != want {
			t.Errorf("%q: %q %v", in, mol, ok)
		}
	}
	for _, in := range []string{"", "beads:", "prd.json"} {
		if _, ok := ParseBeadsSource(in); ok {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestDetectBeadsFolder(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, ".beads"), 0o755)
	os.WriteFile(filepath.Join(root, "prd.json"), []byte("{}"), 0o644)
	src, err := Detect(root, "", "PRD.md")
	if err != nil || src.Kind() != KindBeads || src.Path() != filepath.Join(root, ".beads") {
		t.Fatalf("%v %v", src, err)
	}
}

func TestBeadsPickAsksBdForOneReadyTask(t *testing.T) {
	ctx := context.Background()
	src, _ := beadsFixture(t,
		beadstest.Call{Args: "ready --limit 1 --include-ephemeral --json", Stdout: `[{"id":"rl-b","issue_type":"task","status":"open"}]`},
		// An epic first: the whole list is read and its first task taken.
		beadstest.Call{Args: "ready --limit 1 --include-ephemeral --json", Stdout: `[{"id":"rl-e","issue_type":"epic","status":"open"}]`},
		beadstest.Call{Args: "ready --limit 0 --include-ephemeral --json", Stdout: `[{"id":"rl-e","issue_type":"epic"},{"id":"rl-c","issue_type":"task"}]`},
		// Nothing ready.
		beadstest.Call{Args: "ready --limit 1 --include-ephemeral --json", Stdout: `[]`},
	)
	for _, want := range []string{"rl-b", "rl-c", ""} {
		got, err := src.Pick(ctx)
		if err != nil || got != want {
			t.Fatalf("Pick = %q, %v; want %q", got, err, want)
		}
	}
}

func TestBeadsPickInsideAMoleculeSkipsItsRoot(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, ".beads"), 0o755)
	r := beadstest.New(t, beadstest.Call{Args: "ready --limit 1 --mol rl-mol-1 --json", Stdout: `{"molecule_id":"rl-mol-1","steps":[
		{"issue":{"id":"rl-mol-1","issue_type":"molecule"},"parallel_info":{"is_ready":true}},
		{"issue":{"id":"rl-mol-2","issue_type":"task"},"parallel_info":{"is_ready":true}}]}`})
	src := OpenBeads(root, "rl-mol-1", &beads.Client{Dir: root, Runner: r})
	got, err := src.Pick(context.Background())
	if err != nil || got != "rl-mol-2" {
		t.Fatalf("Pick = %q, %v; want the first ready step, not the root", got, err)
	}
}

// An issue only bd ready names (a wisp: bd list leaves ephemeral issues
// out) stays on the board once ralph claims it, in progress.
func TestBeadsClaimKeepsAWispOnTheBoard(t *testing.T) {
	src, _ := beadsFixture(t,
		beadstest.Call{Args: "version --json", Stdout: `{"version":"1.0.5","schema_version":1}`},
		beadstest.Call{Args: "list --limit 0 --all --json", Stdout: `[{"id":"rl-a","title":"A","issue_type":"task","status":"closed"}]`},
		beadstest.Call{Args: "ready --limit 0 --include-ephemeral --json", Stdout: `[{"id":"rl-wisp-1","title":"W","issue_type":"task","status":"open","ephemeral":true}]`},
		beadstest.Call{Args: "update rl-wisp-1 --claim --json", Stdout: `[{"id":"rl-wisp-1","status":"in_progress"}]`},
	)
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	if id, err := src.Pick(context.Background()); err != nil || id != "rl-wisp-1" {
		t.Fatalf("Pick = %q, %v; want the wisp, from the board read", id, err)
	}
	if err := src.Claim(context.Background(), "rl-wisp-1"); err != nil {
		t.Fatal(err)
	}
	b, err := src.Load() // no bd process: the claim is laid over what was read
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range b.Stories {
		got = append(got, s.ID+"="+string(s.Status))
	}
	if want := "rl-wisp-1=in_progress rl-a=complete"; strings.Join(got, " ") != want && strings.Join(got, " ") != "rl-a=complete rl-wisp-1=in_progress" {
		t.Fatalf("board %v; want %s", got, want)
	}
}

// An iteration's bd ready decides whether the list read after the last
// agent still stands (issue 26 item 17: six bd processes an iteration):
// when it agrees, bd list is not asked again; when another ralph or a
// person claimed, closed or created an issue since, it is.
func TestBeadsKeptListStandsOnlyWhenReadyAgrees(t *testing.T) {
	const list = `[
		{"id":"rl-a","title":"A","issue_type":"task","status":"closed"},
		{"id":"rl-b","title":"B","issue_type":"task","status":"open","dependencies":[{"issue_id":"rl-b","depends_on_id":"rl-c","type":"blocks"}]},
		{"id":"rl-c","title":"C","issue_type":"task","status":"open"},
		{"id":"rl-d","title":"D","issue_type":"task","status":"open"}]`
	first := []beadstest.Call{
		{Args: "prime", Stdout: "context"},
		{Args: "version --json", Stdout: `{"version":"1.0.5","schema_version":1}`},
		{Args: "list --limit 0 --all --json", Stdout: list},
		{Args: "ready --limit 0 --include-ephemeral --json", Stdout: `[{"id":"rl-c","title":"C","status":"open"},{"id":"rl-d","title":"D","status":"open"}]`},
		// After the agent: the list again (did it change a status?).
		{Args: "list --limit 0 --all --json", Stdout: list},
		{Args: "prime", Stdout: "context"},
	}
	statuses := func(b *Board) string {
		var out []string
		for _, s := range b.Stories {
			out = append(out, s.ID+"="+string(s.Status))
		}
		return strings.Join(out, " ")
	}
	iterate := func(src *BeadsSource) *Board {
		t.Helper()
		if _, err := src.Prime(context.Background()); err != nil {
			t.Fatal(err)
		}
		mustLoad(t, src)
		src.Forget()
		mustLoad(t, src)
		if _, err := src.Prime(context.Background()); err != nil {
			t.Fatal(err)
		}
		return mustLoad(t, src)
	}

	t.Run("agrees", func(t *testing.T) {
		src, _ := beadsFixture(t, append(first,
			// The next iteration: bd ready only, with C's title edited.
			beadstest.Call{Args: "ready --limit 0 --include-ephemeral --json", Stdout: `[{"id":"rl-c","title":"C, reworded","status":"open"},{"id":"rl-d","title":"D","status":"open"}]`},
		)...)
		b := iterate(src)
		if got, want := statuses(b), "rl-c=not_started rl-d=not_started rl-a=complete rl-b=not_started"; got != want {
			t.Fatalf("board %s, want %s", got, want)
		}
		if c, _ := b.Find("rl-c"); c.Title != "C, reworded" {
			t.Errorf("title %q: ready's newer text is not laid over the kept list", c.Title)
		}
	})
	for name, ready := range map[string]string{
		"claimed by another": `[{"id":"rl-c","title":"C","status":"open"}]`,
		"created by another": `[{"id":"rl-c","title":"C","status":"open"},{"id":"rl-d","title":"D","status":"open"},{"id":"rl-e","title":"E","status":"open"}]`,
		"reopened":           `[{"id":"rl-a","title":"A","status":"open"},{"id":"rl-c","title":"C","status":"open"},{"id":"rl-d","title":"D","status":"open"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			src, _ := beadsFixture(t, append(first,
				beadstest.Call{Args: "ready --limit 0 --include-ephemeral --json", Stdout: ready},
				beadstest.Call{Args: "list --limit 0 --all --json", Stdout: list},
			)...)
			// The runner fails the test unless the list was asked again.
			iterate(src)
		})
	}
}

// An issue another actor claimed is theirs: ralph resumes its own claims,
// never someone else's (it took another ralph's issue first before).
func TestBeadsIssueClaimedByAnotherIsNotSelected(t *testing.T) {
	src, _ := beadsFixture(t,
		beadstest.Call{Args: "version --json", Stdout: `{"version":"1.0.5","schema_version":1}`},
		beadstest.Call{Args: "list --limit 0 --all --json", Stdout: `[
			{"id":"rl-d","title":"D","issue_type":"task","status":"in_progress","assignee":"someone"},
			{"id":"rl-m","title":"M","issue_type":"task","status":"in_progress","assignee":"ralph"},
			{"id":"rl-a","title":"A","issue_type":"task","status":"open"}]`},
		beadstest.Call{Args: "ready --limit 0 --include-ephemeral --json", Stdout: `[{"id":"rl-a","title":"A","status":"open"}]`},
	)
	src.client.Actor = "ralph"
	b := mustLoad(t, src)
	sel, _, ok, _ := b.Select()
	if !ok || sel.Story.ID != "rl-m" {
		t.Fatalf("selected %q (%v), want ralph's own claim rl-m", sel.Story.ID, ok)
	}
	b.Stories = slices.DeleteFunc(b.Stories, func(s Story) bool { return s.ID == "rl-m" })
	if sel, _, _, _ := b.Select(); sel.Story.ID != "rl-a" {
		t.Fatalf("selected %q, want rl-a: rl-d is someone else's", sel.Story.ID)
	}
	b.Stories = slices.DeleteFunc(b.Stories, func(s Story) bool { return s.ID == "rl-a" })
	if _, _, ok, why := b.Select(); ok || !strings.Contains(why, "in progress by someone else") {
		t.Fatalf("ok=%v why=%q", ok, why)
	}
}
