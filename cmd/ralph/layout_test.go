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

// layer is where each package stands in DESIGN.md's layout (section 3),
// top first: an import must point to a lower number. A new package must be
// placed here, which is the point: it makes its author decide where it
// belongs. Packages of one row of §3 that import each other get numbers
// of their own, the importer above.
var layer = map[string]int{
	// tests' own packages sit on top
	"internal/e2e/crash": 120, "internal/e2e/realagents": 120, "internal/e2e/beads": 120, "internal/e2e/watch": 120,
	"internal/e2e/browser": 120, "internal/e2e/mcp": 120, "internal/e2e/fleet": 120, "internal/e2e/conformance": 120,
	"internal/testing/harness": 112, // builds on clitest
	"internal/testing/clitest": 110, "internal/testing/modelserver": 110, "internal/testing/journalgen": 110, "internal/testing/wait": 110, "internal/beads/beadstest": 110,
	"cmd/ralph": 105, "cmd/ralph-sandbox-net": 105,
	"internal/cli": 100,
	"internal/app": 90,
	// views and controls over the event stream
	"internal/serve": 80, "internal/tui": 80, "internal/mcpserver": 80,
	"internal/live":   76, // a workspace as the front ends see it: local journal or Temporal
	"internal/status": 74, // the status document every front end shows
	"internal/notify": 72, // a sink of events that tells people
	// the parallel core and its executors
	"internal/engine": 60, "internal/fleet": 60,
	// the one task machine and landing procedure both executors run
	"internal/landing": 55,
	// the machines and their runners
	// a thread runs the loop for its Executing phase (seed 003): above it
	"internal/thread":  52,
	"internal/session": 50, "internal/loop": 50,
	"internal/verify": 40,
	"internal/runkit": 30, "internal/heartbeat": 28,
	"internal/report": 20, "internal/control": 20,
	// the ports' materials
	"internal/role": 12, "internal/prompt": 12, "internal/tasks": 12, "internal/memory": 12, "internal/check": 12,
	"internal/agent": 12, "internal/workspace": 12, "internal/worktree": 12,
	"internal/beads": 10, "internal/gitx": 10, "internal/testreport": 10, "internal/config": 10,
	// the sandbox sits with proc, below config: app hands it its policy
	"internal/store": 4, "internal/proc": 4, "internal/sandbox": 4,
	"internal/redact": 2, "internal/inputlimit": 2, "internal/text": 2, "internal/words": 2, "internal/errs": 2,
	// the machines' table type and its one Mermaid writer: pure data,
	// which Temporal's deterministic workflow code reads too
	"internal/machine": 1,
	// the scripted fake agent: a test double, and the labelled demo's stand-in
	"internal/fakeagent": 5,
}

// sideways are imports between packages of one layer that §3 does not
// want, with why they are still there. Remove an entry when its import
// goes: the test fails on an entry no longer needed.
var sideways = map[string]string{}

// readsConfig are the packages below internal/app that still import
// config (none since issue 27: internal/app hands each the values it
// needs). A package added here is debt, named as such.
var readsConfig = map[string]bool{}

// cliReadsConfig are the files of internal/cli that import config, each
// with why it must. None must: commands hold an *app.App, whose methods
// turn the configuration into what the engines take, and even `ralph
// init`, which writes config.toml, has app.Init write it. A file added
// here says why app cannot do its part.
var cliReadsConfig = map[string]string{}

// longFiles are production files past maxLines, each with the most lines
// it may have until it is split: the list only shrinks.
var longFiles = map[string]int{}

// maxLines is DESIGN §3's bound on a production file: one that grows
// past it is a step that wants its own file.
const maxLines = 800

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

// No package imports one of its own layer or above it (but for the
// listed sideways imports), and every package has a layer.
func TestImportsPointDownOnly(t *testing.T) {
	used := map[string]bool{}
	for pkg, imports := range goPackages(t) {
		l, ok := layer[pkg]
		if !ok {
			t.Errorf("package %s has no layer in layout_test.go: place it where DESIGN.md's layout puts it", pkg)
			continue
		}
		for _, imp := range imports {
			li, ok := layer[imp]
			edge := pkg + " -> " + imp
			switch {
			case !ok || imp == pkg || li < l:
			case li == l && sideways[edge] != "":
				used[edge] = true
			case li == l:
				t.Errorf("%s imports %s of its own layer: move what they share below both", pkg, imp)
			default:
				t.Errorf("%s (layer %d) imports %s (layer %d), which is above it: hand it down through a port or a callback", pkg, l, imp, li)
			}
		}
	}
	for edge := range sideways {
		if !used[edge] {
			t.Errorf("%s is gone: remove it from sideways", edge)
		}
	}
}

// Nothing but app reads config: each package below it is handed what
// it needs, and the commands above it ask app (but for the files of
// cliReadsConfig).
func TestOnlyAppReadsConfig(t *testing.T) {
	for pkg, imports := range goPackages(t) {
		if pkg == "internal/cli" {
			continue // file by file, below
		}
		if layer[pkg] >= layer["internal/app"] || pkg == "internal/config" {
			continue
		}
		reads := false
		for _, imp := range imports {
			reads = reads || imp == "internal/config"
		}
		switch {
		case reads && !readsConfig[pkg]:
			t.Errorf("%s imports internal/config: only app (and cli above it) read config; hand %s the values it needs", pkg, pkg)
		case !reads && readsConfig[pkg]:
			t.Errorf("%s no longer imports internal/config: remove it from readsConfig", pkg)
		}
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "internal", "cli", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in internal/cli (%v)", err)
	}
	reads := map[string]bool{}
	for _, p := range files {
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		for _, imp := range f.Imports {
			if strings.Trim(imp.Path.Value, `"`) == module+"internal/config" {
				reads[name] = true
			}
		}
		if reads[name] && cliReadsConfig[name] == "" {
			t.Errorf("internal/cli/%s imports internal/config: a command asks internal/app for what the configuration sets (or say in cliReadsConfig why it must read it)", name)
		}
	}
	for name := range cliReadsConfig {
		if !reads[name] {
			t.Errorf("internal/cli/%s no longer imports internal/config: remove it from cliReadsConfig", name)
		}
	}
}

// No production file passes maxLines; the listed ones may not grow.
func TestNoLongFiles(t *testing.T) {
	seen := map[string]bool{}
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join("..", "..", top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n := strings.Count(string(b), "\n")
			rel, _ := filepath.Rel(filepath.Join("..", ".."), p)
			rel = filepath.ToSlash(rel)
			limit, listed := longFiles[rel]
			seen[rel] = listed
			switch {
			case listed && n > limit:
				t.Errorf("%s has %d lines, more than the %d it had: split a step out of it instead (no file past %d)", rel, n, limit, maxLines)
			case listed && n <= maxLines:
				t.Errorf("%s has %d lines now: remove it from longFiles", rel, n)
			case !listed && n > maxLines:
				t.Errorf("%s has %d lines, past %d: a file that grows past it is a step that wants its own file (DESIGN §3)", rel, n, maxLines)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for f := range longFiles {
		if !seen[f] {
			t.Errorf("%s is gone: remove it from longFiles", f)
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
