package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/text"
)

// Receipts is GET /api/receipts: what each story cost, and each
// iteration as a point of the tokens and cost charts.
type Receipts struct {
	// Stories are the tasks the journal saw worked on, in the order
	// they were first started.
	Stories []Receipt `json:"stories"`
	// Iterations are the build iterations, oldest first.
	Iterations []IterationPoint `json:"iterations"`
}

// Receipt is one story's account.
type Receipt struct {
	Task string `json:"task"`
	// State is verified (accepted on evidence ralph produced),
	// done_agent_word (accepted on the agent's word), landed (a parallel
	// build's story on the target branch), awaiting_landing (accepted on
	// its worker's branch, not landed yet), done (accepted by a ralph
	// that did not say how), partial, blocked, failed (its last attempt
	// was sent back), interrupted (its run stopped during an iteration)
	// or working (an iteration is going). Never done on
	// the agent's claim alone.
	State string `json:"state"`
	// Verdict is how ralph accepted it: "verified" or "agent_word".
	Verdict string `json:"verdict,omitempty"`
	// Evidence is what ralph ran that shows a verified story done.
	Evidence []string `json:"evidence,omitempty"`
	// Attempts counts the iterations that worked on it.
	Attempts       int     `json:"attempts"`
	DurationMillis int64   `json:"duration_ms"`
	Tokens         Usage   `json:"tokens"`
	CostUSD        float64 `json:"cost_usd_estimate"`
	Checks         []Check `json:"checks"`
	// Commit is the commit that landed it (short hash), empty until then.
	Commit string `json:"commit,omitempty"`
	// Reason is why its last attempt failed or why it is blocked.
	Reason string    `json:"reason,omitempty"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
}

// Check counts one check's runs on a story.
type Check struct {
	Name   string `json:"name"`
	Passed int    `json:"passed"`
	Failed int    `json:"failed"`
	// Last is "passed" or "failed": the check's latest result.
	Last string `json:"last"`
}

// Usage is an agent's token use, as the iteration records hold it.
type Usage = agent.Usage

// IterationPoint is one iteration on the charts.
type IterationPoint struct {
	Run            string    `json:"run"`
	Worker         string    `json:"worker,omitempty"`
	Iteration      int       `json:"iteration"`
	Task           string    `json:"task"`
	Attempt        int       `json:"attempt"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	Status         string    `json:"status"`
	DurationMillis int64     `json:"duration_ms"`
	Tokens         Usage     `json:"tokens"`
	CostUSD        float64   `json:"cost_usd_estimate"`
	Commit         string    `json:"commit,omitempty"`
}

// receiptBook keeps the receipts of one workspace up to date with its
// journal, reading only what was appended since the last request.
type receiptBook struct {
	src live.Source

	mu      sync.Mutex
	reader  *report.JournalReader
	runs    string // the .ralph folder, where iteration records live
	stories map[string]*Receipt
	order   []string
	iters   []*IterationPoint
	open    map[string]*IterationPoint // by run and worker
	checks  map[string]map[string]*Check
	// recorded marks iterations whose record was read.
	recorded map[*IterationPoint]bool
	follow   sync.Once
	ferr     error
}

func newReceiptBook(src live.Source) *receiptBook {
	b := &receiptBook{src: src, stories: map[string]*Receipt{}, open: map[string]*IterationPoint{}, checks: map[string]map[string]*Check{}, recorded: map[*IterationPoint]bool{}}
	if l, ok := src.(*live.Local); ok {
		b.reader = &report.JournalReader{Path: l.Journal}
		b.runs = filepath.Join(filepath.Dir(l.Journal), "runs")
	}
	return b
}

// Compute returns the receipts as the journal stands now.
func (b *receiptBook) Compute(ctx context.Context) (Receipts, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reader != nil {
		// Read a piece at a time and filed as read: what the book holds
		// is a summary per story and iteration, whatever the journal's
		// size (one agent line is an event).
		if err := b.reader.ScanRaw(func(line []byte) error {
			if !b.chatter(line) {
				if ev, ok := report.ParseLine(line); ok {
					b.add(ev)
				}
			}
			return ctx.Err()
		}); err != nil {
			return Receipts{}, err
		}
		return b.snapshot(), nil
	}
	// A source that is not a journal on this machine: follow it in the
	// background, filing each event as it comes.
	b.follow.Do(func() {
		go func() {
			err := b.src.Events(context.Background(), 0, func(ev report.Event) error {
				b.mu.Lock()
				b.add(ev)
				b.mu.Unlock()
				return nil
			})
			b.mu.Lock()
			b.ferr = err
			b.mu.Unlock()
		}()
	})
	if b.ferr != nil {
		return Receipts{}, b.ferr
	}
	return b.snapshot(), nil
}

// Most of a journal is agent output and heartbeats, of which receipts
// need only the time (the open iteration's end): chatter reads that much
// of such a line, without its text and data, and files it. It reports
// false for every other line, which is read whole.
func (b *receiptBook) chatter(line []byte) bool {
	if !bytes.Contains(line, kindAgentOutput) && !bytes.Contains(line, kindHeartbeat) {
		return false
	}
	h, ok := report.ReadHeader(line)
	if !ok || (h.Kind != report.KindAgentOutput && h.Kind != report.KindHeartbeat) {
		return false
	}
	if cur := b.open[h.Run+"\x00"+h.Worker]; cur != nil && !h.Time.IsZero() {
		cur.End = h.Time
	}
	return true
}

var (
	kindAgentOutput = []byte(`"kind":"` + report.KindAgentOutput + `"`)
	kindHeartbeat   = []byte(`"kind":"` + report.KindHeartbeat + `"`)
)

func (b *receiptBook) story(task string, t time.Time) *Receipt {
	r := b.stories[task]
	if r == nil {
		r = &Receipt{Task: task, First: t}
		b.stories[task] = r
		b.order = append(b.order, task)
	}
	if t.After(r.Last) {
		r.Last = t
	}
	return r
}

// add files one journal event. Receipts read the facts the loop puts in
// its events' data (internal/loop: the iteration banner and the event
// that closes each iteration, checks, commits, blockers), never the
// lines a person reads, which may be reworded.
func (b *receiptBook) add(ev report.Event) {
	key := ev.Run + "\x00" + ev.Worker
	cur := b.open[key]
	if cur != nil && !ev.Time.IsZero() {
		cur.End = ev.Time
	}
	switch data := ev.Data.(type) {
	case report.Iteration:
		if data.Turn == nil {
			return
		}
		n := data.Iteration
		if data.End != nil && data.IterationEnd {
			b.endIteration(ev, key, n, data)
			return
		}
		task := text.OrNone(ev.Task, data.Task)
		if task == "" {
			return // a planning iteration
		}
		it := &IterationPoint{Run: ev.Run, Worker: ev.Worker, Iteration: n, Task: task, Attempt: ev.Attempt, Start: ev.Time, End: ev.Time, Status: "working"}
		b.iters = append(b.iters, it)
		b.open[key] = it
		r := b.story(task, ev.Time)
		r.Attempts++
		r.State = "working"
	case report.Check:
		name := data.Name
		if data.Passed == nil || name == "" || ev.Task == "" || ev.Machine != loopMachine {
			return // not one of a build's checks on a task (a thread's, the starting tree's)
		}
		b.story(ev.Task, ev.Time)
		cs := b.checks[ev.Task]
		if cs == nil {
			cs = map[string]*Check{}
			b.checks[ev.Task] = cs
		}
		c := cs[name]
		if c == nil {
			c = &Check{Name: name}
			cs[name] = c
		}
		if *data.Passed {
			c.Passed++
			c.Last = "passed"
		} else {
			c.Failed++
			c.Last = "failed"
		}
	case report.Commit:
		hash := data.Commit
		if ev.Task == "" || hash == "" {
			return
		}
		r := b.story(ev.Task, ev.Time)
		state := "done"
		var verdict string
		if data.Judged != nil {
			verdict = data.Verdict
		}
		switch {
		case data.State == "landed":
			state = "landed"
		case data.Status == "partial":
			state = "partial"
		case ev.Worker != "" && verdict != "":
			// A worker's commit is on its own branch: the story is done
			// when the merge queue lands it.
			state = "awaiting_landing"
		case verdict == "agent_word":
			state = "done_agent_word"
		case verdict != "":
			state = "verified"
		}
		if verdict != "" {
			r.Verdict, r.Evidence = verdict, data.Evidence
		}
		r.State, r.Commit, r.Reason = state, text.ShortHash(hash), ""
		if cur != nil && cur.Task == ev.Task {
			// The iteration ends with its own event, just after.
			cur.Status, cur.Commit, cur.End = state, text.ShortHash(hash), ev.Time
		}
	case report.Blocker:
		if ev.Task == "" || data.State != "blocked" {
			return
		}
		r := b.story(ev.Task, ev.Time)
		r.State = "blocked"
		if data.Reason != "" {
			r.Reason = data.Reason
		}
	case report.Limit:
		// A limit that ends the run (a stop, an error) ends its open
		// iteration, which may never get an event of its own.
		if data.Ending != nil && data.Outcome != "" && cur != nil {
			b.cut(key, cur)
		}
	case report.Summary:
		// The run is over: whatever iteration it had open ends here;
		// a parallel build's (the engine's) ends its workers' too.
		for k, it := range b.open {
			if it.Run == ev.Run || (ev.Machine == engineMachine && it.Worker != "") {
				b.cut(k, it)
			}
		}
	}
}

// cut ends an open iteration that its run left without closing: a story
// it was working on is interrupted, not still working (receipts said
// "working" after a stop).
func (b *receiptBook) cut(key string, it *IterationPoint) {
	delete(b.open, key)
	if it.Status == "working" {
		it.Status = "interrupted"
	}
	if r := b.stories[it.Task]; r != nil && r.State == "working" {
		r.State = "interrupted"
	}
}

// engineMachine is the machine of a parallel build's own events
// (engine.MachineName; the engine sits above this package).
const engineMachine = "engine"

// endIteration files the event that closes iteration n, whatever its
// status: its tokens, cost and duration, and the story's state.
func (b *receiptBook) endIteration(ev report.Event, key string, n int, data report.Iteration) {
	task := data.Task
	if task == "" {
		return // a planning iteration
	}
	it := b.open[key]
	if it == nil || it.Task != task || it.Iteration != n {
		it = nil
		for i := len(b.iters) - 1; i >= 0 && it == nil; i-- {
			if p := b.iters[i]; p.Run == ev.Run && p.Worker == ev.Worker && p.Iteration == n && p.Task == task {
				it = p
			}
		}
	}
	if it == nil {
		// Its banner is not in the journal (a journal cut short).
		it = &IterationPoint{Run: ev.Run, Worker: ev.Worker, Iteration: n, Task: task, Start: ev.Time}
		b.iters = append(b.iters, it)
	}
	status := data.Status
	it.Status, it.End = status, ev.Time
	it.DurationMillis, it.Tokens, it.CostUSD = data.DurationMS, data.Tokens, data.CostUSD
	if b.open[key] == it {
		delete(b.open, key)
	}
	r := b.story(task, ev.Time)
	switch status {
	case "done", "partial":
		// The commit's event said how the story was accepted.
		if r.State == "working" || r.State == "failed" || r.State == "" {
			r.State = status
		}
		r.Reason = ""
		if it.Commit != "" {
			r.Commit = it.Commit
		}
	case "interrupted":
		r.State = "interrupted"
	default:
		if r.State != "blocked" { // the blocker may be told first
			r.State = "failed"
		}
		if data.Reason != "" {
			r.Reason = data.Reason
		}
	}
}

// loopMachine is the machine of a build's events (loop.MachineName; the
// loop sits above this package).
const loopMachine = "loop"

// iterRecord is the part of an iteration record (.ralph/runs/RUN/
// iter-N.json, loop.IterationRecord) the receipts use.
type iterRecord struct {
	TaskID         string  `json:"task_id"`
	DurationMillis int64   `json:"duration_ms"`
	Status         string  `json:"status"`
	Tokens         Usage   `json:"tokens"`
	CostUSD        float64 `json:"cost_usd_estimate"`
}

// fromRecord fills in what the journal does not say of a closed
// iteration (its tokens, cost and exact duration) from its record, which
// the loop writes when the iteration ends.
func (b *receiptBook) fromRecord(it *IterationPoint) {
	if b.runs == "" || b.recorded[it] || it.Iteration == 0 || it.Run == "" {
		return
	}
	raw, err := os.ReadFile(filepath.Join(b.runs, it.Run, fmt.Sprintf("iter-%d.json", it.Iteration)))
	if err != nil {
		return
	}
	var rec iterRecord
	if json.Unmarshal(raw, &rec) != nil || rec.TaskID != it.Task {
		return
	}
	b.recorded[it] = true
	if it.Tokens == (Usage{}) {
		it.Tokens = rec.Tokens
	}
	if it.CostUSD == 0 {
		it.CostUSD = rec.CostUSD
	}
	if rec.DurationMillis > 0 {
		it.DurationMillis = rec.DurationMillis
	}
}

func (b *receiptBook) snapshot() Receipts {
	out := Receipts{Stories: []Receipt{}, Iterations: []IterationPoint{}}
	totals := map[string]*Receipt{}
	for _, task := range b.order {
		r := *b.stories[task]
		r.Tokens, r.CostUSD, r.DurationMillis = Usage{}, 0, 0
		r.Checks = []Check{}
		names := make([]string, 0, len(b.checks[task]))
		for n := range b.checks[task] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			r.Checks = append(r.Checks, *b.checks[task][n])
		}
		totals[task] = &r
	}
	for _, it := range b.iters {
		open := false
		for _, o := range b.open {
			open = open || o == it
		}
		if !open {
			b.fromRecord(it)
		}
		p := *it
		if p.DurationMillis == 0 && !p.End.IsZero() {
			p.DurationMillis = p.End.Sub(p.Start).Milliseconds()
		}
		out.Iterations = append(out.Iterations, p)
		if r := totals[it.Task]; r != nil {
			r.Tokens = r.Tokens.Add(p.Tokens)
			r.CostUSD += p.CostUSD
			r.DurationMillis += p.DurationMillis
		}
	}
	for _, task := range b.order {
		out.Stories = append(out.Stories, *totals[task])
	}
	return out
}
