package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/internal/report"
)

// takeEvent files one journal event: what an agent showed and the checks
// go to the output, the run's steps to the journal.
func (m *Model) takeEvent(ev report.Event) {
	if ev.Seq != 0 && ev.Seq <= m.lastSeq {
		return // already shown: a journal read again from its start
	}
	m.lastSeq = max(m.lastSeq, ev.Seq)
	lines := textLines(ev.Text)
	switch ev.Kind {
	case report.KindHeartbeat:
		return // a status line redrawn in place; the run pane shows time
	case report.KindAgentOutput, report.KindCheck, report.KindVerdict:
		m.addOutput(ev.Worker, lines)
		return
	case report.KindIteration:
		if strings.HasPrefix(strings.TrimSpace(ev.Text), "──") {
			m.addOutput(ev.Worker, lines) // the banner that starts an agent's turn
			return
		}
	case report.KindTransition:
		if len(lines) == 0 {
			line := fmt.Sprintf("%s → %s (%s)", orDash(ev.From), ev.To, ev.Trigger)
			if ev.Task != "" {
				line = ev.Task + " " + line
			}
			lines = []string{line}
		}
	}
	if len(lines) == 0 {
		return
	}
	stamp := ev.Time.In(m.loc).Format("15:04:05") + " "
	who := ""
	if ev.Worker != "" && !strings.HasPrefix(lines[0], "["+ev.Worker) {
		who = ev.Worker + " "
	}
	for i, l := range lines {
		if i == 0 {
			m.journal = append(m.journal, stamp+who+l)
		} else {
			m.journal = append(m.journal, strings.Repeat(" ", len(stamp))+l)
		}
	}
	if n := len(m.journal) - maxJournal; n > 0 {
		m.journal = append([]string(nil), m.journal[n:]...)
	}
}

func (m *Model) addOutput(worker string, lines []string) {
	for _, l := range lines {
		m.output = append(m.output, outLine{worker: worker, text: l})
	}
	if n := len(m.output) - maxOutput; n > 0 {
		m.output = append([]outLine(nil), m.output[n:]...)
	}
}

// textLines are the lines of an event's text as a person reads them:
// without terminal controls, carriage returns, tabs or blank lines.
func textLines(s string) []string {
	s = ansi.Strip(s)
	s = strings.ReplaceAll(s, "\t", "    ")
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:]
		}
		l = strings.TrimRight(l, " ")
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, l))
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
