package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/workspace"
)

// isolateGit keeps the machine's git configuration out of the test and
// fails (never skips) when the git binary is missing.
func isolateGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the git binary is required by the workspace tests but is not in PATH: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

// git runs the real git in dir and returns its output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newRepo creates an empty git repository and returns its real path.
func newRepo(t *testing.T) string {
	t.Helper()
	isolateGit(t)
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	git(t, dir, "config", "user.name", "Ralph Test")
	git(t, dir, "config", "user.email", "ralph@example.com")
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// openRepo creates a repository and opens it as a workspace.
func openRepo(t *testing.T) *workspace.Workspace {
	t.Helper()
	dir := newRepo(t)
	ws, err := workspace.Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return ws
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testConfig is the config template the Init tests hand over; the real
// one is internal/app's (config.Template).
const testConfig = "# ralph configuration\n"

// initNow is the fixed clock of the Init tests.
var initNow = time.Date(2024, time.March, 5, 23, 59, 58, 0, time.UTC)

func initWorkspace(t *testing.T, ws *workspace.Workspace) []string {
	t.Helper()
	created, err := ws.Init(initNow, []byte(testConfig))
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	return created
}

func TestOpenOutsideRepoIsErrNotRepo(t *testing.T) {
	isolateGit(t)
	dir := t.TempDir()
	// Stop git from finding a repository above the temp dir.
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	ws, err := workspace.Open(context.Background(), dir)
	if !errors.Is(err, gitx.ErrNotRepo) {
		t.Fatalf("Open(non-repo) = %v, %v; want an error matching gitx.ErrNotRepo", ws, err)
	}
	if ws != nil {
		t.Errorf("Open(non-repo) returned a workspace %+v along with the error", ws)
	}
}

func TestOpenFromSubfolderFindsTopLevel(t *testing.T) {
	root := newRepo(t)
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(context.Background(), sub)
	if err != nil {
		t.Fatalf("Open(sub): %v", err)
	}
	if ws.Root != root {
		t.Errorf("Root = %q, want the top level %q", ws.Root, root)
	}
	if want := filepath.Join(root, ".ralph"); ws.Dir() != want {
		t.Errorf("Dir() = %q, want %q", ws.Dir(), want)
	}
	if want := filepath.Join(root, ".ralph", "config.toml"); ws.ConfigPath() != want {
		t.Errorf("ConfigPath() = %q, want %q", ws.ConfigPath(), want)
	}
}

func TestInitCreatesFilesFromTemplates(t *testing.T) {
	ws := openRepo(t)
	created := initWorkspace(t, ws)

	dir := filepath.Join(ws.Root, ".ralph")
	want := []string{
		filepath.Join(dir, "config.toml"),
		filepath.Join(dir, ".gitignore"),
		filepath.Join(dir, "progress.md"),
		filepath.Join(dir, "guardrails.md"),
		filepath.Join(dir, "errors.log"),
		filepath.Join(dir, "activity.log"),
	}
	got := slices.Clone(created)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Init returned\n  %q\nwant exactly\n  %q", created, want)
	}
	for _, p := range created {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("Init reported %s as created but it is not a file: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "runs")); err != nil || !fi.IsDir() {
		t.Errorf(".ralph/runs was not created: %v", err)
	}

	// Init writes the template it is given, as it is.
	if got := readFile(t, filepath.Join(dir, "config.toml")); got != testConfig {
		t.Errorf("config.toml = %q, want the template %q", got, testConfig)
	}

	progress := readFile(t, filepath.Join(dir, "progress.md"))
	if !strings.HasPrefix(progress, "# Progress Log\n") {
		t.Errorf("progress.md does not start with the title:\n%s", progress)
	}
	for _, s := range []string{"Started: 2024-03-05\n", "## Codebase Patterns", "\n---\n"} {
		if !strings.Contains(progress, s) {
			t.Errorf("progress.md lacks %q:\n%s", s, progress)
		}
	}
	if strings.Index(progress, "## Codebase Patterns") > strings.Index(progress, "\n---\n") {
		t.Errorf("progress.md: the patterns section must come before the --- separator:\n%s", progress)
	}

	guardrails := readFile(t, filepath.Join(dir, "guardrails.md"))
	for _, sign := range []string{"Read Before Writing", "Test Before Commit"} {
		i := strings.Index(guardrails, "## Sign: "+sign+"\n")
		if i < 0 {
			t.Errorf("guardrails.md lacks the sign %q:\n%s", sign, guardrails)
			continue
		}
		body := guardrails[i+len("## Sign: "+sign+"\n"):]
		if j := strings.Index(body, "## Sign:"); j >= 0 {
			body = body[:j]
		}
		for _, field := range []string{"- **Trigger**: ", "- **Instruction**: ", "- **Added after**: "} {
			if !strings.Contains(body, field) {
				t.Errorf("sign %q lacks %q:\n%s", sign, field, body)
			}
		}
		if !strings.Contains(body, "(2024-03-05)") {
			t.Errorf("sign %q does not record the date it was added:\n%s", sign, body)
		}
	}

	errorsLog := readFile(t, filepath.Join(dir, "errors.log"))
	if !strings.HasPrefix(errorsLog, "# Errors Log\n") {
		t.Errorf("errors.log does not start with its title:\n%s", errorsLog)
	}

	activity := readFile(t, filepath.Join(dir, "activity.log"))
	summary, events := strings.Index(activity, "## Run Summary\n"), strings.Index(activity, "## Events\n")
	if summary < 0 || events < 0 || summary > events {
		t.Errorf("activity.log must have \"## Run Summary\" before \"## Events\":\n%s", activity)
	}
}

func TestInitAgainChangesNothing(t *testing.T) {
	ws := openRepo(t)
	initWorkspace(t, ws)

	progress := ws.ProgressPath()
	edited := "# Progress Log\nmy own notes, keep them\n"
	writeFile(t, progress, edited)
	before := map[string]string{}
	entries, err := os.ReadDir(ws.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			before[e.Name()] = readFile(t, filepath.Join(ws.Dir(), e.Name()))
		}
	}

	later := initNow.Add(72 * time.Hour)
	created, err := ws.Init(later, []byte(testConfig))
	if err != nil {
		t.Fatalf("second Init: %v", err)
	}
	if len(created) != 0 {
		t.Errorf("second Init created %q, want nothing", created)
	}
	if got := readFile(t, progress); got != edited {
		t.Errorf("second Init changed the edited progress.md:\n got %q\nwant %q", got, edited)
	}
	for name, content := range before {
		if got := readFile(t, filepath.Join(ws.Dir(), name)); got != content {
			t.Errorf("second Init changed .ralph/%s", name)
		}
	}

	// Only a file that went missing is made again.
	if err := os.Remove(ws.GuardrailsPath()); err != nil {
		t.Fatal(err)
	}
	created, err = ws.Init(later, []byte(testConfig))
	if err != nil {
		t.Fatalf("third Init: %v", err)
	}
	if !slices.Equal(created, []string{ws.GuardrailsPath()}) {
		t.Errorf("Init after removing guardrails.md created %q, want only %q", created, ws.GuardrailsPath())
	}
	if got := readFile(t, progress); got != edited {
		t.Errorf("third Init changed the edited progress.md")
	}
}

func TestGitignoreKeepsMachineStateOutOfGit(t *testing.T) {
	ws := openRepo(t)
	initWorkspace(t, ws)

	machine := []string{
		".ralph/runs/x/run.json",
		".ralph/state.json",
		".ralph/lock",
		".ralph/events.jsonl",
		".ralph/.tmp/PROMPT_prd-1.md",
	}
	for _, p := range machine {
		writeFile(t, filepath.Join(ws.Root, p), "machine state\n")
	}
	if err := ws.LogError(initNow, "something failed"); err != nil {
		t.Fatal(err)
	}
	if err := ws.LogEvent(initNow, "something happened"); err != nil {
		t.Fatal(err)
	}

	status := git(t, ws.Root, "status", "--porcelain", "--untracked-files=all")
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimRight(status, "\n"), "\n") {
		if len(line) > 3 {
			listed[line[3:]] = strings.HasPrefix(line, "?? ")
		}
	}
	for _, p := range append(machine, ".ralph/errors.log", ".ralph/activity.log") {
		if _, ok := listed[p]; ok {
			t.Errorf("git status lists machine state %s; it must be ignored:\n%s", p, status)
		}
	}
	for _, p := range []string{".ralph/progress.md", ".ralph/guardrails.md", ".ralph/config.toml", ".ralph/.gitignore"} {
		if untracked, ok := listed[p]; !ok || !untracked {
			t.Errorf("git status does not list %s as untracked; it is the user's and must be committable:\n%s", p, status)
		}
	}
}

func TestActivityLogLinesInTheOrderTheyHappened(t *testing.T) {
	ws := openRepo(t)
	initWorkspace(t, ws)
	header := readFile(t, ws.ActivityLogPath())

	t1 := time.Date(2024, time.March, 5, 9, 1, 2, 0, time.UTC)
	t2 := time.Date(2024, time.March, 5, 10, 30, 0, 0, time.UTC)
	t3 := time.Date(2024, time.March, 6, 0, 0, 5, 0, time.UTC)
	steps := []func() error{
		func() error { return ws.LogEvent(t1, "run started") },
		func() error { return ws.AddRunSummary("iteration 1: US-001 done") },
		func() error { return ws.LogEvent(t2, "iteration 2\nstarted") },
		func() error { return ws.AddRunSummary("  iteration 2: US-002\nfailed checks\n") },
		func() error { return ws.LogEvent(t3, "run ended") },
		func() error { return ws.AddRunSummary("iteration 3: US-002 done") },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}

	want := header +
		"[2024-03-05 09:01:02] run started\n" +
		"- iteration 1: US-001 done\n" +
		"[2024-03-05 10:30:00] iteration 2 ⏎ started\n" +
		"- iteration 2: US-002 ⏎ failed checks\n" +
		"[2024-03-06 00:00:05] run ended\n" +
		"- iteration 3: US-002 done\n"
	if got := readFile(t, ws.ActivityLogPath()); got != want {
		t.Errorf("activity.log =\n%s\nwant\n%s", got, want)
	}
	// The summary lines are one grep away, in order.
	var summary []string
	for _, l := range strings.Split(readFile(t, ws.ActivityLogPath()), "\n") {
		if strings.HasPrefix(l, "- ") {
			summary = append(summary, l)
		}
	}
	if len(summary) != 3 || !strings.Contains(summary[2], "iteration 3") {
		t.Errorf("lines starting with \"- \": %q, want the three summaries", summary)
	}
}

// A person following the log (`tail -f .ralph/activity.log`) keeps
// following it: a summary line is appended to the same file, never written
// as a new file over it, and what was there is left as it was, however
// long the log has grown.
func TestAddRunSummaryAppendsToTheSameFile(t *testing.T) {
	ws := openRepo(t)
	initWorkspace(t, ws)
	old := readFile(t, ws.ActivityLogPath()) + strings.Repeat("[2024-01-01 00:00:00] an old event\n", 10000)
	writeFile(t, ws.ActivityLogPath(), old)
	f, err := os.Open(ws.ActivityLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := ws.AddRunSummary("iteration 1: US-001 done"); err != nil {
		t.Fatal(err)
	}
	// The file the follower has open is the log: it sees the new line.
	f.Seek(int64(len(old)), 0)
	tail, _ := io.ReadAll(f)
	if string(tail) != "- iteration 1: US-001 done\n" {
		t.Errorf("a reader of the open log sees %q after the old content, want the summary line (the file was replaced?)", tail)
	}
	if got := readFile(t, ws.ActivityLogPath()); got != old+"- iteration 1: US-001 done\n" {
		t.Errorf("activity.log changed other than by the appended line:\n%.300s", got[max(0, len(old)-100):])
	}
}

// The loop's events and its summary lines, written from several goroutines
// (records are written in the background), land as whole lines.
func TestActivityLogLinesStayWholeUnderConcurrentWriters(t *testing.T) {
	ws := openRepo(t)
	initWorkspace(t, ws)
	header := readFile(t, ws.ActivityLogPath())
	long := strings.Repeat("x", 8000)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if g%2 == 0 {
					ws.LogEvent(initNow, fmt.Sprintf("event %d %d %s", g, i, long))
				} else {
					ws.AddRunSummary(fmt.Sprintf("summary %d %d %s", g, i, long))
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(readFile(t, ws.ActivityLogPath()), header), "\n"), "\n")
	if len(lines) != 200 {
		t.Fatalf("%d lines, want 200", len(lines))
	}
	for _, l := range lines {
		if !(strings.HasPrefix(l, "- summary ") || strings.HasPrefix(l, "[")) || !strings.HasSuffix(l, long) {
			t.Fatalf("torn or mixed line: %.80q", l)
		}
	}
}

func TestAddRunSummaryRecreatesMissingActivityLog(t *testing.T) {
	ws := openRepo(t)
	initWorkspace(t, ws)
	fresh := readFile(t, ws.ActivityLogPath())
	if err := os.Remove(ws.ActivityLogPath()); err != nil {
		t.Fatal(err)
	}
	if err := ws.AddRunSummary("iteration 1: US-001 done"); err != nil {
		t.Fatalf("AddRunSummary with no activity.log: %v", err)
	}
	want := fresh + "- iteration 1: US-001 done\n"
	if got := readFile(t, ws.ActivityLogPath()); got != want {
		t.Errorf("activity.log =\n%q\nwant\n%q", got, want)
	}
	// With .ralph/ itself gone nothing is made again: the run says so.
	if err := os.RemoveAll(ws.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := ws.AddRunSummary("iteration 2"); err == nil || ws.Exists() {
		t.Errorf("AddRunSummary without .ralph/: err %v, .ralph made again: %v", err, ws.Exists())
	}
}

func TestLogErrorLineFormat(t *testing.T) {
	ws := openRepo(t)
	initWorkspace(t, ws)
	header := readFile(t, ws.ErrorsLogPath())

	at := time.Date(2024, time.December, 31, 7, 8, 9, 0, time.UTC)
	if err := ws.LogError(at, "agent codex exited with code 1"); err != nil {
		t.Fatal(err)
	}
	if err := ws.LogError(at.Add(61*time.Second), "check failed:\n  go test ./...\n"); err != nil {
		t.Fatal(err)
	}
	want := header +
		"[2024-12-31 07:08:09] agent codex exited with code 1\n" +
		"[2024-12-31 07:09:10] check failed: ⏎ go test ./...\n"
	if got := readFile(t, ws.ErrorsLogPath()); got != want {
		t.Errorf("errors.log =\n%q\nwant\n%q", got, want)
	}
}

func TestAbsAndRelResolveFromRoot(t *testing.T) {
	ws := openRepo(t)
	root := ws.Root

	abs := []struct{ in, want string }{
		{".agents/tasks/prd.md", filepath.Join(root, ".agents", "tasks", "prd.md")},
		{"prd.md", filepath.Join(root, "prd.md")},
		{"/elsewhere/prd.md", "/elsewhere/prd.md"},
	}
	for _, c := range abs {
		if got := ws.Abs(c.in); got != c.want {
			t.Errorf("Abs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Abs ignores the process's current directory.
	t.Chdir(t.TempDir())
	if got, want := ws.Abs("x.md"), filepath.Join(root, "x.md"); got != want {
		t.Errorf("Abs(%q) from another cwd = %q, want %q", "x.md", got, want)
	}

	rel := []struct{ in, want string }{
		{filepath.Join(root, ".agents", "tasks", "prd.md"), filepath.Join(".agents", "tasks", "prd.md")},
		{filepath.Join(root, "prd.md"), "prd.md"},
		{root, "."},
		{filepath.Join(filepath.Dir(root), "other", "prd.md"), filepath.Join(filepath.Dir(root), "other", "prd.md")},
		{"/elsewhere/prd.md", "/elsewhere/prd.md"},
	}
	for _, c := range rel {
		if got := ws.Rel(c.in); got != c.want {
			t.Errorf("Rel(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, p := range []string{"docs/prd.md", "/elsewhere/x"} {
		if got := ws.Abs(ws.Rel(ws.Abs(p))); got != ws.Abs(p) {
			t.Errorf("Abs(Rel(Abs(%q))) = %q, want %q", p, got, ws.Abs(p))
		}
	}
}

func TestRelKeepsNamesThatStartWithTwoDots(t *testing.T) {
	ws := openRepo(t)
	if got := ws.Rel(ws.Root + "/..prd.md"); got != "..prd.md" {
		t.Fatalf("Rel = %q", got)
	}
}

func TestUserChangesLeaveOutRalphsOwnFiles(t *testing.T) {
	got := workspace.UserChanges([]string{".ralph/state.json", "main.go", ".ralphrc", "docs/a.md", ".ralph/sessions/x/progress.md"})
	if strings.Join(got, " ") != "main.go .ralphrc docs/a.md" {
		t.Fatalf("UserChanges = %q", got)
	}
}

// A .ralph that is not this repository's own folder is refused before
// anything is read or written; a link inside the repository is followed.
func TestOpenRefusesARalphFolderThatIsNotTheRepositorysOwn(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, repo string)
		want string // "" means Open succeeds
	}{
		{"symlink outside", func(t *testing.T, repo string) {
			must(t, os.Symlink(t.TempDir(), filepath.Join(repo, ".ralph")))
		}, "outside this repository"},
		{"symlink through a relative path outside", func(t *testing.T, repo string) {
			must(t, os.Mkdir(filepath.Join(repo, "sub"), 0o755))
			must(t, os.Symlink("sub/../..", filepath.Join(repo, ".ralph")))
		}, "outside this repository"},
		{"dangling symlink", func(t *testing.T, repo string) {
			must(t, os.Symlink(filepath.Join(repo, "gone"), filepath.Join(repo, ".ralph")))
		}, "cannot be followed"},
		{"file", func(t *testing.T, repo string) {
			must(t, os.WriteFile(filepath.Join(repo, ".ralph"), []byte("x"), 0o644))
		}, "is not a folder"},
		{"symlink inside", func(t *testing.T, repo string) {
			must(t, os.MkdirAll(filepath.Join(repo, "tools", "ralph"), 0o755))
			must(t, os.Symlink("tools/ralph", filepath.Join(repo, ".ralph")))
		}, ""},
		{"missing", func(t *testing.T, repo string) {}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := newRepo(t)
			tc.make(t, repo)
			_, err := workspace.Open(context.Background(), repo)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Open: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Open: err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
