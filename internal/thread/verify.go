package thread

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/testreport"
)

// Evidence is threads/<id>/evidence.json: the last verification.
type Evidence struct {
	SchemaVersion int            `json:"schema_version"`
	RunID         string         `json:"run_id,omitempty"`
	At            time.Time      `json:"at"`
	Passed        bool           `json:"passed"`
	Items         []EvidenceItem `json:"items"`
}

// EvidenceItem is one verified criterion, verifier or the promise.
type EvidenceItem struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// Evidence is the thread's last verification, nil when there is none.
func (r *Runner) Evidence() *Evidence {
	var ev Evidence
	if _, err := store.ReadJSON(r.path("evidence.json"), 1, &ev); err != nil {
		return nil
	}
	return &ev
}

// RecommendApprove reports whether ralph recommends approving: in quick
// mode, when the last verification passed everything. It is advice only;
// approving stays a human command.
func (r *Runner) RecommendApprove() bool {
	ev := r.Evidence()
	return r.t.Mode == ModeQuick && ev != nil && ev.Passed
}

// verify is the Verifying phase's work. It checks the PRD copy's stories and criteria (with their verify
// commands), the configured verifiers and the spec's promise, and writes
// the evidence. On a failure with iterations left it reopens the failed
// stories (or adds one) and sends the thread back to Running; without
// iterations left the thread is stuck.
//
// After a manual assist the person's edits are judged by verification
// alone: a story passes when every one of its criteria does (by its verify
// command, or ticked by the person), ticked or not, and no promise is
// asked for, since no agent claimed anything. The stories that pass are
// ticked in the PRD copy so that a later run does not redo them.
func (r *Runner) verify() (Event, error) {
	conf := r.effectiveConf()
	assisted := r.t.Assisted
	if assisted {
		r.note("verifying thread %s after your manual assist: criteria and verifiers", r.t.ID)
	} else {
		r.note("verifying thread %s: criteria, verifiers and the promise", r.t.ID)
	}
	ev := &Evidence{SchemaVersion: 1, RunID: conf.RunID, At: r.now().UTC()}
	// What the loop's next prompt gets of each failed command, in the one
	// feedback format, by the name of its evidence item.
	feedback := map[string]string{}
	ran := func(name string, res check.Result) {
		if !res.Passed() {
			feedback[name] = check.Feedback(res)
		}
	}
	var failedStories, passedUnticked []string
	b, err := os.ReadFile(r.prdPath())
	if err != nil {
		return Event{}, err
	}
	prd, err := tasks.ParseMarkdown(r.work.Rel(r.prdPath()), b)
	if err != nil {
		return Event{}, err
	}
	for _, s := range prd.Stories {
		var items []EvidenceItem
		allPass := true
		for _, c := range s.Criteria {
			item := EvidenceItem{Name: s.ID + ": " + c.Text, Passed: s.Done || (assisted && c.Done)}
			if c.Verify != "" {
				res := r.checks.RunCheck(r.ctx, r.work.Root, check.Check{Name: c.Verify, Run: c.Verify, Timeout: r.cfg.AgentTimeout})
				item.Passed = res.Passed()
				item.Detail = "verify: " + c.Verify + tailDetail(res)
				ran(item.Name, res)
			}
			allPass = allPass && item.Passed
			items = append(items, item)
		}
		done := s.Done || (assisted && allPass && len(s.Criteria) > 0)
		if !done {
			ev.Items = append(ev.Items, EvidenceItem{Name: s.ID + ": " + s.Title, Passed: false, Detail: "story not checked"})
		}
		ev.Items = append(ev.Items, items...)
		switch {
		case !done || !allPass:
			failedStories = append(failedStories, s.ID)
		case !s.Done:
			passedUnticked = append(passedUnticked, s.ID)
		}
	}
	allStories := len(failedStories) == 0
	// ralph's own checks: a thread is never verified while one fails,
	// whatever its stories and the agent claim. A test that already
	// failed before the thread is no excuse either: its stories' work
	// was judged on evidence by the loop, and this is the final tree.
	for _, c := range r.env.Checks {
		res := r.checks.RunCheck(r.ctx, r.work.Root, c)
		detail := tailDetail(res)
		if res.Tests != nil {
			detail = " · " + testSummary(res) + detail
		}
		ev.Items = append(ev.Items, EvidenceItem{Name: "check " + c.Name, Passed: res.Passed(), Detail: strings.TrimSpace(detail)})
		ran("check "+c.Name, res)
	}
	for _, v := range conf.Verifiers {
		res := r.checks.RunCheck(r.ctx, r.work.Root, check.Check{Name: v, Run: v})
		ev.Items = append(ev.Items, EvidenceItem{Name: "verifier: " + v, Passed: res.Passed(), Detail: tailDetail(res)})
		ran("verifier: "+v, res)
	}
	spec, _ := ReadSpec(r.dir, r.t.ID, r.t.SpecVersion)
	promise := specPromise(spec)
	if !assisted {
		seen := r.promiseSeen(conf.RunID, promise)
		ev.Items = append(ev.Items, EvidenceItem{Name: "promise <promise>" + promise + "</promise>", Passed: seen})
	}
	ev.Passed = true
	for _, it := range ev.Items {
		if !it.Passed {
			ev.Passed = false
		}
	}
	if r.ctx.Err() != nil {
		return Event{}, interruptedf("interrupted while verifying; thread %s stays Verifying: `ralph thread resume` verifies again", r.t.ID)
	}
	if err := store.WriteJSON(r.path("evidence.json"), ev); err != nil {
		return Event{}, err
	}
	for _, it := range ev.Items {
		r.env.Events.Emit(report.Event{Data: report.Check{Name: it.Name, Passed: report.Ptr(it.Passed)}})
	}
	if len(passedUnticked) > 0 {
		data := b
		for _, id := range passedUnticked {
			if d, err := tasks.SetStoryDone(data, id, true); err == nil {
				data = d
			}
		}
		if err := store.WriteFileAtomic(r.prdPath(), data, 0o644); err != nil {
			return Event{}, err
		}
		b = data
	}
	if ev.Passed {
		return Event{Verb: VerbCriteriaPassed, Source: SourceSystem}, nil
	}
	used := r.t.Phase.Iteration
	if used >= conf.MaxIterations {
		return r.stuckEvent(used, fmt.Sprintf("verification failed with no iterations left (%d of %d used)", used, conf.MaxIterations), ev), nil
	}
	// Send the loop back to work: reopen the stories that failed, or add
	// one for failures no story owns.
	// A failed command is named in the list and its output follows in
	// the feedback format: the hint is read whole into the next prompt.
	var failures, outputs []string
	for _, it := range ev.Items {
		if it.Passed {
			continue
		}
		if fb, ok := feedback[it.Name]; ok {
			failures = append(failures, it.Name)
			outputs = append(outputs, fb)
			continue
		}
		failures = append(failures, strings.TrimSpace(it.Name+" "+it.Detail))
	}
	if !allStories {
		data := b
		for _, id := range failedStories {
			if d, err := tasks.SetStoryDone(data, id, false); err == nil {
				data = d
			}
			if d, err := tasks.UncheckCriteria(data, id); err == nil {
				data = d
			}
		}
		if err := store.WriteFileAtomic(r.prdPath(), data, 0o644); err != nil {
			return Event{}, err
		}
	} else {
		crit := []string{"every verifier passes"}
		if !assisted {
			crit[0] += " and the final message ends with <promise>" + promise + "</promise>"
		}
		if err := r.addStory("VF", "Fix what verification found", crit); err != nil {
			return Event{}, err
		}
	}
	hint := fmt.Sprintf("- (thread %s) verification failed: %s\n", r.t.ID, strings.Join(failures, "; "))
	for _, fb := range outputs {
		hint += "\n" + fb
	}
	store.AppendFile(r.work.Path("context.md"), []byte(hint))
	return Event{Verb: VerbCriteriaFailed, Source: SourceSystem}, nil
}

func tailDetail(res check.Result) string {
	if res.Passed() {
		return ""
	}
	out := strings.TrimSpace(res.Output)
	if len(out) > 300 {
		out = "…" + out[len(out)-300:]
	}
	return fmt.Sprintf(" (exit %d) %s", res.ExitCode, out)
}

// promiseSeen reports whether an iteration of the run ended with the
// spec's promise tag in its final message.
func (r *Runner) promiseSeen(runID, promise string) bool {
	if runID == "" || promise == "" {
		return false
	}
	files, _ := filepath.Glob(filepath.Join(r.loopHome().RunsDir(), runID, "iter-*.json"))
	for _, f := range files {
		var rec loop.IterationRecord
		if _, err := store.ReadJSON(f, 1, &rec); err != nil {
			continue
		}
		for _, s := range rec.Signals {
			if strings.EqualFold(s, promise) {
				return true
			}
		}
		if strings.Contains(rec.FinalMessage, "<promise>"+promise+"</promise>") {
			return true
		}
	}
	// An iteration cut short by a kill after the agent's final message is
	// finished by the resumed run without that message in its record: the
	// end of its raw output, where the final message is, still has it.
	logs, _ := filepath.Glob(filepath.Join(r.loopHome().RunsDir(), runID, "iter-*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "<promise>"+promise+"</promise>") && !strings.Contains(line, "Output <promise>") {
				return true
			}
		}
	}
	return false
}

// addStory appends a story to the PRD copy, so that the loop has work.
func (r *Runner) addStory(prefix, title string, criteria []string) error {
	conf := r.effectiveConf()
	if _, err := os.Stat(r.prdPath()); err != nil || conf.PRDSpecVersion != r.t.SpecVersion {
		if err := r.copySpecToPRD(&conf); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(r.prdPath())
	if err != nil {
		return err
	}
	conf.Extra++
	var sb strings.Builder
	sb.WriteString(strings.TrimRight(string(b), "\n"))
	fmt.Fprintf(&sb, "\n\n### [ ] %s-%d: %s\n", prefix, conf.Extra, title)
	for _, c := range criteria {
		fmt.Fprintf(&sb, "- [ ] %s\n", strings.ReplaceAll(c, "\n", " "))
	}
	if err := store.WriteFileAtomic(r.prdPath(), []byte(sb.String()), 0o644); err != nil {
		return err
	}
	return r.saveConf(conf)
}

// testSummary counts a check's tests as its runner reported them.
func testSummary(res check.Result) string {
	t := res.Tests
	return fmt.Sprintf("%d passed, %d failed, %d skipped", t.Count(testreport.Pass), t.Count(testreport.Fail), t.Count(testreport.Skip))
}
