package loop

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/role"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/verify"
)

// validate is VALIDATE's action: the story's verify commands, the
// reviewer, the agent's claim, and the judgement of evidence on what TEST
// ran (verify.Judge). It accepts the attempt only with evidence ralph
// produced itself, or, when every check passes and nothing could prove
// the story, on the agent's word, labelled as such.
func (b *builder) validate(ctx context.Context, it iteration) (Event, error) {
	story := it.sel.Story
	ar, _ := b.loadAttemptRun()
	// A subtask that is not the story's last open one is done when its
	// tests break nothing: the story's criteria are judged when it
	// completes.
	if it.sel.Subtask != nil {
		open := 0
		for _, st := range story.Subtasks {
			if !st.Done {
				open++
			}
		}
		if open > 1 {
			j := verify.Judgement{Outcome: verify.AgentWord, Failing: failingChecks(ar)}
			b.st.Attempt.Judgement = &j
			return Event{Trigger: TrigACsMet}, nil
		}
	}
	criteria := make([]role.Criterion, len(story.Criteria))
	for i, c := range story.Criteria {
		criteria[i] = role.Criterion{ID: fmt.Sprintf("AC-%d", i+1), Text: c.Text, Verify: c.Verify}
	}
	var cmds []role.CommandResult
	var runs []verify.CommandRun
	var failedCmds []string // what the next prompt gets of each failed verify command
	for _, c := range criteria {
		if c.Verify == "" {
			continue
		}
		res := b.runCheck(context.WithoutCancel(ctx), check.Check{Name: c.ID, Run: c.Verify, Timeout: 10 * time.Minute, Format: check.FormatNone})
		cmds = append(cmds, role.CommandResult{ID: c.ID, Passed: res.Passed(), Output: res.Output, ExitCode: res.ExitCode, TimedOut: res.TimedOut, Missing: res.Missing})
		if !res.Passed() {
			failedCmds = append(failedCmds, check.Feedback(res))
		}
		run := verify.CommandRun{Criterion: c.ID, Command: c.Verify, Passed: res.Passed()}
		if bl := b.st.Baseline; bl != nil {
			if passed, ok := bl.Verify[c.Verify]; ok {
				run.AtStart = passedWord(passed)
			}
		}
		if passed, ok := ar.WithStartVerify[c.Verify]; ok {
			run.WithStartFiles = passedWord(passed)
		}
		runs = append(runs, run)
	}
	var reviewer *role.Verdict
	var reviewed *bool
	if b.opts.Reviewer != nil {
		v, err := b.review(ctx, it, criteria)
		if err != nil {
			return Event{}, err
		}
		reviewer, reviewed = v, &v.Qualified
	}
	if ctx.Err() != nil {
		return Event{}, ErrInterrupted
	}
	j := verify.Judge(b.judgeInput(story, ar, runs, reviewed))
	switch {
	case reviewer != nil:
	case agentTicks(b.src) && (len(criteria) == 0 || len(cmds) < len(criteria)):
		// Seed 001: the agent ticks the criteria it verified; a criterion
		// with no command and no reviewer is judged by that claim, and
		// the claim counts only as far as the judgement accepts the
		// attempt.
		v := b.agentClaim(story.ID, criteria, j)
		reviewer = &v
	case len(cmds) > 0 && len(cmds) < len(criteria):
		// Other task files give the agent no box to tick: the attempt is
		// its claim.
		v := unjudgedClaim(criteria, j)
		reviewer = &v
	}
	verdict := role.Combine(criteria, cmds, reviewer)
	if acReport := verdict.Report(); acReport != "" {
		b.say(report.KindVerdict, "  "+strings.ReplaceAll(strings.TrimRight(acReport, "\n"), "\n", "\n  ")+"\n", nil)
		it.rec.ACReport = acReport
	}
	for _, r := range verdict.Reasons {
		if r == role.ReasonNotConfigured {
			continue // the judgement below says it in its own words
		}
		b.sayf(report.KindWarning, "  ! %s\n", r)
	}
	for _, n := range j.Notes {
		b.sayf(report.KindVerdict, "  · %s\n", n)
	}
	if j.Outcome == verify.Review {
		b.st.Attempt.Judgement = &j
		return b.judgedFailure(it, j, StatusNeedsReview, TrigNeedsReview), nil
	}
	if !verdict.Qualified || !j.Accepted() {
		it.rec.Status = StatusACsFailed
		for _, p := range j.Problems {
			b.sayf(report.KindVerdict, "  ✗ %s\n", p)
		}
		feedback := verdict.Feedback()
		if len(j.Problems) > 0 {
			feedback = strings.TrimSpace(feedback + "\n" + strings.Join(j.Problems, "\n"))
		}
		why := "acceptance criteria not met"
		unmet := reviewed != nil && !*reviewed
		for _, c := range cmds {
			unmet = unmet || !c.Passed
		}
		if !unmet && len(j.Problems) > 0 {
			// Every criterion's own judge agreed: the attempt lacks
			// evidence, or changed what judges it.
			why = "not verified: " + j.Problems[0]
		}
		// The verdict quotes a line of each command's output; the next
		// attempt gets the failed ones in the one feedback format too.
		out := check.Excerpt(feedback)
		for _, fb := range failedCmds {
			out += "\n" + fb
		}
		return b.failWith(it, TrigACsFailed, why, out, "permanent"), nil
	}
	b.st.Attempt.Judgement = &j
	// The verdict words its evidence (report.Render); the agent's word is
	// told with what the checks showed.
	line := ""
	if j.Outcome == verify.AgentWord {
		line = fmt.Sprintf("  ! done on the agent's word: %s, but nothing ralph ran shows %s done (no failing test fixed, no new test, no verify command that failed before the work, no reviewer)\n", b.checksState(), it.sel.TaskID())
	}
	b.say(report.KindVerdict, line, report.Verdict{Outcome: string(j.Outcome), Evidence: j.Evidence, Failing: j.Failing})
	return Event{Trigger: TrigACsMet}, nil
}

func passedWord(passed bool) string {
	if passed {
		return verify.RunPassed
	}
	return verify.RunFailed
}

// failingChecks names the checks that failed on the attempt's tree.
func failingChecks(ar attemptRun) []string {
	var out []string
	for _, r := range ar.Now {
		if !r.Passed {
			out = append(out, r.Name)
		}
	}
	return out
}

// agentClaim reads the agent's ticks as a verdict on the criteria that
// have no verify command (those with one are judged by it alone). A
// ticked criterion counts as met only when the judgement accepts the
// attempt: a tick next to a failing check is no evidence of anything.
func (b *builder) agentClaim(storyID string, criteria []role.Criterion, j verify.Judgement) role.Verdict {
	v := role.Verdict{Qualified: true}
	claim := b.agentsClaim(storyID)
	for i, c := range criteria {
		if c.Verify != "" {
			continue
		}
		ticked := claim != nil && (claim.Story || (i < len(claim.Criteria) && claim.Criteria[i]))
		f := role.Finding{ID: c.ID, Text: c.Text, Met: ticked && j.Accepted(), Source: "agent"}
		switch {
		case !ticked:
			f.Evidence = "the agent did not check this criterion in the PRD"
		case j.Outcome == verify.Verified:
			f.Evidence = "checked by the agent; ralph's evidence: " + strings.Join(clipList(j.Evidence, 2), "; ")
		case j.Accepted():
			f.Evidence = "checked by the agent; " + b.checksState() + ", but nothing ralph ran proves it (the agent's word)"
		default:
			f.Evidence = "checked by the agent, but not accepted: " + strings.Join(clipList(j.Problems, 2), "; ")
		}
		if !f.Met {
			v.Qualified = false
		}
		v.Findings = append(v.Findings, f)
	}
	if claim == nil {
		v.Qualified = false
		v.Reasons = append(v.Reasons, "story "+storyID+" is missing from the PRD")
	}
	if len(criteria) == 0 && !(claim != nil && claim.Story) {
		v.Qualified = false
		v.Reasons = append(v.Reasons, "the agent did not check the story in the PRD")
	}
	return v
}

// agentsClaim is the agent's claim on the current attempt at storyID:
// read after the agent and kept in the state, or, for an attempt an older
// ralph started, read from the PRD.
func (b *builder) agentsClaim(storyID string) *Claim {
	if a := b.st.Attempt; a != nil && a.Claim != nil {
		return a.Claim
	}
	prd, err := ReadPRD(b.ws, b.src.Path())
	if err != nil {
		return nil
	}
	s, ok := prd.Find(storyID)
	if !ok {
		return nil
	}
	c := &Claim{Story: s.Done}
	for _, cr := range s.Criteria {
		c.Criteria = append(c.Criteria, cr.Done)
	}
	return c
}

// unjudgedClaim is the verdict on the criteria without a verify command of
// a task file that has no checkboxes for the agent, when no reviewer is
// configured: the attempt is the agent's claim, met as far as the
// judgement accepts the attempt.
func unjudgedClaim(criteria []role.Criterion, j verify.Judgement) role.Verdict {
	v := role.Verdict{Qualified: j.Accepted()}
	for _, c := range criteria {
		if c.Verify != "" {
			continue
		}
		f := role.Finding{ID: c.ID, Text: c.Text, Met: j.Accepted(), Source: "agent"}
		switch j.Outcome {
		case verify.Verified:
			f.Evidence = "no verify command or reviewer; ralph's evidence for the story: " + strings.Join(clipList(j.Evidence, 2), "; ")
		case verify.AgentWord:
			f.Evidence = "no verify command or reviewer: taken from the agent's claim (its word); ralph's checks pass"
		default:
			f.Evidence = "no verify command or reviewer, and the attempt is not accepted: " + strings.Join(clipList(j.Problems, 2), "; ")
		}
		v.Findings = append(v.Findings, f)
	}
	return v
}

func (b *builder) review(ctx context.Context, it iteration, criteria []role.Criterion) (*role.Verdict, error) {
	tpl, err := prompt.Load(prompt.Review, b.ws.PromptsDir())
	if err != nil {
		return nil, err
	}
	story := it.sel.Story
	diff := strings.Join(append(append([]string{}, it.rec.ChangedFiles...), b.trees.last.Dirty...), "\n")
	var checkOut strings.Builder
	for _, c := range it.rec.Checks {
		fmt.Fprintf(&checkOut, "%s: passed=%v exit=%d", c.Name, c.Passed, c.ExitCode)
		if c.FailedAtStart {
			// Without this a reviewer would blame the attempt for it.
			checkOut.WriteString(" (it failed the same way before any agent ran: not this attempt's doing)")
		}
		checkOut.WriteString("\n")
	}
	text, err := tpl.Render(role.ReviewVars(story.ID, story.Title, story.Block, criteria, diff, checkOut.String()))
	if err != nil {
		return nil, err
	}
	spec := *b.opts.Reviewer
	var perr error
	for try := 1; try <= 2; try++ {
		n := b.st.Machine.Iteration
		b.sayf(report.KindVerdict, "  ── review by %s ──\n", spec.Name)
		// The reviewer is an agent like the executor: bounded by the idle
		// limit too, and tagged with the attempt's token, which is on disk,
		// so that a crash during the review stops it on resume.
		res, err := runkit.Attempt{
			Spec:        spec,
			Prompt:      text,
			PromptFile:  filepath.Join(b.dir, fmt.Sprintf("iter-%d.review-%d.prompt.md", n, try)),
			LogFile:     filepath.Join(b.dir, fmt.Sprintf("iter-%d.review-%d.log", n, try)),
			Dir:         b.ws.Root,
			Timeout:     b.opts.AgentTimeout,
			IdleTimeout: b.opts.IdleTimeout,
			MaxLogBytes: b.opts.MaxLogBytes,
			Token:       attemptToken(b.id, b.st.Attempt),
			Events:      b.em,
			Working:     "reviewer " + spec.Name + " working",
			Terminal:    b.opts.Terminal,
			Sandbox:     b.opts.Sandbox,
		}.Run(ctx)
		out := res.Outcome
		// The reviewer is an agent run like the executor's: its time,
		// tokens and cost count against the budget.
		b.countUsage(out)
		if out.Interrupted || ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		if err != nil {
			return nil, err
		}
		if out.TimedOut || out.Idle {
			// Asking again would only wait out the same limit: the story
			// has no verdict, and the reason says which limit ended it.
			why := fmt.Sprintf("reviewer %s killed after %s: iteration timeout %s reached", spec.Name, ranFor(out.Duration), b.opts.AgentTimeout)
			if out.Idle {
				why = fmt.Sprintf("reviewer %s killed after %s: no output for %s, the idle limit", spec.Name, ranFor(out.Duration), b.opts.IdleTimeout)
			}
			b.logError("iteration %d: %s", n, why)
			return &role.Verdict{Reasons: []string{role.ReasonNoVerdict, why}}, nil
		}
		var v role.Verdict
		if v, perr = role.ParseVerdict(out.Result.FinalMessage, criteria); perr == nil {
			return &v, nil
		}
		b.logError("iteration %d: reviewer answer malformed (try %d): %v", n, try, perr)
		text = role.ReaskPrompt(perr, criteria)
	}
	return role.NoVerdict(perr), nil
}
