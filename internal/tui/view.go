package tui

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/ralphloop/ralph/internal/status"
	"github.com/ralphloop/ralph/internal/words"
)

// styles are the few colours the viewer uses. Plain styles render text
// as it is: NO_COLOR means no colours at all.
type styles struct {
	title, focus, sel, ok, bad, warn, dim, key lipgloss.Style
}

func newStyles(plain bool) styles {
	if plain {
		n := lipgloss.NewStyle()
		return styles{n, n, n, n, n, n, n, n}
	}
	n := lipgloss.NewStyle()
	return styles{
		title: n.Bold(true),
		focus: n.Bold(true).Foreground(lipgloss.Color("12")),
		sel:   n.Reverse(true),
		ok:    n.Foreground(lipgloss.Color("2")),
		bad:   n.Foreground(lipgloss.Color("1")),
		warn:  n.Foreground(lipgloss.Color("3")),
		dim:   n.Faint(true),
		key:   n.Bold(true),
	}
}

// View implements tea.Model.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "ralph watch · " + filepath.Base(m.src.Name())
	return v
}

// Render is the whole screen as text, exactly width×height.
func (m *Model) Render() string {
	w, h := max(m.width, 20), max(m.height, 8)
	head := m.header()
	foot := m.footer()
	bodyH := h - len(head) - len(foot)
	var body []string
	if m.mode == modeHelp {
		body = m.help(w, bodyH)
	} else if m.twoColumns() {
		body = m.twoColumnBody(w, bodyH)
	} else {
		body = m.stackedBody(w, bodyH)
	}
	lines := append(append(head, body...), foot...)
	for i := range lines {
		lines[i] = fit(lines[i], w)
	}
	return strings.Join(lines[:min(len(lines), h)], "\n")
}

// twoColumns is the wide layout: the board and what waits on the left,
// the output and the journal on the right.
func (m *Model) twoColumns() bool { return m.width >= 100 }

func (m *Model) twoColumnBody(w, h int) []string {
	lw := max(34, w*2/5)
	rw := w - lw - 3
	left := m.leftColumn(lw, h)
	outH := h * 3 / 5
	right := append(m.outputPane(rw, outH), m.journalPane(rw, h-outH)...)
	sep := m.st.dim.Render(" │ ")
	lines := make([]string, h)
	for i := range lines {
		lines[i] = fit(left[i], lw) + sep + fit(right[i], rw)
	}
	return lines
}

func (m *Model) leftColumn(w, h int) []string {
	var workers, waiting []string
	if n := len(m.workers()); n > 0 {
		workers = m.workersPane(w, min(n, 6)+1)
	}
	waiting = m.waitingPane(w, max(2, min(len(m.rep.Waiting), 5)+1))
	board := m.boardPane(w, max(2, h-len(workers)-len(waiting)))
	return padLines(append(append(board, workers...), waiting...), h)
}

func (m *Model) stackedBody(w, h int) []string {
	var workers, waiting []string
	if n := len(m.workers()); n > 0 {
		workers = m.workersPane(w, min(n, 3)+1)
	}
	if n := len(m.rep.Waiting); n > 0 {
		waiting = m.waitingPane(w, min(n, 3)+1)
	}
	board := m.boardPane(w, max(2, min(len(m.rep.Board), 5)+1))
	rest := h - len(board) - len(workers) - len(waiting)
	outH := max(2, rest*3/5)
	lines := append(append(append(board, workers...), waiting...), m.outputPane(w, outH)...)
	lines = append(lines, m.journalPane(w, max(0, rest-outH))...)
	return padLines(lines, h)
}

// paneTitle is a pane's rule; the focused pane's is heavy, so that focus
// shows without colour.
func (m *Model) paneTitle(p pane, w int, extra string) string {
	name := paneNames[p]
	if extra != "" {
		name += " · " + extra
	}
	if m.focus == p {
		return m.st.focus.Render(rule("━━ "+name+" ", "━", w))
	}
	return m.st.title.Render(rule("── "+name+" ", "─", w))
}

// listPane draws a title and items, keeping the selected one in view.
func (m *Model) listPane(p pane, w, h int, extra string, items []string, sel int, empty string) []string {
	lines := []string{m.paneTitle(p, w, extra)}
	rows := h - 1
	if len(items) == 0 {
		return padLines(append(lines, m.st.dim.Render("  "+empty)), h)
	}
	first := 0
	if sel >= rows {
		first = sel - rows + 1
	}
	for i := first; i < len(items) && i < first+rows; i++ {
		if i == sel && m.focus == p {
			lines = append(lines, m.st.sel.Render(fit("› "+items[i], w)))
		} else if i == sel {
			lines = append(lines, "› "+items[i])
		} else {
			lines = append(lines, "  "+items[i])
		}
	}
	return padLines(lines, h)
}

var storyMarks = map[string]string{status.StoryDone: "✓", status.StoryVerified: "✓", status.StoryAgentWord: "~",
	status.StoryLanded: "✓", status.StoryClaimed: "▶", status.StoryVerifying: "…", status.StoryTodo: "·",
	status.StoryBlocked: "✗", status.StoryNeedsReview: "?", status.StoryQueued: "⇢"}

// storyWords say what a state is where the mark alone would not: a story
// done on the agent's word is never shown as verified.
var storyWords = map[string]string{status.StoryClaimed: "claimed", status.StoryVerifying: "verifying",
	status.StoryVerified: "verified", status.StoryAgentWord: "done, agent's word", status.StoryLanded: "landed",
	status.StoryBlocked: "blocked", status.StoryNeedsReview: "needs review", status.StoryQueued: "merge queue"}

func (m *Model) boardPane(w, h int) []string {
	items := make([]string, len(m.rep.Board))
	done := 0
	for i, s := range m.rep.Board {
		mark := storyMarks[s.State]
		if mark == "" {
			mark = "·"
		}
		switch s.State {
		case status.StoryDone, status.StoryVerified, status.StoryLanded:
			done++
			mark = m.st.ok.Render(mark)
		case status.StoryAgentWord:
			done++
			mark = m.st.warn.Render(mark)
		case status.StoryBlocked, status.StoryNeedsReview:
			mark = m.st.bad.Render(mark)
		case status.StoryClaimed, status.StoryVerifying, status.StoryQueued:
			mark = m.st.warn.Render(mark)
		}
		line := mark + " " + s.ID + " " + s.Title
		var notes []string
		if wd := storyWords[s.State]; wd != "" {
			notes = append(notes, wd)
		}
		if s.Worker != "" {
			notes = append(notes, s.Worker)
		}
		if s.Attempts > 0 {
			notes = append(notes, words.Count(s.Attempts, "failed attempt", "failed attempts"))
		}
		if len(notes) > 0 {
			line += " (" + strings.Join(notes, ", ") + ")"
		}
		if s.Reason != "" {
			line += ": " + oneLine(s.Reason)
		}
		items[i] = line
	}
	extra := ""
	if len(m.rep.Board) > 0 {
		extra = fmt.Sprintf("%d/%d done", done, len(m.rep.Board))
	}
	return m.listPane(paneBoard, w, h, extra, items, m.boardSel, "no stories: the task file lists none")
}

func (m *Model) workersPane(w, h int) []string {
	ws := m.workers()
	items := make([]string, len(ws))
	for i, wk := range ws {
		items[i] = fmt.Sprintf("%s %s %s · attempt %d · %s", wk.Worker, wk.Task, wk.State, wk.Attempt, dur(time.Duration(wk.ElapsedMillis)*time.Millisecond))
		if wk.Agent != "" {
			items[i] += " · " + wk.Agent
		}
	}
	extra := ""
	if p := m.rep.Parallel; p != nil {
		extra = fmt.Sprintf("%d of %d busy · %d landed", len(ws), p.Workers, p.Landed)
		if len(p.Queue) > 0 {
			extra += fmt.Sprintf(" · %d in the merge queue", len(p.Queue))
		}
	}
	return m.listPane(paneWorkers, w, h, extra, items, m.workerSel, "no worker is busy")
}

func (m *Model) waitingPane(w, h int) []string {
	items := make([]string, len(m.rep.Waiting))
	for i, wt := range m.rep.Waiting {
		switch wt.Kind {
		case status.WaitQuestion:
			items[i] = "? " + wt.ID + ": " + oneLine(wt.Text) + "  [a answers]"
		case status.WaitCheckpoint:
			items[i] = "◆ " + oneLine(wt.Text) + ": " + strings.Join(wt.Steps, ", ") + "  [c chooses]"
		default:
			items[i] = "✗ " + wt.ID + " blocked: " + oneLine(wt.Text) + "  [u unblocks]"
		}
	}
	return m.listPane(paneWaiting, w, h, "", items, m.waitSel, "nothing waits for you")
}

// outputPane shows what the selected agent showed, newest at the bottom.
func (m *Model) outputPane(w, h int) []string {
	if h <= 0 {
		return nil
	}
	extra := "every agent"
	if m.worker != "" {
		extra = m.worker
	} else if len(m.workers()) == 0 && m.rep.LastIteration != nil && m.rep.LastIteration.Agent != "" {
		extra = "agent " + m.rep.LastIteration.Agent
	}
	var lines []string
	for _, l := range m.output {
		if m.worker != "" && l.worker != m.worker {
			continue
		}
		text := l.text
		if m.worker == "" && l.worker != "" {
			text = l.worker + " " + text
		}
		lines = append(lines, wrap(text, w)...)
	}
	return m.scrolled(paneOutput, w, h, extra, lines, &m.outScroll, "no agent output yet")
}

func (m *Model) journalPane(w, h int) []string {
	if h <= 0 {
		return nil
	}
	var lines []string
	for _, l := range m.journal {
		lines = append(lines, wrap(l, w)...)
	}
	return m.scrolled(paneJournal, w, h, "", lines, &m.jourScroll, "the journal is empty: no run has started here")
}

// scrolled shows the last h-1 lines, scroll lines up from the newest.
func (m *Model) scrolled(p pane, w, h int, extra string, lines []string, scroll *int, empty string) []string {
	rows := h - 1
	*scroll = min(*scroll, max(0, len(lines)-rows))
	if *scroll > 0 {
		extra += fmt.Sprintf(" · %d lines below (end follows)", *scroll)
	}
	out := []string{m.paneTitle(p, w, strings.TrimPrefix(extra, " · "))}
	if len(lines) == 0 {
		return padLines(append(out, m.st.dim.Render("  "+empty)), h)
	}
	end := len(lines) - *scroll
	return padLines(append(out, lines[max(0, end-rows):end]...), h)
}

// header is the run: its state, iteration, time, agent, tokens, cost,
// limits, cooldowns, breaker and pause.
func (m *Model) header() []string {
	r := m.rep
	name := filepath.Base(m.src.Name()) // the window title names it once the status is in
	if !m.haveStatus {
		line := "ralph watch · " + name + " · reading the status…"
		if m.statusErr != nil {
			line = "ralph watch · " + name + " · " + m.st.bad.Render("status: "+oneLine(m.statusErr.Error()))
		}
		return []string{line, ""}
	}
	var first []string
	switch {
	case r.Running:
		first = append(first, m.st.ok.Render("● running"))
	case r.RunID == "" && r.Session == nil && r.Parallel == nil && len(m.journal) == 0:
		first = append(first, "○ no run has started in "+name+" yet")
	case r.Finished && r.RunID != "":
		// The last run, finished: its outcome says more than its state.
		run := "○ run " + r.RunID + " finished: " + r.Outcome
		if r.Reason != "" {
			run += " (" + r.Reason + ")"
		}
		first = append(first, run)
	default:
		first = append(first, "○ not running")
	}
	if r.RunID != "" && !(r.Finished && !r.Running) {
		first = append(first, "run "+r.RunID)
	}
	if r.State != "" && !(r.Finished && !r.Running) {
		first = append(first, r.State)
	}
	if r.Iteration > 0 || r.MaxIterations > 0 {
		it := fmt.Sprintf("iteration %d", r.Iteration)
		if r.MaxIterations > 0 {
			it += fmt.Sprintf("/%d", r.MaxIterations)
		}
		first = append(first, it)
	}
	if r.ElapsedMillis > 0 {
		first = append(first, dur(time.Duration(r.ElapsedMillis)*time.Millisecond))
	}
	if li := r.LastIteration; li != nil && li.Agent != "" {
		first = append(first, "agent "+li.Agent)
	}
	lines := []string{strings.Join(first, " · ")}

	var second []string
	if r.Stories > 0 {
		s := fmt.Sprintf("stories %d/%d done", r.StoriesDone, r.Stories)
		if r.CurrentStory != "" && r.Running {
			s += " · on " + r.CurrentStory
		}
		second = append(second, s)
	}
	if mt := r.Metrics; mt != nil {
		t := mt.Tokens
		second = append(second, fmt.Sprintf("tokens %s in · %s out", count(t.InputTokens+t.CacheReadTokens+t.CacheWriteTokens), count(t.OutputTokens)))
		second = append(second, fmt.Sprintf("est. $%.4f", mt.CostUSD))
	}
	if b := r.Budget; b != nil {
		var lim []string
		if b.MaxCost > 0 {
			lim = append(lim, fmt.Sprintf("$%.2f", b.MaxCost))
		}
		if b.MaxTokens > 0 {
			lim = append(lim, count(b.MaxTokens)+" tokens")
		}
		if b.MaxWall > 0 {
			lim = append(lim, dur(b.MaxWall))
		}
		if len(lim) > 0 {
			second = append(second, "budget "+strings.Join(lim, ", "))
		}
	}
	if b := r.Breaker; b != nil && b.State != "" {
		br := "breaker " + strings.ToLower(b.State)
		if b.Reason != "" && !strings.EqualFold(b.State, "closed") {
			br = m.st.bad.Render(br + ": " + oneLine(b.Reason))
		}
		second = append(second, br)
	}
	if s := r.Session; s != nil {
		ss := fmt.Sprintf("session %s %s · tasks %d/%d", s.ID, s.State, s.TasksDone, s.Tasks)
		if s.OpenQuestions > 0 {
			ss += " · " + words.Count(s.OpenQuestions, "open question", "open questions")
		}
		second = append(second, ss)
	}
	if p := r.Parallel; p != nil {
		ps := fmt.Sprintf("parallel run %s · %d workers · %d landed", p.RunID, p.Workers, p.Landed)
		if p.Finished {
			ps += " · finished: " + p.Outcome
		}
		second = append(second, ps)
	}
	lines = append(lines, strings.Join(second, " · "))

	var third []string
	if p := r.Paused; p != nil {
		third = append(third, m.st.warn.Render(fmt.Sprintf("⏸ paused by %s since %s: p resumes", p.By, p.Time.In(m.loc).Format("15:04:05"))))
	}
	names := make([]string, 0, len(r.Cooldowns))
	for n := range r.Cooldowns {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		until, err := time.Parse(time.RFC3339, r.Cooldowns[n])
		if err != nil {
			continue
		}
		if left := until.Sub(m.now()); left > 0 {
			third = append(third, m.st.warn.Render(fmt.Sprintf("%s cooling down: %s left", n, dur(left))))
		}
	}
	if r.PendingHints > 0 {
		third = append(third, words.Count(r.PendingHints, "hint", "hints")+" queued for the next prompt")
	}
	if len(third) > 0 {
		lines = append(lines, strings.Join(third, " · "))
	}
	return lines
}

// footer is the status line and the keys, or the question being asked.
func (m *Model) footer() []string {
	msg := m.msg
	if msg != "" && m.msgErr {
		msg = m.st.bad.Render("✗ " + msg)
	} else if msg != "" {
		msg = "✓ " + msg
	}
	switch m.mode {
	case modeConfirmStop:
		return []string{m.st.warn.Render("Stop the run as Ctrl+C would? The iteration in progress is recorded as interrupted."), m.st.key.Render("y") + " stops · " + m.st.key.Render("n") + " or any other key goes on"}
	case modeInput:
		return []string{m.prompt + "> " + string(m.buf) + "█", "enter sends · esc cancels · ctrl+u clears"}
	case modeCheckpoint:
		var opts []string
		for i, s := range m.cpSteps {
			o := fmt.Sprintf("%d %s", i+1, s)
			if i == m.cpSel {
				o = m.st.sel.Render("[" + o + "]")
			} else {
				o = " " + o + " "
			}
			opts = append(opts, o)
		}
		return []string{"thread " + m.cpThread + " checkpoint: " + strings.Join(opts, " "), "a number or ←/→ and enter takes it · esc cancels"}
	case modeHelp:
		return []string{msg, "any key closes the help"}
	}
	pause := "pause"
	if m.rep.Paused != nil {
		pause = "resume"
	}
	keys := []string{"p " + pause, "x stop", "h hint", "s skip", "b block", "u unblock", "a answer", "c checkpoint", "? help", "q quit"}
	// At 80 columns every key still fits, in a tighter form.
	sep, between := " ", "  "
	if !m.twoColumns() {
		keys[7] = "c checkpt"
		sep, between = ":", " "
	}
	for i, k := range keys {
		key, what, _ := strings.Cut(k, " ")
		keys[i] = m.st.key.Render(key) + sep + what
	}
	return []string{msg, strings.Join(keys, between)}
}

func (m *Model) help(w, h int) []string {
	lines := []string{
		m.st.title.Render("ralph watch: keys"),
		"",
		"  p        pause after the current step; p again resumes",
		"  x        stop the run as Ctrl+C would (asks y/n first)",
		"  h        a hint for the next iteration's prompt (type it, enter sends)",
		"  s        skip the selected story: others go first",
		"  b        block the selected story until a person unblocks it",
		"  u        unblock the selected story",
		"  a        answer the selected question (or the first one)",
		"  c        a thread's checkpoint: approve, commit, finalize, request-changes",
		"  tab      next pane (shift+tab goes back)",
		"  ↑/↓ j/k  select a story, worker or waiting item; scroll output and journal",
		"  end G    follow the newest output again",
		"  q        leave the viewer; the run goes on",
		"",
		"Every command goes through the workspace's control folder and is in the",
		"journal with \"by watch\"; a run that is going takes it at its next step.",
	}
	return padLines(lines, h)
}

// rule is a pane's title followed by a line to the width.
func rule(title, line string, w int) string {
	if ansi.StringWidth(title) >= w {
		return fit(title, w)
	}
	return title + strings.Repeat(line, w-ansi.StringWidth(title))
}

// fit cuts or pads s to exactly w cells.
func fit(s string, w int) string {
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w-1, "") + "…"
	}
	if n := w - ansi.StringWidth(s); n > 0 {
		s += strings.Repeat(" ", n)
	}
	return s
}

func padLines(lines []string, h int) []string {
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines[:h]
}

// wrap breaks a line at words to fit w cells, cutting words longer
// than a line.
func wrap(s string, w int) []string {
	if w <= 0 || ansi.StringWidth(s) <= w {
		return []string{s}
	}
	return strings.Split(ansi.Hardwrap(ansi.Wordwrap(s, w, ""), w, true), "\n")
}

func dur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func count(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%dk", n/1000)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
