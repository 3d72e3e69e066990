package runkit

import "sync"

// Ledger is what several runs spend together: the workers of a parallel
// build, whose budget and iteration limit are the run's, not each
// worker's. It is safe for concurrent use.
type Ledger struct {
	mu    sync.Mutex
	spent Spent
	runs  int
	// MaxRuns bounds the agent iterations of every run together; 0 is
	// no bound.
	MaxRuns int
}

// Add counts one agent run's usage: tokens, cost and its time.
func (l *Ledger) Add(s Spent) {
	l.mu.Lock()
	l.spent.Tokens += s.Tokens
	l.spent.CostUSD += s.CostUSD
	l.spent.Wall += s.Wall
	l.mu.Unlock()
}

// Total is what every run spent so far.
func (l *Ledger) Total() Spent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent
}

// TakeRun counts one iteration about to start; false, counting nothing,
// when MaxRuns iterations have been taken already.
func (l *Ledger) TakeRun() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.MaxRuns > 0 && l.runs >= l.MaxRuns {
		return false
	}
	l.runs++
	return true
}

// Runs is how many iterations were taken.
func (l *Ledger) Runs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs
}
