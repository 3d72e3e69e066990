package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/ralphloop/ralph/"

// layer is where each package stands in DESIGN.md's layout (section 3):
// a package may import only packages of its own layer or below. A new
// package must be placed here, which is the point: it makes its author
// decide where it belongs.
var layer = map[string]int{
	// leaves: no ralph imports, or only other leaves
	"internal/errs": 0, "internal/text": 0, "internal/words": 0, "internal/inputlimit": 0, "internal/testreport": 0,
	"internal/redact": 0, "internal/proc": 0, "internal/heartbeat": 0, "internal/fakeagent": 0,
	// files, git and prompts
	"internal/store": 1, "internal/gitx": 1, "internal/prompt": 1,
	// the machines' materials: agents, checks, memory, task sources, events
	"internal/config": 2, "internal/memory": 2, "internal/check": 2, "internal/agent": 2,
	"internal/beads": 2, "internal/report": 2, "internal/role": 2,
	// control commands and their files, which every runner takes
	"internal/control": 2,
	"internal/tasks":   3, "internal/workspace": 3,
	// notifications: a sink of events that tells people
	"internal/notify": 3,
	// where parallel workers' worktrees live and what goes in them
	"internal/worktree": 3,
	// what every runner shares: the agent attempt
	"internal/runkit": 3, "internal/verify": 3,
	// the machines and their runners
	"internal/loop":    4,
	"internal/session": 5, "internal/thread": 5,
	// the status document, read by every front end
	"internal/status": 5,
	// runs above the machines: parallel workers and the merge queue
	"internal/engine": 6,
	// the same runs on Temporal, across machines: workflows and activities
	"internal/fleet": 6,
	// a workspace as the front ends see it
	"internal/live": 6,
	// the front ends: terminal UI, web dashboard, MCP server
	"internal/tui": 7, "internal/serve": 7, "internal/mcpserver": 7,
	// commands
	"internal/cli": 8, "cmd/ralph": 9,
	// tests' own packages sit on top
	"internal/testing/clitest": 10, "internal/testing/modelserver": 10, "internal/testing/journalgen": 10, "internal/beads/beadstest": 10,
	"internal/e2e/crash": 11, "internal/e2e/realagents": 11, "internal/e2e/beads": 11, "internal/e2e/watch": 11, "internal/e2e/browser": 11, "internal/e2e/mcp": 11, "internal/e2e/fleet": 11,
}

// goPackages lists the module's package folders with their non-test
// imports of other ralph packages.
func goPackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join("..", "..", top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") {
				return nil
			}
			rel, _ := filepath.Rel(filepath.Join("..", ".."), filepath.Dir(p))
			rel = filepath.ToSlash(rel)
			if _, ok := pkgs[rel]; !ok {
				pkgs[rel] = nil
			}
			if strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if strings.HasPrefix(path, module) {
					pkgs[rel] = append(pkgs[rel], strings.TrimPrefix(path, module))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return pkgs
}

// No package imports one above it, and every package has a layer.
func TestImportsPointDownOnly(t *testing.T) {
	for pkg, imports := range goPackages(t) {
		l, ok := layer[pkg]
		if !ok {
			t.Errorf("package %s has no layer in layout_test.go: place it where DESIGN.md's layout puts it", pkg)
			continue
		}
		for _, imp := range imports {
			if li, ok := layer[imp]; ok && li > l {
				t.Errorf("%s (layer %d) imports %s (layer %d), which is above it", pkg, l, imp, li)
			}
		}
	}
}

// The development page's code layout lists exactly the packages there are.
func TestDevelopmentLayoutListsEveryPackage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "# Development\n")
	if i < 0 {
		t.Fatal("docs/development.md has no # Development heading")
	}
	block := text[i:]
	start := strings.Index(block, "```\n")
	end := strings.Index(block[start+4:], "```")
	listed := map[string]bool{}
	for _, line := range strings.Split(block[start+4:start+4+end], "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	var missing []string
	pkgs := goPackages(t)
	for pkg := range pkgs {
		if !listed[pkg] && pkg != "internal/beads/beadstest" {
			missing = append(missing, pkg)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/development.md's layout does not list: %s", strings.Join(missing, ", "))
	}
	for name := range listed {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("docs/development.md's layout lists %s, which is not a package", name)
		}
	}
}
