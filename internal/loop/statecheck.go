package loop

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/ralphloop/ralph/internal/store"
)

// validate checks that a state read from state.json is one this ralph can
// have written: a run, a machine state it knows, task ids and counters that
// make sense. Resuming from anything else would act on nonsense (a null
// file starting over and forgetting every blocker, an unknown state failing
// only after files were written), so LoadState refuses it before a command
// writes anything.
func (st *LoopState) validate() error {
	if st.RunID == "" {
		return errors.New("it holds no run (null, {} or a run without run_id)")
	}
	// The run id names the run's folder and goes into every commit's
	// trailers: one edited into a path would put both elsewhere.
	if err := store.CheckID("run_id", st.RunID); err != nil {
		return err
	}
	if a := st.Attempt; a != nil && a.Own != "" {
		if err := store.CheckID("attempt.own_files", a.Own); err != nil {
			return err
		}
	}
	m := st.Machine
	if !slices.Contains(States, m.State) {
		names := make([]string, len(States))
		for i, s := range States {
			names[i] = string(s)
		}
		return fmt.Errorf("machine.state %q is not a state of the loop (%s)", m.State, strings.Join(names, ", "))
	}
	if m.State == StateStopped && (m.StoppedIn == "" || m.StoppedIn.Ends() || !slices.Contains(States, m.StoppedIn)) {
		return fmt.Errorf("machine.state is STOPPED but machine.stopped_in %q is not a state a run can resume in", m.StoppedIn)
	}
	switch m.Resumes() {
	case StateImplement, StateTest, StateValidate, StateCommit:
		if m.TaskID == "" {
			return fmt.Errorf("machine.state is %s but machine.task_id is empty: %s works on one task", m.Resumes(), m.Resumes())
		}
	}
	if m.TaskID != "" {
		if err := checkTaskID(m.TaskID); err != nil {
			return fmt.Errorf("machine.task_id: %w", err)
		}
	}
	counters := []struct {
		name string
		n    int64
	}{
		{"machine.retry_count", int64(m.RetryCount)},
		{"machine.max_retries", int64(m.MaxRetries)},
		{"machine.iteration", int64(m.Iteration)},
		{"max_iterations", int64(st.MaxIterations)},
		{"metrics.task_successes", int64(st.Metrics.TaskSuccesses)},
		{"metrics.task_failures", int64(st.Metrics.TaskFailures)},
		{"metrics.rework_count", int64(st.Metrics.Reworks)},
		{"metrics.blocked", int64(st.Metrics.Blocked)},
		{"metrics.iterations", int64(st.Metrics.Iterations)},
		{"metrics.total_duration_ms", st.Metrics.TotalMillis},
		{"metrics.agent_ms", st.Metrics.AgentMillis},
		{"breaker.no_progress", int64(st.Breaker.NoProgress)},
		{"breaker.same_error", int64(st.Breaker.SameError)},
		{"breaker.permission_denials", int64(st.Breaker.Denials)},
		{"breaker.times_opened", int64(st.Breaker.Opened)},
	}
	if a := st.Attempt; a != nil {
		if err := checkTaskID(a.TaskID); err != nil {
			return fmt.Errorf("attempt.task_id: %w", err)
		}
		counters = append(counters, struct {
			name string
			n    int64
		}{"attempt.iteration", int64(a.Iteration)})
	}
	ids := make([]string, 0, len(st.Tasks))
	for id := range st.Tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := checkTaskID(id); err != nil {
			return fmt.Errorf("tasks: %w", err)
		}
		t := st.Tasks[id]
		if t == nil {
			return fmt.Errorf("tasks.%s is null", id)
		}
		counters = append(counters, []struct {
			name string
			n    int64
		}{
			{"tasks." + id + ".retry_count", int64(t.RetryCount)},
			{"tasks." + id + ".successes", int64(t.Successes)},
			{"tasks." + id + ".failures", int64(t.Failures)},
		}...)
		if t.Blocker != nil {
			counters = append(counters, struct {
				name string
				n    int64
			}{"tasks." + id + ".blocker.iteration", int64(t.Blocker.Iteration)})
		}
	}
	for _, c := range counters {
		if c.n < 0 {
			return fmt.Errorf("%s is %d; counts are never negative", c.name, c.n)
		}
	}
	if st.Metrics.CostUSD < 0 {
		return fmt.Errorf("metrics.cost_usd_estimate is %v; costs are never negative", st.Metrics.CostUSD)
	}
	switch st.Breaker.State {
	case "", BreakerClosed, BreakerHalfOpen, BreakerOpen:
	default:
		return fmt.Errorf("breaker.state %q is not %s, %s or %s", st.Breaker.State, BreakerClosed, BreakerHalfOpen, BreakerOpen)
	}
	return nil
}

// checkTaskID refuses an id no task source produces: an empty one (a
// blocker of no task could never be cleared) or one with control
// characters, which would break the lines ralph writes it into.
func checkTaskID(id string) error {
	if id == "" {
		return errors.New("a task id is empty")
	}
	if strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("task id %q holds control characters", id)
	}
	return nil
}
