package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/live"
	"github.com/ralphloop/ralph/internal/report"
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
	// State is done, partial, blocked, failed (its last attempt was sent
	// back) or working (an iteration is going).
	State string `json:"state"`
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

// Usage is an agent's token use (agent.Usage's JSON).
type Usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read"`
	CacheWrite int64 `json:"cache_write"`
}

func (u Usage) add(v Usage) Usage {
	return Usage{u.Input + v.Input, u.Output + v.Output, u.CacheRead + v.CacheRead, u.CacheWrite + v.CacheWrite}
}

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

// The lines of the loop these receipts are read from; see
// internal/loop's printCheck, commit and iteration banners.
var (
	iterBanner = regexp.MustCompile(`── iteration (\d+)(?:/\d+)? ·`)
	checkLine  = regexp.MustCompile(`^\s*([✓✗]) check (.+?) \(`)
	commitLine = regexp.MustCompile(`commit ([0-9a-f]{7,40})\b`)
)

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
	pending  []report.Event
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
	var evs []report.Event
	if b.reader != nil {
		var err error
		if evs, err = b.reader.Next(); err != nil {
			return Receipts{}, err
		}
	} else {
		// A source that is not a journal on this machine: follow it in
		// the background and take what arrived.
		b.follow.Do(func() {
			go func() {
				err := b.src.Events(context.Background(), 0, func(ev report.Event) error {
					b.mu.Lock()
					b.pending = append(b.pending, ev)
					b.mu.Unlock()
					return nil
				})
				b.mu.Lock()
				b.ferr = err
				b.mu.Unlock()
			}()
		})
		evs, b.pending = b.pending, nil
		if b.ferr != nil {
			return Receipts{}, b.ferr
		}
	}
	for _, ev := range evs {
		b.add(ev)
	}
	return b.snapshot(), nil
}

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

func (b *receiptBook) add(ev report.Event) {
	key := ev.Run + "\x00" + ev.Worker
	cur := b.open[key]
	if cur != nil && !ev.Time.IsZero() {
		cur.End = ev.Time
	}
	switch ev.Kind {
	case report.KindIteration:
		if status, ok := ev.Data["status"].(string); ok {
			// The end of an iteration that did not land its task.
			task, _ := ev.Data["task"].(string)
			if task == "" {
				return // a planning iteration
			}
			it := cur
			if it == nil || it.Task != task {
				it = &IterationPoint{Run: ev.Run, Worker: ev.Worker, Task: task, Start: ev.Time}
				b.iters = append(b.iters, it)
			}
			it.Status, it.End = status, ev.Time
			if n, ok := ev.Data["iteration"].(float64); ok {
				it.Iteration = int(n)
			}
			if d, ok := ev.Data["duration_ms"].(float64); ok {
				it.DurationMillis = int64(d)
			}
			dataUsage(ev.Data, it)
			r := b.story(task, ev.Time)
			r.State = "failed"
			if why, _ := ev.Data["reason"].(string); why != "" {
				r.Reason = why
			}
			if status == "interrupted" {
				r.State = "interrupted"
			}
			delete(b.open, key)
			return
		}
		m := iterBanner.FindStringSubmatch(ev.Text)
		if m == nil || ev.Task == "" {
			return
		}
		n, _ := strconv.Atoi(m[1])
		it := &IterationPoint{Run: ev.Run, Worker: ev.Worker, Iteration: n, Task: ev.Task, Attempt: ev.Attempt, Start: ev.Time, End: ev.Time, Status: "working"}
		b.iters = append(b.iters, it)
		b.open[key] = it
		r := b.story(ev.Task, ev.Time)
		r.Attempts++
		r.State = "working"
	case report.KindCheck:
		m := checkLine.FindStringSubmatch(ev.Text)
		if m == nil || ev.Task == "" {
			return
		}
		b.story(ev.Task, ev.Time)
		cs := b.checks[ev.Task]
		if cs == nil {
			cs = map[string]*Check{}
			b.checks[ev.Task] = cs
		}
		c := cs[m[2]]
		if c == nil {
			c = &Check{Name: m[2]}
			cs[m[2]] = c
		}
		if m[1] == "✓" {
			c.Passed++
			c.Last = "passed"
		} else {
			c.Failed++
			c.Last = "failed"
		}
	case report.KindCommit:
		m := commitLine.FindStringSubmatch(ev.Text)
		if ev.Task == "" || m == nil {
			return
		}
		r := b.story(ev.Task, ev.Time)
		state := "done"
		if strings.Contains(ev.Text, "partial") {
			state = "partial"
		}
		r.State, r.Commit, r.Reason = state, m[1], ""
		if cur != nil && cur.Task == ev.Task {
			cur.Status, cur.Commit, cur.End = state, m[1], ev.Time
			delete(b.open, key)
		}
	case report.KindBlocker:
		if ev.Task == "" || !strings.Contains(ev.Text, " blocked (") {
			return
		}
		r := b.story(ev.Task, ev.Time)
		r.State = "blocked"
		if _, why, ok := strings.Cut(ev.Text, "): "); ok {
			r.Reason = strings.TrimSpace(why)
		}
	case report.KindSummary:
		// The run is over: whatever iteration it had open ends here.
		for k, it := range b.open {
			if it.Run == ev.Run {
				delete(b.open, k)
			}
		}
	}
}

// dataUsage takes the tokens and cost an iteration event carries, when
// the loop puts them there.
func dataUsage(data map[string]any, it *IterationPoint) {
	if raw, ok := data["tokens"]; ok {
		b, _ := json.Marshal(raw)
		json.Unmarshal(b, &it.Tokens)
	}
	if c, ok := data["cost_usd_estimate"].(float64); ok {
		it.CostUSD = c
	}
}

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
			r.Tokens = r.Tokens.add(p.Tokens)
			r.CostUSD += p.CostUSD
			r.DurationMillis += p.DurationMillis
		}
	}
	for _, task := range b.order {
		out.Stories = append(out.Stories, *totals[task])
	}
	return out
}
