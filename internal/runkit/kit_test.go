package runkit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/store"
)

func TestBudgetNamesTheLimitReached(t *testing.T) {
	b := Budget{MaxTokens: 1000, MaxCost: 2, MaxWall: time.Hour}
	for _, c := range []struct {
		spent Spent
		want  string
	}{
		{Spent{Tokens: 999, CostUSD: 1.99, Wall: 59 * time.Minute}, ""},
		{Spent{Tokens: 1000}, "max_tokens (1000 of 1000 tokens used)"},
		{Spent{CostUSD: 2.5}, "max_cost_usd (estimated $2.50 of $2.00)"},
		{Spent{Wall: 61 * time.Minute}, "max_wall_time (1h1m0s of 1h0m0s)"},
	} {
		if got := b.Exceeded(c.spent); got != c.want {
			t.Errorf("Exceeded(%+v) = %q; want %q", c.spent, got, c.want)
		}
	}
	if got := (Budget{MaxCost: 0.001}).Exceeded(Spent{CostUSD: 0.0012}); got != "max_cost_usd (estimated $0.0012 of $0.0010)" {
		t.Errorf("a small cost budget reads %q", got)
	}
	if got := (Budget{}).Exceeded(Spent{Tokens: 1 << 40, CostUSD: 1e9, Wall: 1e6 * time.Hour}); got != "" {
		t.Errorf("a zero budget bounds nothing, got %q", got)
	}
}

func TestWaitShowsProgressAndStopsOnInterrupt(t *testing.T) {
	var shown []time.Duration
	start := time.Now()
	if err := Wait(context.Background(), start.Add(120*time.Millisecond), 50*time.Millisecond, func(left time.Duration) { shown = append(shown, left) }); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 120*time.Millisecond {
		t.Errorf("Wait returned after %s, before its time", time.Since(start))
	}
	if len(shown) < 2 || shown[0] <= shown[len(shown)-1] {
		t.Errorf("shown = %v; want a countdown of at least two lines", shown)
	}
	// Interrupted once the wait has begun (its first countdown line), not
	// at a guessed moment: the hour must end at once, well before the
	// wait's next look at the time.
	ctx, cancel := context.WithCancel(context.Background())
	start = time.Now()
	err := Wait(ctx, start.Add(time.Hour), 0, func(time.Duration) { cancel() })
	if !errors.Is(err, errs.ErrInterrupted) || time.Since(start) > 10*time.Second {
		t.Errorf("Wait on a cancelled context = %v after %s; want ErrInterrupted at once", err, time.Since(start))
	}
}

func TestCooldownsAreSharedAndNeverShortened(t *testing.T) {
	home := t.TempDir()
	now := time.Now()
	a, b := OpenCooldowns(home), OpenCooldowns(home) // two runs of one workspace
	if err := a.Set("claude", now.Add(time.Hour), "5-hour limit"); err != nil {
		t.Fatal(err)
	}
	if until, ok := b.Until("claude", now); !ok || !until.Equal(now.Add(time.Hour).UTC()) {
		t.Fatalf("the other run sees claude until %v (%v); want the hour a recorded", until, ok)
	}
	// A shorter reset reported later does not bring the agent back early.
	if err := b.Set("claude", now.Add(time.Minute), ""); err != nil {
		t.Fatal(err)
	}
	if until, _ := a.Until("claude", now); !until.Equal(now.Add(time.Hour).UTC()) {
		t.Errorf("claude rests until %v after a shorter Set; want the hour kept", until)
	}
	name, ok, _, err := a.Pick([]string{"claude", "codex"}, now)
	if err != nil || !ok || name != "codex" {
		t.Errorf("Pick = %q %v %v; want codex, the one not resting", name, ok, err)
	}
	if err := a.Set("codex", now.Add(2*time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	_, ok, free, _ := a.Pick([]string{"claude", "codex"}, now)
	if ok || !free.Equal(now.Add(time.Hour).UTC()) {
		t.Errorf("Pick with both resting: ok=%v free=%v; want false and the earliest reset", ok, free)
	}
	if _, ok, _, _ := a.Pick([]string{"claude"}, now.Add(2*time.Hour)); !ok {
		t.Error("an agent whose reset has passed is not picked")
	}
	if s := a.Summary(now); !strings.HasPrefix(s, "claude until ") || !strings.Contains(s, ", codex until ") {
		t.Errorf("Summary = %q", s)
	}
	if err := a.Merge(map[string]time.Time{"claude": now.Add(time.Second), "gemini": now.Add(3 * time.Hour), "old": now.Add(-time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	all, _ := b.All(now)
	if len(all) != 3 || !all["claude"].Until.Equal(now.Add(time.Hour).UTC()) || all["gemini"].Until.IsZero() {
		t.Errorf("after Merge: %v; want claude kept at an hour, gemini added, the past one left out", all)
	}
}

// Two workers recording limits at the same instant both keep theirs: the
// change is a locked read-modify-write, not last-writer-wins.
func TestCooldownsConcurrentSetsKeepEvery(t *testing.T) {
	home := t.TempDir()
	now := time.Now()
	var wg sync.WaitGroup
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := OpenCooldowns(home).Set(n, now.Add(time.Hour), ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	all, err := OpenCooldowns(home).All(now)
	if err != nil || len(all) != len(names) {
		t.Errorf("after %d concurrent Sets: %d rests (%v)", len(names), len(all), err)
	}
}

func TestCooldownsRefuseANewerFile(t *testing.T) {
	home := t.TempDir()
	c := OpenCooldowns(home)
	if err := os.WriteFile(c.Path(), []byte(`{"schema_version": 99, "agents": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var se *store.SchemaError
	if _, err := c.All(time.Now()); !errors.As(err, &se) {
		t.Errorf("All on a newer file = %v; want a SchemaError", err)
	}
	if err := c.Set("x", time.Now().Add(time.Hour), ""); !errors.As(err, &se) {
		t.Errorf("Set on a newer file = %v; want a SchemaError and the file left alone", err)
	}
	if b, _ := os.ReadFile(c.Path()); !strings.Contains(string(b), "99") {
		t.Errorf("the newer file was rewritten: %s", b)
	}
}

func newRepo(t *testing.T) *gitx.Repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the commit tests but is not in PATH: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "T"}, {"config", "user.email", "t@example.com"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	r, err := gitx.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The token is saved before the commit is made and only that token makes
// a commit ralph's: a commit with every other trailer copied is not.
func TestCommitSavesItsTokenFirstAndIsRecognisedByIt(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	if err := os.WriteFile(filepath.Join(r.Dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var saved string
	m := Message{Subject: "US-001: add a", Body: "Acceptance criteria:\n- [x] a", Trailers: []Trailer{{"Ralph-Task", "US-001"}, {"Ralph-Run", "r1"}}}
	hash, err := Commit(ctx, r, m, func(tok string) error {
		if head, _ := r.Head(ctx); head != "" {
			t.Errorf("the token was saved after a commit was made (HEAD %s)", head)
		}
		saved = tok
		return nil
	})
	if err != nil || saved == "" {
		t.Fatalf("Commit = %q, %v (token %q)", hash, err, saved)
	}
	_, msg, _ := r.LastCommit(ctx)
	want := "US-001: add a\n\nAcceptance criteria:\n- [x] a\n\nRalph-Task: US-001\nRalph-Run: r1\nRalph-Commit: " + saved
	if strings.TrimSpace(msg) != want {
		t.Errorf("message:\n%s\nwant:\n%s", msg, want)
	}
	if h, ok := Committed(ctx, r, saved); !ok || h != hash {
		t.Errorf("Committed(saved token) = %q %v; want %s", h, ok, hash)
	}
	// An agent's commit that copies the task trailers is not ralph's.
	if err := os.WriteFile(filepath.Join(r.Dir, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.AddAll(ctx)
	if _, err := r.Commit(ctx, "US-001: more\n\nRalph-Task: US-001\nRalph-Run: r1\nRalph-Commit: forged\n"); err != nil {
		t.Fatal(err)
	}
	if _, ok := Committed(ctx, r, saved); ok {
		t.Error("a later commit by someone else is taken for ralph's")
	}
	if _, ok := Committed(ctx, r, ""); ok {
		t.Error("an empty token recognises a commit")
	}
	// Nothing to commit says so; a token that could not be saved stops
	// the commit before it is made.
	if _, err := Commit(ctx, r, m, nil); !errors.Is(err, gitx.ErrNothingToCommit) {
		t.Errorf("Commit with nothing staged = %v; want ErrNothingToCommit", err)
	}
	os.WriteFile(filepath.Join(r.Dir, "c.txt"), []byte("c\n"), 0o644)
	head, _ := r.Head(ctx)
	if _, err := Commit(ctx, r, m, func(string) error { return errors.New("disk full") }); err == nil {
		t.Error("Commit went on although the token was not saved")
	}
	if now, _ := r.Head(ctx); now != head {
		t.Error("a commit was made without its token on record")
	}
}

// CommitSnapshot saves its token first too, and returns the tree after
// the commit: HEAD is the commit, what the commit left is still dirty.
func TestCommitSnapshotSavesItsTokenFirstAndReturnsTheTreeAfter(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	if err := os.WriteFile(filepath.Join(r.Dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var saved string
	snap, err := CommitSnapshot(ctx, r, Message{Subject: "US-001: add a"}, func(tok string) error {
		if head, _ := r.Head(ctx); head != "" {
			t.Errorf("the token was saved after a commit was made (HEAD %s)", head)
		}
		saved = tok
		return nil
	})
	if err != nil || saved == "" {
		t.Fatalf("CommitSnapshot = %+v, %v (token %q)", snap, err, saved)
	}
	if h, ok := Committed(ctx, r, saved); !ok || h != snap.Head {
		t.Errorf("Committed(saved token) = %q %v; the snapshot's HEAD is %s", h, ok, snap.Head)
	}
	if !snap.Clean() {
		t.Errorf("the tree after the commit is dirty: %v", snap.Dirty)
	}
	if _, err := CommitSnapshot(ctx, r, Message{Subject: "again"}, nil); !errors.Is(err, gitx.ErrNothingToCommit) {
		t.Errorf("CommitSnapshot with nothing staged = %v; want ErrNothingToCommit", err)
	}
}

func TestAgentFileRoundTripsAndReadsAnOlderRecord(t *testing.T) {
	f := AgentFile(filepath.Join(t.TempDir(), "agent.pgid"))
	if _, _, _, ok := f.Read(); ok {
		t.Error("a missing file reads as a recorded run")
	}
	if err := f.Save(4242, "tok"); err != nil {
		t.Fatal(err)
	}
	if pgid, tok, _, ok := f.Read(); !ok || pgid != 4242 || tok != "tok" {
		t.Errorf("Read = %d %q %v", pgid, tok, ok)
	}
	os.WriteFile(string(f), []byte("77\n"), 0o644) // an older ralph's: the group only
	if pgid, tok, start, ok := f.Read(); !ok || pgid != 77 || tok != "" || start != 0 {
		t.Errorf("older record: %d %q %d %v", pgid, tok, start, ok)
	}
	os.WriteFile(string(f), []byte("78 tok2\n"), 0o644) // group and token, no start
	if pgid, tok, start, ok := f.Read(); !ok || pgid != 78 || tok != "tok2" || start != 0 {
		t.Errorf("older record: %d %q %d %v", pgid, tok, start, ok)
	}
	f.Clear()
	if _, found := f.StopRecorded(); found {
		t.Error("a cleared record is found")
	}
}

// CommitSnapshot is Commit for a runner that reads the tree after its
// commit anyway: it returns that snapshot, whose Head is the new commit,
// one git process sooner than Commit and a Snapshot after it.
func CommitSnapshot(ctx context.Context, g SnapshotCommitGit, m Message, save func(token string) error) (gitx.Snapshot, error) {
	text, err := stage(ctx, g, m, save)
	if err != nil {
		return gitx.Snapshot{}, err
	}
	return g.CommitSnapshot(ctx, text)
}

// SnapshotCommitGit is a CommitGit that can read the work tree right after
// its commit (*gitx.Repo's CommitSnapshot).
type SnapshotCommitGit interface {
	CommitGit
	CommitSnapshot(ctx context.Context, message string) (gitx.Snapshot, error)
}
