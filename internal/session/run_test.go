package session_test

// Runner tests: a real git repository, a session made by session.Create,
// and a fake Invoker that answers each role run from a script. Sleep is
// recorded, never slept, and the clock only moves when ralph sleeps.

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/tasks"
)

const (
	greetRequest = "Greet in a text file"
	exec1        = "Execute task-1, attempt 1 of 3"
	exec2        = "Execute task-1, attempt 2 of 3"
	review1      = "Review task-1, attempt 1"
	review2      = "Review task-1, attempt 2"
)

// finishTask1 scripts the rest of a one-task session from the executor's
// first attempt: the executor writes greet.txt, the reviewer qualifies it
// and the goal check passes.
func finishTask1(t *testing.T, e *sessionEnv, inv *fakeInvoker) {
	inv.on(role.Executor, exec1, 1, writes(t, e.ws.Root, "greet.txt", "hello\n", executorDone))
	inv.on(role.Reviewer, review1, 1, says(reviewerOK))
	inv.on(role.GoalCheck, "", 1, says(goalPassed))
}

// wantDone checks what a user sees after a one-task session succeeded:
// Run's nil error, progress.md at Complete with Done, task-1 [x] in both
// files with ralph's one commit of it recorded, and a clean work tree.
func wantDone(t *testing.T, e *sessionEnv, p session.Progress, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !p.State.Done {
		t.Errorf("Run returned progress at %s, not done", p.State.Current)
	}
	saved := e.progress(t)
	if saved.State.Current != session.Complete || !saved.State.Done {
		t.Errorf("progress.md is at %s (done %v), want Complete and done", saved.State.Current, saved.State.Done)
	}
	if m := e.mark(t, "task-1"); m != tasks.MarkDone {
		t.Errorf("tasks.md marks task-1 %q, want [x]", m)
	}
	commits := e.commitsOf(t, "task-1")
	if len(commits) != 1 {
		t.Fatalf("git log has %d commits of task-1, want 1", len(commits))
	}
	if rec := record(t, saved, "task-1"); rec.Mark != tasks.MarkDone || rec.Commit != commits[0][:12] {
		t.Errorf("progress.md records task-1 as %+v; want [x] with commit %s", rec, commits[0][:12])
	}
	if st := git(t, e.ws.Root, "status", "--porcelain"); st != "" {
		t.Errorf("work tree not clean after the session:\n%s", st)
	}
	if got := readTestFile(t, filepath.Join(e.ws.Root, "greet.txt")); got != "hello\n" {
		t.Errorf("greet.txt = %q", got)
	}
}

func TestRunWholeSession(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	finishTask1(t, e, inv)
	p, err := e.runner(t, inv).Run(context.Background())
	wantDone(t, e, p, err)
	inv.allUsed()
	if got, want := inv.roles(), []string{role.Planner, role.Executor, role.Reviewer, role.GoalCheck}; !slices.Equal(got, want) {
		t.Errorf("role runs %v, want %v", got, want)
	}
	if s := e.clock.slept(); len(s) != 0 {
		t.Errorf("a session without failures slept %v", s)
	}
	msg := git(t, e.ws.Root, "log", "-1", "--format=%B")
	for _, want := range []string{"task-1: Write greet.txt", "Ralph-Session: " + testSessionID, "Ralph-Task: task-1", "Ralph-Attempt: 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ralph's commit message lacks %q:\n%s", want, msg)
		}
	}
}

// A usage limit that resets within MaxLimitWait is sat out in place and the
// same role run is made again.
func TestRunWaitsOutShortUsageLimit(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
		return "", &session.LimitError{Agent: "fake", ResetsAt: e.clock.Now().Add(2 * time.Minute), Message: "5-hour limit reached"}
	})
	finishTask1(t, e, inv)
	p, err := e.runner(t, inv).Run(context.Background())
	wantDone(t, e, p, err)
	inv.allUsed()
	slept := e.clock.slept()
	if len(slept) != 1 || slept[0] < 119*time.Second || slept[0] > 2*time.Minute {
		t.Errorf("slept %v, want one wait of about 2m until the limit resets", slept)
	}
	if n := inv.count(role.Executor, exec1); n != 2 {
		t.Errorf("executor ran %d times, want 2 (before and after the limit)", n)
	}
	if rec := record(t, e.progress(t), "task-1"); rec.Failures != 0 {
		t.Errorf("a usage limit counted as a failed attempt: task-1 has %d failures", rec.Failures)
	}
}

// A usage limit too long to wait for, or of unknown reset, stops Run with
// the session saved where it was; a resume continues there.
func TestRunStopsAtLongUsageLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reset time.Duration // 0: unknown
	}{
		{"one hour", time.Hour},
		{"unknown reset", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSessionEnv(t, greetRequest)
			inv := newInvoker(t)
			inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
			inv.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
				le := &session.LimitError{Agent: "fake", Message: "weekly limit reached"}
				if tc.reset > 0 {
					le.ResetsAt = e.clock.Now().Add(tc.reset)
				}
				return "", le
			})
			_, err := e.runner(t, inv).Run(context.Background())
			inv.allUsed()
			if err == nil {
				t.Fatal("Run returned nil at a long usage limit")
			}
			if !strings.Contains(err.Error(), "ralph run --resume") {
				t.Errorf("error %q does not say to resume with ralph run --resume", err)
			}
			var le *session.LimitError
			if !errors.As(err, &le) {
				t.Errorf("error %q does not wrap the *LimitError", err)
			}
			if errors.Is(err, session.ErrFailed) || errors.Is(err, loop.ErrInterrupted) {
				t.Errorf("error %q says failed or interrupted; the session is only paused", err)
			}
			if s := e.clock.slept(); len(s) != 0 {
				t.Errorf("slept %v at a limit longer than MaxLimitWait", s)
			}
			p := e.progress(t)
			wantStopped(t, p, session.Executing, "task-1", 1)
			if rec := record(t, p, "task-1"); rec.Mark != tasks.MarkTodo || rec.Failures != 0 {
				t.Errorf("task-1 is %+v after the limit; want [ ] with no failures", rec)
			}
			if tc.reset > 0 {
				// Past the reset, which the shared cooldowns record.
				e.clock.now = e.clock.now.Add(tc.reset)
			}

			// The resume continues at the executor: no second plan.
			inv2 := newInvoker(t)
			finishTask1(t, e, inv2)
			p, err = e.runner(t, inv2).Run(context.Background())
			wantDone(t, e, p, err)
			inv2.allUsed()
			if n := inv2.count(role.Planner, ""); n != 0 {
				t.Errorf("the resume ran the planner %d times", n)
			}
		})
	}
}

// Failed runs are retried with exponential backoff, progress.md unchanged;
// when the retries run out Run stops, naming the role and how to resume,
// and progress.md says the session stopped where it was.
func TestRunRetriesFailedRunsWithBackoff(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	crash := errors.New("agent exited with status 1")
	var before, after string
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
		before = e.progressText(t)
		return "", crash
	})
	inv.on(role.Executor, exec1, 2, fails(crash))
	inv.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
		after = e.progressText(t)
		return "", crash
	})
	_, err := e.runner(t, inv).Run(context.Background())
	inv.allUsed()
	if err == nil {
		t.Fatal("Run returned nil after the executor failed every retry")
	}
	for _, want := range []string{"executor", "resume"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !errors.Is(err, crash) {
		t.Errorf("error %q does not wrap the last failure", err)
	}
	if errors.Is(err, session.ErrFailed) {
		t.Errorf("error %q says the session failed; it is only stopped", err)
	}
	if got, want := e.clock.slept(), []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("slept %v, want %v", got, want)
	}
	if after != before {
		t.Errorf("progress.md changed while retrying:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	p := e.progress(t)
	wantStopped(t, p, session.Executing, "task-1", 1)
	if rec := record(t, p, "task-1"); rec.Failures != 0 {
		t.Errorf("failed runs counted as failed attempts: task-1 has %d failures", rec.Failures)
	}
}

// A run that fails and then succeeds within the retries goes on as if
// nothing happened.
func TestRunRecoversAfterFailedRun(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 2, fails(errors.New("network unreachable")))
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	finishTask1(t, e, inv)
	p, err := e.runner(t, inv).Run(context.Background())
	wantDone(t, e, p, err)
	inv.allUsed()
	if got, want := e.clock.slept(), []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("slept %v, want %v", got, want)
	}
}

// A crash after ralph's commit of a qualified task but before progress.md
// recorded it: the resume finds the commit's trailers, does not review the
// task again and does not commit it twice.
// interruptedAtReview runs a one-task session whose executor wrote
// greet.txt and stops it (as a kill would) when the reviewer starts.
func interruptedAtReview(t *testing.T) *sessionEnv {
	t.Helper()
	e := newSessionEnv(t, greetRequest)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, writes(t, e.ws.Root, "greet.txt", "hello\n", executorDone))
	inv.on(role.Reviewer, review1, 1, func(ctx context.Context, _ session.Call) (string, error) {
		cancel()
		return "", ctx.Err()
	})
	_, err := e.runner(t, inv).Run(ctx)
	inv.allUsed()
	if !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("Run = %v, want loop.ErrInterrupted", err)
	}
	return e
}

func TestRunResumeRecognisesCommitBeforeCrash(t *testing.T) {
	e := interruptedAtReview(t)
	wantStopped(t, e.progress(t), session.Reviewing, "task-1", 1)
	if m := e.mark(t, "task-1"); m != tasks.MarkInReview {
		t.Fatalf("tasks.md marks task-1 %q in review, want [P]", m)
	}

	// ralph's commit, made just before the crash: progress.md holds the
	// token it carries.
	text := e.progressText(t)
	if !strings.Contains(text, "- Commit token: -\n") {
		t.Fatalf("progress.md has no empty commit token line:\n%s", text)
	}
	writeTestFile(t, session.ProgressPath(e.dir), strings.Replace(text, "- Commit token: -\n", "- Commit token: 0123456789abcdef01234567\n", 1))
	git(t, e.ws.Root, "add", "-A")
	git(t, e.ws.Root, "commit", "-q", "-m", "task-1: Write greet.txt\n\nRalph-Session: "+testSessionID+"\nRalph-Task: task-1\nRalph-Attempt: 1\nRalph-Commit: 0123456789abcdef01234567\n")
	head := strings.TrimSpace(git(t, e.ws.Root, "rev-parse", "HEAD"))

	inv2 := newInvoker(t)
	inv2.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err := e.runner(t, inv2).Run(context.Background())
	wantDone(t, e, p, err)
	inv2.allUsed()
	if n := inv2.count(role.Reviewer, ""); n != 0 {
		t.Errorf("the reviewer ran %d times on resume; the commit already says task-1 qualified", n)
	}
	if rec := record(t, e.progress(t), "task-1"); rec.Commit != head[:12] {
		t.Errorf("progress.md records task-1's commit %q, want %q", rec.Commit, head[:12])
	}
}

// A commit of another attempt is not taken for this one's.
func TestRunResumeIgnoresCommitOfOtherAttempt(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, writes(t, e.ws.Root, "greet.txt", "hello\n", executorDone))
	inv.on(role.Reviewer, review1, 1, func(ctx context.Context, _ session.Call) (string, error) {
		cancel()
		return "", ctx.Err()
	})
	if _, err := e.runner(t, inv).Run(ctx); !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("Run = %v, want loop.ErrInterrupted", err)
	}
	// A person's commit that happens to mention attempt 10.
	writeTestFile(t, filepath.Join(e.ws.Root, "notes.txt"), "notes\n")
	git(t, e.ws.Root, "add", "notes.txt")
	git(t, e.ws.Root, "commit", "-q", "-m", "notes\n\nRalph-Session: "+testSessionID+"\nRalph-Task: task-1\nRalph-Attempt: 10\n")

	inv2 := newInvoker(t)
	inv2.on(role.Reviewer, review1, 1, says(reviewerOK))
	inv2.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err := e.runner(t, inv2).Run(context.Background())
	inv2.allUsed()
	if err != nil || !p.State.Done {
		t.Fatalf("Run = %v, done %v", err, p.State.Done)
	}
	msg := git(t, e.ws.Root, "log", "-1", "--format=%B")
	if !strings.Contains(msg, "Ralph-Attempt: 1\n") || !strings.HasPrefix(msg, "task-1: ") {
		t.Errorf("ralph did not commit task-1 itself; last commit:\n%s", msg)
	}
}

// An interrupt during the executor's run leaves progress.md stopped in
// Executing with the task and attempt; the resume re-runs that executor,
// not the planner.
func TestRunInterruptedDuringExecutorResumes(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
		writeTestFile(t, filepath.Join(e.ws.Root, "greet.txt"), "hel") // half done
		cancel()
		return "", errors.New("agent killed: signal: interrupt")
	})
	_, err := e.runner(t, inv).Run(ctx)
	inv.allUsed()
	if !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("Run = %v, want loop.ErrInterrupted", err)
	}
	if s := e.clock.slept(); len(s) != 0 {
		t.Errorf("an interrupted run was retried: slept %v", s)
	}
	text := e.progressText(t)
	for _, want := range []string{"- State: Stopped\n- Stopped in: Executing\n", "- Current task: task-1\n", "- Attempt: 1\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("progress.md lacks %q:\n%s", want, text)
		}
	}
	p := e.progress(t)
	wantStopped(t, p, session.Executing, "task-1", 1)
	if rec := record(t, p, "task-1"); rec.Failures != 0 || rec.Mark != tasks.MarkTodo {
		t.Errorf("task-1 is %+v after the interrupt; want [ ] and no failures", rec)
	}

	inv2 := newInvoker(t)
	finishTask1(t, e, inv2)
	p, err = e.runner(t, inv2).Run(context.Background())
	wantDone(t, e, p, err)
	inv2.allUsed()
	if got, want := inv2.roles(), []string{role.Executor, role.Reviewer, role.GoalCheck}; !slices.Equal(got, want) {
		t.Errorf("the resume ran %v, want %v", got, want)
	}
}

// A planner that keeps completing without tasks is re-run
// MaxPlanningRetries times; then the session fails.
func TestRunFailsAfterPlanningRetries(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "", 3, says(plannerNoTasks))
	p, err := e.runner(t, inv).Run(context.Background())
	inv.allUsed()
	if !errors.Is(err, session.ErrFailed) {
		t.Fatalf("Run = %v, want an error wrapping ErrFailed", err)
	}
	if p.State.Current != session.Failed || !strings.Contains(p.State.Reason, "planning retries") {
		t.Errorf("Run returned %s with reason %q; want Failed, mentioning planning retries", p.State.Current, p.State.Reason)
	}
	saved := e.progress(t)
	if saved.State.Current != session.Failed || saved.State.PlanningRetries != session.DefaultMaxPlanningRetries ||
		!strings.Contains(saved.State.Reason, "planning retries") {
		t.Errorf("progress.md is at %s, %d planning retries, reason %q; want Failed, %d, planning retries",
			saved.State.Current, saved.State.PlanningRetries, saved.State.Reason, session.DefaultMaxPlanningRetries)
	}
	if !strings.Contains(err.Error(), saved.State.Reason) {
		t.Errorf("error %q does not carry the reason %q", err, saved.State.Reason)
	}

	// A failed session stays failed: Run again runs nothing.
	inv2 := newInvoker(t)
	if _, err := e.runner(t, inv2).Run(context.Background()); !errors.Is(err, session.ErrFailed) {
		t.Errorf("Run of a failed session = %v, want ErrFailed", err)
	}
	if n := len(inv2.roles()); n != 0 {
		t.Errorf("Run of a failed session ran %d roles", n)
	}
}

// A reviewer whose reply stays malformed after being asked again counts as
// a failed attempt: the task goes back to [ ] and the executor tries again.
func TestRunInvalidReviewerVerdictFailsAttempt(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, writes(t, e.ws.Root, "greet.txt", "hi\n", executorDone))
	inv.on(role.Reviewer, review1, 2, says(malformed))
	inv.on(role.Executor, exec2, 1, func(context.Context, session.Call) (string, error) {
		// What ralph recorded before starting attempt 2.
		p := e.progress(t)
		wantState(t, p, session.Executing, "task-1", 2)
		if rec := record(t, p, "task-1"); rec.Mark != tasks.MarkTodo || rec.Failures != 1 {
			t.Errorf("progress.md records task-1 as %+v; want [ ] with 1 failure", rec)
		}
		if m := e.mark(t, "task-1"); m != tasks.MarkTodo {
			t.Errorf("tasks.md marks task-1 %q, want [ ]", m)
		}
		writeTestFile(t, filepath.Join(e.ws.Root, "greet.txt"), "hello\n")
		return executorDone, nil
	})
	inv.on(role.Reviewer, review2, 1, says(reviewerOK))
	inv.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err := e.runner(t, inv).Run(context.Background())
	wantDone(t, e, p, err)
	inv.allUsed()

	reviews := inv.prompts(role.Reviewer)
	if len(reviews) != 3 || !strings.Contains(reviews[1], role.ReaskLine) {
		t.Errorf("the reviewer was not asked again for its verdict: %d reviewer runs", len(reviews))
	}
	execs := inv.prompts(role.Executor)
	if len(execs) != 2 || !strings.Contains(execs[1], "Execute task-1, attempt 2") {
		t.Fatalf("executor prompts: %d, the second lacks %q", len(execs), "Execute task-1, attempt 2")
	}
	if !strings.Contains(execs[1], "no valid verdict") {
		t.Errorf("attempt 2's prompt does not tell the executor the review gave no verdict:\n%s", execs[1])
	}
	if rec := record(t, e.progress(t), "task-1"); rec.Failures != 1 || rec.Reworks != 0 {
		t.Errorf("task-1 ends with %d failures and %d reworks; want 1 and 0 (no Failed verdict was given)", rec.Failures, rec.Reworks)
	}
	if msg := git(t, e.ws.Root, "log", "-1", "--format=%B"); !strings.Contains(msg, "Ralph-Attempt: 2\n") {
		t.Errorf("ralph's commit is not of attempt 2:\n%s", msg)
	}
}

// A limit whose reset time has already passed still waits a minute, and an
// agent that keeps reporting limits stops the session instead of being
// asked again and again.
func TestRunStaleAndEndlessUsageLimitsAreBounded(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 6, func(context.Context, session.Call) (string, error) {
		return "", &session.LimitError{Agent: "fake", ResetsAt: e.clock.Now().Add(-time.Minute), Message: "limit (stale)"}
	})
	_, err := e.runner(t, inv).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "usage limits in a row") || !strings.Contains(err.Error(), "ralph run --resume") {
		t.Fatalf("Run = %v, want it to stop after repeated limits and say how to resume", err)
	}
	slept := e.clock.slept()
	if len(slept) != 5 {
		t.Fatalf("waited %d times (%v), want 5", len(slept), slept)
	}
	for _, d := range slept {
		if d < time.Minute {
			t.Fatalf("a stale reset time waited %v, want at least a minute", d)
		}
	}
	if n := inv.count(role.Planner, "Mode: INITIALIZE"); n != 6 {
		t.Errorf("planner asked %d times, want 6 (one plus five after waits)", n)
	}
}

// Roles that keep discovering work cannot grow a session without end:
// tasks past MaxTasks are not added, and the planner is told which.
func TestRunCapsTheTaskList(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says("```json\n"+`{"status": "completed", "tasks": [{"title": "Write greet.txt"}, {"title": "Two"}, {"title": "Three"}]}`+"\n```"))
	r := e.runner(t, inv)
	r.MaxTasks = 2
	// The executor of task-1 is interrupted so that the test can look at
	// the session right after planning.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
		cancel()
		return "", context.Canceled
	})
	if _, err := r.Run(ctx); !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("Run = %v, want interrupted", err)
	}
	p := e.progress(t)
	if len(p.Tasks) != 2 {
		t.Fatalf("%d tasks after planning, want 2 (the cap)", len(p.Tasks))
	}
	if log := readTestFile(t, e.ws.ErrorsLogPath()); !strings.Contains(log, "at most 2 tasks ([session] max_tasks); not added: Three") {
		t.Errorf("errors.log does not say which task was left out:\n%s", log)
	}
}

// [budget] bounds what a session spends across resumes: a token budget
// used up stops Run before the next role run, with the session saved.
func TestRunStopsAtTheTokenBudget(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, func(_ context.Context, c session.Call) (string, error) {
		c.OnUsage(1500, 0.02)
		return plannerOneTask, nil
	})
	r := e.runner(t, inv)
	r.Budget.MaxTokens = 1000
	_, err := r.Run(context.Background())
	var be *session.BudgetError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "max_tokens (1500 of 1000 tokens used)") || !strings.Contains(err.Error(), "ralph run --resume") {
		t.Fatalf("Run = %v, want a BudgetError naming max_tokens and how to resume", err)
	}
	p := e.progress(t)
	if p.Tokens != 1500 || p.CostUSD != 0.02 {
		t.Errorf("progress.md spent %d tokens, $%.2f; want 1500 and $0.02 (kept for the resume)", p.Tokens, p.CostUSD)
	}
	if p.State.Resumes() != session.Executing {
		t.Errorf("stopped at %s, want Executing (the executor was not run)", p.State.Resumes())
	}
	inv.allUsed()
	// Raised, the budget lets the resumed session go on from there.
	finishTask1(t, e, inv)
	r = e.runner(t, inv)
	r.Budget.MaxTokens = 10_000
	p, err = r.Run(context.Background())
	wantDone(t, e, p, err)
}

// An executor that commits its work with the trailers of ralph's commit
// (session, task, attempt: all in its prompt) is not taken for ralph: on
// resume the reviewer still judges the task.
func TestRunResumeDoesNotTakeAForgedCommitForRalphs(t *testing.T) {
	e := interruptedAtReview(t)
	git(t, e.ws.Root, "add", "-A")
	git(t, e.ws.Root, "commit", "-q", "-m", "task-1: Write greet.txt\n\nRalph-Session: "+testSessionID+"\nRalph-Task: task-1\nRalph-Attempt: 1\n")

	inv2 := newInvoker(t)
	inv2.on(role.Reviewer, review1, 1, says(reviewerOK))
	inv2.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err := e.runner(t, inv2).Run(context.Background())
	wantDone(t, e, p, err)
	inv2.allUsed()
}

// An agent that cannot run at all (not logged in) stops the session at
// once: no retry, no failed attempt, the session saved where it was; once
// the agent works, a resume finishes it.
func TestRunStopsAtOnceWhenTheAgentCannotRun(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	login := &agent.EnvError{Agent: "claude", Kind: agent.EnvAuth, Detail: "Failed to authenticate. API Error: 403", Hint: "Log in: run `claude login`"}
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, fails(login))
	_, err := e.runner(t, inv).Run(context.Background())
	inv.allUsed()
	var envErr *agent.EnvError
	if !errors.As(err, &envErr) || !strings.Contains(err.Error(), "claude login") || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("Run error = %v, want the agent's environment failure with what to do", err)
	}
	if got := e.clock.slept(); len(got) != 0 {
		t.Errorf("slept %v: an agent that cannot run was retried", got)
	}
	p := e.progress(t)
	wantStopped(t, p, session.Executing, "task-1", 1)
	if rec := record(t, p, "task-1"); rec.Failures != 0 {
		t.Errorf("task-1 has %d failures; an agent that cannot run must not count", rec.Failures)
	}

	inv = newInvoker(t)
	finishTask1(t, e, inv)
	p, err = e.runner(t, inv).Run(context.Background())
	wantDone(t, e, p, err)
}

// The token that tags the agent's processes is on disk before the agent
// starts, so that a crash before OnStart still leaves what finds it.
func TestRunRecordsTheAgentTokenBeforeItStarts(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	var recorded, token string
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, func(_ context.Context, c session.Call) (string, error) {
		recorded, token = readTestFile(t, filepath.Join(e.dir, "agent.pgid")), c.Token
		return plannerOneTask, nil
	})
	finishTask1(t, e, inv)
	p, err := e.runner(t, inv).Run(context.Background())
	wantDone(t, e, p, err)
	if len(token) < 16 || recorded != "0 "+token+" 0\n" {
		t.Errorf("before the agent started, agent.pgid held %q; want the call's token %q", recorded, token)
	}
}

// eventLog collects what a runner emits.
type eventLog struct{ evs []report.Event }

func (l *eventLog) Emit(ev report.Event) { l.evs = append(l.evs, ev) }

// The runner tells its caller everything as events of machine "session"
// whose run is the session id: each transition carries from, to, trigger,
// task and attempt for programs, and its Text is the line a person reads.
func TestRunEmitsEventsNotText(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	finishTask1(t, e, inv)
	r := e.runner(t, inv)
	var log eventLog
	r.Events = report.NewEmitter(session.MachineName, testSessionID, 0, e.clock.Now, &log)
	p, err := r.Run(context.Background())
	wantDone(t, e, p, err)
	var sel *report.Event
	for i, ev := range log.evs {
		if ev.Machine != "session" || ev.Run != testSessionID || ev.Seq != int64(i+1) {
			t.Errorf("event %d is machine %q run %q seq %d; want session, %s, %d", i, ev.Machine, ev.Run, ev.Seq, testSessionID, i+1)
		}
		if ev.Kind == report.KindTransition && ev.Trigger == string(session.TaskSelected) {
			sel = &log.evs[i]
		}
	}
	if sel == nil {
		t.Fatalf("no task_selected transition among the events: %+v", log.evs)
	}
	if sel.From != "Executing" || sel.To != "Executing" || sel.Task != "task-1" || sel.Attempt != 1 || sel.Data.(report.Transition).Detail != "Write greet.txt" {
		t.Errorf("task_selected event = %+v; want Executing → Executing for task-1, attempt 1, detail Write greet.txt", *sel)
	}
	if want := "session " + testSessionID + ": Executing → Executing (task_selected, task-1: Write greet.txt)\n"; sel.Text != want {
		t.Errorf("task_selected text = %q, want the terminal's line %q", sel.Text, want)
	}
	last := log.evs[len(log.evs)-1]
	if last.Kind != report.KindSummary || !strings.HasPrefix(last.Text, "✓ session "+testSessionID+" complete: 1 task done") {
		t.Errorf("last event = %s %q; want the summary that the session is complete", last.Kind, last.Text)
	}
}
