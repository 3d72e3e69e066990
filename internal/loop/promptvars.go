package loop

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/inputlimit"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/tasks"
	"github.com/ralphloop/ralph/internal/text"
	"github.com/ralphloop/ralph/internal/workspace"
)

// checkContextSize refuses queued hints beyond inputlimit.MaxContextBytes,
// without reading them: they go whole into the prompt.
func checkContextSize(ws *workspace.Workspace) error {
	info, err := os.Stat(ws.Path("context.md"))
	if err != nil {
		return nil
	}
	return inputlimit.CheckContextSize(ws.Rel(ws.Path("context.md")), info.Size())
}

// consumeContext returns the hints queued by `ralph add-context` and
// removes them: each hint reaches exactly one prompt. Hints beyond
// inputlimit.MaxContextBytes (a file written there by hand while the run
// went on) are an error that leaves them where they are.
func (b *builder) consumeContext(taskID string) (string, error) {
	p := b.ws.Path("context.md")
	if err := checkContextSize(b.ws); err != nil {
		return "", err
	}
	// A named pipe put there would hang the run: it is refused, and
	// left alone.
	data, err := inputlimit.ReadFile(p)
	if inputlimit.IsRefusal(err) {
		b.sayf(report.KindRun, "ralph: %s; the hints in it are not used\n", strings.Replace(err.Error(), p, b.ws.Rel(p), 1))
		return "", nil
	}
	if err != nil || strings.TrimSpace(string(data)) == "" {
		return "", nil
	}
	if err := os.Remove(p); err != nil {
		return "", nil
	}
	b.event("context hints used in iteration %d (%s)", b.st.Machine.Iteration, taskID)
	// A note, not a transition: using hints is no step of the machine.
	b.emit(report.Event{Kind: report.KindNote, Task: taskID, Attempt: b.st.Machine.RetryCount + 1,
		Data: report.Note{ContextUsed: clip(strings.TrimSpace(string(data)), 300)}})
	return strings.TrimSpace(string(data)), nil
}

// prompt is iteration n's prompt for the task at sel: the template with
// the run's variables and the hints queued for it (each reaches one
// prompt).
func (b *builder) prompt(n int, sel tasks.Selection) (string, error) {
	hints, err := b.consumeContext(sel.TaskID())
	if err != nil {
		return "", err
	}
	return b.brief.tpl.Render(b.vars(n, sel, hints))
}

func (b *builder) vars(n int, sel tasks.Selection, hints string) map[string]string {
	ws, o := b.ws, b.opts
	story, taskID := sel.Story, sel.TaskID()
	subtask := ""
	if sel.Subtask != nil {
		subtask = fmt.Sprintf("Subtask: %s: %s (only this subtask; the story's other subtasks come later)", sel.Subtask.ID, sel.Subtask.Title)
	}
	feedback := b.st.Feedback[taskID]
	if feedback == "" {
		feedback = "Nothing: this is the first attempt at this task."
	}
	status := fmt.Sprintf("Do not edit task status in %s (status, passes, checkboxes of other tasks, retry counts, blocker fields): ralph owns them, marks %s done after verifying it, and restores any change.", ws.Rel(b.src.Path()), taskID)
	if agentTicks(b.src) {
		status = fmt.Sprintf("Update the PRD: change `- [ ]` to `- [x]` for each acceptance criterion of %s that now holds. Only when all of them hold, change the story heading from `### [ ] %s:` to `### [x] %s:`. Never check a criterion you did not verify; ralph runs the checks itself and reopens the story if they fail.", story.ID, story.ID, story.ID)
	}
	notes := ""
	if len(b.brief.projectNotes) > 0 {
		notes = "- Project notes for agents: " + strings.Join(b.brief.projectNotes, ", ") + "\n"
	}
	soft, hard := o.ContextSoft, o.ContextHard
	if soft == 0 {
		soft = 70
	}
	if hard == 0 {
		hard = 80
	}
	return map[string]string{
		"REPO_ROOT":         ws.Root,
		"PRD_PATH":          ws.Rel(b.src.Path()),
		"PLAN_PATH":         ws.Rel(o.PlanPath),
		"PROGRESS_PATH":     ws.Rel(ws.ProgressPath()),
		"GUARDRAILS_PATH":   ws.Rel(ws.GuardrailsPath()),
		"ERRORS_LOG_PATH":   ws.Rel(ws.ErrorsLogPath()),
		"ACTIVITY_LOG_PATH": ws.Rel(ws.ActivityLogPath()),
		"TASK_ID":           taskID,
		"STORY_ID":          story.ID,
		"STORY_TITLE":       story.Title,
		"STORY_BLOCK":       story.Block,
		"SUBTASK":           subtask,
		"RUN_ID":            b.id,
		"ITERATION":         strconv.Itoa(n),
		"MAX_ITERATIONS":    strconv.Itoa(b.st.MaxIterations),
		"NO_COMMIT":         strconv.FormatBool(b.st.NoCommit),
		"QUALITY_GATES":     check.Gates(o.Checks),
		"VERIFY_FEEDBACK":   feedback,
		"STATUS_RULES":      status,
		"CONTEXT_HINTS":     text.OrNone(hints, "None."),
		"MEMORY":            text.OrNone(b.brief.memText, "Nothing recorded yet."),
		"PROJECT_NOTES":     notes,
		"CONTEXT_SOFT":      strconv.Itoa(soft),
		"CONTEXT_HARD":      strconv.Itoa(hard),
	}
}
