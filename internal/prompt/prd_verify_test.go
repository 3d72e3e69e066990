package prompt_test

import (
	"strings"
	"testing"

	"github.com/ralphloop/ralph/internal/prompt"
	"github.com/ralphloop/ralph/internal/tasks"
)

// The PRD prompt teaches the verify syntax by example: the example story it
// shows must parse with a verify command on its first criterion, so that a
// PRD written as told gets its criteria checked by command.
func TestPRDPromptExampleCarriesAVerifyCommand(t *testing.T) {
	tpl, err := prompt.Load(prompt.PRD, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(map[string]string{"REPO_ROOT": "/repo", "PRD_PATH": "prd.md", "REQUEST": "a todo app"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "(verify: `command`)") {
		t.Errorf("the PRD prompt does not say how to write a verify command:\n%s", out)
	}
	var example []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "    ") {
			example = append(example, strings.TrimPrefix(line, "    "))
		}
	}
	prd, err := tasks.ParseMarkdown("prd.md", []byte(strings.Join(example, "\n")+"\n"))
	if err != nil {
		t.Fatalf("the example story does not parse: %v\n%s", err, strings.Join(example, "\n"))
	}
	s, ok := prd.Find("US-001")
	if !ok || len(s.Criteria) < 2 {
		t.Fatalf("the example has no story US-001 with two criteria: %+v", prd)
	}
	if got := s.Criteria[0].Verify; got != "sh tests/us-001.sh" {
		t.Errorf("first criterion's verify command = %q, want %q", got, "sh tests/us-001.sh")
	}
	if got := s.Criteria[1].Verify; got != "" {
		t.Errorf("second criterion has verify command %q, want none", got)
	}
}
