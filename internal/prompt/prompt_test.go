package prompt

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// sessionCommon is the variables every session-role template uses.
var sessionCommon = []string{
	"REPO_ROOT", "SESSION_ID", "SESSION_DIR", "REQUEST", "PLAN_PATH", "TASKS_PATH", "PROGRESS_PATH", "RESULT_FORMAT",
}

// sessionKinds is each session-role template with exactly the variables it
// uses, beyond sessionCommon, and its required first line.
var sessionKinds = []struct {
	kind      Kind
	file      string
	vars      []string
	firstLine string
	lines     []string // lines that must appear exactly, before rendering
}{
	{Planner, "PROMPT_planner.md", []string{"MODE", "QA", "FEEDBACK"},
		"# Ralph session role: planner", []string{"Mode: {{MODE}}"}},
	{Questioner, "PROMPT_questioner.md", []string{"QUESTIONS"},
		"# Ralph session role: questioner", nil},
	{Executor, "PROMPT_executor.md", []string{"TASK_ID", "TASK_TITLE", "TASK_CRITERIA", "ATTEMPT", "MAX_ATTEMPTS", "FEEDBACK", "QUALITY_GATES"},
		"# Ralph session role: executor", []string{"Execute {{TASK_ID}}, attempt {{ATTEMPT}} of {{MAX_ATTEMPTS}}"}},
	{SessionReview, "PROMPT_session-review.md", []string{"TASK_ID", "TASK_TITLE", "TASK_CRITERIA", "ATTEMPT", "DIFF", "CHECKS", "EXECUTOR_SUMMARY"},
		"# Ralph session role: reviewer", []string{"Review {{TASK_ID}}, attempt {{ATTEMPT}}"}},
	{GoalCheck, "PROMPT_goal-check.md", []string{"TASKS", "DIFF_STAT", "BASELINE"},
		"# Ralph session role: goal-check", nil},
}

var placeholder = regexp.MustCompile(`\{\{([A-Z0-9_]+)\}\}`)

func TestSessionKindsNameTheirFiles(t *testing.T) {
	for _, sk := range sessionKinds {
		if sk.kind.FileName() != sk.file {
			t.Errorf("%s: FileName() = %q, want %q", sk.kind, sk.kind.FileName(), sk.file)
		}
		if Default(sk.kind) == "" {
			t.Errorf("%s: no embedded template", sk.kind)
		}
	}
}

func TestSessionTemplatesUseExactlyTheirVariables(t *testing.T) {
	for _, sk := range sessionKinds {
		t.Run(string(sk.kind), func(t *testing.T) {
			want := map[string]string{}
			for _, v := range append(append([]string{}, sessionCommon...), sk.vars...) {
				want[v] = "<" + strings.ToLower(v) + ">"
			}
			tpl, err := Load(sk.kind, "")
			if err != nil {
				t.Fatal(err)
			}
			if tpl.Source != "embedded" {
				t.Fatalf("source = %q", tpl.Source)
			}

			used := map[string]bool{}
			for _, m := range placeholder.FindAllStringSubmatch(tpl.Text, -1) {
				used[m[1]] = true
			}
			for v := range want {
				if !used[v] {
					t.Errorf("the template does not use {{%s}}", v)
				}
			}
			for v := range used {
				if _, ok := want[v]; !ok {
					t.Errorf("the template uses {{%s}}, which is not one of its variables", v)
				}
			}
			lines := strings.Split(tpl.Text, "\n")
			for _, l := range sk.lines {
				if !slices.Contains(lines, l) {
					t.Errorf("the template has no line %q", l)
				}
			}

			out, err := tpl.Render(want)
			if err != nil {
				t.Fatalf("render with its variables: %v", err)
			}
			if strings.Contains(out, "{{") {
				t.Error("placeholder left in output")
			}
			if first, _, _ := strings.Cut(out, "\n"); first != sk.firstLine {
				t.Errorf("first line = %q, want %q", first, sk.firstLine)
			}
			if standaloneSignal.MatchString(out) || strings.Contains(out, "<promise>") {
				t.Error("a session role has no promise signal to give")
			}
			for _, v := range []string{"<result_format>", "<request>", "<session_id>"} {
				if !strings.Contains(out, v) {
					t.Errorf("rendered prompt lacks %s", v)
				}
			}

			// Without one of its variables, rendering fails and names it.
			for _, v := range []string{"RESULT_FORMAT", sk.vars[0]} {
				less := maps.Clone(want)
				delete(less, v)
				if _, err := tpl.Render(less); err == nil || !strings.Contains(err.Error(), "{{"+v+"}}") {
					t.Errorf("render without %s: err = %v", v, err)
				}
			}
		})
	}
}

// The orchestrator owns commits and task marks; every role is told so.
func TestSessionTemplatesLeaveCommitsAndMarksToRalph(t *testing.T) {
	for _, sk := range sessionKinds {
		text := Default(sk.kind)
		for _, want := range []string{"do not commit", "push", "mark"} {
			if !strings.Contains(strings.ToLower(text), want) {
				t.Errorf("%s lacks %q", sk.file, want)
			}
		}
	}
}

func TestLoadTakesASessionOverrideFromTheDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "PROMPT_session-review.md"), []byte("Judge {{TASK_ID}} in {{SESSION_ID}}."), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := Load(SessionReview, dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "PROMPT_session-review.md"); tpl.Source != want {
		t.Errorf("source = %q, want %q", tpl.Source, want)
	}
	out, err := tpl.Render(map[string]string{"TASK_ID": "task-2", "SESSION_ID": "260131-144400"})
	if err != nil || out != "Judge task-2 in 260131-144400." {
		t.Fatalf("out=%q err=%v", out, err)
	}

	// A kind without an override in the directory falls back to the
	// embedded template.
	tpl, err = Load(GoalCheck, dir)
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Source != "embedded" || tpl.Text != Default(GoalCheck) {
		t.Errorf("goal-check: source %q, want the embedded template", tpl.Source)
	}
}

// Default returns the embedded text of kind k.
func Default(k Kind) string {
	b, _ := embedded.ReadFile("templates/" + k.FileName())
	return string(b)
}
