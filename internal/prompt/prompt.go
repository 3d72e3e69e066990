// Package prompt holds the prompt templates that ralph renders for each
// agent run, and their rendering.
//
// The templates are embedded in the binary; a file with the same name in
// .ralph/prompts/ overrides one. Rendering replaces {{NAME}} placeholders in
// one pass: values are never scanned again, so text taken from a task (which
// may itself contain braces) cannot inject further placeholders.
package prompt

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ralphloop/ralph/internal/inputlimit"
)

//go:embed templates/*.md
var embedded embed.FS

// Kind names one of the prompt templates.
type Kind string

// The prompts ralph renders.
const (
	Build  Kind = "build"
	Plan   Kind = "plan"
	PRD    Kind = "prd"
	Review Kind = "review"
)

// The prompts of the roles of a seed-002 session. Each run ends its reply
// with a JSON result (see role.ParseResult); ralph, not the agent, keeps the
// session's files and commits.
const (
	// Planner writes or revises the session plan and returns the task
	// list; {{MODE}} is INITIALIZE, UPDATE or QA_COORDINATE.
	Planner Kind = "planner"
	// Questioner answers the planner's questions from the code and the
	// request, and sets aside those only a person can answer.
	Questioner Kind = "questioner"
	// Executor implements one task of the session.
	Executor Kind = "executor"
	// SessionReview judges one executed task against its success
	// criteria. (Review is the single-loop story review.)
	SessionReview Kind = "session-review"
	// GoalCheck checks the whole request against everything done once
	// every task is done.
	GoalCheck Kind = "goal-check"
)

// FileName is the template's file name, also the name of its override.
func (k Kind) FileName() string { return "PROMPT_" + string(k) + ".md" }

// Template is a loaded prompt template.
type Template struct {
	Kind   Kind
	Source string // "embedded" or the override's path
	Text   string
}

// Load returns the template of kind k, taking an override from overrideDir
// when one exists there.
func Load(k Kind, overrideDir string) (Template, error) {
	if overrideDir != "" {
		p := filepath.Join(overrideDir, k.FileName())
		b, err := inputlimit.ReadFile(p)
		if err == nil {
			return Template{Kind: k, Source: p, Text: string(b)}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return Template{}, err
		}
	}
	b, err := embedded.ReadFile("templates/" + k.FileName())
	if err != nil {
		return Template{}, fmt.Errorf("no prompt template %q", k)
	}
	return Template{Kind: k, Source: "embedded", Text: string(b)}, nil
}

// Render replaces every {{NAME}} in the template with vars[NAME]. A
// placeholder without a value is an error that names the template, so that a
// typo in an override fails loudly instead of reaching the agent.
func (t Template) Render(vars map[string]string) (string, error) {
	var b strings.Builder
	b.Grow(len(t.Text) + 1024)
	s := t.Text
	var unknown []string
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := strings.Index(s[i+2:], "}}")
		if j < 0 {
			b.WriteString(s)
			break
		}
		name := s[i+2 : i+2+j]
		if !isName(name) {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, name)
		}
		b.WriteString(v)
		s = s[i+2+j+2:]
	}
	if len(unknown) > 0 {
		known := make([]string, 0, len(vars))
		for k := range vars {
			known = append(known, k)
		}
		sort.Strings(known)
		return "", fmt.Errorf("prompt %s (%s): unknown variable {{%s}}; known variables: %s",
			t.Kind.FileName(), t.Source, strings.Join(unknown, "}}, {{"), strings.Join(known, ", "))
	}
	return b.String(), nil
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && r != '_' && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
