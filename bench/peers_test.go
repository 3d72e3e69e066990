package bench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/modelserver"
)

var (
	flagReps    = flag.Int("reps", 1, "repetitions of each contender; the table shows the median wall time")
	flagOnly    = flag.String("only", "", "comma-separated contender keys to run (ralph-1, ralph-4, tui-serial, tui-4, ralphy-serial, ralphy-4, ralphy-4-md); empty runs all")
	flagStories = flag.Int("stories", 8, "independent stories in the task file")
	flagDelay   = flag.Duration("delay", 2*time.Second, "how long the scripted model takes to answer each request")
	flagTimeout = flag.Duration("run-timeout", 6*time.Minute, "a run still going after this is killed and reported as timed out")
	flagKeep    = flag.Bool("keep", false, "keep each run's repository, HOME and output log, and print where")
	flagRalph   = flag.String("ralph", "", "a ralph binary to run instead of one built from this checkout (say, one built from a commit while the checkout has others' work in progress)")
)

// contender is one orchestrator in one mode.
type contender struct {
	key  string // for -only
	name string // for the table
	// tool is "ralph", "ralph-tui" or "ralphy".
	tool string
	// files are the task file and configuration committed in the
	// repository before the run, as a user would have them.
	files func(ids []string) map[string]string
	// homeFiles go into the run's HOME (per-user configuration).
	homeFiles map[string]string
	argv      func(t *tools) []string
}

var contenders = []contender{
	{
		key: "ralph-1", name: "ralph build --workers 1", tool: "ralph",
		files: ralphFiles,
		argv:  func(t *tools) []string { return []string{t.ralph, "build", "--workers", "1"} },
	},
	{
		key: "ralph-4", name: "ralph build --workers 4", tool: "ralph",
		files: ralphFiles,
		argv:  func(t *tools) []string { return []string{t.ralph, "build", "--workers", "4"} },
	},
	{
		key: "tui-serial", name: "ralph-tui run --serial", tool: "ralph-tui",
		files: tuiFiles, homeFiles: tuiHome,
		argv: func(t *tools) []string {
			return []string{t.bun, t.ralphTUI, "run", "--prd", "prd.json", "--agent", "claude", "--headless", "--no-setup", "--no-notify", "--serial"}
		},
	},
	{
		// Without --direct-merge ralph-tui lands the workers' work on a
		// session branch of its own and leaves the target branch alone.
		key: "tui-4", name: "ralph-tui run --parallel 4 --direct-merge", tool: "ralph-tui",
		files: tuiFiles, homeFiles: tuiHome,
		argv: func(t *tools) []string {
			return []string{t.bun, t.ralphTUI, "run", "--prd", "prd.json", "--agent", "claude", "--headless", "--no-setup", "--no-notify", "--parallel", "4", "--direct-merge"}
		},
	},
	{
		key: "ralphy-serial", name: "ralphy --yaml tasks.yaml", tool: "ralphy",
		files: ralphyFiles,
		argv:  func(t *tools) []string { return []string{t.ralphy, "--yaml", "tasks.yaml"} },
	},
	{
		key: "ralphy-4", name: "ralphy --yaml tasks.yaml --parallel --max-parallel 4", tool: "ralphy",
		files: ralphyFiles,
		argv: func(t *tools) []string {
			return []string{t.ralphy, "--yaml", "tasks.yaml", "--parallel", "--max-parallel", "4"}
		},
	},
	{
		// ralphy's default task file, as the issue measured it: see
		// ralphyFiles for why nothing runs in parallel with it.
		key: "ralphy-4-md", name: "ralphy --prd PRD.md --parallel --max-parallel 4", tool: "ralphy",
		files: ralphyMarkdown,
		argv: func(t *tools) []string {
			return []string{t.ralphy, "--prd", "PRD.md", "--parallel", "--max-parallel", "4"}
		},
	},
}

// The stories: each writes its own file, so none conflicts with another.
func storyIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("US-%03d", i+1)
	}
	return ids
}

func storyFile(id string) string  { return strings.ToLower(id) + ".txt" }
func storyTitle(id string) string { return "Write " + storyFile(id) }
func storyContent(id string) string {
	return id + " done\n"
}

// prdJSON is the task file of ralph and ralph-tui: snarktank's prd.json
// shape, which both read. The criterion's "(verify: ...)" is ralph's way to
// check it; ralph-tui shows it as text.
func prdJSON(ids []string) string {
	var b strings.Builder
	b.WriteString("{\n  \"project\": \"bench\",\n  \"description\": \"Independent stories, one file each.\",\n  \"userStories\": [\n")
	for i, id := range ids {
		sep := ","
		if i == len(ids)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, `    {"id": %q, "title": %q, "description": %q, "acceptanceCriteria": [%q], "priority": %d, "passes": false}%s`+"\n",
			id, storyTitle(id), fmt.Sprintf("Create %s holding the line %q.", storyFile(id), id+" done"),
			fmt.Sprintf("%s holds the line %s done (verify: `grep -qx '%s done' %s`)", storyFile(id), id, id, storyFile(id)),
			i+1, sep)
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func ralphFiles(ids []string) map[string]string {
	return map[string]string{
		"prd.json": prdJSON(ids),
		// The defaults but for the plan (these stories need none) and the
		// free-disk floor (a benchmark machine may be small).
		".ralph/config.toml": `[agent]
default = "claude"
timeout = "300s"
[build]
require_plan = false
min_free_disk = 1
`,
	}
}

func tuiFiles(ids []string) map[string]string {
	return map[string]string{"prd.json": prdJSON(ids)}
}

// tuiHome is ralph-tui's per-user configuration. It turns on auto-commit
// (off by default; its parallel workers commit whatever it says), so that
// its serial mode lands stories on the branch as the others do, and lets
// the API key through to the agent: ralph-tui drops *_API_KEY variables
// from the agent's environment unless told otherwise (Claude Code then
// says "Not logged in").
var tuiHome = map[string]string{".config/ralph-tui/config.toml": "autoCommit = true\nenvPassthrough = [\"ANTHROPIC_API_KEY\"]\n"}

// ralphyFiles is ralphy's YAML task source with every task in parallel
// group 1, as its README shows for tasks that may run together. With its
// default source, PRD.md, ralphy 4.7.2 gives every task a batch of its own
// in --parallel mode (a markdown task has no group, and a task without a
// group runs alone), so nothing runs in parallel at all. The tasks have no
// description: one-at-a-time ralphy puts only the description, when there
// is one, into the prompt, and the title names the story.
func ralphyFiles(ids []string) map[string]string {
	var b strings.Builder
	b.WriteString("tasks:\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "  - title: %q\n    completed: false\n    parallel_group: 1\n", id+": "+storyTitle(id))
	}
	return map[string]string{"tasks.yaml": b.String()}
}

// ralphyMarkdown is ralphy's default task source, PRD.md.
func ralphyMarkdown(ids []string) map[string]string {
	var b strings.Builder
	b.WriteString("# PRD: bench\n\n## Tasks\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "- [ ] %s: %s\n", id, storyTitle(id))
	}
	return map[string]string{"PRD.md": b.String()}
}

// tools are the binaries the contenders run; missing says, per tool, why it
// cannot run here.
type tools struct {
	ralph     string // built from this checkout
	claudeDir string // holds claude
	bun       string
	ralphTUI  string // ralph-tui's cli.js, run by bun
	ralphy    string
	missing   map[string]string // by contender.tool

	barePrompts string // BenchmarkSerial's bare loop: one prompt file per story
	ralphBase   string // BenchmarkSerial's -ralph-base

	ralphVersion, claudeVersion string
}

// The peers' folders in the cache of scripts/install-peers.sh, which pins
// the same versions.
const (
	tuiPeer    = "ralph-tui@0.11.0"
	ralphyPeer = "ralphy-cli@4.7.2"
)

// findTools builds ralph, finds Claude Code in .tools/agents and the peers
// in the per-user cache of scripts/install-peers.sh. Without Claude Code
// nothing can run and the benchmark fails; a missing peer is reported in
// the table with the reason.
func findTools(b *testing.B) *tools {
	b.Helper()
	root, err := clitest.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	t := &tools{missing: map[string]string{}}
	for _, bin := range []string{"git", "node"} {
		if _, err := exec.LookPath(bin); err != nil {
			b.Fatalf("the benchmark needs %s on PATH (apt-get install git nodejs npm)", bin)
		}
	}
	t.claudeDir = filepath.Join(root, ".tools", "agents", "node_modules", ".bin")
	out, err := exec.Command(filepath.Join(t.claudeDir, "claude"), "--version").CombinedOutput()
	if err != nil {
		b.Fatalf("Claude Code is not installed in %s (%v: %s): run `make agents` (or bash scripts/install-agents.sh) first", t.claudeDir, err, out)
	}
	t.claudeVersion = strings.TrimSpace(string(out))

	if *flagRalph != "" {
		if t.ralph, err = filepath.Abs(*flagRalph); err != nil {
			b.Fatal(err)
		}
		if _, err := os.Stat(t.ralph); err != nil {
			b.Fatalf("-ralph: %v", err)
		}
		// The binary cannot say which commit it was built from ("(devel)"):
		// whoever passes it says so.
		t.ralphVersion = "ralph binary " + t.ralph
	} else {
		dir := b.TempDir()
		t.ralph = filepath.Join(dir, "ralph")
		build := exec.Command("go", "build", "-o", t.ralph, "./cmd/ralph")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build ./cmd/ralph: %v\n%s", err, out)
		}
		// ralph says "(devel)" when built from a checkout: name the commit.
		t.ralphVersion = "ralph at " + gitOut(root, "rev-parse", "--short", "HEAD")
		if gitOut(root, "status", "--porcelain", "--untracked-files=no") != "" {
			t.ralphVersion += " with uncommitted changes"
		}
	}

	cache := os.Getenv("RALPH_PEERS_CACHE")
	if cache == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			b.Fatalf("no cache folder for the peers (%v): set RALPH_PEERS_CACHE", err)
		}
		cache = filepath.Join(c, "ralph", "peers")
	}
	tuiDir := filepath.Join(cache, tuiPeer)
	t.bun = filepath.Join(tuiDir, "node_modules", ".bin", "bun")
	t.ralphTUI = filepath.Join(tuiDir, "node_modules", "ralph-tui", "dist", "cli.js")
	if why := peerMissing(tuiDir, t.bun, t.ralphTUI); why != "" {
		t.missing["ralph-tui"] = why
	}
	ralphyDir := filepath.Join(cache, ralphyPeer)
	t.ralphy = filepath.Join(ralphyDir, "node_modules", ".bin", "ralphy")
	if why := peerMissing(ralphyDir, t.ralphy); why != "" {
		t.missing["ralphy"] = why
	}
	return t
}

// gitOut runs git in dir and returns its trimmed output, or "?" on error.
func gitOut(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// peerMissing says why a peer installed by scripts/install-peers.sh cannot
// run, or "" when its files are there.
func peerMissing(dir string, files ...string) string {
	if msg, err := os.ReadFile(filepath.Join(dir, ".install-error")); err == nil {
		return "install failed: " + firstLines(string(msg), 3)
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("not installed (%s missing): run bash scripts/install-peers.sh", f)
		}
	}
	return ""
}

// result is what one run left behind.
type result struct {
	wall time.Duration
	// cpu is the user+system time of the contender's whole process tree:
	// the process and every descendant that was waited for (wait4's rusage
	// of the child). A process that outlives its parent and is reparented
	// to init is not in it.
	cpu       time.Duration
	exit      int
	timedOut  bool
	landed    int // stories whose file is on the target branch as written
	commits   int // new commits on the target branch
	merges    int // of which merge commits
	branches  []string
	worktrees int
	requests  int // completion requests the model answered
	// promptBytes is the median size of the prompts the agent was given
	// (the first user message of each conversation, Claude Code's own
	// context blocks left out).
	promptBytes int
	notes       []string
	err         error // the run could not be set up or measured
	log         string
	// agentRuns, agentTime and gaps are what the timing shim in front of
	// the CLI saw (claudeTimer): how many agent runs, their summed wall
	// time, and the time from the end of each run to the start of the
	// next, which is the orchestrator's alone.
	agentRuns int
	agentTime time.Duration
	gaps      []time.Duration
}

// claudeTimer stands first on PATH as claude: it runs the real CLI and,
// for an agent run (-p or --print; not a --version probe), appends its
// start and end ($EPOCHREALTIME, no process of its own) to $AGENT_TIMES.
// Every contender pays the same bash start per run.
const claudeTimer = `#!/bin/bash
case " $* " in
*" -p "* | *" --print "*) ;;
*) exec "$REAL_CLAUDE" "$@" ;;
esac
start=$EPOCHREALTIME
"$REAL_CLAUDE" "$@"
st=$?
printf '%s %s\n' "$start" "$EPOCHREALTIME" >> "$AGENT_TIMES"
exit $st
`

// readAgentTimes reads the shim's log: the runs, their summed time and
// the gaps between one run's end and the next one's start.
func readAgentTimes(path string) (runs int, total time.Duration, gaps []time.Duration) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, nil
	}
	var prevEnd float64
	for line := range strings.Lines(string(data)) {
		var start, end float64
		if _, err := fmt.Sscanf(line, "%f %f", &start, &end); err != nil || end < start {
			continue
		}
		if runs > 0 {
			gaps = append(gaps, time.Duration((start-prevEnd)*float64(time.Second)))
		}
		runs++
		total += time.Duration((end - start) * float64(time.Second))
		prevEnd = end
	}
	return runs, total, gaps
}

// BenchmarkPeers runs every contender on the same stories with the same
// agent CLI and model, -reps times each, and prints one table. It is a
// benchmark only in name: run it through `make bench-peers`.
func BenchmarkPeers(b *testing.B) {
	t := findTools(b)
	ids := storyIDs(*flagStories)
	var run []contender
	for _, c := range contenders {
		if *flagOnly == "" || slices.Contains(strings.Split(*flagOnly, ","), c.key) {
			run = append(run, c)
		}
	}
	if len(run) == 0 {
		b.Fatalf("-only %q names no contender: use some of ralph-1, ralph-4, tui-serial, tui-4, ralphy-serial, ralphy-4, ralphy-4-md", *flagOnly)
	}
	w := os.Stdout
	fmt.Fprintf(w, "\n%d independent stories, each one tool call and a final answer; the model answers every request after %v\n", len(ids), *flagDelay)
	fmt.Fprintf(w, "%s; %s (bun 1.4.5); %s; agent claude %s\nmachine: %s\n\n", t.ralphVersion, tuiPeer, ralphyPeer, t.claudeVersion, machine())

	results := map[string][]result{}
	for rep := 1; rep <= *flagReps; rep++ {
		for _, c := range run {
			if why := t.missing[c.tool]; why != "" {
				results[c.key] = append(results[c.key], result{err: fmt.Errorf("%s", why)})
				fmt.Fprintf(w, "  rep %d/%d  %-48s could not run: %s\n", rep, *flagReps, c.name, why)
				continue
			}
			r := runOnce(b, t, c, ids)
			results[c.key] = append(results[c.key], r)
			fmt.Fprintf(w, "  rep %d/%d  %-48s %s\n", rep, *flagReps, c.name, r.short(len(ids)))
		}
	}
	fmt.Fprintln(w)
	printTable(w, run, results, len(ids))
	if r1, r4 := medianWall(results["ralph-1"]), medianWall(results["ralph-4"]); r1 > 0 && r4 > 0 {
		ratio := r4.Seconds() / r1.Seconds()
		fmt.Fprintf(w, "\nralph --workers 4 takes %.2f of --workers 1 (target: at most 0.30)\n", ratio)
		b.ReportMetric(ratio, "w4/w1")
	}
	for _, c := range run {
		if m := medianWall(results[c.key]); m > 0 {
			b.ReportMetric(m.Seconds(), "s/"+c.key)
		}
	}
	// A contender that could not run fails the benchmark, after the table:
	// a comparison with a peer missing is not the comparison asked for.
	for _, c := range run {
		if rs := results[c.key]; len(rs) > 0 && rs[0].err != nil && rs[0].wall == 0 {
			b.Errorf("%s could not run: %v", c.name, rs[0].err)
		}
	}
}

// runOnce runs contender c in a fresh repository with a fresh HOME and a
// fresh model, and measures what it left behind.
func runOnce(b *testing.B, t *tools, c contender, ids []string) (r result) {
	b.Helper()
	d, err := newRunDirs(b, c.key)
	if err != nil {
		return result{err: err}
	}
	if *flagKeep {
		defer func() { r.notes = append(r.notes, "kept in "+d.base) }()
	}
	repo := d.repo
	model := startStoryModel(b, ids, *flagDelay)
	env, err := runEnv(t, d, model.URL, c.homeFiles)
	if err != nil {
		return result{err: err}
	}
	if err := writeFiles(repo, c.files(ids)); err != nil {
		return result{err: err}
	}
	git := func(args ...string) (string, error) { return gitIn(repo, env, args...) }
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "initial"}} {
		if _, err := git(args...); err != nil {
			return result{err: err}
		}
	}
	start, err := git("rev-parse", "HEAD")
	if err != nil {
		return result{err: err}
	}

	logPath := filepath.Join(d.base, "output.log")
	p := runProc(c.argv(t), repo, env, logPath, *flagTimeout)
	r.wall, r.cpu, r.exit, r.timedOut, r.err = p.wall, p.cpu, p.exit, p.timedOut, p.err
	r.agentRuns, r.agentTime, r.gaps = readAgentTimes(d.times)
	logData, _ := os.ReadFile(logPath)
	r.log = string(logData)

	// What reached the target branch, and what was left around it.
	for _, id := range ids {
		if got, err := git("show", "main:"+storyFile(id)); err == nil && got+"\n" == storyContent(id) {
			r.landed++
		}
	}
	if s, err := git("rev-list", "--count", start+"..main"); err == nil {
		r.commits, _ = strconv.Atoi(s)
	}
	if s, err := git("rev-list", "--merges", "--count", start+"..main"); err == nil {
		r.merges, _ = strconv.Atoi(s)
	}
	if s, err := git("for-each-ref", "--format=%(refname:short)", "refs/heads/"); err == nil {
		for _, br := range strings.Fields(s) {
			if br != "main" {
				r.branches = append(r.branches, br)
			}
		}
	}
	if s, err := git("worktree", "list", "--porcelain"); err == nil {
		r.worktrees = strings.Count("\n"+s, "\nworktree ") - 1
	}
	if s, err := git("branch", "--show-current"); err == nil && s != "main" {
		r.notes = append(r.notes, fmt.Sprintf("checkout left on %q", s))
	}
	if s, err := git("status", "--porcelain"); err == nil && s != "" {
		r.notes = append(r.notes, fmt.Sprintf("%d uncommitted paths in the checkout", len(strings.Split(s, "\n"))))
	}
	var unmatched, leaks []string
	r.requests, unmatched, leaks = model.stats()
	r.promptBytes = model.medianPromptBytes()
	if len(unmatched) > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%d prompts named no story (first: %q)", len(unmatched), unmatched[0]))
	}
	if len(leaks) > 0 {
		r.notes = append(r.notes, fmt.Sprintf("tried to reach %s (refused)", strings.Join(slices.Compact(slices.Sorted(slices.Values(leaks))), ", ")))
	}
	if *flagKeep || r.landed < len(ids) || r.exit != 0 || r.timedOut {
		fmt.Fprintf(os.Stdout, "--- %s: last lines of its output (%s)\n%s\n", c.name, logPath, lastLines(r.log, 15))
	}
	return r
}

// runDirs are one run's folders. The repository sits in a folder of its
// own: ralph and ralph-tui put their worktrees next to it.
type runDirs struct {
	base, repo, home, tmp string
	shim                  string // holds the timing shim, first on PATH
	times                 string // the shim's log (claudeTimer)
}

// newRunDirs makes a run's folders: in the benchmark's temporary folder,
// or with -keep in one that outlives it (named after key).
func newRunDirs(b *testing.B, key string) (runDirs, error) {
	var base string
	if *flagKeep {
		var err error
		if base, err = os.MkdirTemp("", "ralph-bench-"+key+"-"); err != nil {
			return runDirs{}, err
		}
	} else {
		base = b.TempDir()
	}
	d := runDirs{base: base, repo: filepath.Join(base, "repo"), home: filepath.Join(base, "home"), tmp: filepath.Join(base, "tmp"),
		shim: filepath.Join(base, "shim"), times: filepath.Join(base, "agent-times")}
	for _, dir := range []string{d.repo, d.home, d.tmp} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return runDirs{}, err
		}
	}
	return d, nil
}

// runEnv writes a run's HOME (a git identity, and homeFiles) and the
// timing shim, and returns the environment a contender runs in: Claude
// Code pointed at the model at modelURL, the shim first on PATH, then the
// CLI, bun and ralph; nothing of this process's environment but PATH, so
// that no real key or configuration reaches the run.
func runEnv(t *tools, d runDirs, modelURL string, homeFiles map[string]string) ([]string, error) {
	if err := writeFiles(d.shim, map[string]string{"claude": claudeTimer}); err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(d.shim, "claude"), 0o755); err != nil {
		return nil, err
	}
	env := append(modelserver.ClaudeEnv(d.home, modelURL),
		"PATH="+strings.Join([]string{d.shim, t.claudeDir, filepath.Dir(t.bun), filepath.Dir(t.ralph), os.Getenv("PATH")}, string(os.PathListSeparator)),
		"REAL_CLAUDE="+filepath.Join(t.claudeDir, "claude"),
		"AGENT_TIMES="+d.times,
		"LANG=C.UTF-8",
		"TMPDIR="+d.tmp,
		"GIT_CONFIG_GLOBAL="+filepath.Join(d.home, ".gitconfig"),
		"GIT_CONFIG_NOSYSTEM=1",
		"NO_COLOR=1",
		"TERM=dumb",
	)
	files := map[string]string{".gitconfig": "[user]\n\tname = Bench\n\temail = bench@example.invalid\n"}
	for name, content := range homeFiles {
		files[name] = content
	}
	if err := writeFiles(d.home, files); err != nil {
		return nil, err
	}
	return env, nil
}

// gitIn runs git in dir with env and returns its trimmed output.
func gitIn(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// procResult is how a contender's process ended.
type procResult struct {
	wall, cpu time.Duration // cpu: see result.cpu
	exit      int
	timedOut  bool
	err       error // it could not be started or waited for
}

// runProc runs argv in dir with env, its output to logPath, in a process
// group of its own, and stops the group after timeout (SIGTERM, then
// SIGKILL 10 s later) and again once the contender has exited.
func runProc(argv []string, dir string, env []string, logPath string, timeout time.Duration) (r procResult) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	logf, err := os.Create(logPath)
	if err != nil {
		return procResult{err: err}
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so that a timeout stops the agents too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return procResult{err: fmt.Errorf("start %s: %v", argv[0], err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(timeout):
		// SIGTERM first, so that an orchestrator can stop the agents it
		// started in process groups of their own.
		r.timedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case werr = <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			werr = <-done
		}
	}
	r.wall = time.Since(began)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// Whatever it left running (an agent, a merge) is no part of the next run.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		r.exit = ee.ExitCode()
	} else if werr != nil {
		r.err = werr
	}
	return r
}

func (r result) short(n int) string {
	if r.err != nil && r.wall == 0 {
		return "could not run: " + r.err.Error()
	}
	s := fmt.Sprintf("%6.1fs  landed %d/%d  commits %d  branches left %d  worktrees left %d", r.wall.Seconds(), r.landed, n, r.commits, len(r.branches), r.worktrees)
	if r.timedOut {
		s += fmt.Sprintf("  TIMED OUT after %v", *flagTimeout)
	} else if r.exit != 0 {
		s += fmt.Sprintf("  exit %d", r.exit)
	}
	return s
}

func printTable(w io.Writer, run []contender, results map[string][]result, n int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "contender\twall (median)\truns\tlanded\tcommits (merges)\tbranches left\tworktrees left\texit\tmodel requests\tnotes")
	for _, c := range run {
		rs := results[c.key]
		if len(rs) > 0 && rs[0].err != nil && rs[0].wall == 0 {
			// The reason, often long, follows the table.
			fmt.Fprintf(tw, "%s\tcould not run\t-\t-\t-\t-\t-\t-\t-\t\n", c.name)
			continue
		}
		var walls, landed, commits, branches, worktrees, exits, requests []string
		var notes []string
		for _, r := range rs {
			walls = append(walls, fmt.Sprintf("%.1f", r.wall.Seconds()))
			landed = append(landed, fmt.Sprintf("%d/%d", r.landed, n))
			commits = append(commits, fmt.Sprintf("%d (%d)", r.commits, r.merges))
			branches = append(branches, strconv.Itoa(len(r.branches)))
			worktrees = append(worktrees, strconv.Itoa(r.worktrees))
			e := strconv.Itoa(r.exit)
			if r.timedOut {
				e = "timeout"
			}
			exits = append(exits, e)
			requests = append(requests, strconv.Itoa(r.requests))
			for _, note := range r.notes {
				if !slices.Contains(notes, note) {
					notes = append(notes, note)
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%.1f s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.name, medianWall(rs).Seconds(),
			strings.Join(walls, " "), same(landed), same(commits), same(branches), same(worktrees), same(exits), same(requests), strings.Join(notes, "; "))
	}
	tw.Flush()
}

// same joins the values of the repetitions, or gives the one value they
// share.
func same(vals []string) string {
	if len(slices.Compact(slices.Clone(vals))) == 1 {
		return vals[0]
	}
	return strings.Join(vals, " ")
}

func medianWall(rs []result) time.Duration {
	var ws []time.Duration
	for _, r := range rs {
		if r.wall > 0 {
			ws = append(ws, r.wall)
		}
	}
	if len(ws) == 0 {
		return 0
	}
	slices.Sort(ws)
	if len(ws)%2 == 1 {
		return ws[len(ws)/2]
	}
	return (ws[len(ws)/2-1] + ws[len(ws)/2]) / 2
}

// machine describes where the figures come from: cores, CPU, memory, date.
func machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
		}
	}
	kernel := "?"
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(data))
	}
	node := "?"
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		node = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%d cores (%s)%s, %s/%s, kernel %s, %s, node %s, %s", runtime.NumCPU(), cpu, mem, runtime.GOOS, runtime.GOARCH, kernel, runtime.Version(), node, time.Now().Format("2006-01-02"))
}

func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " / ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
