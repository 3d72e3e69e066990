package prompt

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Variables is every variable the build, plan and prd templates use.
var allVars = map[string]string{
	"REPO_ROOT": "/repo", "RUN_ID": "r1", "ITERATION": "1", "MAX_ITERATIONS": "5",
	"PRD_PATH": "prd.md", "PLAN_PATH": "plan.md", "PROGRESS_PATH": "progress.md",
	"GUARDRAILS_PATH": "guardrails.md", "ERRORS_LOG_PATH": "errors.log", "ACTIVITY_LOG_PATH": "activity.log",
	"STORY_ID": "US-001", "STORY_TITLE": "Title", "STORY_BLOCK": "### [ ] US-001: Title",
	"NO_COMMIT": "false", "QUALITY_GATES": "go test ./...", "VERIFY_FEEDBACK": "None.", "REQUEST": "a todo app",
	"TASK_ID": "US-001", "SUBTASK": "", "CONTEXT_HINTS": "None.", "MEMORY": "Nothing recorded yet.", "PROJECT_NOTES": "",
	"STATUS_RULES": "Do not edit task status.", "CONTEXT_SOFT": "70", "CONTEXT_HARD": "80",
}

// A signal standing alone on a line is what ends a loop; if a template
// carried one, an agent that echoes its prompt would end the loop falsely.
var standaloneSignal = regexp.MustCompile(`(?m)^\s*<promise>[A-Z_]+</promise>\s*$`)

func TestEmbeddedTemplatesRenderAndNeverCarryAStandaloneSignal(t *testing.T) {
	for _, k := range []Kind{Build, Plan, PRD} {
		tpl, err := Load(k, "")
		if err != nil {
			t.Fatal(err)
		}
		out, err := tpl.Render(allVars)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if strings.Contains(out, "{{") {
			t.Fatalf("%s: placeholder left in output", k)
		}
		if standaloneSignal.MatchString(out) {
			t.Fatalf("%s: a line of the prompt is a bare completion signal", k)
		}
	}
}

func TestBuildPromptNamesStoryAndStopPoint(t *testing.T) {
	tpl, _ := Load(Build, "")
	out, _ := tpl.Render(allVars)
	for _, want := range []string{"US-001: Title", "Stop here", "<promise>COMPLETE</promise>", "NO_COMMIT is false", "go test ./..."} {
		if !strings.Contains(out, want) {
			t.Errorf("build prompt lacks %q", want)
		}
	}
}

func TestOverrideReplacesEmbedded(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "PROMPT_build.md"), []byte("Do {{STORY_ID}} now."), 0o644)
	tpl, err := Load(Build, dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(allVars)
	if err != nil || out != "Do US-001 now." {
		t.Fatalf("out=%q err=%v", out, err)
	}
}

func TestUnknownVariableIsAnErrorNamingTheFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "PROMPT_plan.md"), []byte("Plan {{STORYID}}"), 0o644)
	tpl, _ := Load(Plan, dir)
	_, err := tpl.Render(allVars)
	if err == nil || !strings.Contains(err.Error(), "{{STORYID}}") || !strings.Contains(err.Error(), "PROMPT_plan.md") {
		t.Fatalf("err = %v", err)
	}
}

func TestValuesAreNotExpandedAgain(t *testing.T) {
	tpl := Template{Kind: Build, Text: "[{{STORY_BLOCK}}]"}
	out, err := tpl.Render(map[string]string{"STORY_BLOCK": "use {{RUN_ID}} literally", "RUN_ID": "x"})
	if err != nil || out != "[use {{RUN_ID}} literally]" {
		t.Fatalf("out=%q err=%v", out, err)
	}
}
