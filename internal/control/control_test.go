package control

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestValidateRefusesWhatNoRunCouldTake(t *testing.T) {
	ok := []Command{
		{Kind: Pause, By: ByCLI},
		{Kind: Hint, By: ByWeb, Text: "use the HTTP client"},
		{Kind: Block, By: ByWatch, Task: "US-002"},
		{Kind: Unblock, By: ByCLI, Task: "US-002/1"},
		{Kind: Answer, By: ByMCP, Question: "q1", Text: "yes"},
		{Kind: Checkpoint, By: ByWeb, Step: "approve"},
	}
	for _, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v; want valid", c, err)
		}
	}
	bad := map[string]Command{
		"unknown command":           {Kind: "explode", By: ByCLI},
		"needs who gives it":        {Kind: Pause},
		"a hint needs its text":     {Kind: Hint, By: ByCLI, Text: "  "},
		"skip needs the task":       {Kind: Skip, By: ByCLI},
		"an answer needs":           {Kind: Answer, By: ByCLI, Text: "yes"},
		"unknown thread checkpoint": {Kind: Checkpoint, By: ByCLI, Step: "merge"},
		"request-changes needs":     {Kind: Checkpoint, By: ByCLI, Step: "request-changes"},
		"holds characters":          {Kind: Answer, By: ByCLI, Question: "../q1", Text: "x"},
		"at most":                   {Kind: Hint, By: ByCLI, Text: strings.Repeat("x", maxText+1)},
	}
	for want, c := range bad {
		err := c.Validate()
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate = %v; want an InputError saying %q", c.Kind, err, want)
		}
	}
}

func TestNewIDsSortInTheOrderGiven(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := NewID(t0), NewID(t0.Add(time.Millisecond))
	if !(a < b) {
		t.Errorf("ids %s, %s: the later one sorts first", a, b)
	}
}

func fastPoll(t *testing.T) {
	old := pollEvery
	pollEvery = 10 * time.Millisecond
	t.Cleanup(func() { pollEvery = old })
}

func TestAttachListsTheRunUntilDetach(t *testing.T) {
	f := Folder{Dir: t.TempDir()}
	a, err := f.Attach(Run{Run: "build", Machine: "build", Takes: []Kind{Block}})
	if err != nil {
		t.Fatal(err)
	}
	if runs := f.Attached(); len(runs) != 1 || runs[0].Machine != "build" || runs[0].PID == 0 {
		t.Fatalf("Attached = %+v; want the build", runs)
	}
	if _, err := f.Attach(Run{Run: "build", Machine: "build"}); err == nil {
		t.Errorf("a second run attached under the same id")
	}
	if r, ok := f.Taker(Block); !ok || r.Run != "build" {
		t.Errorf("Taker(block) = %+v, %v; want the build", r, ok)
	}
	if _, ok := f.Taker(Skip); ok {
		t.Errorf("a run that does not take skip is its taker")
	}
	a.Detach()
	a.Detach() // twice is fine
	if runs := f.Attached(); len(runs) != 0 {
		t.Errorf("Attached after Detach = %+v; want none", runs)
	}
}

func TestTakeRemovesOnlyTheKindsAskedInOrder(t *testing.T) {
	f := Folder{Dir: t.TempDir()}
	a, _ := f.Attach(Run{Run: "r1", Machine: "build"})
	defer a.Detach()
	now := time.Now()
	var want []string
	for i, k := range []Kind{Block, Answer, Skip, Unblock} {
		c := New(k, ByCLI, now.Add(time.Duration(i)*time.Millisecond))
		c.Task = "US-1"
		if err := f.Enqueue(c); err != nil {
			t.Fatal(err)
		}
		if k != Answer {
			want = append(want, c.ID)
		}
	}
	got := a.Take(Skip, Block, Unblock)
	if len(got) != 3 || got[0].ID != want[0] || got[1].ID != want[1] || got[2].ID != want[2] {
		t.Fatalf("Take = %+v; want block, skip, unblock in the order given", got)
	}
	if q, _ := f.Queued(); len(q) != 1 || q[0].Kind != Answer {
		t.Errorf("queue after Take = %+v; want the answer left", q)
	}
	b, _ := f.Attach(Run{Run: "r2", Machine: "build"})
	defer b.Detach()
	if again := b.Take(Skip, Block, Unblock); len(again) != 0 {
		t.Errorf("a command was taken twice: %+v", again)
	}
	if (*Attachment)(nil).Take(Block) != nil {
		t.Errorf("a nil attachment took commands")
	}
}

func TestBoundaryWaitsWhilePausedAndHeedsOnlyNewPauses(t *testing.T) {
	fastPoll(t)
	f := Folder{Dir: t.TempDir()}
	// A pause that outlived its run does not hold the next one.
	if err := f.SetPause(New(Pause, ByCLI, time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	a, _ := f.Attach(Run{Run: "build", Machine: "build"})
	defer a.Detach()
	if err := a.Boundary(context.Background(), func(Command) { t.Error("held by an old pause") }, nil); err != nil {
		t.Fatal(err)
	}
	f.SetPause(New(Pause, ByWeb, time.Now()))
	var by string
	resumed := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Boundary(context.Background(), func(p Command) { by = p.By }, func() { close(resumed) })
	}()
	select {
	case <-done:
		t.Fatal("Boundary returned while paused")
	case <-time.After(100 * time.Millisecond):
	}
	f.ClearPause()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-resumed
	if by != ByWeb {
		t.Errorf("paused callback got by %q; want web", by)
	}
	// A context that ends while paused ends the wait with its error.
	f.SetPause(New(Pause, ByWeb, time.Now()))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Boundary(ctx, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Boundary = %v; want the context's error", err)
	}
}

func TestWatchStopEndsTheContextWithWhoStopped(t *testing.T) {
	fastPoll(t)
	f := Folder{Dir: t.TempDir()}
	f.RequestStop(New(Stop, ByCLI, time.Now().Add(-time.Hour))) // an old stop
	a, _ := f.Attach(Run{Run: "build", Machine: "build"})
	defer a.Detach()
	ctx, done := a.WatchStop(context.Background())
	defer done()
	select {
	case <-ctx.Done():
		t.Fatal("an old stop ended the new run")
	case <-time.After(60 * time.Millisecond):
	}
	f.RequestStop(New(Stop, ByMCP, time.Now()))
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the stop was not heeded")
	}
	var se *StopError
	if !errors.As(context.Cause(ctx), &se) || se.Cmd.By != ByMCP || !strings.Contains(se.Error(), "stopped by mcp") {
		t.Errorf("cause = %v; want a StopError by mcp", context.Cause(ctx))
	}
}

// A command arrives as JSON from a web page, an MCP client or a queue
// file anyone can write. Whatever it holds, validating it never panics,
// and one that validates names a known command, a task without control
// characters, and text within bounds, and survives a round trip to its
// queue file unchanged.
func FuzzCommandFromJSON(f *testing.F) {
	f.Add([]byte(`{"command":"block","task":"US-002","text":"needs a key","by":"web"}`))
	f.Add([]byte(`{"command":"checkpoint","step":"request-changes","text":"","by":"web"}`))
	f.Add([]byte(`{"command":"answer","question":"q-1","text":"yes","by":"mcp","session":"../x"}`))
	f.Add([]byte(`{"id":"../../x","command":"block","task":"US-1","by":"web"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if json.Unmarshal(b, &c) != nil {
			return
		}
		if c.Validate() != nil {
			return
		}
		if !slices.Contains(Kinds, c.Kind) || len(c.Text) > maxText || strings.ContainsFunc(c.Task, func(r rune) bool { return r < 0x20 }) {
			t.Fatalf("validated a command it should refuse: %+v", c)
		}
		if strings.ContainsAny(c.ID, "/\\") {
			t.Fatalf("validated the id %q, which leaves the queue folder", c.ID)
		}
		c.ID, c.V = "x", SchemaVersion
		dir := Folder{Dir: t.TempDir()}
		if err := dir.Enqueue(c); err != nil {
			t.Fatal(err)
		}
		q, err := dir.Queued()
		if err != nil || len(q) != 1 || q[0].Kind != c.Kind || q[0].Task != c.Task || q[0].Text != c.Text {
			t.Fatalf("queued %+v, read back %+v (%v)", c, q, err)
		}
	})
}

func TestAPersonsBlockIsHeldUntilReleased(t *testing.T) {
	f := Folder{Dir: t.TempDir()}
	b := New(Block, ByCLI, time.Now())
	b.Task, b.Text = "US-002/1", "needs a key"
	if err := f.Hold(b); err != nil {
		t.Fatal(err)
	}
	c := New(Block, ByWeb, time.Now())
	c.Task = "US-001"
	if err := f.Hold(c); err != nil {
		t.Fatal(err)
	}
	// Another process, later: the blocks are still there.
	g := Folder{Dir: f.Dir}
	holds := g.Holds()
	if len(holds) != 2 || holds[0].Task != "US-001" || holds[1].Task != "US-002/1" || holds[1].Text != "needs a key" {
		t.Fatalf("holds = %+v", holds)
	}
	if h := g.Held("US-002/1"); h == nil || HeldReason(*h) != "blocked by cli: needs a key" {
		t.Fatalf("held = %+v", h)
	}
	if ok, err := g.Release("US-002/1"); !ok || err != nil {
		t.Fatalf("release = %v, %v", ok, err)
	}
	if ok, err := g.Release("US-002/1"); ok || err != nil {
		t.Fatalf("second release = %v, %v", ok, err)
	}
	if g.Held("US-002/1") != nil || len(g.Holds()) != 1 {
		t.Fatalf("after release: %+v", g.Holds())
	}
	if err := g.Hold(New(Skip, ByCLI, time.Now())); err == nil {
		t.Fatal("a skip was held")
	}
}
