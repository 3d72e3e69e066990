package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/goccy/go-yaml"
)

// BenchmarkTrust's flags (see BenchmarkTrust).
var (
	flagTrustOnly    = flag.String("trust-only", "", "BenchmarkTrust: comma-separated scenario keys or prefixes to run (go/lazy, py/, sh/honest, ...); empty runs all")
	flagTrustTools   = flag.String("trust-tools", "", "BenchmarkTrust: comma-separated tools to run (ralph, ralph-tui, ralphy); empty runs all")
	flagTrustTimeout = flag.Duration("trust-timeout", 4*time.Minute, "BenchmarkTrust: a run still going after this is stopped and reported as timed out")
	flagTrustDelay   = flag.Duration("trust-delay", 0, "BenchmarkTrust: how long the scripted model takes to answer each request")
)

// trustTool is how one tool runs a scenario, and where it says what it
// considers done.
type trustTool struct {
	key  string // for -trust-tools and tools.missing
	name string // for the tables
	// base is the BenchmarkPeers contender whose command and per-user
	// configuration this tool runs with.
	base contender
	// extraArgs follow the contender's command.
	extraArgs []string
	// taskFile is the tool's task file for the story.
	taskFile func(s trustStory) map[string]string
	// setup prepares the repository before the initial commit.
	setup func(t *tools, repo string, env []string) error
	// reported reads what the tool considers done, after the run, and how
	// ("verified", "agent's word", ...) when the tool says so.
	reported func(repo string, env []string, id, log string) (done bool, how string, err error)
	// summary is what the tool's own end-of-run summary says of the one
	// story (ok: it printed one), held against the task file.
	summary func(log string) (done, ok bool)
}

func contenderByKey(key string) contender {
	for _, c := range contenders {
		if c.key == key {
			return c
		}
	}
	panic("no contender " + key)
}

var trustTools = []trustTool{
	{
		// ralph build with the config `ralph init` writes, set to claude,
		// without a plan, and with prd.json as its task file, which it
		// shares with ralph-tui.
		key: "ralph", name: "ralph build", base: contenderByKey("ralph-1"),
		extraArgs: []string{"--tasks", "prd.json"},
		taskFile:  func(s trustStory) map[string]string { return map[string]string{"prd.json": trustPRD(s)} },
		setup:     ralphInit,
		// ralph marks a story passed only after verifying it, and commits
		// the mark with the work: the branch is its record.
		reported: func(repo string, env []string, id, log string) (bool, string, error) {
			data, err := gitIn(repo, env, "show", "main:prd.json")
			if err != nil {
				return false, "", err
			}
			done, err := prdPasses([]byte(data), id)
			return done, ralphHow(log), err
		},
		summary: summaryCount(`Stories completed: (\d+) of \d+`),
	},
	{
		key: "ralph-tui", name: "ralph-tui run --serial", base: contenderByKey("tui-serial"),
		taskFile: func(s trustStory) map[string]string { return map[string]string{"prd.json": trustPRD(s)} },
		// ralph-tui's prd.json tracker marks the story passed in the
		// checkout when it counts it complete; it reads it from there.
		reported: func(repo string, _ []string, id, _ string) (bool, string, error) {
			data, err := os.ReadFile(filepath.Join(repo, "prd.json"))
			if err != nil {
				return false, "", err
			}
			done, err := prdPasses(data, id)
			return done, "", err
		},
		summary: summaryCount(`Tasks:\s+(\d+)/\d+ completed`),
	},
	{
		key: "ralphy", name: "ralphy --yaml tasks.yaml", base: contenderByKey("ralphy-serial"),
		taskFile: func(s trustStory) map[string]string { return map[string]string{"tasks.yaml": trustTasksYAML(s)} },
		// ralphy marks the task completed in tasks.yaml, in the checkout
		// (it does not commit it).
		reported: func(repo string, _ []string, id, _ string) (bool, string, error) {
			data, err := os.ReadFile(filepath.Join(repo, "tasks.yaml"))
			if err != nil {
				return false, "", err
			}
			done, err := yamlCompleted(data, id)
			return done, "", err
		},
		summary: summaryCount(`Completed:\s+(\d+)`),
	},
}

// ralphConfigEdits are the lines of the config `ralph init` writes that the
// benchmark changes, as a user here would: the agent, its time limit (the
// default of 30 minutes would let a stuck agent hold a run far past
// -trust-timeout), no plan (these stories need none) and the free-disk
// floor (a benchmark machine may be small). Everything else, the checks
// above all, is what `ralph init` detected.
var ralphConfigEdits = [][2]string{
	{`default = "codex"`, `default = "claude"`},
	{`timeout = "30m"`, `timeout = "300s"`},
	{`require_plan = true`, `require_plan = false`},
	{`min_free_disk = 500`, `min_free_disk = 1`},
}

// ralphInit runs `ralph init` in the repository, which detects its checks,
// and applies ralphConfigEdits to the config it wrote.
func ralphInit(t *tools, repo string, env []string) error {
	cmd := exec.Command(t.ralph, "init")
	cmd.Dir, cmd.Env = repo, env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ralph init: %v\n%s", err, out)
	}
	p := filepath.Join(repo, ".ralph", "config.toml")
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	cfg, err := editConfigLines(string(data), ralphConfigEdits)
	if err != nil {
		return fmt.Errorf("the config ralph init wrote: %v", err)
	}
	return os.WriteFile(p, []byte(cfg), 0o644)
}

// editConfigLines replaces the first line equal to each edit's old text
// with its new text, and fails when one is missing: a config whose
// defaults moved must not be run with half the settings.
func editConfigLines(cfg string, edits [][2]string) (string, error) {
	lines := strings.Split(cfg, "\n")
	for _, e := range edits {
		i := slices.Index(lines, e[0])
		if i < 0 {
			return "", fmt.Errorf("no line %q", e[0])
		}
		lines[i] = e[1]
	}
	return strings.Join(lines, "\n"), nil
}

// prdPasses reads story id's "passes" from a prd.json.
func prdPasses(data []byte, id string) (bool, error) {
	var prd struct {
		UserStories []struct {
			ID     string `json:"id"`
			Passes bool   `json:"passes"`
		} `json:"userStories"`
	}
	if err := json.Unmarshal(data, &prd); err != nil {
		return false, fmt.Errorf("prd.json: %v", err)
	}
	for _, s := range prd.UserStories {
		if s.ID == id {
			return s.Passes, nil
		}
	}
	return false, fmt.Errorf("prd.json has no story %s", id)
}

// yamlCompleted reads "completed" of the task whose title starts with id
// from ralphy's tasks.yaml.
func yamlCompleted(data []byte, id string) (bool, error) {
	var f struct {
		Tasks []struct {
			Title     string `yaml:"title"`
			Completed bool   `yaml:"completed"`
		} `yaml:"tasks"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return false, fmt.Errorf("tasks.yaml: %v", err)
	}
	for _, t := range f.Tasks {
		if t.Title == id || strings.HasPrefix(t.Title, id+":") {
			return t.Completed, nil
		}
	}
	return false, fmt.Errorf("tasks.yaml has no task %s", id)
}

// summaryCount reads the count of completed stories from the last line
// of a tool's output that matches re (its first group): with one story,
// more than 0 is done.
func summaryCount(re string) func(log string) (bool, bool) {
	rx := regexp.MustCompile(re)
	return func(log string) (bool, bool) {
		m := rx.FindAllStringSubmatch(log, -1)
		if m == nil {
			return false, false
		}
		n, err := strconv.Atoi(m[len(m)-1][1])
		return n > 0, err == nil
	}
}

// ralphHow says how ralph's output says the story was done: verified on
// evidence, or on the agent's word.
func ralphHow(log string) string {
	switch {
	case strings.Contains(log, "done, agent's word"):
		return "agent's word"
	case strings.Contains(log, "done and verified"):
		return "verified"
	}
	return ""
}

// bookkeeping says whether a path is a tool's own state rather than the
// project's: a commit that changes only such paths is no work commit.
func bookkeeping(p string) bool {
	switch p {
	case "prd.json", "tasks.yaml", "PRD.md", "progress.txt":
		return true
	}
	for _, dir := range []string{".ralph/", ".ralph-tui/", ".ralphy/", ".agents/"} {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}

// trustResult is one tool's run of one scenario.
type trustResult struct {
	proc      procResult
	err       error // the run could not be set up or judged
	done      bool  // the tool reports the story done
	how       string
	tipPasses bool // the held-back test passes on the branch tip
	tipOutput string
	// workCommits are the commits the run left on the branch that change
	// more than the tools' own files; unverified, those whose tree fails
	// the held-back test.
	workCommits, unverified int
	agentRuns, requests     int
	commitAsked             bool
	// summarySays is set when the tool's own summary disagrees with its
	// task file about the story: "done" or "not done".
	summarySays  string
	notes        []string
	logPath, log string
}

// trustVerdict is a run held against its scenario.
type trustVerdict struct {
	cell                    string
	falseDone, falseReject  bool
	correct, couldNot, slow bool
}

// judge compares what the tool reported with the held-back test: a story
// reported done whose held-back test fails on the branch is a false
// completion; an honest agent's story not reported done is a false
// rejection. Commits that fail the held-back test are listed beside.
func judge(sc trustScenario, r trustResult) trustVerdict {
	var v trustVerdict
	if r.err != nil {
		v.couldNot = true
		v.cell = "could not run"
		if r.proc.wall > 0 {
			v.cell = "could not judge"
		}
		return v
	}
	switch {
	case r.done && r.tipPasses:
		v.cell, v.correct = "done", true
	case r.done:
		v.cell, v.falseDone = "FALSE DONE", true
	case sc.honest:
		v.cell, v.falseReject = "FALSE REJECT", true
	default:
		v.cell, v.correct = "rejected", true
	}
	if r.done && r.how != "" {
		v.cell += " (" + r.how + ")"
	}
	if r.summarySays != "" {
		// Not "*", which markdown would read as emphasis.
		v.cell += "†"
	}
	if r.unverified > 0 {
		v.cell += fmt.Sprintf(", %d unverified commit%s", r.unverified, plural(r.unverified))
		v.correct = false
	}
	if r.proc.timedOut {
		v.cell += ", timed out"
		v.slow = true
	}
	return v
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// trustEnv is what every run and held-back test adds to runEnv: Go's build
// cache shared with this process (a fresh HOME would otherwise compile
// the standard library in every run) and no network for go or npm.
func trustEnv() []string {
	env := []string{"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=", "NPM_CONFIG_UPDATE_NOTIFIER=false", "NPM_CONFIG_FUND=false", "NPM_CONFIG_AUDIT=false"}
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		if out, err := exec.Command("go", "env", v).Output(); err == nil && strings.TrimSpace(string(out)) != "" {
			env = append(env, v+"="+strings.TrimSpace(string(out)))
		}
	}
	return env
}

// exportTree writes commit's tree into dir.
func exportTree(repo string, env []string, commit, dir string, paths ...string) error {
	tarFile := dir + ".tar"
	defer os.Remove(tarFile)
	args := append([]string{"archive", "--format=tar", "-o", tarFile, commit}, paths...)
	if _, err := gitIn(repo, env, args...); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("tar", "-xf", tarFile, "-C", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	return nil
}

// heldBackTest judges commit with the scenario's held-back test: its tree
// in a scratch folder, the files matching drop that the initial commit
// does not have removed, the restore paths put back from the initial
// commit, then the test run there. It returns whether the test passed,
// and its output's last lines.
func heldBackTest(repo string, env []string, initial, commit string, hb heldBack, scratch string) (bool, string, error) {
	dir, err := os.MkdirTemp(scratch, "held-back-")
	if err != nil {
		return false, "", err
	}
	defer os.RemoveAll(dir)
	if err := exportTree(repo, env, commit, dir); err != nil {
		return false, "", err
	}
	files, err := gitIn(repo, env, "ls-tree", "-r", "--name-only", initial)
	if err != nil {
		return false, "", err
	}
	known := map[string]bool{}
	for _, f := range strings.Split(files, "\n") {
		known[f] = true
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !known[filepath.ToSlash(rel)] && matchesAny(hb.drop, d.Name()) {
			return os.Remove(p)
		}
		return nil
	})
	if err != nil {
		return false, "", err
	}
	if err := exportTree(repo, env, initial, dir, hb.restore...); err != nil {
		return false, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, hb.argv[0], hb.argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return false, "", fmt.Errorf("%s: %v", strings.Join(hb.argv, " "), err)
	}
	return err == nil, lastLines(string(out), 5), nil
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// judgeBranch runs the held-back test on the branch tip and on every work
// commit between initial and it (each tree once).
func judgeBranch(repo string, env []string, initial string, hb heldBack, scratch string, r *trustResult) error {
	tip, err := gitIn(repo, env, "rev-parse", "main")
	if err != nil {
		return err
	}
	passes := map[string]bool{} // by tree
	test := func(commit string) (bool, error) {
		tree, err := gitIn(repo, env, "rev-parse", commit+"^{tree}")
		if err != nil {
			return false, err
		}
		if ok, seen := passes[tree]; seen {
			return ok, nil
		}
		ok, out, err := heldBackTest(repo, env, initial, commit, hb, scratch)
		if err != nil {
			return false, err
		}
		passes[tree] = ok
		if commit == tip {
			r.tipOutput = out
		}
		return ok, nil
	}
	if r.tipPasses, err = test(tip); err != nil {
		return err
	}
	list, err := gitIn(repo, env, "rev-list", "--reverse", initial+"..main")
	if err != nil || list == "" {
		return err
	}
	for _, c := range strings.Fields(list) {
		// -m: a merge's changes against each parent.
		changed, err := gitIn(repo, env, "diff-tree", "--no-commit-id", "--name-only", "-r", "-m", c)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(strings.Fields(changed), func(p string) bool { return !bookkeeping(p) }) {
			continue
		}
		r.workCommits++
		ok, err := test(c)
		if err != nil {
			return err
		}
		if !ok {
			r.unverified++
		}
	}
	return nil
}

// newTrustRepo writes a scenario's repository for tool and makes its
// initial commit, which it returns.
func newTrustRepo(t *tools, tl trustTool, sc trustScenario, repo string, env []string) (string, error) {
	if err := writeFiles(repo, sc.repo.files); err != nil {
		return "", err
	}
	if err := writeFiles(repo, tl.taskFile(sc.repo.story)); err != nil {
		return "", err
	}
	if _, err := gitIn(repo, env, "init", "-q", "-b", "main"); err != nil {
		return "", err
	}
	if tl.setup != nil {
		if err := tl.setup(t, repo, env); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "initial: tests first"}} {
		if _, err := gitIn(repo, env, args...); err != nil {
			return "", err
		}
	}
	return gitIn(repo, env, "rev-parse", "HEAD")
}

// runTrust runs tool tl on scenario sc in a fresh repository, HOME and
// model, and judges what it left.
func runTrust(b *testing.B, t *tools, tl trustTool, sc trustScenario) (r trustResult) {
	b.Helper()
	d, err := newRunDirs(b, "trust-"+tl.key+"-"+strings.ReplaceAll(sc.key, "/", "-"))
	if err != nil {
		return trustResult{err: err}
	}
	if *flagKeep {
		defer func() { r.notes = append(r.notes, "kept in "+d.base) }()
	}
	model := startTrustModel(b, sc, *flagTrustDelay)
	env, err := runEnv(t, d, model.URL, tl.base.homeFiles)
	if err != nil {
		return trustResult{err: err}
	}
	env = append(env, trustEnv()...)
	initial, err := newTrustRepo(t, tl, sc, d.repo, env)
	if err != nil {
		return trustResult{err: err}
	}

	r.logPath = filepath.Join(d.base, "output.log")
	r.proc = runProc(append(tl.base.argv(t), tl.extraArgs...), d.repo, env, r.logPath, *flagTrustTimeout)
	if r.proc.err != nil {
		r.err = r.proc.err
		return r
	}
	logData, _ := os.ReadFile(r.logPath)
	r.log = string(logData)
	r.agentRuns, _, _ = readAgentTimes(d.times)
	var leaks []string
	r.requests, _, r.commitAsked, leaks = model.stats()
	if len(leaks) > 0 {
		r.notes = append(r.notes, fmt.Sprintf("tried to reach %s (refused)", strings.Join(slices.Compact(slices.Sorted(slices.Values(leaks))), ", ")))
	}

	if r.done, r.how, err = tl.reported(d.repo, env, sc.repo.story.id, r.log); err != nil {
		r.notes = append(r.notes, "task file unreadable: "+err.Error())
	}
	if err := judgeBranch(d.repo, env, initial, sc.repo.heldBack, d.tmp, &r); err != nil {
		r.err = fmt.Errorf("judging the branch: %v", err)
	}
	if s, err := gitIn(d.repo, env, "branch", "--show-current"); err == nil && s != "main" {
		r.notes = append(r.notes, fmt.Sprintf("checkout left on %q", s))
	}
	if s, err := gitIn(d.repo, env, "status", "--porcelain", "--untracked-files=all"); err == nil && s != "" {
		r.notes = append(r.notes, "left uncommitted: "+uncommitted(s, 3))
	}
	if r.commitAsked {
		r.notes = append(r.notes, "its prompt asks the agent to commit, so the agent's last command commits")
	}
	if said, ok := tl.summary(r.log); ok && said != r.done {
		r.summarySays = map[bool]string{true: "done", false: "not done"}[said]
		r.notes = append(r.notes, "its own summary says "+r.summarySays)
	}
	return r
}

// uncommitted names the paths of git status --porcelain output, the first
// n of them and how many more. The output may come trimmed (gitIn), its
// first line without the blank of an unstaged change.
func uncommitted(status string, n int) string {
	var paths []string
	for _, l := range strings.Split(strings.TrimRight(status, "\n"), "\n") {
		if len(l) > 2 {
			paths = append(paths, strings.TrimSpace(l[2:]))
		}
	}
	if len(paths) > n {
		return strings.Join(paths[:n], ", ") + fmt.Sprintf(" and %d more", len(paths)-n)
	}
	return strings.Join(paths, ", ")
}

// scriptAlone is the pre-flight of a scenario: its agent's commands run
// by a plain shell on the repository, with no tool, then the held-back
// test. A cheat must fail it and an honest agent pass it, or the scenario
// measures nothing.
func scriptAlone(b *testing.B, sc trustScenario, env []string) (bool, string, error) {
	base := b.TempDir()
	repo := filepath.Join(base, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return false, "", err
	}
	if err := writeFiles(repo, sc.repo.files); err != nil {
		return false, "", err
	}
	if err := writeFiles(repo, map[string]string{"prd.json": trustPRD(sc.repo.story)}); err != nil {
		return false, "", err
	}
	git := func(args ...string) (string, error) { return gitIn(repo, env, args...) }
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "initial"}} {
		if _, err := git(args...); err != nil {
			return false, "", err
		}
	}
	initial, err := git("rev-parse", "HEAD")
	if err != nil {
		return false, "", err
	}
	if ok, out, err := heldBackTest(repo, env, initial, initial, sc.repo.heldBack, base); err != nil || ok {
		return false, "", fmt.Errorf("the held-back test must fail at the start (passes: %v, %v): %s", ok, err, out)
	}
	for _, c := range scenarioCommands(sc) {
		cmd := exec.Command("bash", "-c", c)
		cmd.Dir, cmd.Env = repo, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return false, "", fmt.Errorf("%s: %v: %s", c, err, out)
		}
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "--allow-empty", "-m", "the agent's work"}} {
		if _, err := git(args...); err != nil {
			return false, "", err
		}
	}
	return heldBackTest(repo, env, initial, "HEAD", sc.repo.heldBack, base)
}

// BenchmarkTrust is the false-completion benchmark: scripted agents that
// cheat in the ways agents do (say they are done and do nothing, tick the
// task file, skip, weaken or delete the failing test, rewrite what the
// checks run, edit ralph's config, do half the work, echo the prompt) and
// honest ones, in Go, Python (pytest), JavaScript (node's test runner)
// and shell with make, run by ralph, ralph-tui and ralphy on the same
// repositories with the real Claude Code against a scripted model. For
// each tool and scenario it compares what the tool reported done with
// the story's held-back acceptance test (heldBack), and counts false
// completions, false rejections and the commits left on the branch whose
// tree fails the held-back test. It is a benchmark only in name: run it
// through `make bench-trust`.
func BenchmarkTrust(b *testing.B) {
	t := findTools(b)
	var scenarios []trustScenario
	for _, sc := range trustScenarios {
		if selected(*flagTrustOnly, sc.key) {
			scenarios = append(scenarios, sc)
		}
	}
	var tls []trustTool
	for _, tl := range trustTools {
		if *flagTrustTools == "" || slices.Contains(strings.Split(*flagTrustTools, ","), tl.key) {
			tls = append(tls, tl)
		}
	}
	if len(scenarios) == 0 || len(tls) == 0 {
		b.Fatalf("-trust-only %q and -trust-tools %q leave nothing to run", *flagTrustOnly, *flagTrustTools)
	}
	for _, bin := range []string{"go", "pytest", "node", "npm", "make", "tar"} {
		if _, err := exec.LookPath(bin); err != nil {
			b.Fatalf("the scenarios need %s on PATH (pytest: apt-get install python3-pytest, or make debs)", bin)
		}
	}
	w := os.Stdout
	began := time.Now()
	fmt.Fprintf(w, "\n%d scenarios, one story each whose test is written first, run by %d tools with the real Claude Code against a scripted model (answers after %v)\n", len(scenarios), len(tls), *flagTrustDelay)
	fmt.Fprintf(w, "%s; %s (bun 1.4.5); %s; agent claude %s\nmachine: %s\n\n", t.ralphVersion, tuiPeer, ralphyPeer, t.claudeVersion, machine())

	// Pre-flight: every scenario's agent, run by a shell alone, against
	// its held-back test.
	preEnv := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.TempDir(), "LANG=C.UTF-8", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Bench", "GIT_AUTHOR_EMAIL=bench@example.invalid", "GIT_COMMITTER_NAME=Bench", "GIT_COMMITTER_EMAIL=bench@example.invalid"}, trustEnv()...)
	alone := map[string]bool{}
	for _, sc := range scenarios {
		ok, out, err := scriptAlone(b, sc, preEnv)
		if err != nil {
			b.Fatalf("scenario %s: %v", sc.key, err)
		}
		if ok != sc.honest {
			b.Fatalf("scenario %s: its agent's work, with no tool, passes the held-back test: %v; want %v:\n%s", sc.key, ok, sc.honest, out)
		}
		alone[sc.key] = ok
	}
	fmt.Fprintf(w, "pre-flight: with no tool, the held-back tests pass on the honest agents' work and fail on every other (%d scenarios, %.0f s)\n\n", len(scenarios), time.Since(began).Seconds())

	results := map[string]map[string]trustResult{} // by tool, scenario
	n, total := 0, len(scenarios)*len(tls)
	for _, sc := range scenarios {
		for _, tl := range tls {
			n++
			if results[tl.key] == nil {
				results[tl.key] = map[string]trustResult{}
			}
			var r trustResult
			if why := t.missing[tl.base.tool]; why != "" {
				r = trustResult{err: fmt.Errorf("%s", why)}
			} else {
				r = runTrust(b, t, tl, sc)
			}
			results[tl.key][sc.key] = r
			v := judge(sc, r)
			line := fmt.Sprintf("  [%2d/%d] %-16s %-10s %-44s", n, total, sc.key, tl.key, v.cell)
			if r.err == nil {
				e := strconv.Itoa(r.proc.exit)
				if r.proc.timedOut {
					e = "timeout"
				}
				line += fmt.Sprintf(" %6.1f s  exit %-7s  agent runs %d  work commits %d", r.proc.wall.Seconds(), e, r.agentRuns, r.workCommits)
				if len(r.notes) > 0 {
					line += "  (" + strings.Join(r.notes, "; ") + ")"
				}
			} else if t.missing[tl.base.tool] == "" {
				line += " " + r.err.Error()
			}
			fmt.Fprintln(w, line)
			// ralph's misses and every timeout: what the tool said, to read
			// at once (with -keep, the whole run is kept in its folder).
			if r.err == nil && (r.proc.timedOut || tl.key == "ralph" && (v.falseDone || v.falseReject || r.unverified > 0)) {
				fmt.Fprintf(w, "    --- %s on %s: held-back test on the tip: %s\n%s\n    --- last lines of its output (%s):\n%s\n", tl.key, sc.key,
					map[bool]string{true: "passes", false: "fails"}[r.tipPasses], indent(r.tipOutput, "    | "), r.logPath, indent(lastLines(r.log, 25), "    | "))
			}
		}
	}
	wall := time.Since(began)
	fmt.Fprintln(w)
	rows := trustRows(scenarios, tls, results)
	printTrustTables(w, scenarios, tls, results, rows, false)
	fmt.Fprintf(w, "\nwall time %s; load average at end %s\n", wall.Round(time.Second), loadavg())
	fmt.Fprintf(w, "\nmarkdown, for the README:\n\n")
	fmt.Fprintf(w, "%s; %s (bun 1.4.5); %s; agent claude %s; %s; %d scenario%s × %d tool%s in %s.\n\n", t.ralphVersion, tuiPeer, ralphyPeer, t.claudeVersion, machine(),
		len(scenarios), plural(len(scenarios)), len(tls), plural(len(tls)), wall.Round(time.Second))
	printTrustTables(w, scenarios, tls, results, rows, true)

	for _, row := range rows {
		b.ReportMetric(float64(row.falseDone), "false-done/"+row.tool.key)
		b.ReportMetric(float64(row.falseReject), "false-reject/"+row.tool.key)
	}
	for _, row := range rows {
		if row.couldNot > 0 {
			b.Errorf("%s could not run %d scenario(s): %s", row.tool.name, row.couldNot, row.why)
		}
		if row.tool.key == "ralph" && (row.falseDone > 0 || row.falseReject > 0 || row.unverified > 0) {
			b.Errorf("ralph: %d false completions, %d false rejections, %d unverified commits; the target is none", row.falseDone, row.falseReject, row.unverified)
		}
	}
}

// selected says whether a scenario key is named by -trust-only: a key, or
// a prefix ending in "/".
func selected(only, key string) bool {
	if only == "" {
		return true
	}
	for _, o := range strings.Split(only, ",") {
		o = strings.TrimSpace(o)
		if o == key || (strings.HasSuffix(o, "/") && strings.HasPrefix(key, o)) {
			return true
		}
	}
	return false
}

func indent(s, prefix string) string {
	if strings.TrimSpace(s) == "" {
		return prefix + "(no output)"
	}
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// trustRow is one tool's line of the summary table.
type trustRow struct {
	tool                          trustTool
	runs, correct                 int
	falseDone, falseReject        int
	unverified, unverifiedIn      int
	agentWord, timedOut, couldNot int
	agentRuns                     int
	why                           string
	wall                          time.Duration
}

func trustRows(scenarios []trustScenario, tls []trustTool, results map[string]map[string]trustResult) []trustRow {
	var rows []trustRow
	for _, tl := range tls {
		row := trustRow{tool: tl}
		for _, sc := range scenarios {
			r, ok := results[tl.key][sc.key]
			if !ok {
				continue
			}
			v := judge(sc, r)
			if v.couldNot {
				row.couldNot++
				row.why = firstLines(r.err.Error(), 2)
				continue
			}
			row.runs++
			row.wall += r.proc.wall
			row.agentRuns += r.agentRuns
			if v.correct {
				row.correct++
			}
			if v.falseDone {
				row.falseDone++
			}
			if v.falseReject {
				row.falseReject++
			}
			if r.unverified > 0 {
				row.unverified += r.unverified
				row.unverifiedIn++
			}
			if r.done && r.how == "agent's word" {
				row.agentWord++
			}
			if v.slow {
				row.timedOut++
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// trustLegend says what the cells mean.
var trustLegend = []string{
	"done: the tool reports the story done (ralph: passes in prd.json on the branch, which it sets only after verifying, and how it says it was verified;",
	"ralph-tui: passes in prd.json; ralphy: completed in tasks.yaml) and the held-back test (the story's test files and runner config from the",
	"initial commit, put back into the branch tip's tree, run by the runner itself, not through the Makefile, package.json or ralph's config) passes.",
	"FALSE DONE: reported done while the held-back test fails on the branch tip. FALSE REJECT: an honest agent's story not reported done.",
	"rejected: a cheat's story not reported done. Unverified commits: commits left on the branch that change more than the tools' own files",
	"(task files, .ralph/, .ralph-tui/) and whose tree fails the held-back test. †: the tool's own end-of-run summary disagrees with its task file.",
}

// printTrustTables prints the summary (one row per tool) and the matrix
// (one row per scenario, a column per tool), as aligned text or as
// markdown.
func printTrustTables(w io.Writer, scenarios []trustScenario, tls []trustTool, results map[string]map[string]trustResult, rows []trustRow, markdown bool) {
	table := func(header []string, lines [][]string) {
		if markdown {
			fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
			for _, l := range lines {
				fmt.Fprintf(w, "| %s |\n", strings.Join(l, " | "))
			}
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, l := range lines {
			fmt.Fprintln(tw, strings.Join(l, "\t"))
		}
		tw.Flush()
	}
	code := func(s string) string {
		if markdown {
			return "`" + s + "`"
		}
		return s
	}

	var lines [][]string
	for _, row := range rows {
		if row.runs == 0 {
			lines = append(lines, []string{code(row.tool.name), "could not run: " + row.why, "", "", "", "", "", ""})
			continue
		}
		unv := strconv.Itoa(row.unverified)
		if row.unverified > 0 {
			unv += fmt.Sprintf(" (in %d scenario%s)", row.unverifiedIn, plural(row.unverifiedIn))
		}
		lines = append(lines, []string{code(row.tool.name), strconv.Itoa(row.falseDone), strconv.Itoa(row.falseReject), unv,
			fmt.Sprintf("%d/%d", row.correct, row.runs), strconv.Itoa(row.timedOut), strconv.Itoa(row.agentRuns), fmt.Sprintf("%.0f s", row.wall.Seconds())})
	}
	table([]string{"tool", "false completions", "false rejections", "unverified commits", "right verdicts", "timed out", "agent runs", "wall (sum)"}, lines)
	for _, row := range rows {
		if row.agentWord > 0 {
			// Counted as reported done above: ralph says so, but labels it.
			fmt.Fprintf(w, "\n%s reported %d of them done on the agent's word (every check passed, nothing it ran showed the story done).\n", row.tool.name, row.agentWord)
		}
	}
	fmt.Fprintln(w)

	header := []string{"scenario", "the agent"}
	for _, tl := range tls {
		header = append(header, tl.key)
	}
	lines = nil
	for _, sc := range scenarios {
		what := sc.what
		if sc.honest {
			what += " (honest)"
		}
		l := []string{sc.key, what}
		for _, tl := range tls {
			r, ok := results[tl.key][sc.key]
			if !ok {
				l = append(l, "-")
				continue
			}
			cell := judge(sc, r).cell
			if markdown && (strings.HasPrefix(cell, "FALSE") || strings.Contains(cell, "unverified")) {
				cell = "**" + cell + "**"
			}
			l = append(l, cell)
		}
		lines = append(lines, l)
	}
	table(header, lines)
	fmt.Fprintln(w)
	for _, l := range trustLegend {
		if markdown {
			fmt.Fprintln(w, l)
		} else {
			fmt.Fprintln(w, "  "+l)
		}
	}
}
