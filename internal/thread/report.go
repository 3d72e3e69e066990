package thread

import (
	"fmt"
	"os"
	"strings"

	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/words"
)

// What the runner tells the person about a phase: the boxes and the review
// that the performers show on entering it (performers.go) and that `ralph
// thread show` shows again.

// printReview shows what a reviewer needs: the commits and the diff since
// the baseline, the verification evidence and ralph's recommendation.
func (r *Runner) printReview() {
	t := r.t
	r.note("── review of thread %s: %s ──", t.ID, t.Title)
	if t.Baseline != nil {
		// What `thread commit` commits: every change since the baseline,
		// ralph's committed records and the uncommitted work included, so
		// that nothing is committed that was not shown here.
		base := text.ShortHash(t.Baseline.CommitSHA)
		log, _ := r.git("log", "--oneline", t.Baseline.CommitSHA+"..HEAD")
		stat, _ := r.git("diff", "--stat", t.Baseline.CommitSHA, "--")
		untracked, _ := r.git("ls-files", "--others", "--exclude-standard")
		r.note("commits since the baseline %s (ralph thread commit squashes them into one):", base)
		for _, l := range strings.Split(log, "\n") {
			if l != "" {
				r.note("  %s", l)
			}
		}
		r.note("what the commit will hold (git diff --stat %s, and the files not yet added):", base)
		for _, l := range strings.Split(stat, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				r.note("  %s", l)
			}
		}
		for _, f := range strings.Split(untracked, "\n") {
			if f != "" {
				r.note("  %s (new, not yet added)", f)
			}
		}
	}
	if ev := r.Evidence(); ev != nil {
		r.note("verification evidence:")
		for _, it := range ev.Items {
			mark := "✓"
			if !it.Passed {
				mark = "✗"
			}
			r.note("  %s %s", mark, it.Name)
		}
	}
	if r.RecommendApprove() {
		r.note("★ Recommend Approve: every criterion, verifier and the promise passed. Approving is still yours.")
	}
	r.note("next: ralph thread approve | request-changes \"what to fix\" | revise (resets to the baseline) | abandon")
}

// ReportStuck prints the Stuck box: the choices a person has, why the
// thread is stuck and what the failed attempt reached.
func (r *Runner) ReportStuck() {
	t := r.t
	r.note("┌─────────────────────────────────────────────────────┐")
	r.note("│  STUCK: What would you like to do?                  │")
	r.note("├─────────────────────────────────────────────────────┤")
	r.note("│  [R] Revise spec     → Resets workspace, Drafting   │")
	r.note("│  [C] Reconfigure     → Configuring (keep changes)   │")
	r.note("│  [M] Manual assist   → Running (after human edits)  │")
	r.note("│  [A] Abandon         → Abandoned                    │")
	r.note("│  [D] Diagnose        → (view details, stay Stuck)   │")
	r.note("└─────────────────────────────────────────────────────┘")
	if reason := r.StuckReason(); reason != "" {
		r.note("why: %s", reason)
	}
	if t.Stuck != nil {
		r.note("spec v%d, %s, criteria %d passed / %d failed", t.Stuck.SpecVersion, words.Count(t.Stuck.Iterations, "iteration", "iterations"), len(t.Stuck.CriteriaPassed), len(t.Stuck.CriteriaFailed))
	}
	r.note("commands: ralph thread revise [--yes] | reconfigure | assist | abandon | diagnose")
}

// ReportPaused prints the Paused box: where the loop stopped and the
// choices a person has.
func (r *Runner) ReportPaused() {
	conf := r.loadConf()
	passed, total := 0, 0
	if b, err := os.ReadFile(r.prdPath()); err == nil {
		if prd, err := tasks.ParseMarkdown("prd", b); err == nil {
			for _, s := range prd.Stories {
				for _, c := range s.Criteria {
					total++
					if s.Done || c.Done {
						passed++
					}
				}
			}
		}
	}
	model := "default"
	if len(conf.Agents) > 0 {
		model = conf.Agents[0]
	}
	r.note("┌─────────────────────────────────────────────────────┐")
	r.note("│  PAUSED: Loop interrupted                           │")
	r.note("├─────────────────────────────────────────────────────┤")
	r.note("│  Iteration: %-40s│", fmt.Sprintf("%d/%d", r.t.Phase.Iteration, conf.MaxIterations))
	r.note("│  Current model: %-36s│", model)
	r.note("│  Criteria: %-41s│", fmt.Sprintf("%d/%d passing", passed, total))
	r.note("│                                                     │")
	r.note("│  [R] Resume          → Continue from here           │")
	r.note("│  [C] Reconfigure     → Change models/iterations     │")
	r.note("│  [A] Abandon         → Abandon thread               │")
	r.note("└─────────────────────────────────────────────────────┘")
	r.note("commands: ralph thread resume | reconfigure | abandon")
}
