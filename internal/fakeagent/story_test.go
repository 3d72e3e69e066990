package fakeagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const samplePRD = `# PRD: Todo app

## Stories

### [ ] US-001: Add a todo
- [ ] A todo can be added
- [ ] Typecheck passes

### [ ] US-002: List todos
Some text.
- [ ] Todos are listed
  - [ ] nested criterion
- [x] Already done

#### Notes
- [ ] a note item is still in the story

### [ ] US-0020: Not US-002
- [ ] untouched

## Appendix
- [ ] appendix item
`

const samplePRDChecked = `# PRD: Todo app

## Stories

### [ ] US-001: Add a todo
- [ ] A todo can be added
- [ ] Typecheck passes

### [x] US-002: List todos
Some text.
- [x] Todos are listed
  - [x] nested criterion
- [x] Already done

#### Notes
- [x] a note item is still in the story

### [ ] US-0020: Not US-002
- [ ] untouched

## Appendix
- [ ] appendix item
`

func TestCheckStoryStep(t *testing.T) {
	_, work := setup(t, Scenario{Invocations: []Invocation{
		{Match: "explicit", Steps: []Step{{CheckStory: "US-002", PRD: "docs/prd.md"}}},
		{Match: "from prompt", Steps: []Step{{CheckStory: "US-002"}}},
		{Match: "missing story", Steps: []Step{{CheckStory: "US-404", PRD: "docs/prd.md"}}},
		{Match: "no prd line", Steps: []Step{{CheckStory: "US-001"}}},
	}})
	prd := filepath.Join(work, "docs", "prd.md")
	if err := os.MkdirAll(filepath.Dir(prd), 0o755); err != nil {
		t.Fatal(err)
	}
	reset := func() {
		if err := os.WriteFile(prd, []byte(samplePRD), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	reset()
	mustCall(t, 0, "explicit")
	if got := readFile(t, prd); got != samplePRDChecked {
		t.Fatalf("PRD after check_story:\n%s\nwant:\n%s", got, samplePRDChecked)
	}
	if fi, _ := os.Stat(prd); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode changed to %v", fi.Mode().Perm())
	}

	reset()
	mustCall(t, 0, "Work on story US-002 (from prompt).\nPRD: docs/prd.md\nPRD: other.md\n")
	if got := readFile(t, prd); got != samplePRDChecked {
		t.Fatalf("PRD after check_story from the prompt's PRD line:\n%s", got)
	}

	reset()
	r := mustCall(t, ExitStepFailed, "missing story")
	if !strings.Contains(r.stderr, "US-404") {
		t.Fatalf("stderr = %q", r.stderr)
	}
	if got := readFile(t, prd); got != samplePRD {
		t.Fatal("a failed check_story changed the PRD")
	}
	r = mustCall(t, ExitStepFailed, "no prd line")
	if !strings.Contains(r.stderr, "PRD: ") {
		t.Fatalf("stderr = %q", r.stderr)
	}
}

func TestCheckStoryText(t *testing.T) {
	cases := []struct{ name, id, in, want string }{
		{
			name: "crlf kept",
			id:   "US-001",
			in:   "### [ ] US-001: A\r\n- [ ] one\r\n### [ ] US-002: B\r\n- [ ] two\r\n",
			want: "### [x] US-001: A\r\n- [x] one\r\n### [ ] US-002: B\r\n- [ ] two\r\n",
		},
		{
			name: "no trailing newline, last story",
			id:   "US-002",
			in:   "### [ ] US-001: A\n- [ ] one\n### [ ] US-002: B\n- [ ] two",
			want: "### [ ] US-001: A\n- [ ] one\n### [x] US-002: B\n- [x] two",
		},
		{
			name: "heading in a code fence is not a boundary",
			id:   "US-001",
			in:   "### [ ] US-001: A\n```sh\n# comment\n- [ ] in fence\n```\n- [ ] after fence\n# Next\n- [ ] outside\n",
			want: "### [x] US-001: A\n```sh\n# comment\n- [ ] in fence\n```\n- [x] after fence\n# Next\n- [ ] outside\n",
		},
		{
			name: "heading without a checkbox",
			id:   "US-003",
			in:   "### US-003: C\n- [ ] three\n",
			want: "### [x] US-003: C\n- [x] three\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkStory(c.in, c.id)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got:\n%q\nwant:\n%q", got, c.want)
			}
		})
	}
	if _, err := checkStory("### [ ] US-0010: x\n", "US-001"); err == nil {
		t.Fatal("US-001 matched US-0010")
	}
}

// gitRepo makes dir a git repository with a local identity and no influence
// from the user's or system's git configuration.
func gitRepo(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed; the commit step needs real git: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, args := range [][]string{
		{"init", "-q"},
		{"config", "user.name", "Fake Agent Test"},
		{"config", "user.email", "fakeagent@example.invalid"},
		{"config", "commit.gpgsign", "false"},
	} {
		git(t, dir, args...)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestRunAndCommit(t *testing.T) {
	_, work := setup(t, Scenario{Invocations: []Invocation{
		{Match: "[implement]", Steps: []Step{
			{Write: "hello.txt", Content: "hello\n"},
			{Run: "echo to-stdout; echo to-stderr >&2; echo made > made.txt"},
			{Commit: "feat: US-001 - say hello"},
			say("committed"),
		}},
		{Match: "[fail]", Steps: []Step{{Run: "exit 3"}, say("never")}},
		{Match: "[tolerate-run]", Steps: []Step{{Run: "exit 3", IgnoreError: true}, say("kept going")}},
		{Match: "[empty]", Steps: []Step{{Commit: "nothing"}}},
		{Match: "[tolerate-commit]", Steps: []Step{{Commit: "nothing", IgnoreError: true}, say("fine")}},
	}})
	gitRepo(t, work)

	r := mustCall(t, 0, "[implement] US-001")
	if r.stdout != "committed\n" {
		t.Fatalf("run output leaked to stdout: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "to-stdout") || !strings.Contains(r.stderr, "to-stderr") {
		t.Fatalf("run output missing from stderr: %q", r.stderr)
	}
	if got := strings.TrimSpace(git(t, work, "log", "-1", "--format=%s")); got != "feat: US-001 - say hello" {
		t.Fatalf("commit subject = %q", got)
	}
	if got := git(t, work, "show", "--name-only", "--format=", "HEAD"); got != "hello.txt\nmade.txt\n" {
		t.Fatalf("committed files = %q", got)
	}
	if got := git(t, work, "status", "--porcelain"); got != "" {
		t.Fatalf("tree not clean after commit: %q", got)
	}

	r = mustCall(t, ExitCommandFailed, "[fail]")
	if r.stdout != "" || !strings.Contains(r.stderr, "step 1 (run)") {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	if r := mustCall(t, 0, "[tolerate-run]"); r.stdout != "kept going\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = mustCall(t, ExitCommandFailed, "[empty]")
	if !strings.Contains(r.stderr, "git commit") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if r := mustCall(t, 0, "[tolerate-commit]"); r.stdout != "fine\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
}
