package tui

import (
	"fmt"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/status"
)

// key handles one key press in the current mode.
func (m *Model) key(k tea.KeyPressMsg) tea.Cmd {
	s := k.String()
	if s == "ctrl+c" {
		return tea.Quit // leaves the viewer in every mode; the run goes on
	}
	switch m.mode {
	case modeHelp:
		m.mode = modeNormal // any key closes the help
		return nil
	case modeConfirmStop:
		m.mode = modeNormal
		if s == "y" || s == "Y" {
			return m.steer(m.command(control.Stop))
		}
		m.say(false, "stop: cancelled; the run goes on")
		return nil
	case modeInput:
		return m.inputKey(k)
	case modeCheckpoint:
		return m.checkpointKey(s)
	}
	switch s {
	case "q":
		return tea.Quit
	case "?":
		m.mode = modeHelp
	case "tab":
		m.cycleFocus(1)
	case "shift+tab":
		m.cycleFocus(-1)
	case "up", "k":
		m.move(-1)
	case "down", "j":
		m.move(1)
	case "pgup":
		m.move(-10)
	case "pgdown":
		m.move(10)
	case "end", "G":
		m.outScroll, m.jourScroll = 0, 0
	case "p":
		if m.rep.Paused != nil {
			return m.steer(m.command(control.Resume))
		}
		return m.steer(m.command(control.Pause))
	case "x":
		m.mode = modeConfirmStop
	case "h":
		m.ask("hint for the next iteration", func(text string) control.Command {
			c := m.command(control.Hint)
			c.Text = text
			return c
		})
	case "s", "b", "u":
		return m.storyKey(s)
	case "a":
		m.answerKey()
	case "c":
		m.checkpointStart()
	}
	return nil
}

// ask opens the one-line text input; enter gives the command fill makes.
func (m *Model) ask(prompt string, fill func(string) control.Command) {
	m.mode, m.prompt, m.buf, m.fill = modeInput, prompt, nil, fill
}

func (m *Model) inputKey(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "esc":
		m.mode = modeNormal
		m.say(false, "cancelled")
	case "enter":
		m.mode = modeNormal
		return m.steer(m.fill(string(m.buf)))
	case "backspace", "ctrl+h":
		if len(m.buf) > 0 {
			m.buf = m.buf[:len(m.buf)-1]
		}
	case "ctrl+u":
		m.buf = nil
	default:
		if k.Text != "" {
			m.buf = append(m.buf, []rune(k.Text)...)
		}
	}
	return nil
}

// storyKey skips, blocks or unblocks the selected story: the board's, or
// the blocked task selected among what waits for a person.
func (m *Model) storyKey(s string) tea.Cmd {
	task := m.selectedTask()
	if task == "" {
		m.say(true, "no story is selected: the board is empty")
		return nil
	}
	switch s {
	case "s":
		c := m.command(control.Skip)
		c.Task = task
		return m.steer(c)
	case "u":
		c := m.command(control.Unblock)
		c.Task = task
		return m.steer(c)
	}
	m.ask("block "+task+": why (optional)", func(text string) control.Command {
		c := m.command(control.Block)
		c.Task, c.Text = task, text
		return c
	})
	return nil
}

func (m *Model) selectedTask() string {
	if m.focus == paneWaiting && m.waitSel < len(m.rep.Waiting) && m.rep.Waiting[m.waitSel].Kind == status.WaitBlocked {
		return m.rep.Waiting[m.waitSel].ID
	}
	if m.boardSel < len(m.rep.Board) {
		return m.rep.Board[m.boardSel].ID
	}
	return ""
}

// waiting returns the item of kind to act on: the one selected among
// what waits when it is of that kind, else the first of that kind.
func (m *Model) waiting(kind string) (status.Waiting, bool) {
	if m.focus == paneWaiting && m.waitSel < len(m.rep.Waiting) && m.rep.Waiting[m.waitSel].Kind == kind {
		return m.rep.Waiting[m.waitSel], true
	}
	for _, w := range m.rep.Waiting {
		if w.Kind == kind {
			return w, true
		}
	}
	return status.Waiting{}, false
}

func (m *Model) answerKey() {
	q, ok := m.waiting(status.WaitQuestion)
	if !ok {
		m.say(true, "no question waits for an answer")
		return
	}
	m.ask(fmt.Sprintf("answer %s (%s)", q.ID, clipText(q.Text, 50)), func(text string) control.Command {
		c := m.command(control.Answer)
		c.Session, c.Question, c.Text = q.Session, q.ID, text
		return c
	})
}

// checkpointStart opens the chooser of the selected thread's
// checkpoints. A checkpoint is only ever given from here, by a person.
func (m *Model) checkpointStart() {
	w, ok := m.waiting(status.WaitCheckpoint)
	if !ok {
		m.say(true, "no thread waits at a checkpoint")
		return
	}
	steps := slices.Clone(w.Steps)
	if len(steps) == 0 {
		steps = []string{"approve", "commit", "finalize", "request-changes"}
	}
	m.mode, m.cpThread, m.cpSteps, m.cpSel = modeCheckpoint, w.ID, steps, 0
}

func (m *Model) checkpointKey(s string) tea.Cmd {
	switch s {
	case "esc", "q", "n":
		m.mode = modeNormal
		m.say(false, "checkpoint: cancelled")
		return nil
	case "left", "h", "up", "k", "shift+tab":
		m.cpSel = (m.cpSel + len(m.cpSteps) - 1) % len(m.cpSteps)
		return nil
	case "right", "l", "down", "j", "tab":
		m.cpSel = (m.cpSel + 1) % len(m.cpSteps)
		return nil
	case "enter":
	default:
		n := 0
		if len(s) != 1 || s[0] < '1' || s[0] > '9' {
			return nil
		}
		n = int(s[0] - '1')
		if n >= len(m.cpSteps) {
			return nil
		}
		m.cpSel = n
	}
	step, thread := m.cpSteps[m.cpSel], m.cpThread
	if step == "request-changes" {
		m.ask("request changes on thread "+thread+": what to fix", func(text string) control.Command {
			c := m.command(control.Checkpoint)
			c.Thread, c.Step, c.Text = thread, step, text
			return c
		})
		return nil
	}
	m.mode = modeNormal
	c := m.command(control.Checkpoint)
	c.Thread, c.Step = thread, step
	return m.steer(c)
}

// visiblePanes are the panes on screen, in tab order.
func (m *Model) visiblePanes() []pane {
	ps := []pane{paneBoard}
	if len(m.workers()) > 0 {
		ps = append(ps, paneWorkers)
	}
	if len(m.rep.Waiting) > 0 || m.twoColumns() {
		ps = append(ps, paneWaiting)
	}
	return append(ps, paneOutput, paneJournal)
}

func (m *Model) cycleFocus(d int) {
	ps := m.visiblePanes()
	i := slices.Index(ps, m.focus)
	if i < 0 {
		i = 0
	}
	m.focus = ps[(i+d+len(ps))%len(ps)]
}

// move moves the selection of the focused pane, or scrolls it.
func (m *Model) move(d int) {
	switch m.focus {
	case paneBoard:
		m.boardSel = clampSel(m.boardSel+d, len(m.rep.Board))
		if m.boardSel < len(m.rep.Board) {
			m.worker = m.rep.Board[m.boardSel].Worker
		}
	case paneWorkers:
		ws := m.workers()
		m.workerSel = clampSel(m.workerSel+d, len(ws))
		if m.workerSel < len(ws) {
			m.worker = ws[m.workerSel].Worker
		}
	case paneWaiting:
		m.waitSel = clampSel(m.waitSel+d, len(m.rep.Waiting))
	case paneOutput:
		m.outScroll = max(0, m.outScroll-d)
	case paneJournal:
		m.jourScroll = max(0, m.jourScroll-d)
	}
}

// oneLine folds text onto one line: commands and the status line hold
// no line breaks.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clipText(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
