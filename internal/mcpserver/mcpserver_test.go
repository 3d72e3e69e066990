package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

// steerer records the commands it is given. Like cli's, it refuses a
// command that does not validate with its *control.InputError, and a
// pause with no run going with a plain error.
type steerer struct {
	mu   sync.Mutex
	cmds []control.Command
}

func (s *steerer) Do(ctx context.Context, cmd control.Command) (control.Result, error) {
	if err := cmd.Validate(); err != nil {
		return control.Result{}, err
	}
	if cmd.Kind == control.Pause {
		return control.Result{}, errors.New("no run in this workspace is going, so there is nothing to pause")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmds = append(s.cmds, cmd)
	return control.Result{ID: cmd.ID, Status: control.Applied, Message: "done: " + cmd.Describe()}, nil
}

func (s *steerer) given() []control.Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cmds)
}

var testReport = status.Report{
	RunID: "20260101-000000-abcdef", State: "IMPLEMENT", Running: true, Iteration: 2, MaxIterations: 5,
	TaskFile: ".agents/tasks/prd.md", TaskSource: "prd-md", Stories: 3, StoriesDone: 1, CurrentTask: "US-002",
	Board: []status.Story{
		{ID: "US-001", Title: "First", State: status.StoryDone},
		{ID: "US-002", Title: "Second", State: status.StoryInFlight, Attempts: 1},
		{ID: "US-003", Title: "Third", State: status.StoryBlocked, Reason: "needs a key"},
	},
	Waiting: []status.Waiting{{Kind: status.WaitQuestion, ID: "Q1", Text: "Which database?", Session: "s1", Hint: "ralph answer Q1 TEXT"}},
}

// newLocal is a workspace on disk as cli's openLive builds it, with a
// journal of n events (every fifth a control event) and the steerer st.
func newLocal(t *testing.T, n int, st control.Steerer) *live.Local {
	t.Helper()
	dir := t.TempDir()
	journal := filepath.Join(dir, "events.jsonl")
	var b strings.Builder
	for i := 1; i <= n; i++ {
		ev := report.Event{V: 1, Seq: int64(i), Time: time.Unix(int64(i), 0).UTC(), Machine: "loop", Kind: report.KindNote, Text: fmt.Sprintf("note %d\n", i)}
		if i%5 == 0 {
			ev.Kind, ev.Machine, ev.Text = report.KindControl, "control", fmt.Sprintf("control %d\n", i)
		}
		line, _ := json.Marshal(ev)
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(journal, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return &live.Local{Dir: dir, Journal: journal, Steerer: st,
		StatusOf: func(context.Context) (status.Report, error) { return testReport, nil }}
}

// connect serves src to a client over in-memory transports.
func connect(t *testing.T, src live.Source) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(src, Options{Version: "test"}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait(); cancel() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v (a tool's trouble must come back as a tool error)", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func TestListTools(t *testing.T) {
	cs := connect(t, newLocal(t, 0, &steerer{}))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"ralph_answer", "ralph_approve", "ralph_block", "ralph_board", "ralph_hint", "ralph_journal_tail", "ralph_pause",
		"ralph_resume", "ralph_skip", "ralph_status", "ralph_stop", "ralph_unblock"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v (no thread checkpoint: those stay a person's)", names, want)
	}
	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "Thread checkpoints") || !strings.Contains(ins, "not available here") {
		t.Errorf("the instructions do not say checkpoints are not served:\n%s", ins)
	}
}

func TestStatus(t *testing.T) {
	cs := connect(t, newLocal(t, 0, &steerer{}))
	res := call(t, cs, "ralph_status", nil)
	if res.IsError {
		t.Fatalf("status failed: %s", text(res))
	}
	var rep status.Report
	structured(t, res, &rep)
	if len(rep.Board) != 3 || rep.Board[2].State != status.StoryBlocked || rep.CurrentTask != "US-002" || len(rep.Waiting) != 1 {
		t.Errorf("structured status %+v, want the workspace's document", rep)
	}
	txt := text(res)
	for _, want := range []string{"run 20260101-000000-abcdef is going: state IMPLEMENT · iteration 2/5", "1 of 3 stories done",
		"claimed      US-002 Second · 1 failed attempt", "blocked      US-003 Third · needs a key", "question Q1: Which database? (session s1)"} {
		if !strings.Contains(txt, want) {
			t.Errorf("status text lacks %q:\n%s", want, txt)
		}
	}

	res = call(t, cs, "ralph_board", nil)
	var b Board
	structured(t, res, &b)
	if b.Total != 3 || b.Done != 1 || b.Stories[1].ID != "US-002" || !strings.HasPrefix(text(res), "1 of 3 stories done\n") {
		t.Errorf("board %+v, text %q", b, text(res))
	}
}

func TestStatusError(t *testing.T) {
	src := newLocal(t, 0, &steerer{})
	src.StatusOf = func(context.Context) (status.Report, error) {
		return status.Report{}, errors.New("state.json is from a newer ralph")
	}
	res := call(t, connect(t, src), "ralph_status", nil)
	if !res.IsError || !strings.Contains(text(res), "state.json is from a newer ralph") {
		t.Errorf("a status that cannot be read: IsError %v, %q", res.IsError, text(res))
	}
}

func TestControl(t *testing.T) {
	st := &steerer{}
	cs := connect(t, newLocal(t, 0, st))

	res := call(t, cs, "ralph_hint", map[string]any{"text": "use the helper in util.sh"})
	if res.IsError || text(res) != `done: hint "use the helper in util.sh"` {
		t.Fatalf("hint: IsError %v, %q", res.IsError, text(res))
	}
	var r control.Result
	structured(t, res, &r)
	if r.Status != control.Applied || r.ID == "" {
		t.Errorf("hint result %+v", r)
	}
	call(t, cs, "ralph_block", map[string]any{"task": "US-003", "reason": "needs a key"})
	call(t, cs, "ralph_answer", map[string]any{"question": "Q1", "text": "sqlite", "session": "s1"})
	call(t, cs, "ralph_stop", nil)
	got := st.given()
	if len(got) != 4 {
		t.Fatalf("the steerer got %d commands, want 4: %+v", len(got), got)
	}
	for _, c := range got {
		if c.By != control.ByMCP {
			t.Errorf("%s given by %q, want mcp", c.Kind, c.By)
		}
	}
	if c := got[0]; c.Kind != control.Hint || c.Text != "use the helper in util.sh" {
		t.Errorf("hint command %+v", c)
	}
	if c := got[1]; c.Kind != control.Block || c.Task != "US-003" || c.Text != "needs a key" {
		t.Errorf("block command %+v", c)
	}
	if c := got[2]; c.Kind != control.Answer || c.Question != "Q1" || c.Text != "sqlite" || c.Session != "s1" {
		t.Errorf("answer command %+v", c)
	}
	if got[3].Kind != control.Stop {
		t.Errorf("stop command %+v", got[3])
	}
}

func TestControlErrors(t *testing.T) {
	st := &steerer{}
	cs := connect(t, newLocal(t, 0, st))
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		// The steerer's *control.InputError.
		{"ralph_hint", map[string]any{"text": "   "}, "a hint needs its text"},
		{"ralph_skip", map[string]any{"task": " "}, "skip needs the task's id"},
		// Any other error the workspace gives.
		{"ralph_pause", nil, "nothing to pause"},
		// What the input schema refuses.
		{"ralph_hint", nil, "text"},
		{"ralph_answer", map[string]any{"question": "Q1"}, "text"},
		{"ralph_journal_tail", map[string]any{"n": 501}, "ask for 1 to 500 events"},
		{"ralph_journal_tail", map[string]any{"n": -1}, "ask for 1 to 500 events"},
		{"ralph_journal_tail", map[string]any{"kinds": []string{"nope"}}, `unknown event kind "nope": the kinds are transition,`},
	} {
		res := call(t, cs, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s %v: IsError %v, %q; want a tool error saying %q", tc.tool, tc.args, res.IsError, text(res), tc.want)
		}
	}
	if got := st.given(); len(got) != 0 {
		t.Errorf("refused commands reached the workspace: %+v", got)
	}
	// The server is still there after every refusal.
	if res := call(t, cs, "ralph_status", nil); res.IsError {
		t.Errorf("status after the errors: %s", text(res))
	}
}

func TestJournalTail(t *testing.T) {
	cs := connect(t, newLocal(t, 30, &steerer{}))
	check := func(args map[string]any, seqs []int64) {
		t.Helper()
		res := call(t, cs, "ralph_journal_tail", args)
		if res.IsError {
			t.Fatalf("tail %v: %s", args, text(res))
		}
		var tail Tail
		structured(t, res, &tail)
		var got []int64
		for _, ev := range tail.Events {
			got = append(got, ev.Seq)
		}
		if !slices.Equal(got, seqs) || tail.LastSeq != 30 {
			t.Errorf("tail %v: seqs %v (last %d), want %v (last 30)", args, got, tail.LastSeq, seqs)
		}
		lines := strings.Split(strings.TrimSuffix(text(res), "\n"), "\n")
		if len(lines) != len(seqs) || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("#%d ", seqs[len(seqs)-1])) {
			t.Errorf("tail %v: text lines %q", args, lines)
		}
	}
	var last20 []int64
	for i := int64(11); i <= 30; i++ {
		last20 = append(last20, i)
	}
	check(nil, last20)
	check(map[string]any{"n": 3}, []int64{28, 29, 30})
	check(map[string]any{"n": 4, "kinds": []string{"control"}}, []int64{15, 20, 25, 30})
	res := call(t, cs, "ralph_journal_tail", map[string]any{"kinds": []string{"commit"}})
	if res.IsError || text(res) != "no events of kind commit in the journal\n" {
		t.Errorf("an empty tail: %q", text(res))
	}
}

// remote is a Source that is not a workspace on this machine: its
// journal is only a stream, replayed then followed.
type remote struct {
	*live.Local
}

func (r remote) Events(ctx context.Context, after int64, fn func(report.Event) error) error {
	return r.Local.Events(ctx, after, fn)
}

func TestJournalTailOfAStream(t *testing.T) {
	src := remote{newLocal(t, 12, &steerer{})}
	res := call(t, connect(t, src), "ralph_journal_tail", map[string]any{"n": 2})
	var tail Tail
	structured(t, res, &tail)
	if len(tail.Events) != 2 || tail.Events[0].Seq != 11 || tail.Events[1].Seq != 12 {
		t.Errorf("tail of a streamed journal: %+v", tail.Events)
	}
}

// TestServeAnswersBeforeItEnds: a client that writes its calls and closes
// its end at once, as `printf ... | ralph mcp` does, gets every answer,
// and the server ends when its input does.
func TestServeAnswersBeforeItEnds(t *testing.T) {
	st := &steerer{}
	src := newLocal(t, 3, st)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ralph_status","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ralph_hint","arguments":{"text":"from a pipe"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ralph_journal_tail","arguments":{"n":1}}}`,
	}, "\n") + "\n"
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), src, strings.NewReader(in), pw, Options{}); pw.Close() }()
	ids := map[int]bool{}
	sc := bufio.NewScanner(pr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg.Result == nil {
			t.Errorf("not an answer on the protocol's stream: %s", sc.Text())
		}
		ids[msg.ID] = true
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve at the end of its input: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not end when its input did")
	}
	for id := 1; id <= 4; id++ {
		if !ids[id] {
			t.Errorf("call %d got no answer before the server ended (answers: %v)", id, ids)
		}
	}
	if got := st.given(); len(got) != 1 || got[0].Text != "from a pipe" {
		t.Errorf("the hint did not land: %+v", got)
	}
}

// TestServeAnswersBadLinesAndGoesOn: a line that is not JSON, a message
// whose id is an object, a line over the frame limit and a batch each
// get a JSON-RPC error, and the calls after them are still answered.
func TestServeAnswersBadLinesAndGoesOn(t *testing.T) {
	st := &steerer{}
	src := newLocal(t, 3, st)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`this is not json`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"ralph_hint","arguments":{"text":"` + strings.Repeat("x", 3000) + `"}}}`,
		`[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`,
		`{"jsonrpc":"1.0","id":6,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ralph_hint","arguments":{"text":"still here"}}}`,
	}, "\n") + "\n"
	var out strings.Builder
	if err := Serve(context.Background(), src, strings.NewReader(in), &out, Options{MaxFrame: 2048}); err != nil {
		t.Fatalf("Serve ended with %v: a bad line must not end the server", err)
	}
	type answer struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var codes []int
	var msgs []string
	results := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var a answer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("not JSON on the protocol's stream: %s", line)
		}
		if a.Error != nil {
			codes = append(codes, a.Error.Code)
			msgs = append(msgs, string(a.ID)+" "+a.Error.Message)
		} else {
			results[string(a.ID)] = true
		}
	}
	if want := []int{-32700, -32600, -32600, -32600, -32600}; !slices.Equal(codes, want) {
		t.Errorf("error codes %v, want %v; messages:\n%s", codes, want, strings.Join(msgs, "\n"))
	}
	if len(msgs) == 5 {
		if !strings.Contains(msgs[2], "too large") || !strings.Contains(msgs[2], "2048") {
			t.Errorf("the oversize line's error does not say too large and the limit: %s", msgs[2])
		}
		if !strings.HasPrefix(msgs[1], "null ") || !strings.Contains(msgs[1], "id must be") {
			t.Errorf("an object id's error: %s", msgs[1])
		}
		if !strings.HasPrefix(msgs[4], "6 ") {
			t.Errorf("a bad version's error must carry the request's id 6: %s", msgs[4])
		}
	}
	if !results["1"] || !results["2"] {
		t.Errorf("calls before and after the bad lines were not both answered: %v\n%s", results, out.String())
	}
	if got := st.given(); len(got) != 1 || got[0].Text != "still here" {
		t.Errorf("only the hint after the bad lines should land: %+v", got)
	}
}
