package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The README is a guide a newcomer reads to the end; the reference lives
// in docs/. Past this it is growing back into the reference.
const maxREADMELines = 400

func TestREADMEStaysAGuide(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: move the detail into a page under docs/ and link to it", n, maxREADMELines)
	}
}

// Every relative link of the README and the docs pages leads somewhere: a
// moved section or a renamed heading breaks the links into it.
func TestDocsLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	for _, p := range pages {
		for _, problem := range brokenLinks(t, p) {
			t.Error(problem)
		}
	}
}

// The check itself finds a missing file and a missing anchor, and accepts
// what GitHub would link: headings with code and punctuation, a repeated
// heading's "-1", a link inside the same page, and no link inside code.
func TestBrokenLinksAreFound(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("other.md", "# Parallel builds: `ralph build --workers N`\n\n## Notes\n\n## Notes\n")
	write("page.md", strings.Join([]string{
		"# Page",
		"[fine](other.md) [fine](other.md#parallel-builds-ralph-build---workers-n) [fine](other.md#notes-1)",
		"[fine](#page) [fine](https://example.com/x.md#nowhere) `[code](gone.md)`",
		"```",
		"[code](gone.md)",
		"```",
		"[broken](gone.md) [broken](other.md#nowhere) [broken](#nowhere) ![broken](img/none.png)",
	}, "\n")+"\n")
	got := brokenLinks(t, filepath.Join(dir, "page.md"))
	if len(got) != 4 {
		t.Fatalf("want the 4 broken links found, got %d:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, want := range []string{"gone.md", "other.md#nowhere", "#nowhere", "img/none.png"} {
		if !strings.Contains(got[i], "("+want+")") {
			t.Errorf("problem %d = %q, want it to name %s", i, got[i], want)
		}
	}
}

var (
	markdownLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCode   = regexp.MustCompile("`[^`]*`")
	headingLine  = regexp.MustCompile(`^#{1,6} +(.*)$`)
)

// brokenLinks names each relative link of the markdown file at path whose
// file or anchor does not exist.
func brokenLinks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for i, line := range proseLines(string(b)) {
		if line == "" {
			continue
		}
		for _, m := range markdownLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: (%s): no such file", path, i+1, target))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				problems = append(problems, fmt.Sprintf("%s:%d: (%s): an anchor into a file that is not markdown", path, i+1, target))
				continue
			}
			if !anchors(t, dest)[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: (%s): %s has no heading with that anchor", path, i+1, target, dest))
			}
		}
	}
	return problems
}

// proseLines is the file's lines with those of fenced code blocks blanked,
// so that line numbers stay the file's.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// anchors are the ids GitHub gives the headings of a markdown file:
// lower case, punctuation dropped, spaces as hyphens, and "-1", "-2" on
// repeats.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, line := range proseLines(string(b)) {
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id := slug(m[1])
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
