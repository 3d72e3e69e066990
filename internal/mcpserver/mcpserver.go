// Package mcpserver serves a workspace's status and control commands as
// MCP tools (`ralph mcp`), so that an agent or an IDE can watch a run and
// steer it: read the status, the board and the journal; give a hint,
// pause, resume, stop, skip, block, unblock, answer a question.
//
// The tools work on a live.Source, the same view `ralph watch` and `ralph
// serve` have, and every control tool goes through the Source's one
// steerer, which journals the command with "by": "mcp".
//
// Thread checkpoints (finalize, approve, request-changes, commit,
// abandon) are not served: they are taken only from a person's action,
// and the caller of an MCP tool is usually an agent.
package mcpserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

// Name is the server's name in the MCP handshake.
const Name = "ralph"

// The journal tail's default and largest number of events.
const (
	DefaultTail = 20
	MaxTail     = 500
)

// Options configure a server.
type Options struct {
	// Version is ralph's version, told to clients in the handshake.
	Version string
	// Log receives a line for each control command and for the SDK's
	// own trouble; nil discards them. It must not be stdout, which
	// carries the protocol.
	Log *slog.Logger
	// MaxFrame bounds one message on stdio, in bytes; 0 is
	// DefaultMaxFrame.
	MaxFrame int
}

// Instructions is what a client is told about the server as a whole.
const Instructions = `ralph runs an AI coding agent in a loop over a PRD until every story is done and verified. These tools watch and steer the ralph workspace this server was started in.

Read: ralph_status (the whole status document), ralph_board (the stories and where each is), ralph_journal_tail (the last events of the journal).
Steer: ralph_hint (a hint for the next iteration's prompt), ralph_pause / ralph_resume / ralph_stop (the run that is going), ralph_skip / ralph_block / ralph_unblock (a task), ralph_answer (a session's open question).
A command for a run that is going is taken by that run at its next step boundary; every command is journaled with "by": "mcp".
Thread checkpoints (finalize, approve, request-changes, commit, abandon) are not available here: they are taken only from a person's action, in ralph thread, ralph watch or ralph serve.`

// New returns a server with ralph's tools on src.
func New(src live.Source, opts Options) *mcp.Server {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "ralph", Version: version}, &mcp.ServerOptions{
		Instructions: Instructions,
		// The SDK logs each session's start and end at info: only its
		// trouble is worth a line.
		Logger: slog.New(minLevel{log.Handler(), slog.LevelWarn}),
		// Tools only: no logging capability, since ralph's logs go to
		// stderr, not to the client.
		Capabilities: &mcp.ServerCapabilities{},
	})
	t := &tools{src: src, log: log}
	t.add(s)
	return s
}

// minLevel drops records below its level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

type tools struct {
	src live.Source
	log *slog.Logger
}

// NoInput is the input of a tool that takes none.
type NoInput struct{}

// Board is ralph_board's output.
type Board struct {
	Workspace   string         `json:"workspace"`
	Stories     []status.Story `json:"stories"`
	Total       int            `json:"total"`
	Done        int            `json:"done"`
	CurrentTask string         `json:"current_task,omitempty"`
}

// TailInput is ralph_journal_tail's input.
type TailInput struct {
	N     int      `json:"n,omitempty" jsonschema:"how many events, the last ones: 1 to 500 (default 20)"`
	Kinds []string `json:"kinds,omitempty" jsonschema:"only events of these kinds, for example [\"transition\",\"commit\",\"control\"]; all kinds when empty"`
}

// Tail is ralph_journal_tail's output.
type Tail struct {
	// LastSeq is the journal's last seq: events after it are new.
	LastSeq int64          `json:"last_seq"`
	Events  []report.Event `json:"events"`
}

// HintInput is ralph_hint's input.
type HintInput struct {
	Text string `json:"text" jsonschema:"the hint, as one would tell the agent: it goes into the next iteration's prompt, once"`
}

// TaskInput is the input of ralph_skip, ralph_block and ralph_unblock.
type TaskInput struct {
	Task   string `json:"task" jsonschema:"the task's id, for example US-002 (ralph_board lists them)"`
	Reason string `json:"reason,omitempty" jsonschema:"why, for the journal (and, for a block, shown by ralph status)"`
}

// AnswerInput is ralph_answer's input.
type AnswerInput struct {
	Question string `json:"question" jsonschema:"the open question's id (ralph_status lists them under waiting)"`
	Text     string `json:"text" jsonschema:"the answer"`
	Session  string `json:"session,omitempty" jsonschema:"the question's session; the active session when empty"`
}

func ptr[T any](v T) *T { return &v }

func (t *tools) add(s *mcp.Server) {
	read := func(title string) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	}
	steer := func(title string, destructive, idempotent bool) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: ptr(destructive), IdempotentHint: idempotent, OpenWorldHint: ptr(false)}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_status", Annotations: read("Status"), OutputSchema: outputSchema[status.Report](),
		Description: "The status of this ralph workspace: whether a run is going, its state, iteration and elapsed time, the board of stories, a pause in force, what waits for a person (open questions, blocked tasks), metrics, cooldowns. The same document as `ralph status --json`, as structured output, with a summary as text."},
		t.status)
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_board", Annotations: read("Board"), OutputSchema: outputSchema[Board](),
		Description: "The stories of the task file, each with its state: verified (accepted on evidence ralph produced; the evidence is listed), done_agent_word (accepted on the agent's word: its checks pass, nothing proves it), landed (on the target branch), done (accepted before ralph recorded how), claimed (an agent works on it), verifying (its agent claims it done, ralph is checking), todo, blocked (with the reason), needs_review or merge_queue. A story is never done on the agent's claim alone."},
		t.board)
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_journal_tail", Annotations: read("Journal tail"), OutputSchema: outputSchema[Tail](),
		Description: fmt.Sprintf("The last events of the workspace's journal (.ralph/events.jsonl), oldest first: n events (default %d, at most %d), optionally only some kinds (%s). Each event as its text line and as the structured envelope {v, seq, time, run, worker, machine, from, to, trigger, task, attempt, kind, data, text}.", DefaultTail, MaxTail, kindList())},
		t.tail)
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_hint", Annotations: steer("Hint", false, false),
		Description: "Queue a hint for the next iteration's prompt (as `ralph add-context` does): the next agent run reads it once. Works whether or not a run is going."},
		t.hint)
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_pause", Annotations: steer("Pause", false, true),
		Description: "Pause the run going in this workspace after its current step; ralph_resume goes on. An error when no run is going."},
		t.control(control.Pause))
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_resume", Annotations: steer("Resume", false, false),
		Description: "Resume a paused run. An error when nothing is paused."},
		t.control(control.Resume))
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_stop", Annotations: steer("Stop", true, true),
		Description: "Stop the run going in this workspace as Ctrl+C would: the iteration in progress is recorded as interrupted, and `ralph build` resumes it later. An error when no run is going."},
		t.control(control.Stop))
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_skip", Annotations: steer("Skip a task", false, false),
		Description: "Set a task aside in the build that is going: other tasks go first, and it is retried when nothing else is left. An error when no build is going (ralph_block keeps a task out of later builds)."},
		t.task(control.Skip))
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_block", Annotations: steer("Block a task", true, false),
		Description: "Block a task until it is unblocked: builds leave it. Taken by the build that is going at its next step, or applied now when none is."},
		t.task(control.Block))
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_unblock", Annotations: steer("Unblock a task", false, false),
		Description: "Clear a task's blocker so that builds take it again."},
		t.task(control.Unblock))
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_approve", Annotations: steer("Approve a reviewed test change", true, false),
		Description: "Accept the work of a task that waits for review (state needs_review: its story says its tests change, and the attempt changed them): ralph brings the work back from its attempt's ref, marks the task done and commits it, naming who approved. Read the test change first (the board's reason names the ref). Taken by the build that is going at its next step, or applied now when none is."},
		t.task(control.Approve))
	mcp.AddTool(s, &mcp.Tool{Name: "ralph_answer", Annotations: steer("Answer a question", false, false),
		Description: "Answer a session's open question (ralph_status lists them under waiting, kind question)."},
		t.answer)
}

func kindList() string {
	names := make([]string, len(report.Kinds))
	for i, k := range report.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (t *tools) status(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, status.Report, error) {
	rep, err := t.src.Status(ctx)
	if err != nil {
		return nil, status.Report{}, fmt.Errorf("reading the status of %s: %w", t.src.Name(), err)
	}
	return textResult(Summary(t.src.Name(), rep)), rep, nil
}

func (t *tools) board(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, Board, error) {
	rep, err := t.src.Status(ctx)
	if err != nil {
		return nil, Board{}, fmt.Errorf("reading the board of %s: %w", t.src.Name(), err)
	}
	b := Board{Workspace: t.src.Name(), Stories: rep.Board, Total: len(rep.Board), CurrentTask: rep.CurrentTask}
	if b.Stories == nil {
		b.Stories = []status.Story{}
	}
	for _, s := range rep.Board {
		if status.Accepted(s.State) {
			b.Done++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d of %d stories done\n", b.Done, b.Total)
	writeBoard(&sb, rep.Board)
	return textResult(sb.String()), b, nil
}

func (t *tools) tail(ctx context.Context, _ *mcp.CallToolRequest, in TailInput) (*mcp.CallToolResult, Tail, error) {
	n := in.N
	if n == 0 {
		n = DefaultTail
	}
	if n < 1 || n > MaxTail {
		return nil, Tail{}, fmt.Errorf("n is %d: ask for 1 to %d events (default %d)", in.N, MaxTail, DefaultTail)
	}
	for _, k := range in.Kinds {
		if !slices.Contains(report.Kinds, report.Kind(k)) {
			return nil, Tail{}, fmt.Errorf("unknown event kind %q: the kinds are %s", k, kindList())
		}
	}
	var keep func(report.Event) bool
	if len(in.Kinds) > 0 {
		keep = func(ev report.Event) bool { return slices.Contains(in.Kinds, string(ev.Kind)) }
	}
	evs, last, err := journalTail(ctx, t.src, n, keep)
	if err != nil {
		return nil, Tail{}, fmt.Errorf("reading the journal of %s: %w", t.src.Name(), err)
	}
	out := Tail{Events: []report.Event{}, LastSeq: last}
	out.Events = append(out.Events, evs...)
	var sb strings.Builder
	if len(evs) == 0 {
		sb.WriteString("no events")
		if len(in.Kinds) > 0 {
			fmt.Fprintf(&sb, " of kind %s", strings.Join(in.Kinds, ", "))
		}
		sb.WriteString(" in the journal\n")
	}
	for _, ev := range evs {
		sb.WriteString(Line(ev))
		sb.WriteByte('\n')
	}
	return textResult(sb.String()), out, nil
}

// quiet is how long a Source's replay of its journal may pause before
// the tail takes it as caught up, for a Source that is not a local
// workspace: Events replays, then follows, with no mark between.
var quiet = func() time.Duration { return 3*live.Poll + 200*time.Millisecond }

// journalTail returns the last n events of src's journal that keep takes
// (nil: all), and the seq of its last event. A local workspace's are
// read from the end of its file, so that a tail costs what it holds
// whatever the journal's size; another Source's journal is replayed until
// it goes quiet, keeping only the last n.
func journalTail(ctx context.Context, src live.Source, n int, keep func(report.Event) bool) ([]report.Event, int64, error) {
	if l, ok := src.(*live.Local); ok {
		return report.TailJournal(l.Journal, n, keep)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var evs []report.Event
	var last int64
	got := make(chan struct{}, 1)
	done := make(chan error, 1)
	// Events calls fn on its own goroutine; evs is read only after it
	// returns.
	go func() {
		done <- src.Events(ctx, 0, func(ev report.Event) error {
			select {
			case got <- struct{}{}:
			default:
			}
			last = ev.Seq
			if keep != nil && !keep(ev) {
				return nil
			}
			if len(evs) == n {
				evs = append(evs[:0], evs[1:]...)
			}
			evs = append(evs, ev)
			return nil
		})
	}()
	timer := time.NewTimer(quiet())
	defer timer.Stop()
	for {
		select {
		case err := <-done:
			return evs, last, err
		case <-got:
			timer.Reset(quiet())
		case <-timer.C:
			cancel()
			err := <-done
			return evs, last, err
		}
	}
}

// Line is an event as one line of text: its own text when it has one,
// else what the envelope says.
func Line(ev report.Event) string {
	if txt := strings.TrimRight(ev.Text, "\n"); strings.TrimSpace(txt) != "" {
		return fmt.Sprintf("#%d %s", ev.Seq, txt)
	}
	parts := []string{fmt.Sprintf("#%d", ev.Seq), string(ev.Kind)}
	if ev.From != "" || ev.To != "" {
		parts = append(parts, ev.From+" → "+ev.To)
	}
	if ev.Trigger != "" {
		parts = append(parts, "("+ev.Trigger+")")
	}
	if ev.Task != "" {
		parts = append(parts, ev.Task)
	}
	return strings.Join(parts, " ")
}

func (t *tools) hint(ctx context.Context, _ *mcp.CallToolRequest, in HintInput) (*mcp.CallToolResult, control.Result, error) {
	return t.steer(ctx, control.Hint, func(c *control.Command) { c.Text = in.Text })
}

func (t *tools) control(kind control.Kind) mcp.ToolHandlerFor[NoInput, control.Result] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, control.Result, error) {
		return t.steer(ctx, kind, nil)
	}
}

func (t *tools) task(kind control.Kind) mcp.ToolHandlerFor[TaskInput, control.Result] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in TaskInput) (*mcp.CallToolResult, control.Result, error) {
		return t.steer(ctx, kind, func(c *control.Command) { c.Task, c.Text = strings.TrimSpace(in.Task), in.Reason })
	}
}

func (t *tools) answer(ctx context.Context, _ *mcp.CallToolRequest, in AnswerInput) (*mcp.CallToolResult, control.Result, error) {
	return t.steer(ctx, control.Answer, func(c *control.Command) {
		c.Question, c.Text, c.Session = strings.TrimSpace(in.Question), in.Text, strings.TrimSpace(in.Session)
	})
}

// steer gives one command, by mcp. Any error, the caller's (an
// *control.InputError) or the workspace's, comes back as the tool's
// error result with its message: a client sees why and nothing crashes.
func (t *tools) steer(ctx context.Context, kind control.Kind, fill func(*control.Command)) (*mcp.CallToolResult, control.Result, error) {
	cmd := control.New(kind, control.ByMCP, time.Now())
	if fill != nil {
		fill(&cmd)
	}
	res, err := t.src.Steer(ctx, cmd)
	if err != nil {
		t.log.Info("control refused", "command", cmd.Describe(), "error", err)
		return nil, control.Result{}, err
	}
	t.log.Info("control", "command", cmd.Describe(), "status", res.Status)
	return textResult(res.Message), res, nil
}

// outputSchema is the schema of T as the SDK would infer it, except that
// a map may also be null: a nil map marshals as null, and the SDK checks
// every answer against its schema, so a status with no cooldowns yet
// would otherwise fail as a protocol error.
func outputSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("the output schema of %T: %v", *new(T), err)) // a programming error, found by any test
	}
	var walk func(*jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil {
			return
		}
		if s.Type == "object" && s.AdditionalProperties != nil {
			s.Type, s.Types = "", []string{"null", "object"}
		}
		for _, p := range s.Properties {
			walk(p)
		}
		for _, d := range s.Defs {
			walk(d)
		}
		walk(s.Items)
		walk(s.AdditionalProperties)
		for _, list := range [][]*jsonschema.Schema{s.PrefixItems, s.AnyOf, s.OneOf, s.AllOf} {
			for _, c := range list {
				walk(c)
			}
		}
	}
	walk(s)
	return s
}
