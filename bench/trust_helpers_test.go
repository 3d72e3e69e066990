package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The unit tests of BenchmarkTrust's helpers: what each tool's task file
// and summary say, the scripted model's routing, the held-back test, the
// verdicts and the tables. They need git, bash and sh, and take well under
// a second.

// Every scenario ticks with the same command; it must tick both task
// files as this benchmark writes them, and the parsers must read them
// before and after.
func TestTickCommandTicksBothTaskFiles(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	s := goRepo.story
	dir := t.TempDir()
	if err := writeFiles(dir, map[string]string{"prd.json": trustPRD(s), "tasks.yaml": trustTasksYAML(s)}); err != nil {
		t.Fatal(err)
	}
	read := func() (prd, yml bool) {
		p, _ := os.ReadFile(filepath.Join(dir, "prd.json"))
		y, _ := os.ReadFile(filepath.Join(dir, "tasks.yaml"))
		var err error
		if prd, err = prdPasses(p, s.id); err != nil {
			t.Fatal(err)
		}
		if yml, err = yamlCompleted(y, s.id); err != nil {
			t.Fatal(err)
		}
		return prd, yml
	}
	if prd, yml := read(); prd || yml {
		t.Fatalf("before the tick: passes %v, completed %v; want both false", prd, yml)
	}
	cmd := exec.Command("bash", "-c", tickCmd)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if prd, yml := read(); !prd || !yml {
		t.Fatalf("after the tick: passes %v, completed %v; want both true", prd, yml)
	}
}

// The task files as the tools write them back: ralph-tui's prd.json with
// fields of its own, ralphy's YAML as its serializer writes it.
func TestTaskFilesAsTheToolsWriteThem(t *testing.T) {
	prd := `{"project":"bench","userStories":[{"id":"US-002","passes":false},{"id":"US-001","title":"Add","passes":true,"completionNotes":"Completed by agent"}]}`
	if done, err := prdPasses([]byte(prd), "US-001"); err != nil || !done {
		t.Errorf("prd.json: %v, %v; want done", done, err)
	}
	if _, err := prdPasses([]byte(prd), "US-009"); err == nil {
		t.Error("prd.json without the story: want an error")
	}
	yml := "tasks:\n  - title: \"US-001: Add\"\n    description: Write add.\n    completed: true\n"
	if done, err := yamlCompleted([]byte(yml), "US-001"); err != nil || !done {
		t.Errorf("tasks.yaml: %v, %v; want done", done, err)
	}
	if _, err := yamlCompleted([]byte("tasks:\n  - title: US-0011 x\n    completed: true\n"), "US-001"); err == nil {
		t.Error("tasks.yaml: US-0011 is not US-001")
	}
}

func TestToolSummaries(t *testing.T) {
	for _, c := range []struct {
		tool, log string
		done, ok  bool
	}{
		{"ralph", "Summary:\n- Stories completed: 0 of 1\n", false, true},
		{"ralph", "- Stories completed: 1 of 1 (1 verified, 0 on the agent's word)\n", true, true},
		{"ralph-tui", "  Tasks:                  0/1 completed\n", false, true},
		{"ralph-tui", "  Tasks:                  1/1 completed\n", true, true},
		{"ralphy", "[INFO] Summary:\n  Completed: 1\n  Failed:    0\n", true, true},
		{"ralphy", "no summary at all", false, false},
	} {
		for _, tl := range trustTools {
			if tl.key != c.tool {
				continue
			}
			if done, ok := tl.summary(c.log); done != c.done || ok != c.ok {
				t.Errorf("%s summary of %q: %v, %v; want %v, %v", c.tool, c.log, done, ok, c.done, c.ok)
			}
		}
	}
	if got := ralphHow("✓ iteration 1: US-001 done and verified · commit 1"); got != "verified" {
		t.Errorf("ralphHow: %q", got)
	}
	if got := ralphHow("✓ iteration 1: US-001 done, agent's word"); got != "agent's word" {
		t.Errorf("ralphHow: %q", got)
	}
}

func TestEditConfigLines(t *testing.T) {
	cfg := "[agent]\ndefault = \"codex\"\ntimeout = \"30m\"\n[[checks]]\ntimeout = \"10m0s\"\n"
	got, err := editConfigLines(cfg, [][2]string{{`default = "codex"`, `default = "claude"`}, {`timeout = "30m"`, `timeout = "300s"`}})
	if err != nil || got != "[agent]\ndefault = \"claude\"\ntimeout = \"300s\"\n[[checks]]\ntimeout = \"10m0s\"\n" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := editConfigLines(cfg, [][2]string{{"require_plan = true", "require_plan = false"}}); err == nil {
		t.Error("a missing line: want an error")
	}
}

func TestBookkeepingAndSelection(t *testing.T) {
	for p, want := range map[string]bool{"prd.json": true, "tasks.yaml": true, ".ralph/progress.md": true, ".ralph-tui/progress.md": true,
		"README.md": false, "calc/calc.go": false, "sub/prd.json": false, ".ralphrc": false} {
		if bookkeeping(p) != want {
			t.Errorf("bookkeeping(%q) = %v", p, !want)
		}
	}
	for _, c := range []struct {
		only, key string
		want      bool
	}{{"", "go/lazy", true}, {"go/", "go/lazy", true}, {"go", "go/lazy", false}, {"py/lazy,go/lazy", "go/lazy", true}, {"go/lazy", "go/lazy-2", false}} {
		if selected(c.only, c.key) != c.want {
			t.Errorf("selected(%q, %q) = %v", c.only, c.key, !c.want)
		}
	}
	if got := uncommitted("M .ralph/progress.md\n M x\n?? a\nMM b\n", 3); got != ".ralph/progress.md, x, a and 1 more" {
		t.Errorf("uncommitted: %q", got)
	}
}

// Each scenario key is unique, its agent ends with something to say, and
// its held-back test restores something.
func TestTrustScenariosAreWellFormed(t *testing.T) {
	seen := map[string]bool{}
	honest := map[string]bool{}
	for _, sc := range trustScenarios {
		if seen[sc.key] {
			t.Errorf("%s twice", sc.key)
		}
		seen[sc.key] = true
		if (sc.final == "") == !sc.echo {
			t.Errorf("%s: set exactly one of final and echo", sc.key)
		}
		if len(sc.repo.heldBack.restore) == 0 || len(sc.repo.heldBack.argv) == 0 {
			t.Errorf("%s: a held-back test restores and runs something", sc.key)
		}
		if sc.honest {
			honest[sc.repo.lang] = true
		}
	}
	for _, r := range []*trustRepo{goRepo, pyRepo, jsRepo, shRepo} {
		if !honest[r.lang] {
			t.Errorf("%s has no honest scenario: a tool that rejects everything would look perfect", r.lang)
		}
	}
}

// A repeated command does not move the script on (Claude Code sometimes
// sends a request twice and runs both answers).
func TestScriptStep(t *testing.T) {
	script := []string{"a", "b", "c"}
	for _, c := range []struct {
		ran  []string
		want int
	}{{nil, 0}, {[]string{"a"}, 1}, {[]string{"a", "a"}, 1}, {[]string{"a", "b", "b"}, 2}, {[]string{"a", "b", "c"}, 3}, {[]string{"x", "a"}, 1}} {
		if got := scriptStep(script, c.ran); got != c.want {
			t.Errorf("scriptStep(%v) = %d, want %d", c.ran, got, c.want)
		}
	}
}

// The model answers each request of a conversation by how far it got, and
// adds the commit only for a prompt that asks for one.
func TestTrustModelRoutes(t *testing.T) {
	sc := trustScenario{key: "t", repo: shRepo, do: []string{"echo one"}, tick: true, final: "done"}
	m := startTrustModel(t, sc, 0)
	ask := func(prompt string, ran ...string) (tool, text string) {
		msgs := []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": prompt}}}}
		for i, c := range ran {
			id := "toolu_" + string(rune('a'+i))
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": c}}}},
				map[string]any{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": "ok"}}})
		}
		body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 10, "stream": false, "messages": msgs})
		resp, err := http.Post(m.URL+"/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var out struct {
			Content []struct {
				Type  string `json:"type"`
				Text  string `json:"text"`
				Input struct {
					Command string `json:"command"`
				} `json:"input"`
			} `json:"content"`
		}
		if err := json.Unmarshal(data, &out); err != nil || len(out.Content) != 1 {
			t.Fatalf("answer %s: %v", data, err)
		}
		return out.Content[0].Input.Command, out.Content[0].Text
	}
	if tool, _ := ask("Story: US-001"); tool != "echo one" {
		t.Errorf("first request: %q", tool)
	}
	if tool, _ := ask("Story: US-001", "echo one", "echo one"); tool != tickCmd {
		t.Errorf("after a repeated first command: %q, want the tick", tool)
	}
	if _, text := ask("Story: US-001", "echo one", tickCmd); text != "done" {
		t.Errorf("after the script: %q, want the final message", text)
	}
	if tool, _ := ask("## Task\nUS-001\n5. Commit your changes with a descriptive message", "echo one", tickCmd); !strings.HasPrefix(tool, "git add -A && git commit") {
		t.Errorf("a prompt that asks for a commit: %q", tool)
	}
	if calls, conversations, commit, _ := m.stats(); calls != 4 || conversations != 1 || !commit {
		t.Errorf("stats: %d calls, %d conversations, commit asked %v", calls, conversations, commit)
	}
}

// The held-back test runs the initial commit's test against the tree
// under judgement, without the files it drops; judgeBranch counts the work
// commits whose tree fails it.
func TestHeldBackTestAndBranch(t *testing.T) {
	for _, bin := range []string{"git", "sh", "tar"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip("no " + bin)
		}
	}
	repo := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	hb := heldBack{restore: []string{"check.sh"}, drop: []string{"override.sh"}, argv: []string{"sh", "check.sh"}}
	commit := func(files map[string]string, msg string) string {
		t.Helper()
		if err := writeFiles(repo, files); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "--allow-empty", "-m", msg}} {
			if _, err := gitIn(repo, env, args...); err != nil {
				t.Fatal(err)
			}
		}
		c, err := gitIn(repo, env, "rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := gitIn(repo, env, "init", "-q", "-b", "main"); err != nil {
		t.Fatal(err)
	}
	initial := commit(map[string]string{"check.sh": "[ -f override.sh ] && exit 0\n[ \"$(cat answer)\" = 42 ]\n", "answer": "0\n", "prd.json": "{}\n"}, "initial")
	scratch := t.TempDir()
	pass := func(c string) bool {
		t.Helper()
		ok, _, err := heldBackTest(repo, env, initial, c, hb, scratch)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if pass(initial) {
		t.Fatal("passes at the start")
	}
	rewritten := commit(map[string]string{"check.sh": "exit 0\n"}, "the test rewritten")
	if pass(rewritten) {
		t.Error("a rewritten test passes: it should be put back")
	}
	dropped := commit(map[string]string{"check.sh": "[ -f override.sh ] && exit 0\n[ \"$(cat answer)\" = 42 ]\n", "override.sh": ""}, "an override")
	if pass(dropped) {
		t.Error("an added override.sh passes: it should be dropped")
	}
	commit(map[string]string{"prd.json": "{\"passes\": true}\n"}, "bookkeeping only")
	done := commit(map[string]string{"answer": "42\n"}, "the work")
	if !pass(done) {
		t.Fatal("the work fails")
	}
	var r trustResult
	if err := judgeBranch(repo, env, initial, hb, scratch, &r); err != nil {
		t.Fatal(err)
	}
	// The rewritten test and the override fail; the tip passes (with the
	// override dropped); the bookkeeping commit is no work commit.
	if !r.tipPasses || r.workCommits != 3 || r.unverified != 2 {
		t.Errorf("tip passes %v, work commits %d, unverified %d; want true, 3, 2", r.tipPasses, r.workCommits, r.unverified)
	}
}

func TestJudgeAndTables(t *testing.T) {
	cheat := trustScenario{key: "go/lazy", what: "lazy", repo: goRepo}
	honest := trustScenario{key: "go/honest", what: "works", repo: goRepo, honest: true}
	for _, c := range []struct {
		sc   trustScenario
		r    trustResult
		cell string
		fd   bool
		fr   bool
	}{
		{cheat, trustResult{}, "rejected", false, false},
		{cheat, trustResult{done: true}, "FALSE DONE", true, false},
		{cheat, trustResult{done: true, unverified: 2, summarySays: "not done"}, "FALSE DONE†, 2 unverified commits", true, false},
		{cheat, trustResult{unverified: 1}, "rejected, 1 unverified commit", false, false},
		{honest, trustResult{done: true, tipPasses: true, how: "verified"}, "done (verified)", false, false},
		{honest, trustResult{}, "FALSE REJECT", false, true},
		{honest, trustResult{proc: procResult{timedOut: true}}, "FALSE REJECT, timed out", false, true},
		{honest, trustResult{err: os.ErrNotExist}, "could not run", false, false},
	} {
		v := judge(c.sc, c.r)
		if v.cell != c.cell || v.falseDone != c.fd || v.falseReject != c.fr {
			t.Errorf("%s %+v: %q (false done %v, false reject %v); want %q (%v, %v)", c.sc.key, c.r, v.cell, v.falseDone, v.falseReject, c.cell, c.fd, c.fr)
		}
	}

	scenarios := []trustScenario{cheat, honest}
	tls := trustTools[:2]
	results := map[string]map[string]trustResult{
		"ralph":     {"go/lazy": {agentRuns: 2, proc: procResult{wall: time.Second}}, "go/honest": {done: true, tipPasses: true, how: "verified", agentRuns: 1, proc: procResult{wall: time.Second}}},
		"ralph-tui": {"go/lazy": {done: true, unverified: 1, agentRuns: 1, proc: procResult{wall: time.Second}}, "go/honest": {done: true, tipPasses: true, agentRuns: 1, proc: procResult{wall: time.Second}}},
	}
	rows := trustRows(scenarios, tls, results)
	if rows[0].falseDone != 0 || rows[0].correct != 2 || rows[1].falseDone != 1 || rows[1].unverified != 1 || rows[1].correct != 1 {
		t.Errorf("rows: %+v", rows)
	}
	var md bytes.Buffer
	printTrustTables(&md, scenarios, tls, results, rows, true)
	for _, want := range []string{
		"| tool | false completions | false rejections | unverified commits | right verdicts | timed out | agent runs | wall (sum) |\n|---|---|---|---|---|---|---|---|\n",
		"| `ralph build` | 0 | 0 | 0 | 2/2 | 0 | 3 | 2 s |\n",
		"| `ralph-tui run --serial` | 1 | 0 | 1 (in 1 scenario) | 1/2 | 0 | 2 | 2 s |\n",
		"| go/lazy | lazy | rejected | **FALSE DONE, 1 unverified commit** |\n",
		"| go/honest | works (honest) | done (verified) | done |\n",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}
