package session_test

// The paths a user meets when something goes wrong around a session: an
// agent that edits the files ralph owns, a progress.md or tasks.md broken
// by hand or by an agent, a pause or a stop from another terminal, an
// agent a kill of ralph left running, an executor that bends the checks
// instead of the code. Each test drives Run as the CLI does and asserts
// what a person sees: the lines, the files, the error's advice.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/control"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/session"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// sinkFunc is a sink that calls f with each event as it is emitted.
type sinkFunc func(report.Event)

func (f sinkFunc) Emit(ev report.Event) { f(ev) }

// textOf is everything the events told a person, in order.
func textOf(evs []report.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.Text)
	}
	return b.String()
}

// runWith runs the session once with r, recording its events, and
// returns what Run returned and the events.
func runWith(t *testing.T, e *sessionEnv, r *session.Runner, ctx context.Context, also ...report.Sink) (session.Progress, error, []report.Event) {
	t.Helper()
	var log eventLog
	sinks := append([]report.Sink{report.Text{W: testWriter{t}}, &log}, also...)
	r.Events = report.NewEmitter(session.MachineName, testSessionID, 0, e.clock.Now, sinks...)
	p, err := r.Run(ctx)
	return p, err, log.evs
}

// An executor that makes ralph's check pass by rewriting the check script
// gets no review out of it: ralph runs the checks again with the start's
// script put back, fails the attempt saying so, and the next attempt is
// told why. The executor's own script is back in the work tree after the
// rerun, and the attempt that fixes the code is committed.
func TestCoverStartTestsPutBackForAReview(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	root := e.ws.Root
	writeTestFile(t, filepath.Join(root, "check.sh"), "grep -qx hello greet.txt\n")
	git(t, root, "add", "check.sh")
	git(t, root, "commit", "-q", "-m", "a check")
	bent := "exit 0 # the executor's\n"

	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	inv.on(role.Executor, exec1, 1, func(ctx context.Context, c session.Call) (string, error) {
		writeTestFile(t, filepath.Join(root, "greet.txt"), "hi\n")
		writeTestFile(t, filepath.Join(root, "check.sh"), bent)
		return executorDone, nil
	})
	inv.on(role.Executor, exec2, 1, writes(t, root, "greet.txt", "hello\n", executorDone))
	inv.on(role.Reviewer, review2, 1, says(reviewerOK))
	inv.on(role.GoalCheck, "", 1, says(goalPassed))

	r := e.runner(t, inv)
	r.Checks = []check.Check{{Name: "files", Run: "sh check.sh"}}
	p, err, evs := runWith(t, e, r, context.Background())
	wantDone(t, e, p, err)
	inv.allUsed()

	out := textOf(evs)
	if !strings.Contains(out, "ralph: the task changed check.sh; running the checks again with the start's versions against the new code") {
		t.Errorf("no line says the checks run again with the start's check.sh:\n%s", out)
	}
	why := `with the start's version of check.sh put back, ralph's check "files" fails (exit 1): changing the tests or the checks instead of the code does not count`
	var failed []string
	for _, ev := range evs {
		if ev.Kind == report.KindTransition && detailOf(ev) == "Failed: "+why {
			failed = append(failed, ev.From+" -> "+ev.To)
		}
	}
	if len(failed) != 1 || failed[0] != "Reviewing -> Executing" {
		t.Errorf("the transitions saying why the review failed: %q, want one back to Executing:\n%s", failed, out)
	}
	if prompts := inv.prompts(role.Executor); len(prompts) != 2 || !strings.Contains(prompts[1], why) {
		t.Errorf("the second attempt was not told why the first failed")
	}
	if report := readTestFile(t, filepath.Join(e.dir, "reports", "task-1.md")); !strings.Contains(report, "Review (Failed by ralph's checks with the start's tests)") {
		t.Errorf("task-1's report does not record the failed rerun:\n%s", report)
	}
	// The executor's script stood aside only for the rerun: its version is
	// what the work tree and ralph's commit hold, and no copy is left over.
	if got := readTestFile(t, filepath.Join(root, "check.sh")); got != bent {
		t.Errorf("check.sh after the session = %q, want the executor's %q", got, bent)
	}
	if got := git(t, root, "show", "HEAD:check.sh"); got != bent {
		t.Errorf("ralph's commit holds check.sh %q, want the executor's", got)
	}
	if got := git(t, root, "status", "--porcelain"); got != "" {
		t.Errorf("the work tree is not clean after the session:\n%s", got)
	}
}

// ralph owns the marks of tasks.md: a mark an agent wrote is put back and
// said so, and a task an agent added to the file is adopted and worked.
func TestCoverAgentEditsToTasksMD(t *testing.T) {
	g := newRig(t)
	root, tasksMD := g.e.ws.Root, filepath.Join(g.e.dir, "tasks.md")
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	g.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
		writeTestFile(t, filepath.Join(root, "greet.txt"), "hello\n")
		data := readTestFile(t, tasksMD)
		data = regexp.MustCompile(`- \[.\] task-1:`).ReplaceAllString(data, "- [x] task-1:")
		writeTestFile(t, tasksMD, data+"- [ ] task-2: Write bye.txt\n")
		return executorDone, nil
	})
	g.on(role.Reviewer, review1, 1, says(reviewerOK))
	g.on(role.Executor, "Execute task-2, attempt 1", 1, writes(t, root, "bye.txt", "bye\n", executorDone))
	g.on(role.Reviewer, "Review task-2, attempt 1", 1, says(reviewerOK))
	g.on(role.GoalCheck, "", 1, says(goalPassed))
	p, err, _, _ := g.run()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	g.inv.allUsed()
	out := textOf(g.events)
	if !strings.Contains(out, "ralph: task-1 is [ ] in ralph's records; putting back the [x] an agent wrote") {
		t.Errorf("no line says the agent's mark was put back:\n%s", out)
	}
	for _, id := range []string{"task-1", "task-2"} {
		if m := g.e.mark(t, id); m != tasks.MarkDone {
			t.Errorf("tasks.md marks %s %q, want [x]", id, m)
		}
		if rec := record(t, p, id); rec.Mark != tasks.MarkDone || len(g.e.commitsOf(t, id)) != 1 {
			t.Errorf("progress.md has %s as %+v with %d commits, want done with one", id, rec, len(g.e.commitsOf(t, id)))
		}
	}
}

// A tasks.md an agent broke stops the run with advice on what to do; the
// session is saved where it was, and once the file is fixed by hand the
// resume goes on from there and finishes.
func TestCoverBrokenTasksMDStopsAndResumesOnceFixed(t *testing.T) {
	g := newRig(t)
	tasksMD := filepath.Join(g.e.dir, "tasks.md")
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	g.on(role.Executor, exec1, 1, func(context.Context, session.Call) (string, error) {
		data := readTestFile(t, tasksMD)
		i := strings.Index(data, "- [")
		writeTestFile(t, tasksMD, data[:i]+"- [?"+data[i+4:])
		return executorDone, nil
	})
	_, err, steps, _ := g.run()
	if err == nil || !strings.Contains(err.Error(), "an agent may have broken the file: fix it by hand, then ralph run --resume") ||
		!strings.Contains(err.Error(), "tasks.md") {
		t.Fatalf("Run = %v, want the broken tasks.md named with what to do", err)
	}
	wantSteps(t, "the run that found tasks.md broken", steps, concat(happy[:3], []string{"Executing -unexpected_error-> Stopped"})...)
	wantStopped(t, g.e.progress(t), session.Executing, "task-1", 1)

	// Fixed by hand, with a mark of its own: ralph puts its mark back.
	writeTestFile(t, tasksMD, strings.Replace(readTestFile(t, tasksMD), "- [?", "- [x", 1))
	finishTask1(t, g.e, g.inv)
	p, err, steps, _ := g.run()
	wantDone(t, g.e, p, err)
	wantSteps(t, "the resume", steps, concat([]string{"Stopped -resumed-> Executing"}, happy[3:])...)
	if out := textOf(g.events); !strings.Contains(out, "ralph: task-1 is [ ] in ralph's records; putting back the [x] an agent wrote") {
		t.Errorf("the resume did not put ralph's mark back:\n%s", out)
	}
	g.inv.allUsed()
}

// A progress.md that does not read is refused with the line and what is
// wrong with it, and the run changes nothing: no role runs, the file and
// the transition log stay as they were.
func TestCoverBrokenProgressMDIsRefusedAndLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string // a line of the file and what it becomes
		want     string
	}{
		{"unknown state", "- State: Initializing", "- State: Dreaming", `unknown state "Dreaming"`},
		{"negative attempt", "- Attempt: 0", "- Attempt: -2", `Attempt is "-2", not a count`},
		{"tokens not a number", "- Tokens: 0", "- Tokens: lots", `Tokens is "lots", not a count`},
		{"negative cost", "- Cost USD: 0.0000", "- Cost USD: -1", `Cost USD is "-1", not an amount`},
		{"torn last transition", "- Run ms: 0", "- Run ms: 0\n- Last transition: {\"timestamp\":", "Last transition is not a transition"},
		{"unknown mark", "|---|---|---|---|---|", "|---|---|---|---|---|\n| task-1 | [?] | 0 | 0 | - |", `task task-1 has mark "[?]"; marks are [ ], [P] and [x]`},
		{"negative counter", "|---|---|---|---|---|", "|---|---|---|---|---|\n| task-1 | [x] | -1 | 0 | - |", "task task-1 has a malformed counter"},
		{"short row", "|---|---|---|---|---|", "|---|---|---|---|---|\n| task-1 | [x] | 0 |", "a task row has 3 cells, want 5"},
		{"row without id", "|---|---|---|---|---|", "|---|---|---|---|---|\n|  | [x] | 0 | 0 | - |", "a task row has no task id"},
		{"no session line", "- Session: " + testSessionID + "\n", "", "no session or state line; the file is written by ralph: start a new session"},
		{"stopped nowhere", "- State: Initializing", "- State: Stopped", `the line "Stopped in" says "-"; the file is written by ralph: restore it from the session's transitions.jsonl`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSessionEnv(t, greetRequest)
			path := session.ProgressPath(e.dir)
			orig := readTestFile(t, path)
			if !strings.Contains(orig, tc.old) {
				t.Fatalf("progress.md has no %q:\n%s", tc.old, orig)
			}
			broken := strings.Replace(orig, tc.old, tc.new, 1)
			writeTestFile(t, path, broken)
			_, err, evs := runWith(t, e, e.runner(t, newInvoker(t)), context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "progress.md") {
				t.Fatalf("Run = %v, want an error naming progress.md and saying %q", err, tc.want)
			}
			if got := readTestFile(t, path); got != broken {
				t.Errorf("the refused run rewrote progress.md:\n%s", got)
			}
			if _, err := os.Stat(session.TransitionsPath(e.dir)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused run logged a transition (%v)", err)
			}
			if len(evs) != 0 {
				t.Errorf("the refused run told a person %q", textOf(evs))
			}
		})
	}
}

// A session run again after it completed only says so; one that failed
// says why again, and neither runs a role.
func TestCoverRunAgainAfterTheEnd(t *testing.T) {
	g := newRig(t)
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	finishTask1(t, g.e, g.inv)
	p, err, _, _ := g.run()
	wantDone(t, g.e, p, err)
	before := readTestFile(t, session.TransitionsPath(g.e.dir))

	p, err, steps, _ := g.run()
	wantDone(t, g.e, p, err)
	if len(steps) != 0 {
		t.Errorf("a completed session made transitions when run again: %q", steps)
	}
	if out := textOf(g.events); out != "✓ session "+testSessionID+" complete: 1 task done, goal check passed\n" {
		t.Errorf("running a completed session again says %q", out)
	}
	if got := readTestFile(t, session.TransitionsPath(g.e.dir)); got != before {
		t.Errorf("running a completed session again changed its transition log")
	}

	f := newRig(t)
	f.on(role.Planner, "", 1, says(plannerBlocked))
	if _, err, _, _ := f.run(); !errors.Is(err, session.ErrFailed) {
		t.Fatalf("Run = %v, want ErrFailed", err)
	}
	_, err, steps, _ = f.run()
	if !errors.Is(err, session.ErrFailed) || !strings.Contains(err.Error(), "planner blocked: needs a database") || len(steps) != 0 {
		t.Errorf("a failed session run again = %v with steps %q; want ErrFailed with its reason and no steps", err, steps)
	}
	f.inv.allUsed()
}

// controlled returns a runner of e that takes commands from the
// workspace's control folder, and that folder.
func controlled(t *testing.T, e *sessionEnv, inv session.Invoker) (*session.Runner, control.Folder) {
	t.Helper()
	folder := control.Folder{Dir: e.ws.Path("control")}
	a, err := folder.Attach(control.Run{Run: testSessionID, Machine: session.MachineName, Takes: []control.Kind{control.Pause, control.Stop},
		Since: time.Now().Add(-time.Minute).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Detach)
	r := e.runner(t, inv)
	r.Control = a
	return r, folder
}

// pauses is a planner run during which `ralph pause` is given.
func pauses(t *testing.T, folder control.Folder) func(context.Context, session.Call) (string, error) {
	return func(context.Context, session.Call) (string, error) {
		if err := folder.SetPause(control.New(control.Pause, "ana", time.Now())); err != nil {
			t.Error(err)
		}
		return plannerOneTask, nil
	}
}

// A pause given during a role run holds the session before its next step
// and says how to go on; `ralph resume` lets it go on where it was.
func TestCoverPauseHoldsTheSessionUntilResumed(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	r, folder := controlled(t, e, inv)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, pauses(t, folder))
	finishTask1(t, e, inv)
	// The person resumes as soon as the session says it is paused.
	resume := sinkFunc(func(ev report.Event) {
		if w, ok := ev.Data.(report.Wait); ok && w.Paused {
			if err := folder.ClearPause(); err != nil {
				t.Error(err)
			}
		}
	})
	p, err, evs := runWith(t, e, r, context.Background(), resume)
	wantDone(t, e, p, err)
	inv.allUsed()
	out := textOf(evs)
	paused := strings.Index(out, "⏸ paused by ana at ")
	resumed := strings.Index(out, "▶ resumed\n")
	planned := strings.Index(out, "(planner_completed")
	selected := strings.Index(out, "(task_selected")
	if paused < 0 || !strings.Contains(out, "`ralph resume` goes on") || resumed < paused || paused < planned || selected < resumed {
		t.Errorf("want the pause told after planning and the resume before the next step:\n%s", out)
	}
}

// A stop while the session waits paused ends the run as an interrupt:
// the session is saved where it was, and a later run goes on from there
// without planning again.
func TestCoverStopWhilePaused(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	r, folder := controlled(t, e, inv)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, pauses(t, folder))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := sinkFunc(func(ev report.Event) {
		if w, ok := ev.Data.(report.Wait); ok && w.Paused {
			cancel()
		}
	})
	_, err, evs := runWith(t, e, r, ctx, stop)
	if !errors.Is(err, errs.ErrInterrupted) {
		t.Fatalf("Run = %v, want interrupted", err)
	}
	if strings.Contains(textOf(evs), "▶ resumed") {
		t.Errorf("a stopped pause said it resumed")
	}
	wantStopped(t, e.progress(t), session.Executing, "", 0)
	if err := folder.ClearPause(); err != nil {
		t.Fatal(err)
	}

	finishTask1(t, e, inv)
	p, err, _ := runWith(t, e, e.runner(t, inv), context.Background())
	wantDone(t, e, p, err)
	if n := inv.count(role.Planner, ""); n != 1 {
		t.Errorf("the planner ran %d times, want once: the resume planned again", n)
	}
	inv.allUsed()
}

// An executor a kill of ralph left running is stopped by the next run
// before anything else, which says so and notes in the task's report that
// the attempt was cut short; the attempt then runs again.
func TestCoverLeftoverExecutorIsStoppedOnResume(t *testing.T) {
	g := newRig(t)
	var agentProc *exec.Cmd
	exited := make(chan struct{})
	g.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	g.on(role.Executor, exec1, 1, func(ctx context.Context, c session.Call) (string, error) {
		agentProc = exec.Command("sleep", "30")
		agentProc.Env = []string{"PATH=" + os.Getenv("PATH"), "RALPH_AGENT_TOKEN=" + c.Token}
		agentProc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := agentProc.Start(); err != nil {
			t.Error(err)
			return "", err
		}
		go func() { agentProc.Wait(); close(exited) }()
		c.OnStart(agentProc.Process.Pid)
		runtime.Goexit() // ralph is killed while the agent works
		return "", nil
	})
	if _, _, _, crashed := g.run(); !crashed {
		t.Fatal("the first run was meant to be killed during the executor")
	}
	t.Cleanup(func() { agentProc.Process.Kill(); <-exited })
	pgid := agentProc.Process.Pid

	finishTask1(t, g.e, g.inv)
	p, err, _, _ := g.run()
	wantDone(t, g.e, p, err)
	// Run stopped it before anything else; its exit reaches this test's
	// own reaper a moment later.
	wait.Recv(t, exited, 10*time.Second, "the agent the kill left running to exit")
	out := textOf(g.events)
	if want := "ralph: stopped the agent the killed session left running (process group " + strconv.Itoa(pgid) + ")"; !strings.Contains(out, want) {
		t.Errorf("the resume does not say %q:\n%s", want, out)
	}
	if report := readTestFile(t, filepath.Join(g.e.dir, "reports", "task-1.md")); !strings.Contains(report, "Executor (interrupted)") ||
		!strings.Contains(report, "ralph stopped during this run; it is run again.") {
		t.Errorf("task-1's report does not note the cut-short attempt:\n%s", report)
	}
	g.inv.allUsed()
}

// interruptingClock is the fake clock during whose waits the person
// presses Ctrl+C: each wait ends the run's context and returns its error.
type interruptingClock struct {
	*fakeClock
	cancel context.CancelFunc
}

func (c interruptingClock) Wait(ctx context.Context, d time.Duration, show func(time.Duration)) error {
	c.fakeClock.mu.Lock()
	c.fakeClock.sleeps = append(c.fakeClock.sleeps, d)
	c.fakeClock.mu.Unlock()
	c.cancel()
	return ctx.Err()
}

// A stop while the session waits, to retry a failed role run or for a
// usage limit to reset, ends the run as an interrupt: nothing more runs,
// the session is saved where it was, and the next run goes on from there.
func TestCoverStopWhileWaiting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails error
		says  string
	}{
		{"to retry", errors.New("network is unreachable"), "ralph: the executor run failed (network is unreachable); retrying in 1s (1/3)"},
		{"for a usage limit", &session.LimitError{Agent: fakeAgentName, ResetsAt: runT0.Add(3 * time.Minute), Message: "limit reached"}, "; waiting 3m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSessionEnv(t, greetRequest)
			inv := newInvoker(t)
			inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
			inv.on(role.Executor, exec1, 1, fails(tc.fails))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r := e.runner(t, inv)
			r.Clock = interruptingClock{e.clock, cancel}
			_, err, evs := runWith(t, e, r, ctx)
			if !errors.Is(err, errs.ErrInterrupted) {
				t.Fatalf("Run = %v, want interrupted", err)
			}
			if out := textOf(evs); !strings.Contains(out, tc.says) {
				t.Errorf("the run does not say %q before it waits:\n%s", tc.says, out)
			}
			wantStopped(t, e.progress(t), session.Executing, "task-1", 1)
			inv.allUsed()

			finishTask1(t, e, inv)
			p, err, _ := runWith(t, e, e.runner(t, inv), context.Background())
			wantDone(t, e, p, err)
			inv.allUsed()
		})
	}
}

// A runner given no backoff waits five seconds before it asks a failed
// role again, and says so.
func TestCoverDefaultBackoff(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	inv.on(role.Planner, "Mode: INITIALIZE", 1, fails(errors.New("connection reset")))
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerOneTask))
	finishTask1(t, e, inv)
	r := e.runner(t, inv)
	r.Backoff = 0
	p, err, evs := runWith(t, e, r, context.Background())
	wantDone(t, e, p, err)
	if out := textOf(evs); !strings.Contains(out, "ralph: the planner run failed (connection reset); retrying in 5s (1/3)") {
		t.Errorf("the retry is not told with the default backoff:\n%s", out)
	}
	if slept := e.clock.slept(); len(slept) != 1 || slept[0] != 5*time.Second {
		t.Errorf("the runner waited %v, want 5s once", slept)
	}
	inv.allUsed()
}

// A planner that writes tasks.md itself and lists no tasks in its answer
// gets its file adopted: ralph keeps its own marks and works the tasks.
// A questioner that gives no valid answer is noted in qa.md, and planning
// goes on. The runner works with the system's clock when given none.
func TestCoverPlannerWritesTasksItselfAfterAnInvalidQuestioner(t *testing.T) {
	e := newSessionEnv(t, greetRequest)
	inv := newInvoker(t)
	tasksMD := filepath.Join(e.dir, "tasks.md")
	inv.on(role.Planner, "Mode: INITIALIZE", 1, says(plannerQA))
	inv.on(role.Questioner, "", 2, says(malformed))
	inv.on(role.Planner, "Mode: QA_COORDINATE", 1, func(context.Context, session.Call) (string, error) {
		writeTestFile(t, tasksMD, "# Tasks\n\n- [ ] task-1: Write greet.txt\n  - greet.txt says hello\n")
		return plannerNoTasks, nil
	})
	finishTask1(t, e, inv)
	r := e.runner(t, inv)
	r.Clock = nil
	p, err, _ := runWith(t, e, r, context.Background())
	wantDone(t, e, p, err)
	inv.allUsed()
	qa := readTestFile(t, filepath.Join(e.dir, "qa.md"))
	if !strings.Contains(qa, "### The questioner answers\n\n(no valid answer: ") {
		t.Errorf("qa.md does not note the questioner's invalid answer:\n%s", qa)
	}
	if prompts := inv.prompts(role.Executor); len(prompts) != 1 || !strings.Contains(prompts[0], "greet.txt says hello") {
		t.Errorf("the executor was not given the criterion the planner wrote in tasks.md")
	}
}

// detailOf is a transition's detail, "" for any other event.
func detailOf(ev report.Event) string {
	if d, ok := ev.Data.(report.Transition); ok {
		return d.Detail
	}
	return ""
}
