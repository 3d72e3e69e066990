package live_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/serve"
	"github.com/ralphloop/ralph/internal/status"
)

type recordingSteerer struct {
	mu   sync.Mutex
	cmds []control.Command
}

func (s *recordingSteerer) Do(_ context.Context, c control.Command) (control.Result, error) {
	if err := c.Validate(); err != nil {
		return control.Result{}, err
	}
	s.mu.Lock()
	s.cmds = append(s.cmds, c)
	s.mu.Unlock()
	return control.Result{ID: c.ID, Status: control.Applied, Message: "ok"}, nil
}

// A workspace served by `ralph serve` works as a Source on another
// machine: the same status document, the journal replayed from a seq and
// followed, and commands that need the server's token.
func TestRemoteSeesWhatTheServerServes(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "events.jsonl")
	em := report.NewEmitter("loop", "r1", 0, nil, &report.Journal{Path: journal})
	for i := 0; i < 3; i++ {
		em.Emit(report.Event{Kind: report.KindNote, Text: "line\n"})
	}
	steer := &recordingSteerer{}
	local := &live.Local{Dir: "/ws/app", Journal: journal, Steerer: steer,
		StatusOf: func(context.Context) (status.Report, error) {
			return status.Report{RunID: "r1", State: "IMPLEMENT", Board: []status.Story{{ID: "US-001", Title: "One", State: status.StoryInFlight}}}, nil
		}}
	srv, err := serve.New(serve.Options{Workspaces: []live.Source{local}, Token: "secret-token-of-the-test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	remote, err := live.ParseRemote(hs.URL + "/#token=secret-token-of-the-test")
	if err != nil || remote.Token != "secret-token-of-the-test" || remote.Base != hs.URL {
		t.Fatalf("ParseRemote = %+v, %v", remote, err)
	}
	remote.Retry = 50 * time.Millisecond
	rep, err := remote.Status(ctx)
	if err != nil || rep.RunID != "r1" || len(rep.Board) != 1 || rep.Board[0].State != status.StoryInFlight {
		t.Fatalf("Status = %+v, %v", rep, err)
	}

	got := make(chan int64, 10)
	go remote.Events(ctx, 1, func(ev report.Event) error { got <- ev.Seq; return nil })
	for _, want := range []int64{2, 3} {
		if s := <-got; s != want {
			t.Fatalf("replayed seq %d, want %d", s, want)
		}
	}
	em.Emit(report.Event{Kind: report.KindCommit})
	select {
	case s := <-got:
		if s != 4 {
			t.Fatalf("followed seq %d, want 4", s)
		}
	case <-ctx.Done():
		t.Fatal("an event appended to the journal never came over the stream")
	}

	// The connection drops (a proxy, a restart): the stream is asked
	// again after the last event it gave, which is not given twice.
	hs.CloseClientConnections()
	em.Emit(report.Event{Kind: report.KindNote})
	select {
	case s := <-got:
		if s != 5 {
			t.Fatalf("after a reconnect the stream gave seq %d, want 5", s)
		}
	case <-ctx.Done():
		t.Fatal("no event came after the connection dropped")
	}

	if res, err := remote.Steer(ctx, control.Command{Kind: control.Hint, By: control.ByWatch, Text: "use the helper"}); err != nil || res.Status != control.Applied {
		t.Fatalf("Steer with the token = %+v, %v", res, err)
	}
	if len(steer.cmds) != 1 || steer.cmds[0].By != control.ByWeb || steer.cmds[0].Text != "use the helper" {
		t.Errorf("the server's steerer got %+v; want the hint, given by web", steer.cmds)
	}
	var ie *control.InputError
	if _, err := remote.Steer(ctx, control.Command{Kind: control.Block, By: control.ByWatch}); !errors.As(err, &ie) {
		t.Errorf("a block without a task = %v; want the server's input error", err)
	}
	anon := &live.Remote{Base: hs.URL}
	if _, err := anon.Steer(ctx, control.Command{Kind: control.Pause, By: control.ByWatch}); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("a command without the token = %v; want a refusal that asks for the token", err)
	}
	if len(steer.cmds) != 1 {
		t.Errorf("refused commands reached the steerer: %+v", steer.cmds)
	}
}
