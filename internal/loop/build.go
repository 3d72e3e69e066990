package loop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/workspace"
)

// SetupError is a missing prerequisite that a named command fixes. Nothing
// has been changed when it is returned.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// LoadPRD reads and parses the PRD. A missing file is a *SetupError that
// names the command which writes one.
func LoadPRD(ws *workspace.Workspace, path string) (*tasks.PRD, error) {
	prd, err := ReadPRD(ws, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &SetupError{Msg: fmt.Sprintf("no PRD at %s: run `ralph prd \"what you want built\"` to write one, or pass --prd PATH", ws.Rel(path))}
	}
	return prd, err
}

// ReadPRD parses the PRD at path; errors name it relative to the
// repository, as the user would type it.
func ReadPRD(ws *workspace.Workspace, path string) (*tasks.PRD, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	prd, err := tasks.ParseMarkdown(ws.Rel(path), b)
	if prd != nil {
		prd.Path = path
	}
	return prd, err
}

// feedbackLimit bounds the check output carried into the next prompt.
const feedbackLimit = 8 << 10

// Build runs build iterations until every story in the PRD is done and
// verified, the iteration limit is reached, or ctx is cancelled.
func Build(ctx context.Context, ws *workspace.Workspace, opts Options) (rep Report, err error) {
	// Bad input must change nothing: validate before the lock, the run
	// folder or any state file exists.
	prd, err := LoadPRD(ws, opts.PRDPath)
	if err != nil {
		return rep, err
	}
	if opts.RequirePlan {
		if _, err := os.Stat(opts.PlanPath); errors.Is(err, fs.ErrNotExist) {
			return Report{}, &SetupError{Msg: fmt.Sprintf("no plan at %s: run `ralph plan` first, or set require_plan = false under [build] in .ralph/config.toml", ws.Rel(opts.PlanPath))}
		}
	}
	tpl, err := prompt.Load(prompt.Build, ws.PromptsDir())
	if err != nil {
		return Report{}, err
	}
	r, err := begin(ctx, ws, "build", opts)
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
	feedback := map[string]string{} // story id -> why the last attempt was sent back

	for n := 1; ; n++ {
		prd, err = LoadPRD(ws, opts.PRDPath)
		if err != nil {
			rep.Outcome, reason = OutcomeError, err.Error()
			r.logError("iteration %d: %v", n, err)
			return rep, err
		}
		rep.StoriesLeft, rep.StoriesDone = prd.Remaining(), len(prd.Stories)-prd.Remaining()
		story, ok := prd.Next()
		if !ok {
			rep.Outcome, reason = OutcomeComplete, "all stories are checked and verified"
			fmt.Fprintf(opts.Out, "✓ all %d stories are done and verified\n", len(prd.Stories))
			return rep, nil
		}
		if n > opts.MaxIterations {
			rep.Outcome = OutcomeMaxIterations
			reason = fmt.Sprintf("reached %d iterations with %d stories left", opts.MaxIterations, rep.StoriesLeft)
			fmt.Fprintf(opts.Out, "■ %s\n", reason)
			return rep, nil
		}
		rep.Iterations = n

		vars := r.vars(n, story)
		if fb := feedback[story.ID]; fb != "" {
			vars["VERIFY_FEEDBACK"] = fb
		}
		text, err := tpl.Render(vars)
		if err != nil {
			rep.Outcome, reason = OutcomeError, err.Error()
			return rep, err
		}
		fmt.Fprintf(opts.Out, "\n── iteration %d/%d · %s: %s · agent %s ──\n", n, opts.MaxIterations, story.ID, story.Title, opts.Agent.Name)
		r.event("iteration %d started: story %s with agent %s", n, story.ID, opts.Agent.Name)

		started := opts.now()
		out, promptFile, logFile, runErr := r.runAgent(ctx, n, text)
		rec := r.newRecord(n, started, out, promptFile, logFile)
		rec.StoryID, rec.StoryTitle = story.ID, story.Title
		if runErr != nil && !out.Interrupted {
			// The agent could not be started at all: going on would only
			// repeat the failure, so the run stops here.
			rec.Status, rec.Reason = StatusAgentError, runErr.Error()
			r.logError("iteration %d (%s): %v", n, story.ID, runErr)
			r.saveIteration(rec)
			rep.Outcome, reason = OutcomeError, runErr.Error()
			return rep, runErr
		}
		status, why := agentStatus(out)
		after, gerr := r.gitDelta(bg, rec, snap)
		if gerr != nil {
			r.logError("iteration %d: git: %v", n, gerr)
		} else {
			snap = after
		}

		// Re-read the PRD: the agent's edits are the claim, ralph checks it.
		post, perr := LoadPRD(ws, opts.PRDPath)
		claimed := false
		if perr == nil {
			if s, ok := post.Find(story.ID); ok && s.Done {
				claimed = true
			}
		}
		switch {
		case status == StatusInterrupted:
			if claimed {
				r.reopen(story.ID, "interrupted before verification")
			}
		case status != "":
			r.logError("iteration %d (%s): %s; the story stays open (output: %s)", n, story.ID, why, ws.Rel(logFile))
			if claimed {
				r.reopen(story.ID, why)
			}
		case perr != nil:
			status, why = StatusAgentError, "the agent left the PRD unreadable: "+perr.Error()
			r.logError("iteration %d (%s): %s", n, story.ID, why)
		case !claimed:
			status = StatusOpen
		default:
			results, passed := check.RunAll(bg, ws.Root, opts.Checks)
			for _, res := range results {
				rec.Checks = append(rec.Checks, CheckRecord{
					Name: res.Check.Name, Passed: res.Passed(), ExitCode: res.ExitCode,
					DurationMillis: res.Duration.Milliseconds(), TimedOut: res.TimedOut, Missing: res.Missing,
				})
				mark := "✓"
				if !res.Passed() {
					mark = "✗"
				}
				fmt.Fprintf(opts.Out, "  %s check %s (%s)\n", mark, res.Check.Name, res.Duration.Round(time.Millisecond))
			}
			if passed {
				status = StatusDone
				delete(feedback, story.ID)
			} else {
				failed := results[len(results)-1]
				status, why = StatusVerifyFailed, describeFailure(failed)
				feedback[story.ID] = fmt.Sprintf("Your previous attempt at %s was sent back: %s. Output of the failing check:\n\n```\n%s\n```\nFix the cause, then check the story again.",
					story.ID, why, clipTail(failed.Output, feedbackLimit))
				r.logError("iteration %d (%s): verification failed: %s; story reopened", n, story.ID, why)
				r.reopen(story.ID, why)
			}
		}
		rec.Status, rec.Reason = status, why

		if status == StatusInterrupted {
			r.saveIteration(rec)
			rep.Outcome, reason = OutcomeInterrupted, "interrupted during iteration "+strconv.Itoa(n)
			fmt.Fprintf(opts.Out, "■ interrupted: iteration %d recorded as interrupted\n", n)
			return rep, ErrInterrupted
		}

		if !opts.NoCommit && len(snap.Dirty) > 0 {
			r.logError("iteration %d (%s) left uncommitted changes: %s", n, story.ID, strings.Join(clipList(snap.Dirty, 10), ", "))
			fmt.Fprintf(opts.Out, "  ! uncommitted changes left: %s\n", strings.Join(clipList(snap.Dirty, 5), ", "))
		}
		rec.UncommittedFiles = snap.Dirty

		// The completion signal is a claim; the PRD is the truth.
		final, ferr := LoadPRD(ws, opts.PRDPath)
		left := -1
		if ferr == nil {
			left = final.Remaining()
			rep.StoriesLeft, rep.StoriesDone = left, len(final.Stories)-left
		}
		if hasSignal(rec.Signals, "COMPLETE") {
			if left == 0 {
				rec.SignalAccepted = true
			} else {
				msg := fmt.Sprintf("signal rejected: the agent said COMPLETE but %d stories are unchecked", left)
				if left < 0 {
					msg = "signal rejected: the agent said COMPLETE but the PRD cannot be read"
				}
				r.logError("iteration %d (%s): %s", n, story.ID, msg)
				r.event("iteration %d: %s", n, msg)
				fmt.Fprintf(opts.Out, "  ! %s\n", msg)
			}
		}
		r.saveIteration(rec)
		r.event("iteration %d ended: story %s %s", n, story.ID, status)
		printIteration(opts, rec, why)
	}
}

func (r *run) vars(n int, story tasks.Story) map[string]string {
	ws, o := r.ws, r.opts
	return map[string]string{
		"REPO_ROOT":         ws.Root,
		"PRD_PATH":          ws.Rel(o.PRDPath),
		"PLAN_PATH":         ws.Rel(o.PlanPath),
		"PROGRESS_PATH":     ws.Rel(ws.ProgressPath()),
		"GUARDRAILS_PATH":   ws.Rel(ws.GuardrailsPath()),
		"ERRORS_LOG_PATH":   ws.Rel(ws.ErrorsLogPath()),
		"ACTIVITY_LOG_PATH": ws.Rel(ws.ActivityLogPath()),
		"STORY_ID":          story.ID,
		"STORY_TITLE":       story.Title,
		"STORY_BLOCK":       story.Block,
		"RUN_ID":            r.id,
		"ITERATION":         strconv.Itoa(n),
		"MAX_ITERATIONS":    strconv.Itoa(o.MaxIterations),
		"NO_COMMIT":         strconv.FormatBool(o.NoCommit),
		"QUALITY_GATES":     qualityGates(o.Checks),
		"VERIFY_FEEDBACK":   "Nothing: this is the first attempt at this story in this run.",
	}
}

// reopen unchecks a story the agent marked done but ralph did not accept.
func (r *run) reopen(id, why string) {
	b, err := os.ReadFile(r.opts.PRDPath)
	if err == nil {
		b, err = tasks.SetStoryDone(b, id, false)
	}
	if err == nil {
		err = store.WriteFileAtomic(r.opts.PRDPath, b, 0o644)
	}
	if err != nil {
		r.logError("could not reopen %s in the PRD: %v", id, err)
		return
	}
	r.event("story %s reopened: %s", id, why)
	fmt.Fprintf(r.opts.Out, "  ↺ %s reopened: %s\n", id, why)
}

func qualityGates(checks []check.Check) string {
	if len(checks) == 0 {
		return "none configured; run the project's own tests and linters"
	}
	parts := make([]string, len(checks))
	for i, c := range checks {
		parts[i] = "`" + c.Run + "`"
	}
	return strings.Join(parts, ", ")
}

func describeFailure(res check.Result) string {
	switch {
	case res.Missing:
		return fmt.Sprintf("check %q could not run: its program is not installed", res.Check.Name)
	case res.TimedOut:
		return fmt.Sprintf("check %q timed out after %s", res.Check.Name, res.Duration.Round(time.Second))
	default:
		return fmt.Sprintf("check %q exited with code %d", res.Check.Name, res.ExitCode)
	}
}

func printIteration(opts Options, rec *IterationRecord, why string) {
	mark := map[string]string{StatusDone: "✓", StatusPlanned: "✓", StatusOpen: "·", StatusInterrupted: "■"}[rec.Status]
	if mark == "" {
		mark = "✗"
	}
	line := fmt.Sprintf("%s iteration %d: %s %s · %s · %d commit(s)", mark, rec.Iteration, rec.StoryID, rec.Status,
		(time.Duration(rec.DurationMillis) * time.Millisecond).Round(10*time.Millisecond), len(rec.Commits))
	if why != "" {
		line += " · " + why
	}
	fmt.Fprintln(opts.Out, line)
}

func hasSignal(signals []string, name string) bool {
	for _, s := range signals {
		if s == name {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func clipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(append([]string{}, l[:n]...), fmt.Sprintf("and %d more", len(l)-n))
}
