package tasks

import (
	"regexp"
	"strings"
)

// acHeading matches a BMAD story file's "## Acceptance Criteria" heading.
var acHeading = regexp.MustCompile(`(?i)^#{1,6}\s+acceptance\s+criteria\s*#*\s*$`)

// listItem matches a bullet or numbered list item, capturing the indentation
// and the text after the marker.
var listItem = regexp.MustCompile(`^([ \t]*)(?:[-*+]|\d+[.)])[ \t]+(.*)$`)

// storyFileCriteria returns the list items under the first "Acceptance
// Criteria" heading of a BMAD story file, up to the next heading of the same
// or a higher level. Only items at the outermost indentation count, since
// nested items elaborate on their parent; a checkbox sets Done and a
// "(verify: `cmd`)" suffix sets Verify. Lines are 1-based in the story file.
func storyFileCriteria(data []byte) []Criterion {
	text := strings.TrimPrefix(string(data), byteOrderMark)
	var (
		out      []Criterion
		inAC     bool
		acLevel  int
		itemIndt = -1
		fence    codeFence
	)
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if fence.isOpen() {
			if fence.isClosedBy(line) {
				fence = codeFence{}
			}
			continue
		}
		if opened, ok := openingFence(line); ok {
			fence = opened
			continue
		}
		if level := markerRun(line, '#'); level > 0 && level < len(line) && (line[level] == ' ' || line[level] == '\t') {
			if inAC && level <= acLevel {
				break
			}
			if !inAC && acHeading.MatchString(line) {
				inAC, acLevel = true, level
			}
			continue
		}
		if !inAC {
			continue
		}
		match := listItem.FindStringSubmatch(line)
		if match == nil {
			continue
		}
		indent := len(match[1])
		if itemIndt < 0 {
			itemIndt = indent
		}
		if indent != itemIndt {
			continue
		}
		item := strings.TrimSpace(match[2])
		c := Criterion{Line: i + 1}
		if len(item) >= 3 && item[0] == '[' && item[2] == ']' && strings.IndexByte(" xX", item[1]) >= 0 {
			c.Done = item[1] != ' '
			item = strings.TrimSpace(item[3:])
		}
		if item == "" {
			continue
		}
		c.Text, c.Verify = splitVerify(item)
		out = append(out, c)
	}
	return out
}
