// Package tui is `ralph watch`: a terminal UI over a live.Source. It
// shows the run, the board of stories, the workers, the live output of
// the selected agent, the journal and what waits for a person, and gives
// every control command from a key. It works on the Source alone, so the
// same viewer follows a run that is going or shows the last one, from
// any terminal.
//
// The package never prints: Run draws on the output it is given, and the
// model's View is what the tests compare with their golden files.
package tui

import (
	"context"
	"errors"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/status"
)

// Options tune a Model. The zero value is a live viewer in colour.
type Options struct {
	// Now is the clock of countdowns and commands; nil means time.Now.
	// Tests fix it so that golden files are stable.
	Now func() time.Time
	// Location is the zone journal times are shown in; nil means Local.
	Location *time.Location
	// Plain draws without colours or attributes (NO_COLOR): selection and
	// focus are shown by characters, never by colour alone.
	Plain bool
	// Poll is how often the status is read again; 0 means a second.
	Poll time.Duration
	// Width and Height, when set, are the screen's size for an output
	// that is not a terminal (tests); a terminal reports its own.
	Width, Height int
}

// Run shows src on out, reading keys from in, until the person quits
// (q or Ctrl+C) or ctx ends. It never touches the run by itself: only a
// person's key gives a command.
func Run(ctx context.Context, src live.Source, in io.Reader, out io.Writer, opts Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := New(ctx, src, opts)
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out)}
	if opts.Width > 0 && opts.Height > 0 {
		popts = append(popts, tea.WithWindowSize(opts.Width, opts.Height))
	}
	if opts.Plain {
		popts = append(popts, tea.WithColorProfile(colorprofile.Ascii))
	}
	p := tea.NewProgram(m, popts...)
	go func() {
		// The journal is replayed, then followed; each event reaches the
		// model as a message so that the model alone owns its state.
		err := src.Events(ctx, 0, func(ev report.Event) error {
			p.Send(eventMsg{ev})
			return ctx.Err()
		})
		if ctx.Err() == nil {
			p.Send(eventsEndedMsg{err})
		}
	}()
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // the caller ended the viewer: not a failure
	}
	return err
}

// The messages the model takes besides keys and sizes.
type (
	statusMsg struct {
		rep status.Report
		err error
	}
	eventMsg       struct{ ev report.Event }
	eventsEndedMsg struct{ err error }
	tickMsg        struct{}
	steerMsg       struct {
		cmd control.Command
		res control.Result
		err error
	}
)

// The panes, in the order tab visits them.
type pane int

const (
	paneBoard pane = iota
	paneWorkers
	paneWaiting
	paneOutput
	paneJournal
)

var paneNames = map[pane]string{paneBoard: "Board", paneWorkers: "Workers", paneWaiting: "Waiting for you",
	paneOutput: "Output", paneJournal: "Journal"}

// The modes of the key line: a question asked of the person.
type mode int

const (
	modeNormal mode = iota
	modeConfirmStop
	modeInput
	modeCheckpoint
	modeHelp
)

// outLine is one line of an agent's output, with who said it.
type outLine struct {
	worker string
	text   string
}

// The most lines kept of the output and of the journal: a long run's
// journal must not grow the viewer without end.
const (
	maxOutput  = 3000
	maxJournal = 2000
)

// Model is the viewer's state.
type Model struct {
	ctx   context.Context
	src   live.Source
	now   func() time.Time
	loc   *time.Location
	plain bool
	poll  time.Duration
	st    styles

	width, height int

	rep        status.Report
	haveStatus bool
	statusErr  error

	output  []outLine
	journal []string
	lastSeq int64

	focus     pane
	boardSel  int
	waitSel   int
	workerSel int
	// worker is the agent whose output is shown; "" shows every agent.
	worker     string
	outScroll  int // lines scrolled up from the newest; 0 follows
	jourScroll int

	mode mode
	// The text input: its prompt, its text, and the command it fills.
	prompt string
	buf    []rune
	fill   func(text string) control.Command
	// The checkpoint chooser.
	cpThread string
	cpSteps  []string
	cpSel    int

	msg    string
	msgErr bool
}

// New returns the viewer of src. ctx bounds the commands it gives.
func New(ctx context.Context, src live.Source, opts Options) *Model {
	m := &Model{ctx: ctx, src: src, now: opts.Now, loc: opts.Location, plain: opts.Plain, poll: opts.Poll,
		width: 80, height: 24}
	if m.now == nil {
		m.now = time.Now
	}
	if m.loc == nil {
		m.loc = time.Local
	}
	if m.poll <= 0 {
		m.poll = time.Second
	}
	m.st = newStyles(opts.Plain)
	return m
}

// Init implements tea.Model: read the status at once.
func (m *Model) Init() tea.Cmd { return m.readStatus() }

func (m *Model) readStatus() tea.Cmd {
	return func() tea.Msg {
		rep, err := m.src.Status(m.ctx)
		return statusMsg{rep, err}
	}
}

// Update implements tea.Model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case statusMsg:
		m.takeStatus(msg)
		// The next read is scheduled only after this one answered, so
		// that a slow status never piles reads up.
		return m, tea.Tick(m.poll, func(time.Time) tea.Msg { return tickMsg{} })
	case tickMsg:
		return m, m.readStatus()
	case eventMsg:
		m.takeEvent(msg.ev)
	case eventsEndedMsg:
		if msg.err != nil {
			m.say(true, "the journal can no longer be read: "+msg.err.Error())
		}
	case steerMsg:
		if msg.err != nil {
			m.say(true, string(msg.cmd.Kind)+": "+msg.err.Error())
		} else {
			m.say(false, string(msg.cmd.Kind)+": "+msg.res.Message)
		}
		return m, m.readStatus() // show what the command changed without waiting for the tick
	case tea.PasteMsg:
		if m.mode == modeInput {
			m.buf = append(m.buf, []rune(oneLine(msg.Content))...)
		}
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *Model) takeStatus(msg statusMsg) {
	m.statusErr = msg.err
	if msg.err != nil {
		return
	}
	m.rep, m.haveStatus = msg.rep, true
	m.boardSel = clampSel(m.boardSel, len(m.rep.Board))
	m.waitSel = clampSel(m.waitSel, len(m.rep.Waiting))
	m.workerSel = clampSel(m.workerSel, len(m.workers()))
}

func clampSel(sel, n int) int {
	return max(0, min(sel, n-1))
}

func (m *Model) say(isErr bool, text string) { m.msg, m.msgErr = oneLine(text), isErr }

func (m *Model) workers() []status.Worker {
	if m.rep.Parallel == nil {
		return nil
	}
	return m.rep.Parallel.Working
}

// steer gives cmd through the source, off the UI's goroutine.
func (m *Model) steer(cmd control.Command) tea.Cmd {
	m.say(false, string(cmd.Kind)+": sending…")
	return func() tea.Msg {
		res, err := m.src.Steer(m.ctx, cmd)
		return steerMsg{cmd, res, err}
	}
}

func (m *Model) command(kind control.Kind) control.Command {
	return control.New(kind, control.ByWatch, m.now())
}
