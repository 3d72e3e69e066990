package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/words"
	"github.com/ralphloop/ralph/internal/workspace"
)

// ErrPlanTouchedOtherFiles is returned when a planning iteration changed
// files other than the plan. Planning is read-only; an agent that writes
// code there is misbehaving, and going on would compound it.
var ErrPlanTouchedOtherFiles = errors.New("planning changed files other than the plan")

// Plan runs planning iterations that create or refine the implementation
// plan. It stops after MaxIterations, or earlier when the agent signals
// COMPLETE and the plan exists.
func Plan(ctx context.Context, ws *workspace.Workspace, opts Options) (rep Report, err error) {
	prd, err := LoadPRD(ws, opts.PRDPath)
	if err != nil {
		return rep, err
	}
	tpl, err := prompt.Load(prompt.Plan, ws.PromptsDir())
	if err != nil {
		return Report{}, err
	}
	if err := agentInstalled(opts.Agent); err != nil {
		return Report{}, err
	}
	r, err := begin(ctx, ws, "plan", opts, "")
	if err != nil {
		return Report{}, err
	}
	rep = Report{StoriesLeft: prd.Remaining(), StoriesDone: len(prd.Stories) - prd.Remaining()}
	reason := ""
	defer func() { r.finish(&rep, reason) }()

	bg := context.WithoutCancel(ctx)
	snap, err := ws.Repo.Snapshot(bg)
	if err != nil {
		rep.Outcome, reason = OutcomeError, err.Error()
		return rep, err
	}
	r.record.HeadBefore = snap.Head
	planRel := ws.Rel(opts.PlanPath)

	for n := 1; n <= opts.MaxIterations; n++ {
		rep.Iterations = n
		vars := map[string]string{
			"REPO_ROOT":       ws.Root,
			"RUN_ID":          r.id,
			"ITERATION":       strconv.Itoa(n),
			"MAX_ITERATIONS":  strconv.Itoa(opts.MaxIterations),
			"PRD_PATH":        ws.Rel(opts.PRDPath),
			"PLAN_PATH":       planRel,
			"GUARDRAILS_PATH": ws.Rel(ws.GuardrailsPath()),
			"ERRORS_LOG_PATH": ws.Rel(ws.ErrorsLogPath()),
			"PROGRESS_PATH":   ws.Rel(ws.ProgressPath()),
			"QUALITY_GATES":   check.Gates(opts.Checks),
		}
		text, err := tpl.Render(vars)
		if err != nil {
			rep.Outcome, reason = OutcomeError, err.Error()
			return rep, err
		}
		r.say(report.KindIteration, fmt.Sprintf("\n── planning iteration %d/%d · agent %s ──\n", n, opts.MaxIterations, opts.Agent.Name),
			report.Iteration{Turn: &report.Turn{Iteration: n}, Agent: opts.Agent.Name})
		r.event("planning iteration %d started with agent %s", n, opts.Agent.Name)
		started := opts.now()
		res, runErr := r.runAgentAs(ctx, r.opts.Agent, n, text)
		out, logFile := res.Outcome, res.LogFile
		rec := r.newRecord(n, started, out, res.PromptFile, logFile)
		if runErr != nil && !out.Interrupted {
			rec.Status, rec.Reason = StatusAgentError, runErr.Error()
			r.logError("planning iteration %d: %v", n, runErr)
			r.saveIteration(rec)
			rep.Outcome, reason = OutcomeError, runErr.Error()
			return rep, runErr
		}
		dirtyBefore := map[string]bool{}
		for _, f := range snap.Dirty {
			dirtyBefore[f] = true
		}
		after, gerr := r.git.Snapshot(bg)
		if gerr == nil {
			_, gerr = rangeInto(bg, r.git, rec, snap.Head, after)
		}
		if gerr != nil {
			r.logError("planning iteration %d: git: %v", n, gerr)
		} else {
			snap = after
		}
		// Files the agent touched: those in its commits and those that
		// became dirty during the iteration.
		var foreign []string
		seen := map[string]bool{}
		touched := append(append([]string{}, rec.ChangedFiles...), after.Dirty...)
		for _, f := range touched {
			if seen[f] || f == planRel || (dirtyBefore[f] && !contains(rec.ChangedFiles, f)) {
				continue
			}
			seen[f] = true
			foreign = append(foreign, f)
		}

		status, why := r.agentStatus(out)
		switch {
		case status == StatusInterrupted:
		case len(foreign) > 0:
			status = StatusPlanError
			why = fmt.Sprintf("%s: %s", ErrPlanTouchedOtherFiles, strings.Join(clipList(foreign, 10), ", "))
			r.logError("planning iteration %d: %s", n, why)
		case status != "":
			r.logError("planning iteration %d: %s (output: %s)", n, why, ws.Rel(logFile))
		default:
			status = StatusPlanned
		}
		rec.Status, rec.Reason = status, why
		done := status == StatusPlanned && slices.Contains(rec.Signals, "COMPLETE") && exists(opts.PlanPath)
		rec.SignalAccepted = done
		r.saveIteration(rec)
		r.event("planning iteration %d ended: %s", n, status)
		r.printIteration(rec, why)

		switch status {
		case StatusInterrupted:
			rep.Outcome, reason = OutcomeInterrupted, "interrupted during planning iteration "+strconv.Itoa(n)
			return rep, ErrInterrupted
		case StatusPlanError:
			rep.Outcome, reason = OutcomeError, why
			return rep, fmt.Errorf("%s; see %s", why, ws.Rel(ws.ErrorsLogPath()))
		}
		if done {
			break
		}
	}
	if !exists(opts.PlanPath) {
		rep.Outcome, reason = OutcomeError, "the agent did not write the plan"
		err := fmt.Errorf("no plan was written to %s after %s: see the agent's output in %s", planRel, words.Count(rep.Iterations, "iteration", "iterations"), ws.Rel(r.dir))
		r.logError("%v", err)
		return rep, err
	}
	rep.Outcome, reason = OutcomeComplete, "plan written to "+planRel
	r.sayf(report.KindCommit, "✓ plan written to %s\n", planRel)
	return rep, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
