package prompt

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// A user who overrides a prompt in .ralph/prompts/ learns the placeholders
// from the configuration page: every one the build, plan and PRD templates
// use must be listed there.
func TestDocsListEveryPlaceholderOfTheLoopPrompts(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(page), "\n## Prompts\n")
	if i < 0 {
		t.Fatal("docs/configuration.md has no ## Prompts section")
	}
	section := string(page[i:])
	if j := strings.Index(section[1:], "\n## "); j >= 0 {
		section = section[:j+1]
	}
	placeholder := regexp.MustCompile(`{{([A-Z_]+)}}`)
	for _, k := range []Kind{Build, Plan, PRD} {
		for _, m := range placeholder.FindAllStringSubmatch(Default(k), -1) {
			if !strings.Contains(section, "`"+m[1]+"`") {
				t.Errorf("%s uses {{%s}}, which the Prompts section of docs/configuration.md does not list", k.FileName(), m[1])
			}
		}
	}
}
