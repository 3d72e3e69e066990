package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
)

// vars are the prompt variables every role gets.
func (r *Runner) vars(resultRole string) map[string]string {
	return map[string]string{
		"REPO_ROOT":     r.WS.Root,
		"SESSION_ID":    r.prog.State.SessionID,
		"SESSION_DIR":   r.WS.Rel(r.Dir),
		"REQUEST":       Request(r.Dir),
		"PLAN_PATH":     r.WS.Rel(planPath(r.Dir)),
		"TASKS_PATH":    r.WS.Rel(tasksPath(r.Dir)),
		"PROGRESS_PATH": r.WS.Rel(ProgressPath(r.Dir)),
		"RESULT_FORMAT": role.ResultFormat(resultRole),
	}
}

// ask renders kind's template, runs the role and parses its result. A
// malformed result is asked for once more; a second malformed one returns
// ok=false with the parse error.
func (r *Runner) ask(ctx context.Context, kind prompt.Kind, roleName string, extra map[string]string) (res role.Result, ok bool, why string, err error) {
	tpl, err := prompt.Load(kind, r.WS.PromptsDir())
	if err != nil {
		return res, false, "", err
	}
	vars := r.vars(roleName)
	for k, v := range extra {
		vars[k] = v
	}
	text, err := tpl.Render(vars)
	if err != nil {
		return res, false, "", err
	}
	final, err := r.invoke(ctx, roleName, text)
	if err != nil {
		return res, false, "", err
	}
	res, perr := role.ParseResult(roleName, final)
	if perr == nil {
		return res, true, "", nil
	}
	r.say(report.KindWarning, report.Warning{Role: roleName, Error: perr.Error()}, "ralph: the %s gave no valid result (%v); asking again", roleName, perr)
	final, err = r.invoke(ctx, roleName, text+"\n\n"+role.ResultReaskPrompt(roleName, perr))
	if err != nil {
		return res, false, "", err
	}
	res, perr = role.ParseResult(roleName, final)
	if perr != nil {
		return res, false, perr.Error(), nil
	}
	return res, true, "", nil
}

// minLimitWait is the shortest wait for a usage limit, and maxLimitWaits
// the most limits one role run sits out in a row.
const (
	minLimitWait  = time.Minute
	maxLimitWaits = 5
)

// invoke runs a role, retrying failed runs with exponential backoff and
// sitting out short usage limits, its own and those the workspace's
// shared cooldowns record for its agent.
func (r *Runner) invoke(ctx context.Context, roleName, text string) (string, error) {
	wait := r.Backoff
	if wait <= 0 {
		wait = 5 * time.Second
	}
	limits := 0
	for try := 0; ; try++ {
		if why := r.budgetExceeded(); why != "" {
			return "", &BudgetError{Why: why}
		}
		if err := r.awaitCooldown(ctx, roleName); err != nil {
			return "", err
		}
		name := fmt.Sprintf("%03d-%s", r.nextRunNumber(), roleName)
		token := agent.NewToken()
		if err := r.agentFile().Save(0, token); err != nil {
			return "", err
		}
		final, err := r.Invoker.Invoke(ctx, Call{Role: roleName, Prompt: redact.Default().Redact(text), Name: name, Token: token,
			OnStart: func(pgid int) { _ = r.agentFile().Save(pgid, token) }, OnUsage: r.addUsage})
		r.agentFile().Clear()
		if err == nil {
			return final, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		var envErr *agent.EnvError
		if errors.As(err, &envErr) {
			// The agent cannot run at all: asking again cannot help,
			// and the task must not pay for it.
			return "", fmt.Errorf("%w; the session is saved: resume it with ralph run --resume", err)
		}
		var le *LimitError
		if errors.As(err, &le) {
			if !le.ResetsAt.IsZero() {
				// The limit is the account's: every run of the workspace
				// leaves the agent alone until it resets.
				_ = r.cooldowns().Set(le.Agent, le.ResetsAt, le.Message)
			}
			if le.ResetsAt.IsZero() || le.ResetsAt.Sub(r.now()) > r.MaxLimitWait {
				return "", fmt.Errorf("%w; the session is saved: resume it with ralph run --resume once the limit resets", err)
			}
			// A reset time already past (a stale message, a skewed clock)
			// still waits a little, and an agent that keeps reporting
			// limits stops the session rather than being asked forever.
			limits++
			if limits > maxLimitWaits {
				return "", fmt.Errorf("%w (%d usage limits in a row); the session is saved: resume it with ralph run --resume later", err, limits-1)
			}
			d := max(le.ResetsAt.Sub(r.now()), minLimitWait)
			r.say(report.KindLimit, report.Limit{Role: roleName, Agent: le.Agent, ResetsAt: report.Ptr(le.ResetsAt.UTC()), WaitSeconds: d.Seconds()},
				"ralph: %v; waiting %s", err, d.Round(time.Second))
			if err := r.wait(ctx, d, "usage limit of "+le.Agent); err != nil {
				return "", err
			}
			continue
		}
		if try >= r.MaxAgentRetries {
			return "", fmt.Errorf("the %s failed %s, last: %w; the session is saved: resume it with ralph run --resume", roleName, words.Count(try+1, "time", "times"), err)
		}
		r.say(report.KindWarning, report.Warning{Role: roleName, Error: err.Error(), Retry: try + 1, MaxRetries: r.MaxAgentRetries},
			"ralph: the %s run failed (%v); retrying in %s (%d/%d)", roleName, err, wait, try+1, r.MaxAgentRetries)
		if err := r.wait(ctx, wait, "retry of the "+roleName); err != nil {
			return "", err
		}
		wait *= 2
	}
}

func (r *Runner) cooldowns() *runkit.Cooldowns { return runkit.OpenCooldowns(r.WS.Dir()) }

// awaitCooldown is the shared cooldown of the role's agent, before it is
// asked: a limit it hit in another run (the loop's, another session's)
// resting until within MaxLimitWait is waited out; a longer one stops the
// session as the agent's own long limit does.
func (r *Runner) awaitCooldown(ctx context.Context, roleName string) error {
	name := r.Invoker.Agent(roleName)
	if name == "" {
		return nil
	}
	rests, err := r.cooldowns().All(r.now())
	if err != nil {
		return err
	}
	rest, ok := rests[name]
	if !ok {
		return nil
	}
	le := &LimitError{Agent: name, ResetsAt: rest.Until, Message: text.OrNone(rest.Why, "recorded in "+r.WS.Rel(r.cooldowns().Path()))}
	left := rest.Until.Sub(r.now())
	if left > r.MaxLimitWait {
		return fmt.Errorf("%w; the session is saved: resume it with ralph run --resume once the limit resets", le)
	}
	r.say(report.KindLimit, report.Limit{Role: roleName, Agent: name, ResetsAt: report.Ptr(rest.Until.UTC()), WaitSeconds: left.Seconds()},
		"ralph: %v; waiting %s", le, left.Round(time.Second))
	return r.wait(ctx, left, "usage limit of "+name)
}

// wait waits d through the clock. The line that starts a wait says how
// long it is; a long one then shows, as wait events, that it is alive.
func (r *Runner) wait(ctx context.Context, d time.Duration, what string) error {
	until, first := r.now().Add(d), true
	return r.clock().Wait(ctx, d, func(left time.Duration) {
		if first {
			first = false
			return
		}
		r.say(report.KindWait, report.Wait{WaitingFor: what, LeftSeconds: report.Ptr(left.Round(time.Second).Seconds())},
			"  … %s: %s left (until %s)", what, left.Round(time.Second), until.Local().Format("15:04:05"))
	})
}

// agentPGIDFile holds the process group of the role run in progress.
const agentPGIDFile = "agent.pgid"

// agentFile records the role run in progress: its token before the agent
// starts, its process group once it runs. A crash at any instant after
// that leaves what finds the agent.
func (r *Runner) agentFile() runkit.AgentFile { return runkit.AgentFile(r.path(agentPGIDFile)) }

func (r *Runner) addUsage(tokens int64, cost float64) {
	r.prog.Tokens += tokens
	r.prog.CostUSD += cost
}

// reportLeftoverAgent says what Run stopped first: a role run still
// recorded (pgid, found) was cut short by a crash of ralph, which does not
// stop the agent; one still working in the repository would race the
// resumed session, so Run stopped it (st), and the cut-short run is noted
// in the task's report.
func (r *Runner) reportLeftoverAgent(pgid int, st proc.Stopped, found bool) {
	if !found {
		return
	}
	if st.Any() {
		g := pgid
		if len(st.Groups) > 0 {
			g = st.Groups[0]
		}
		r.say(report.KindNote, report.Note{PGID: g}, "")
	}
	for _, p := range st.Escaped {
		r.say(report.KindNote, report.Note{Process: p.String()}, "")
	}
	if s := r.prog.State; s.CurrentTaskID != "" && (s.Resumes() == Executing || s.Resumes() == Reviewing) {
		who := "Executor"
		if s.Resumes() == Reviewing {
			who = "Review"
		}
		r.report(s.CurrentTaskID, s.CurrentAttemptNumber, who+" (interrupted)", "ralph stopped during this run; it is run again.")
	}
}

// nextRunNumber numbers role runs across resumes by counting the logs
// already in the folder.
func (r *Runner) nextRunNumber() int {
	entries, _ := os.ReadDir(filepath.Join(r.Dir, "logs"))
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".prompt.md") {
			n++
		}
	}
	return n + 1
}
