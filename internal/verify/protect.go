package verify

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Guard is what ralph protects in a work tree: the tests that exist when
// a run starts and the files that define its checks. An attempt that
// changes any of them is also judged with their start versions put back
// (see Overlay), so that a test weakened, skipped or deleted, a Makefile
// target replaced by `@echo ok`, or a conftest.py that deselects the
// failing test, shows as what it is.
type Guard struct {
	// Defining are the files that define the checks and the verify
	// commands, found when the run started: the scripts they name, the
	// makefile of a check that runs make, package.json of one that runs
	// a package manager, pytest's configuration, and the files their
	// recipes and scripts name. Paths are slash-separated, relative to
	// the work tree.
	Defining []string `json:"defining,omitempty"`
	// Globs are the user's own `[verify] protected` patterns (path.Match
	// syntax, with ** for any number of folders).
	Globs []string `json:"globs,omitempty"`
}

// testDirs are folder names whose files are tests or their fixtures.
var testDirs = []string{"test", "tests", "__tests__", "spec", "specs", "testdata", "test_data", "fixtures", "e2e", "t"}

// IsTestPath reports whether rel (slash-separated, relative to the work
// tree) is, by the conventions of the common ecosystems, a test or a
// test's data: Go's *_test.go and testdata, pytest's test_*.py and
// *_test.py, JavaScript's *.test.* and *.spec.* and __tests__, Java's
// *Test.java, shell tests, and anything under a tests folder.
func IsTestPath(rel string) bool {
	dir, base := path.Split(rel)
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		if slices.Contains(testDirs, strings.ToLower(part)) {
			return true
		}
	}
	lower := strings.ToLower(base)
	stem, ext := splitExt(lower)
	switch {
	case strings.HasSuffix(lower, "_test.go"):
		return true
	case ext == ".py" && (strings.HasPrefix(stem, "test_") || strings.HasSuffix(stem, "_test") || stem == "tests"):
		return true
	case strings.Contains(lower, ".test.") || strings.Contains(lower, ".spec.") || strings.HasSuffix(stem, "_spec"):
		return true
	case (ext == ".java" || ext == ".kt" || ext == ".scala" || ext == ".cs") && (strings.HasSuffix(base[:len(base)-len(ext)], "Test") || strings.HasSuffix(base[:len(base)-len(ext)], "Tests") || strings.HasSuffix(base[:len(base)-len(ext)], "IT")):
		return true
	case ext == ".bats" || ext == ".t":
		return true
	case (ext == ".sh" || ext == "") && (strings.HasPrefix(stem, "test") || strings.HasSuffix(stem, "_test") || strings.HasSuffix(stem, "-test")):
		return true
	}
	return false
}

// testConfigNames are files that change how tests run wherever they are:
// a new one can deselect, skip or stub the failing test, so they are
// protected even when the attempt added them.
var testConfigNames = []string{"conftest.py", "pytest.ini", "tox.ini", "noxfile.py", ".rspec", "phpunit.xml", "phpunit.xml.dist", "mocha.opts", "ava.config.js"}

// testConfigPrefixes are config files named <prefix>.<ext>.
var testConfigPrefixes = []string{"jest.config.", "jest.setup.", "vitest.config.", "vitest.workspace.", "vitest.setup.", "karma.conf.", ".mocharc", "playwright.config.", "cypress.config.", "babel.config."}

// IsTestConfig reports whether rel is a file that configures a test
// runner by its presence.
func IsTestConfig(rel string) bool {
	base := path.Base(rel)
	if slices.Contains(testConfigNames, base) {
		return true
	}
	for _, p := range testConfigPrefixes {
		if strings.HasPrefix(base, p) {
			return true
		}
	}
	return false
}

func splitExt(base string) (stem, ext string) {
	ext = path.Ext(base)
	return strings.TrimSuffix(base, ext), ext
}

// Protects reports whether a change to rel needs the start versions run
// against the new code. existed says rel was in the start tree: a test
// the attempt added is new evidence, not a protected file, unless it is
// a test runner's configuration or a user's glob names it.
func (g Guard) Protects(rel string, existed bool) bool {
	rel = filepath.ToSlash(rel)
	if IsTestConfig(rel) || g.matchesGlob(rel) {
		return true
	}
	// A file a check names but that the start did not have (a check
	// `test -f a.txt` the story makes pass) defines nothing yet: it is
	// the work.
	return existed && (IsTestPath(rel) || slices.Contains(g.Defining, rel))
}

// InTestSide reports whether rel belongs to the tests' side of the tree,
// the side the start's versions are put back for: the protected files and
// every test, new ones included (a new test file can hold a TestMain that
// exits 0 or an init that stubs the code).
func (g Guard) InTestSide(rel string) bool {
	return g.Protects(rel, true)
}

func (g Guard) matchesGlob(rel string) bool {
	for _, glob := range g.Globs {
		if MatchGlob(glob, rel) {
			return true
		}
	}
	return false
}

// MatchGlob matches a slash-separated path against a pattern of
// path.Match with one addition: a "**" element matches any number of
// folders, so "tests/**" protects the whole tests folder and
// "**/*.snap" every snapshot. A pattern without a slash matches the base
// name anywhere, as .gitignore does.
func MatchGlob(pattern, rel string) bool {
	pattern = strings.TrimPrefix(filepath.ToSlash(pattern), "./")
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(rel))
		return ok
	}
	return matchParts(strings.Split(pattern, "/"), strings.Split(rel, "/"))
}

func matchParts(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(parts); i++ {
				if matchParts(pat[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], parts[0]); !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return len(parts) == 0
}

// GlobsMatchingNothing returns the user's globs that match no file of the
// work tree at root: worth a warning (a typo protects nothing), not an
// error.
func GlobsMatchingNothing(root string, globs []string) []string {
	if len(globs) == 0 {
		return nil
	}
	matched := make([]bool, len(globs))
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for i, g := range globs {
			if !matched[i] && MatchGlob(g, rel) {
				matched[i] = true
			}
		}
		return nil
	})
	var none []string
	for i, g := range globs {
		if !matched[i] {
			none = append(none, g)
		}
	}
	return none
}

// FindDefining lists the files in the work tree at root that define the
// given commands (the checks' and the verify commands' command lines):
// each word that names a file of the tree; for make, the makefile and
// the files its recipes name; for npm, yarn, pnpm and bun, package.json
// and the files its scripts name; for pytest, its configuration files.
// Only files that exist are listed: what the start tree has is what an
// attempt can change.
func FindDefining(root string, commands []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(rel string) {
		rel = path.Clean(filepath.ToSlash(rel))
		if seen[rel] || rel == "." || strings.HasPrefix(rel, "../") || strings.HasPrefix(rel, "/") {
			return
		}
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		seen[rel] = true
		out = append(out, rel)
	}
	addWords := func(line string) {
		for _, w := range shellWords(line) {
			if strings.HasPrefix(w, "-") {
				if _, v, ok := strings.Cut(w, "="); ok {
					add(v) // --rcfile=x.cfg
				}
				continue
			}
			add(w)
		}
	}
	var expand func(cmd string, depth int)
	expand = func(cmd string, depth int) {
		addWords(cmd)
		if depth > 3 {
			return
		}
		for _, prog := range programs(cmd) {
			switch prog {
			case "make", "gmake":
				for _, mk := range []string{"GNUmakefile", "makefile", "Makefile"} {
					if _, err := os.Stat(filepath.Join(root, mk)); err == nil {
						add(mk)
						for _, r := range makeRecipes(filepath.Join(root, mk)) {
							expand(r, depth+1)
						}
						break
					}
				}
			case "npm", "yarn", "pnpm", "bun", "npx":
				add("package.json")
				for _, s := range packageScripts(filepath.Join(root, "package.json")) {
					expand(s, depth+1)
				}
			case "pytest", "py.test":
				for _, f := range []string{"pytest.ini", "conftest.py", "tox.ini"} {
					add(f)
				}
				for _, f := range []string{"pyproject.toml", "setup.cfg"} {
					if data, err := os.ReadFile(filepath.Join(root, f)); err == nil && (strings.Contains(string(data), "[tool.pytest") || strings.Contains(string(data), "[tool:pytest]")) {
						add(f)
					}
				}
			}
		}
	}
	for _, c := range commands {
		expand(c, 0)
	}
	slices.Sort(out)
	return out
}

// programs returns the programs a command line runs: the first word of
// each simple command, past assignments and wrappers such as env, with
// "python -m pytest" counted as pytest.
func programs(cmd string) []string {
	var out []string
	words := shellWords(cmd)
	first := true
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "&&" || w == "||" || w == ";" || w == "|" {
			first = true
			continue
		}
		if !first {
			continue
		}
		if strings.Contains(w, "=") && !strings.HasPrefix(w, "=") || w == "env" || w == "time" || w == "exec" {
			continue
		}
		base := path.Base(w)
		if strings.HasPrefix(base, "python") && i+2 < len(words) && words[i+1] == "-m" {
			base = words[i+2]
		}
		out = append(out, base)
		first = false
	}
	return out
}

// shellWords splits a command line into words roughly as sh does: quotes
// removed, and the operators &&, ||, ; and | as words of their own. It is
// for finding file names, not for running anything.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			flush()
		case r == ';' || r == '|' || r == '&' || r == '(' || r == ')' || r == '<' || r == '>':
			flush()
			op := string(r)
			if i+1 < len(rs) && (rs[i+1] == '&' || rs[i+1] == '|') && (r == '&' || r == '|') {
				op += string(rs[i+1])
				i++
			}
			if op == "&&" || op == "||" || op == ";" || op == "|" {
				words = append(words, op)
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words
}

// makeRecipes returns the recipe lines of a makefile (those starting with
// a tab), whose words may name the scripts a target runs.
func makeRecipes(p string) []string {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && len(out) < 2000 {
		if l := sc.Text(); strings.HasPrefix(l, "\t") {
			out = append(out, strings.TrimLeft(strings.TrimSpace(l), "@-+"))
		}
	}
	return out
}

// packageScripts returns the script bodies of a package.json.
func packageScripts(p string) []string {
	data, err := os.ReadFile(p)
	if err != nil || len(data) > 4<<20 {
		return nil
	}
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	if json.Unmarshal(data, &pkg) != nil {
		return nil
	}
	var out []string
	for _, s := range pkg.Scripts {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
