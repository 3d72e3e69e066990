package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

const testToken = "0123456789abcdef0123456789abcdef"

// recordingSteerer keeps every command it is given and answers with err
// when set.
type recordingSteerer struct {
	mu   sync.Mutex
	cmds []control.Command
	err  error
}

func (s *recordingSteerer) Do(ctx context.Context, cmd control.Command) (control.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := cmd.Validate(); err != nil {
		return control.Result{}, err
	}
	if s.err != nil {
		return control.Result{}, s.err
	}
	s.cmds = append(s.cmds, cmd)
	return control.Result{ID: cmd.ID, Status: control.Applied, Message: "done: " + cmd.Describe()}, nil
}

func (s *recordingSteerer) given() []control.Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]control.Command(nil), s.cmds...)
}

// workspace is a live.Local over a journal in a temp folder.
type workspace struct {
	*live.Local
	steer *recordingSteerer
	em    *report.Emitter
	j     *report.Journal
}

func newWorkspace(t *testing.T, name string, rep status.Report) *workspace {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755); err != nil {
		t.Fatal(err)
	}
	st := &recordingSteerer{}
	j := &report.Journal{Path: filepath.Join(dir, ".ralph", "events.jsonl")}
	return &workspace{
		Local: &live.Local{Dir: dir, Journal: j.Path, Steerer: st,
			StatusOf: func(context.Context) (status.Report, error) { return rep, nil }},
		steer: st,
		j:     j,
		em:    report.NewEmitter("loop", "run-1", 0, nil, j),
	}
}

func (w *workspace) emit(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		w.em.Emit(report.Event{Kind: report.KindAgentOutput, Text: fmt.Sprintf("line %d\n", i)})
	}
	if err := w.j.Err(); err != nil {
		t.Fatal(err)
	}
}

// The journal is read often so that the tests wait little.
func init() { live.Poll = 20 * time.Millisecond }

func newServer(t *testing.T, srcs ...live.Source) *httptest.Server {
	t.Helper()
	s, err := New(Options{Workspaces: srcs, Token: testToken, Heartbeat: 50 * time.Millisecond, LoopbackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func get(t testing.TB, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if into != nil {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

func TestStatusIsTheStatusDocument(t *testing.T) {
	rep := status.Report{RunID: "run-1", State: "IMPLEMENT", Running: true, Iteration: 3, Stories: 2, StoriesDone: 1,
		Board:   []status.Story{{ID: "US-001", Title: "one", State: status.StoryDone}, {ID: "US-002", Title: "two", State: status.StoryInFlight}},
		Waiting: []status.Waiting{{Kind: status.WaitBlocked, ID: "US-003", Text: "needs a key", Hint: "ralph unblock US-003"}}}
	a := newWorkspace(t, "app", rep)
	b := newWorkspace(t, "lib", status.Report{RunID: "other"})
	ts := newServer(t, a.Local, b.Local)

	want, _ := json.Marshal(rep)
	for _, path := range []string{"/api/status", "/api/status?ws=app", "/w/app/api/status"} {
		var got json.RawMessage
		if code := get(t, ts.URL+path, &got); code != 200 {
			t.Fatalf("GET %s: %d", path, code)
		}
		var g, w any
		json.Unmarshal(got, &g)
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("GET %s is not the status document:\n got %s\nwant %s", path, got, want)
		}
	}
	var other status.Report
	get(t, ts.URL+"/w/lib/api/status", &other)
	if other.RunID != "other" {
		t.Errorf("/w/lib/api/status is %q's status, want lib's", other.RunID)
	}
	var eb ErrorBody
	if code := get(t, ts.URL+"/api/status?ws=nope", &eb); code != 404 || !strings.Contains(eb.Error, "app, lib") {
		t.Errorf("an unknown workspace: %d %q, want 404 naming the workspaces", code, eb.Error)
	}
	var list []WorkspaceInfo
	get(t, ts.URL+"/api/workspaces", &list)
	if len(list) != 2 || list[0].Name != "app" || !list[0].Default || list[1].Name != "lib" || list[1].API != "/w/lib/api" {
		t.Errorf("workspaces: %+v", list)
	}
}

func TestPageAndAssetsAreServed(t *testing.T) {
	ts := newServer(t, newWorkspace(t, "app", status.Report{}).Local)
	for path, want := range map[string]string{"/": "<title>ralph</title>", "/assets/app.js": "EventSource", "/assets/style.css": ".card"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, body without %q", path, resp.StatusCode, want)
		}
	}
}

// sseEvent is one event as a client parses the stream.
type sseEvent struct {
	id, kind string
	ev       report.Event
}

// stream reads events from an open stream onto a channel.
func stream(t *testing.T, ctx context.Context, url string, lastID string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	ch := make(chan sseEvent, 1000)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.id != "" {
					ch <- cur
				}
				cur = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				cur.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &cur.ev)
			case line == ": heartbeat":
				ch <- sseEvent{kind: "heartbeat-comment"}
			}
		}
	}()
	return ch, resp
}

func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatal("the stream ended")
			}
			if e.kind == "heartbeat-comment" {
				continue
			}
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5s")
		}
	}
}

func TestEventsReplayThenFollowAndResumeAfterLastEventID(t *testing.T) {
	w := newWorkspace(t, "app", status.Report{})
	w.emit(t, 5)
	ts := newServer(t, w.Local)

	ctx, cancel := context.WithCancel(context.Background())
	ch, _ := stream(t, ctx, ts.URL+"/api/events", "")
	var seen []int64
	for len(seen) < 5 {
		e := next(t, ch)
		if e.id != strconv.FormatInt(e.ev.Seq, 10) || e.kind != string(e.ev.Kind) || e.ev.Text == "" {
			t.Fatalf("event fields: id %q event %q data %+v", e.id, e.kind, e.ev)
		}
		seen = append(seen, e.ev.Seq)
	}
	// The run goes on while the client is connected: it gets new
	// events as they are written.
	w.emit(t, 2)
	seen = append(seen, next(t, ch).ev.Seq, next(t, ch).ev.Seq)
	// The connection drops; the run writes on meanwhile; the client
	// comes back with the last id it saw.
	cancel()
	w.emit(t, 3)
	last := seen[len(seen)-1]
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch2, _ := stream(t, ctx2, ts.URL+"/api/events", strconv.FormatInt(last, 10))
	// The three written while it was away come first; then the run
	// writes on, to the client known to be back.
	for len(seen) < 10 {
		seen = append(seen, next(t, ch2).ev.Seq)
	}
	w.emit(t, 2)
	for len(seen) < 12 {
		seen = append(seen, next(t, ch2).ev.Seq)
	}
	for i, s := range seen {
		if s != int64(i+1) {
			t.Fatalf("seqs seen across the reconnect: %v, want 1..12 each once", seen)
		}
	}
	// Nothing more comes: a duplicate would show here.
	select {
	case e := <-ch2:
		if e.kind != "heartbeat-comment" {
			t.Fatalf("an event after the last one written: %+v", e)
		}
	case <-time.After(200 * time.Millisecond):
	}

	// ?after= works the same for a client that cannot set the header.
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	ch3, _ := stream(t, ctx3, ts.URL+"/api/events?after=10", "")
	if e := next(t, ch3); e.ev.Seq != 11 {
		t.Errorf("?after=10 starts at seq %d, want 11", e.ev.Seq)
	}
}

func TestEventsHeartbeat(t *testing.T) {
	ts := newServer(t, newWorkspace(t, "app", status.Report{}).Local)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := stream(t, ctx, ts.URL+"/api/events", "")
	select {
	case e := <-ch:
		if e.kind != "heartbeat-comment" {
			t.Fatalf("got %+v, want a heartbeat comment on an idle stream", e)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no heartbeat on an idle stream")
	}
}

func TestEventsRefuseABadLastEventID(t *testing.T) {
	ts := newServer(t, newWorkspace(t, "app", status.Report{}).Local)
	var eb ErrorBody
	if code := get(t, ts.URL+"/api/events?after=x", &eb); code != 400 || !strings.Contains(eb.Error, "seq") {
		t.Errorf("?after=x: %d %q", code, eb.Error)
	}
}

func post(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestControlNeedsTheToken(t *testing.T) {
	w := newWorkspace(t, "app", status.Report{})
	ts := newServer(t, w.Local)
	hint := `{"command":"hint","text":"use the existing client"}`
	for _, tok := range []string{"", "wrong", testToken + "0", testToken[:len(testToken)-1]} {
		if code, out := post(t, ts.URL+"/api/control", tok, hint); code != 401 || !strings.Contains(fmt.Sprint(out["error"]), "Authorization: Bearer") {
			t.Errorf("token %q: %d %v, want 401 saying how to send the token", tok, code, out)
		}
	}
	if got := w.steer.given(); len(got) != 0 {
		t.Fatalf("commands without the token reached the steerer: %+v", got)
	}
	code, out := post(t, ts.URL+"/api/control", testToken, `{"command":"hint","text":"use the existing client","by":"mallory","id":"x"}`)
	if code != 200 || out["status"] != "applied" {
		t.Fatalf("with the token: %d %v", code, out)
	}
	got := w.steer.given()
	if len(got) != 1 || got[0].Kind != control.Hint || got[0].Text != "use the existing client" || got[0].By != control.ByWeb || got[0].ID == "x" || got[0].Time.IsZero() {
		t.Fatalf("the steerer got %+v, want one hint by web with the server's id and time", got)
	}
	if out["id"] != got[0].ID {
		t.Errorf("the result's id %v is not the command's %s", out["id"], got[0].ID)
	}
}

func TestControlErrors(t *testing.T) {
	w := newWorkspace(t, "app", status.Report{})
	ts := newServer(t, w.Local)
	for _, c := range []struct {
		body string
		err  error
		code int
		want string
	}{
		{`{"command":"hint"}`, nil, 400, "a hint needs its text"},
		{`{"command":"dance"}`, nil, 400, "unknown command"},
		{`not json`, nil, 400, "not a control command"},
		{`{"command":"hint","text":"x","color":"red"}`, nil, 400, "color"},
		{`{"command":"pause"}`, errors.New("no run in this workspace is going, so there is nothing to pause"), 409, "nothing to pause"},
		{`{"command":"pause"}`, &os.PathError{Op: "open", Path: "/x", Err: os.ErrPermission}, 500, "permission"},
		// A second command after the first is refused, not dropped, and
		// neither is taken.
		{`{"command":"hint","text":"one"}{"command":"stop"}`, nil, 400, "one command per request"},
		{`{"command":"hint","text":"one"} trailing`, nil, 400, "one command per request"},
		{`{"command":"hint","text":"` + strings.Repeat("x", 10<<20) + `"}`, nil, 413, "too large"},
	} {
		w.steer.err = c.err
		code, out := post(t, ts.URL+"/api/control", testToken, c.body)
		if code != c.code || !strings.Contains(fmt.Sprint(out["error"]), c.want) {
			t.Errorf("%.80s (steerer error %v): %d %v, want %d with %q", c.body, c.err, code, out, c.code, c.want)
		}
	}
	if got := w.steer.given(); len(got) != 0 {
		t.Errorf("refused bodies reached the steerer: %+v", got)
	}
}

func TestForeignHostIsRefused(t *testing.T) {
	ts := newServer(t, newWorkspace(t, "app", status.Report{RunID: "secret"}).Local)
	req, _ := http.NewRequest("GET", ts.URL+"/api/status", nil)
	req.Host = "attacker.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest || strings.Contains(string(b), "secret") {
		t.Errorf("a request for another host name: %d %s", resp.StatusCode, b)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:7777": true, "localhost:0": true, "[::1]:80": true, "0.0.0.0:7777": false, ":7777": false, "192.168.1.5:7777": false, "example.com:80": false} {
		got, err := IsLoopback(addr)
		if err != nil || got != want {
			t.Errorf("IsLoopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := IsLoopback("7777"); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Errorf("IsLoopback(7777): %v", err)
	}
}

// The page listens for each kind of event by name (EventSource delivers
// only the names it was given): a kind missing from its list, such as
// the sandbox's refused connections, would never reach the journal pane.
func TestPageListensForEveryKind(t *testing.T) {
	js, err := assets.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	_, list, _ := strings.Cut(string(js), "const KINDS = [")
	list, _, _ = strings.Cut(list, "];")
	for _, k := range report.Kinds {
		if !strings.Contains(list, `"`+string(k)+`"`) {
			t.Errorf("app.js KINDS lacks %q: the dashboard would not show those events", k)
		}
	}
}
