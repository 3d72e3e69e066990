package tui

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// fixedNow is the tests' clock: goldens show countdowns against it.
var fixedNow = time.Date(2026, 11, 24, 5, 0, 20, 0, time.UTC)

// fakeSource is a live.Source fed from a recorded journal and status
// document, that records the commands it is given.
type fakeSource struct {
	name   string
	rep    status.Report
	events []report.Event

	mu    sync.Mutex
	steer []control.Command
}

func loadSource(t *testing.T, journal, statusDoc string) *fakeSource {
	t.Helper()
	src := &fakeSource{name: "/home/me/repo"}
	b, err := os.ReadFile(filepath.Join("testdata", statusDoc))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &src.rep); err != nil {
		t.Fatalf("%s: %v", statusDoc, err)
	}
	f, err := os.Open(filepath.Join("testdata", journal))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if ev, ok := report.ParseLine(sc.Bytes()); ok {
			src.events = append(src.events, ev)
		}
	}
	if len(src.events) == 0 {
		t.Fatalf("%s holds no events", journal)
	}
	return src
}

func (f *fakeSource) Name() string { return f.name }
func (f *fakeSource) Status(ctx context.Context) (status.Report, error) {
	return f.rep, nil
}
func (f *fakeSource) Events(ctx context.Context, after int64, fn func(report.Event) error) error {
	for _, ev := range f.events {
		if ev.Seq > after {
			if err := fn(ev); err != nil {
				return err
			}
		}
	}
	<-ctx.Done()
	return nil
}
func (f *fakeSource) Steer(ctx context.Context, cmd control.Command) (control.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.steer = append(f.steer, cmd)
	if err := cmd.Validate(); err != nil {
		return control.Result{}, err
	}
	return control.Result{ID: cmd.ID, Status: control.Queued, Message: cmd.Describe() + " taken"}, nil
}

func (f *fakeSource) commands() []control.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]control.Command(nil), f.steer...)
}

// newModel is a plain model at w×h that has read src's status and
// journal, as the program would have by then.
func newModel(t *testing.T, src *fakeSource, w, h int) *Model {
	t.Helper()
	m := New(context.Background(), src, Options{Now: func() time.Time { return fixedNow }, Location: time.UTC, Plain: true})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	rep, err := src.Status(context.Background())
	m.Update(statusMsg{rep, err})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	src.Events(ctx, 0, func(ev report.Event) error {
		m.Update(eventMsg{ev})
		if n++; n == len(src.events) {
			cancel()
		}
		return nil
	})
	return m
}

func TestViewsMatchGoldenFiles(t *testing.T) {
	cases := []struct{ name, journal, status string }{
		{"serial-finished", "serial.jsonl", "serial-status.json"},
		{"serial-running-paused", "serial-running.jsonl", "serial-running-status.json"},
		{"parallel", "parallel.jsonl", "parallel-status.json"},
		{"question", "question.jsonl", "question-status.json"},
		{"thread-pending-review", "thread.jsonl", "thread-status.json"},
	}
	for _, c := range cases {
		for _, size := range [][2]int{{80, 24}, {120, 40}} {
			t.Run(fmt.Sprintf("%s-%dx%d", c.name, size[0], size[1]), func(t *testing.T) {
				m := newModel(t, loadSource(t, c.journal, c.status), size[0], size[1])
				out := m.View().Content
				lines := strings.Split(out, "\n")
				if len(lines) != size[1] {
					t.Errorf("the view has %d lines; the terminal has %d", len(lines), size[1])
				}
				if strings.Contains(out, "\x1b[") {
					t.Errorf("a plain (NO_COLOR) view holds terminal escapes:\n%q", out)
				}
				golden.RequireEqual(t, []byte(out))
			})
		}
	}
}

// press feeds keys to m as a person types them and runs the commands
// they return, as the program would, feeding their messages back.
func press(t *testing.T, m *Model, keys ...string) (quit bool) {
	t.Helper()
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "ctrl+c":
			msg = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
		default:
			r := []rune(k)
			msg = tea.KeyPressMsg{Code: r[0], Text: k}
		}
		_, cmd := m.Update(msg)
		if run(m, cmd) {
			quit = true
		}
	}
	return quit
}

// run runs cmd and what its messages lead to, except the status tick;
// it reports whether the program would quit.
func run(m *Model, cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	switch msg := cmd().(type) {
	case tea.QuitMsg:
		return true
	case tea.BatchMsg:
		for _, c := range msg {
			if run(m, c) {
				return true
			}
		}
	case steerMsg:
		m.Update(msg) // its status re-read is left out: the fake's never changes
	case nil:
	default:
		m.Update(msg)
	}
	return false
}

func TestPauseKeyPausesAndResumes(t *testing.T) {
	src := loadSource(t, "serial-running.jsonl", "serial-status.json")
	src.rep.Paused = nil
	m := newModel(t, src, 80, 24)
	press(t, m, "p")
	cmds := src.commands()
	if len(cmds) != 1 || cmds[0].Kind != control.Pause || cmds[0].By != control.ByWatch {
		t.Fatalf("p gave %+v; want one pause by watch", cmds)
	}
	if !strings.Contains(m.View().Content, "pause taken") {
		t.Errorf("the status line does not show the pause's result:\n%s", m.View().Content)
	}
	// With a pause in force, the same key resumes.
	src.rep.Paused = &cmds[0]
	m.Update(statusMsg{rep: src.rep})
	if !strings.Contains(m.View().Content, "p resume") || !strings.Contains(m.View().Content, "paused by watch") {
		t.Errorf("a paused run does not show the pause and the resume key:\n%s", m.View().Content)
	}
	press(t, m, "p")
	if cmds := src.commands(); len(cmds) != 2 || cmds[1].Kind != control.Resume {
		t.Fatalf("p on a paused run gave %+v; want a resume", cmds)
	}
}

func TestHintKeySendsTypedText(t *testing.T) {
	src := loadSource(t, "serial-running.jsonl", "serial-running-status.json")
	m := newModel(t, src, 80, 24)
	press(t, m, "h")
	// While typing, the command keys are text: p and q do nothing else.
	press(t, m, strings.Split("use the helper q p", "")...)
	if n := len(src.commands()); n != 0 {
		t.Fatalf("typing a hint gave %d commands before enter", n)
	}
	if !strings.Contains(m.View().Content, "hint for the next iteration> use the helper q p") {
		t.Errorf("the input line does not show the typed text:\n%s", m.View().Content)
	}
	press(t, m, "enter")
	cmds := src.commands()
	if len(cmds) != 1 || cmds[0].Kind != control.Hint || cmds[0].Text != "use the helper q p" || cmds[0].By != control.ByWatch {
		t.Fatalf("h + text + enter gave %+v; want one hint by watch with the text", cmds)
	}
	if !strings.Contains(m.View().Content, `✓ hint: hint "use the helper q p" taken`) {
		t.Errorf("the status line does not show the hint's result:\n%s", m.View().Content)
	}
}

func TestQuitTouchesNothing(t *testing.T) {
	for _, key := range []string{"q", "ctrl+c"} {
		src := loadSource(t, "serial-running.jsonl", "serial-running-status.json")
		m := newModel(t, src, 80, 24)
		if !press(t, m, key) {
			t.Errorf("%s does not quit the viewer", key)
		}
		if cmds := src.commands(); len(cmds) != 0 {
			t.Errorf("%s gave commands %+v; leaving the viewer must not touch the run", key, cmds)
		}
	}
}

func TestStopAsksFirst(t *testing.T) {
	src := loadSource(t, "serial-running.jsonl", "serial-running-status.json")
	m := newModel(t, src, 80, 24)
	press(t, m, "x")
	if !strings.Contains(m.View().Content, "Stop the run as Ctrl+C would?") {
		t.Fatalf("x does not ask before stopping:\n%s", m.View().Content)
	}
	press(t, m, "n")
	if cmds := src.commands(); len(cmds) != 0 {
		t.Fatalf("x then n gave %+v; want nothing", cmds)
	}
	press(t, m, "x", "y")
	if cmds := src.commands(); len(cmds) != 1 || cmds[0].Kind != control.Stop {
		t.Fatalf("x then y gave %+v; want one stop", cmds)
	}
}

func TestStoryKeysSteerTheSelectedStory(t *testing.T) {
	src := loadSource(t, "serial-running.jsonl", "serial-running-status.json")
	m := newModel(t, src, 80, 24)
	press(t, m, "down", "s")
	press(t, m, "down", "b")
	press(t, m, strings.Split("flaky", "")...)
	press(t, m, "enter", "u")
	got := src.commands()
	want := []string{"skip US-002", "block US-003 (flaky)", "unblock US-003"}
	if len(got) != len(want) {
		t.Fatalf("gave %+v; want %v", got, want)
	}
	for i, c := range got {
		if c.Describe() != want[i] {
			t.Errorf("command %d is %q; want %q", i, c.Describe(), want[i])
		}
	}
}

func TestAnswerKeyAnswersTheQuestion(t *testing.T) {
	src := loadSource(t, "question.jsonl", "question-status.json")
	m := newModel(t, src, 80, 24)
	press(t, m, "a")
	press(t, m, strings.Split("hello", "")...)
	press(t, m, "enter")
	cmds := src.commands()
	if len(cmds) != 1 || cmds[0].Kind != control.Answer || cmds[0].Question != "q-1" || cmds[0].Session != "261124-045729" || cmds[0].Text != "hello" {
		t.Fatalf("a + text + enter gave %+v; want the answer hello to q-1", cmds)
	}
}

func TestCheckpointKeyChoosesAStep(t *testing.T) {
	src := loadSource(t, "thread.jsonl", "thread-status.json")
	m := newModel(t, src, 120, 40)
	press(t, m, "c")
	if v := m.View().Content; !strings.Contains(v, "thread q1 checkpoint: [1 approve]  2 request-changes") {
		t.Fatalf("c does not offer the thread's checkpoints:\n%s", v)
	}
	if n := len(src.commands()); n != 0 {
		t.Fatalf("opening the chooser gave %d commands", n)
	}
	// request-changes asks what to fix.
	press(t, m, "2")
	press(t, m, strings.Split("say hello", "")...)
	press(t, m, "enter")
	// approve, by moving and enter.
	press(t, m, "c", "enter")
	cmds := src.commands()
	if len(cmds) != 2 || cmds[0].Step != "request-changes" || cmds[0].Text != "say hello" || cmds[0].Thread != "q1" ||
		cmds[1].Step != "approve" || cmds[1].Kind != control.Checkpoint {
		t.Fatalf("gave %+v; want request-changes with its text, then approve, for thread q1", cmds)
	}
}

func TestErrorsShowInTheStatusLine(t *testing.T) {
	src := loadSource(t, "serial.jsonl", "serial-status.json")
	m := newModel(t, src, 80, 24)
	press(t, m, "a")
	if !strings.Contains(m.View().Content, "✗ no question waits for an answer") {
		t.Errorf("a with no question does not say so:\n%s", m.View().Content)
	}
	press(t, m, "h", "enter") // an empty hint: the steerer refuses it
	if !strings.Contains(m.View().Content, "✗ hint: a hint needs its text") {
		t.Errorf("a refused command's error is not shown:\n%s", m.View().Content)
	}
}

func TestResizeRedraws(t *testing.T) {
	src := loadSource(t, "parallel.jsonl", "parallel-status.json")
	m := newModel(t, src, 120, 40)
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 15})
	lines := strings.Split(m.View().Content, "\n")
	if len(lines) != 15 {
		t.Fatalf("after a resize to 60x15 the view has %d lines", len(lines))
	}
	for i, l := range lines {
		if w := len([]rune(l)); w > 60 {
			t.Errorf("line %d is %d wide after a resize to 60: %q", i, w, l)
		}
	}
}

// TestRunQuitsOnQ runs the real program on a pipe: it draws the journal
// it follows, and q ends it without a command.
func TestRunQuitsOnQ(t *testing.T) {
	src := loadSource(t, "serial.jsonl", "serial-status.json")
	inR, inW := io.Pipe()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), src, inR, &out, Options{Plain: true, Now: func() time.Time { return fixedNow }, Width: 80, Height: 24})
	}()
	wait.Until(t, wait.Long, func() bool { return strings.Contains(out.String(), "Multiply two numbers") }, "the viewer to draw the board")
	inW.Write([]byte("q"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("q did not end the viewer within 10s")
	}
	if cmds := src.commands(); len(cmds) != 0 {
		t.Errorf("the viewer gave %+v on its own", cmds)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
