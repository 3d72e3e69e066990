package loop

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// The circuit breaker's cooldown is a wait, not time spent implementing:
// status used to show "IMPLEMENT 5m0s" for a loop that slept five minutes.
func TestBreakerCooldownCountsAsWaitingNotAsState(t *testing.T) {
	ws := newBenchWorkspace(t)
	if err := os.MkdirAll(ws.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	const cooldown = 400 * time.Millisecond
	now := time.Now()
	b := &builder{run: &run{ws: ws, home: HomeOf(ws), id: "r1", log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		em: report.NewEmitter(MachineName, "r1", 0, nil), opts: Options{Breaker: BreakerConfig{Cooldown: cooldown}}}}
	b.st = &LoopState{
		SchemaVersion: StateSchemaVersion, RunID: "r1",
		Machine:   Machine{State: StateImplement, Iteration: 2, TaskID: "US-001"},
		EnteredAt: now.Add(-50 * time.Millisecond), // 50ms of IMPLEMENT before the gate
		Tasks:     map[string]*TaskRecord{}, Feedback: map[string]string{},
		Metrics: Metrics{StateMillis: map[State]int64{StateMemoryLoad: 10}},
		Breaker: Breaker{State: BreakerOpen, Reason: "2 iterations without progress", OpenedAt: now},
	}
	// The gate waits until the breaker's cooldown ends, counted from when
	// it opened (now): at least what is left of it when the gate starts.
	left := now.Add(cooldown).Sub(time.Now())
	if err := b.breakerGate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.transition(Event{Trigger: TrigCodeWritten}); err != nil {
		t.Fatal(err)
	}
	m := b.st.Metrics
	if got := m.StateMillis[StateImplement]; got < 50 || got >= 300 {
		t.Errorf("IMPLEMENT = %dms, want about the 50ms before the gate: the %s cooldown is not implementing", got, cooldown)
	}
	if got := m.WaitMillis[WaitBreaker]; got < left.Milliseconds() || got > 5000 {
		t.Errorf("waiting for the breaker = %dms, want the %s of the %s cooldown left when the gate started", got, left, cooldown)
	}
	if want := m.StateMillis[StateImplement] + m.StateMillis[StateMemoryLoad] + m.WaitMillis[WaitBreaker]; m.TotalMillis != want {
		t.Errorf("total = %dms, want %dms: states plus waits, the run's wall time", m.TotalMillis, want)
	}
	// The wait is saved: status reads it from state.json.
	st, err := HomeOf(ws).Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Metrics.WaitMillis[WaitBreaker] != m.WaitMillis[WaitBreaker] {
		t.Errorf("saved waits = %v, want %v", st.Metrics.WaitMillis, m.WaitMillis)
	}
}

// A killed agent's reason names the configured limit and the time it ran
// apart: a 5s idle limit hit at 6.5s used to read "timeout (7s)".
func TestAgentStatusSaysTheLimitAndTheTimeApart(t *testing.T) {
	r := &run{opts: Options{AgentTimeout: 7 * time.Second, IdleTimeout: 5 * time.Second}}
	for _, c := range []struct {
		out  proc.Outcome
		want string
	}{
		{proc.Outcome{Idle: true, Duration: 6500 * time.Millisecond, ExitCode: -1}, "agent killed after 6.5s: no output for 5s, the idle limit"},
		{proc.Outcome{TimedOut: true, Duration: 7040 * time.Millisecond, ExitCode: -1}, "agent killed after 7.0s: iteration timeout 7s reached"},
		{proc.Outcome{TimedOut: true, Duration: 30*time.Minute + 5400*time.Millisecond, ExitCode: -1}, "agent killed after 30m5s: iteration timeout 7s reached"},
	} {
		status, why := r.agentStatus(agent.Outcome{Outcome: c.out})
		if status != StatusTimeout || why != c.want {
			t.Errorf("%+v: %s %q, want %s %q", c.out, status, why, StatusTimeout, c.want)
		}
	}
	// The idle kill stays a blocker a person looks at, as before: its
	// words must not read as a network timeout.
	_, why := r.agentStatus(agent.Outcome{Outcome: proc.Outcome{Idle: true, Duration: 6500 * time.Millisecond}})
	if got := classify(why, false); got != "permanent" {
		t.Errorf("classify(%q) = %s, want permanent", why, got)
	}
}

// neo4j_connected is true only when the store is Neo4j; an old state file,
// which wrote it for any store, loads as memory_connected.
func TestOldStateNeo4jConnectedLoadsAsMemoryConnected(t *testing.T) {
	ws := newBenchWorkspace(t)
	if err := os.MkdirAll(ws.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	old := `{"schema_version": 1, "run_id": "r1", "machine": {"state": "STORY_SELECT"}, "neo4j_connected": true, "memory_store": "sqlite", "metrics": {}}`
	if err := os.WriteFile(HomeOf(ws).StatePath(), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := HomeOf(ws).Load()
	if err != nil {
		t.Fatal(err)
	}
	if !st.MemoryConnected || st.Neo4jConnected {
		t.Errorf("memory_connected=%v neo4j_connected=%v, want true and false: the store is SQLite", st.MemoryConnected, st.Neo4jConnected)
	}
}

// A person's pause is a wait, not time in the state the run was held
// in: status showed a pause as TEST time.
func TestPauseCountsAsWaitingNotAsState(t *testing.T) {
	ws := newBenchWorkspace(t)
	if err := os.MkdirAll(ws.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	f := control.Folder{Dir: t.TempDir()}
	att, err := f.Attach(control.Run{Run: "r1", Machine: "build", Takes: buildTakes})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Detach()
	if err := f.SetPause(control.New(control.Pause, control.ByCLI, time.Now())); err != nil {
		t.Fatal(err)
	}
	// The run's clock is the test's: the pause lasts exactly held, by
	// the clock the run books time with, however slowly the machine runs.
	const held = 400 * time.Millisecond
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	evs := &events{}
	b := &builder{run: &run{ws: ws, home: HomeOf(ws), id: "r1", log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		em: report.NewEmitter(MachineName, "r1", 0, nil, evs), opts: Options{Control: att, Now: clock}}, board: &tasks.Board{}}
	b.st = &LoopState{
		SchemaVersion: StateSchemaVersion, RunID: "r1",
		Machine:   Machine{State: StateTest, Iteration: 1, TaskID: "US-001"},
		EnteredAt: now.Add(-50 * time.Millisecond),
		Tasks:     map[string]*TaskRecord{}, Feedback: map[string]string{},
		Metrics: Metrics{StateMillis: map[State]int64{}},
	}
	go func() {
		if !wait.Within(wait.Long, func() bool { return len(evs.of(report.KindWait)) > 0 }) {
			t.Error("the run never said it was paused")
		}
		mu.Lock()
		now = now.Add(held)
		mu.Unlock()
		f.ClearPause()
	}()
	if err := b.steer(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.transition(Event{Trigger: TrigTestsPassed}); err != nil {
		t.Fatal(err)
	}
	m := b.st.Metrics
	if got := m.StateMillis[StateTest]; got != 50 {
		t.Errorf("TEST = %dms, want the 50ms before the pause: the %s pause is not testing", got, held)
	}
	if got := m.WaitMillis[WaitPause]; got != held.Milliseconds() {
		t.Errorf("paused = %dms, want %s", got, held)
	}
	st, err := HomeOf(ws).Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Metrics.WaitMillis[WaitPause] != m.WaitMillis[WaitPause] {
		t.Errorf("saved waits = %v, want %v", st.Metrics.WaitMillis, m.WaitMillis)
	}
}
