package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/redact"
)

// project creates a temp dir holding files, given as name/content pairs.
func project(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i+1 < len(files); i += 2 {
		p := filepath.Join(dir, files[i])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runs lists the Run lines of checks, the easiest form to compare.
func runs(checks []Check) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Kind+": "+c.Run)
	}
	return out
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"empty", nil, nil},
		{"go", []string{"go.mod", "module x\n"},
			[]string{"lint: go vet ./...", "test: go test -json ./..."}},
		{"pnpm with placeholder test", []string{
			"pnpm-lock.yaml", "",
			"package.json", `{"scripts": {
				"test": "echo \"Error: no test specified\" && exit 1",
				"lint": "eslint .", "tsc": "tsc --noEmit", "test:e2e": "playwright test",
				"build": "vite build"}}`,
		}, []string{"typecheck: pnpm run tsc", "lint: pnpm run lint", "e2e: pnpm run test:e2e"}},
		{"npm aliases pick the first", []string{
			"package.json", `{"scripts": {"type-check": "x", "typecheck": "y", "test": "vitest run", "e2e": "z", "test:e2e": "w"}}`,
		}, []string{"typecheck: npm run typecheck", "test: npm run test -- --reporter=default --reporter=junit --outputFile.junit=.ralph/reports/vitest.xml", "e2e: npm run e2e"}},
		{"yarn", []string{"yarn.lock", "", "package.json", `{"scripts": {"test": "jest"}}`},
			[]string{"test: yarn run test"}},
		{"bun", []string{"bun.lock", "", "package.json", `{"scripts": {"test": "bun test"}}`},
			[]string{"test: bun run test"}},
		{"packageManager field", []string{"package.json", `{"packageManager": "pnpm@9.1.0", "scripts": {"lint": "x"}}`},
			[]string{"lint: pnpm run lint"}},
		{"broken package.json", []string{"package.json", `{"scripts": `}, nil},
		{"cargo", []string{"Cargo.toml", "[package]\nname = \"x\"\n"},
			[]string{"test: cargo test"}},
		{"pytest via pyproject", []string{"pyproject.toml", "[project]\nname='x'\n\n[tool.pytest.ini_options]\naddopts='-q'\n"},
			[]string{"test: pytest --junitxml=.ralph/reports/pytest.xml"}},
		{"pyproject without pytest", []string{"pyproject.toml", "[project]\nname='x'\n"}, nil},
		{"pytest.ini", []string{"pytest.ini", "[pytest]\n"}, []string{"test: pytest --junitxml=.ralph/reports/pytest.xml"}},
		{"setup.cfg", []string{"setup.cfg", "[tool:pytest]\n"}, []string{"test: pytest --junitxml=.ralph/reports/pytest.xml"}},
		{"tests dir", []string{"tests/test_x.py", "def test_x(): pass\n"}, []string{"test: pytest --junitxml=.ralph/reports/pytest.xml"}},
		{"makefile only", []string{"Makefile", "VAR := 1\nbuild:\n\tcc x.c\n\n.PHONY: test\ntest: build\n\t./run-tests\n"},
			[]string{"test: make test"}},
		{"makefile without test", []string{"Makefile", "test := 1\nbuild:\n\ttest -f x\n"}, nil},
		{"makefile defers to go test", []string{"go.mod", "module x\n", "Makefile", "test:\n\tgo test ./...\n"},
			[]string{"lint: go vet ./...", "test: go test -json ./..."}},
		{"mixed ecosystems are ordered by kind", []string{
			"go.mod", "module x\n",
			"package.json", `{"scripts": {"e2e": "playwright test", "typecheck": "tsc", "test": "vitest"}}`,
			"Cargo.toml", "",
		}, []string{
			"typecheck: npm run typecheck", "lint: go vet ./...", "test: go test -json ./...",
			"test: npm run test -- --reporter=default --reporter=junit --outputFile.junit=.ralph/reports/vitest.xml", "test: cargo test", "e2e: npm run e2e",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := project(t, tc.files...)
			got := runs(Detect(dir))
			if !slices.Equal(got, tc.want) {
				t.Errorf("Detect = %q\nwant     %q", got, tc.want)
			}
			if again := runs(Detect(dir)); !slices.Equal(again, got) {
				t.Errorf("Detect is not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestDetectNames(t *testing.T) {
	got := Detect(project(t, "go.mod", "module x\n"))
	want := []Check{
		{Name: "go vet", Kind: KindLint, Run: "go vet ./..."},
		{Name: "go test", Kind: KindTest, Run: "go test -json ./...", Format: FormatGoJSON},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Detect = %+v, want %+v", got, want)
	}
}

func TestSortKeepsOrderWithinKind(t *testing.T) {
	checks := []Check{
		{Name: "a", Kind: KindE2E}, {Name: "b", Kind: "custom"}, {Name: "c", Kind: KindTest},
		{Name: "d", Kind: KindTypecheck}, {Name: "e", Kind: KindTest}, {Name: "f", Kind: KindLint},
	}
	Sort(checks)
	var names string
	for _, c := range checks {
		names += c.Name
	}
	if names != "dfceab" {
		t.Errorf("order %q, want %q", names, "dfceab")
	}
}

func TestRunPassAndFail(t *testing.T) {
	dir := t.TempDir()
	pass := Run(context.Background(), dir, Check{Name: "ok", Run: "echo out; echo err >&2; pwd"})
	if !pass.Passed() || pass.ExitCode != 0 {
		t.Errorf("passing check: %+v", pass)
	}
	if want := "out\nerr\n" + dir + "\n"; pass.Output != want {
		t.Errorf("Output %q, want %q", pass.Output, want)
	}
	if pass.Check.Name != "ok" || pass.Duration <= 0 {
		t.Errorf("Result lacks its check or duration: %+v", pass)
	}

	fail := Run(context.Background(), dir, Check{Name: "bad", Run: "echo failing; exit 3"})
	if fail.Passed() || fail.ExitCode != 3 || fail.Missing || fail.Output != "failing\n" {
		t.Errorf("failing check: %+v", fail)
	}
}

func TestRunBoundsOutput(t *testing.T) {
	// 1 MiB of numbered lines ending with a marker.
	c := Check{Run: `i=0; while [ $i -lt 16384 ]; do printf '%063d\n' $i; i=$((i+1)); done; echo END`}
	r := Run(context.Background(), t.TempDir(), c)
	if !r.Passed() {
		t.Fatalf("check failed: exit %d, %q", r.ExitCode, r.Output[:min(len(r.Output), 200)])
	}
	if len(r.Output) != OutputLimit {
		t.Errorf("len(Output) = %d, want %d", len(r.Output), OutputLimit)
	}
	if !strings.HasSuffix(r.Output, fmt.Sprintf("\n%063d\nEND\n", 16383)) {
		t.Errorf("Output does not end with the last lines: %q", r.Output[len(r.Output)-100:])
	}
}

func TestRunTimeout(t *testing.T) {
	start := time.Now()
	r := Run(context.Background(), t.TempDir(), Check{Run: "sleep 30", Timeout: 200 * time.Millisecond})
	if !r.TimedOut || r.Passed() {
		t.Errorf("result %+v, want TimedOut and not Passed", r)
	}
	// Generous for a loaded machine, far below the check's own 30 s.
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v", d)
	}
}

func TestRunMissingProgram(t *testing.T) {
	r := Run(context.Background(), t.TempDir(), Check{Run: "definitely-not-installed-xyz --version"})
	if !r.Missing || r.Passed() || r.ExitCode != 127 {
		t.Errorf("result %+v, want Missing with exit 127", r)
	}
	if plain := Run(context.Background(), t.TempDir(), Check{Run: "exit 127"}); plain.Missing {
		t.Errorf("a bare exit 127 was reported Missing: %+v", plain)
	}
}

func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	r := Run(ctx, t.TempDir(), Check{Run: "sleep 5"})
	if r.Passed() || r.ExitCode != -1 {
		t.Errorf("result %+v, want a killed, failed check", r)
	}
}

// A check that prints a secret of the environment, or a URL with a
// password, keeps neither in its output: that output goes to errors.log,
// the iteration record and the agent's next prompt.
func TestRunRedactsSecrets(t *testing.T) {
	const secret = "sk-check-0123456789"
	t.Setenv("CHECK_TEST_API_KEY", secret)
	redact.AddNames() // rebuild the default redactor from this environment
	res := Run(context.Background(), t.TempDir(), Check{Name: "leaky", Run: `echo "key $CHECK_TEST_API_KEY"; echo "remote https://bot:pw-123456@git.example/r.git"; exit 1`})
	if strings.Contains(res.Output, secret) || strings.Contains(res.Output, "pw-123456") {
		t.Fatalf("Output holds a secret: %q", res.Output)
	}
	if !strings.Contains(res.Output, "key "+redact.Mask) || !strings.Contains(res.Output, "https://bot:"+redact.Mask+"@git.example") {
		t.Fatalf("Output = %q, want the secrets masked", res.Output)
	}
}

func TestTailKeepsWholeLinesFromTheEnd(t *testing.T) {
	out := "first line\nsecond line\nthird line\n"
	for _, tc := range []struct {
		max  int
		want string
	}{
		{100, "first line\nsecond line\nthird line"},
		{len("second line\nthird line"), "second line\nthird line"},
		{len("second line\nthird line") - 3, "third line"},
		{4, "line"},
	} {
		if got := Tail(out, tc.max); got != tc.want {
			t.Errorf("Tail(%d) = %q, want %q", tc.max, got, tc.want)
		}
	}
	// A cut inside a character keeps only whole characters.
	if got := Tail("ééé", 3); got != "é" {
		t.Errorf("Tail of a split character = %q, want %q", got, "é")
	}
}

func TestLastLinesSkipsBlankLines(t *testing.T) {
	got := LastLines("a\n\nb\r\nc\n\n", 2)
	if strings.Join(got, "|") != "b|c" {
		t.Errorf("LastLines = %q, want [b c]", got)
	}
}

// A check is code the agent could have written: it does not get the
// notification secret either (issue 26 item 5), nor the variable config's
// [notify] secret_env names.
func TestCheckDoesNotSeeTheNotifySecret(t *testing.T) {
	t.Setenv("RALPH_NOTIFY_SECRET", "notify-secret-0123")
	t.Setenv("MY_CHECK_SIGNING", "hook-secret-0123")
	t.Setenv("CHECK_ENV_KEPT", "kept")
	proc.Withhold("MY_CHECK_SIGNING")
	res := Run(context.Background(), t.TempDir(), Check{Name: "env", Run: "env"})
	if res.ExitCode != 0 {
		t.Fatalf("env: exit %d: %s", res.ExitCode, res.Output)
	}
	if strings.Contains(res.Output, "RALPH_NOTIFY_SECRET") || strings.Contains(res.Output, "MY_CHECK_SIGNING") || !strings.Contains(res.Output, "CHECK_ENV_KEPT=kept") {
		t.Errorf("the check's environment:\n%s", res.Output)
	}
}
