package fakeagent

import (
	"errors"
	"fmt"
	"strings"
)

// prdPathFromPrompt returns the path on the first prompt line that starts
// with "PRD: " or "Task file: " (the two ways ralph's prompts name it).
func prdPathFromPrompt(prompt string) (string, error) {
	for _, line := range strings.Split(prompt, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, prefix := range []string{"PRD: ", "Task file: "} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				if p := strings.TrimSpace(rest); p != "" {
					return p, nil
				}
			}
		}
	}
	return "", errors.New(`no "prd" given and no prompt line starts with "PRD: " or "Task file: "`)
}

// checkStory marks the story heading "### [ ] <id>: ..." as "### [x]" and
// every "- [ ]" line of its block (up to the next "#", "##" or "###"
// heading) as "- [x]". Line endings and all other text are kept. Headings
// inside fenced code blocks are ignored.
func checkStory(text, id string) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	found := false
	inStory := false
	inFence := false
	for i, line := range lines {
		body := strings.TrimRight(line, "\r\n")
		eol := line[len(body):]
		if isFence(body) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if isBlockHeading(body) {
			inStory = false
			if found {
				break // only the first heading with this id
			}
			if h, ok := checkHeading(body, id); ok {
				lines[i] = h + eol
				found = true
				inStory = true
			}
			continue
		}
		if inStory {
			trimmed := strings.TrimLeft(body, " \t")
			if strings.HasPrefix(trimmed, "- [ ]") {
				indent := body[:len(body)-len(trimmed)]
				lines[i] = indent + "- [x]" + trimmed[len("- [ ]"):] + eol
			}
		}
	}
	if !found {
		return "", fmt.Errorf("story %s: no heading \"### [ ] %s: ...\" found", id, id)
	}
	return strings.Join(lines, ""), nil
}

func isFence(body string) bool {
	t := strings.TrimLeft(body, " ")
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

// isBlockHeading reports whether body is a "#", "##" or "###" heading, the
// headings that end a story block.
func isBlockHeading(body string) bool {
	for _, p := range []string{"# ", "## ", "### "} {
		if strings.HasPrefix(body, p) {
			return true
		}
	}
	return body == "#" || body == "##" || body == "###"
}

// checkHeading returns the checked form of a "### " heading if it is the
// heading of story id, with or without a checkbox.
func checkHeading(body, id string) (string, bool) {
	rest, ok := strings.CutPrefix(body, "### ")
	if !ok {
		return "", false
	}
	rest = strings.TrimLeft(rest, " ")
	for _, box := range []string{"[ ]", "[x]", "[X]"} {
		if after, ok := strings.CutPrefix(rest, box); ok {
			rest = strings.TrimLeft(after, " ")
			break
		}
	}
	after, ok := strings.CutPrefix(rest, id)
	if !ok {
		return "", false
	}
	if after != "" {
		c := after[0]
		if c != ':' && c != ' ' && c != '\t' {
			return "", false // US-0010 is not US-001
		}
	}
	return "### [x] " + rest, true
}
