package bench

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/testing/modelserver"
)

// BenchmarkClaudeArgOrder is the experiment behind the order of ralph's
// claude flags. In BenchmarkSerial, ralphy 4.7.2 finished each story 50 to
// 90 ms sooner than a bare loop of the same CLI. Its environment, stdin
// (/dev/null), stdout and stderr (socket pairs read by bun), working
// directory, repository and prompt made no difference when tried one at a
// time; the order of its flags did: ralphy runs
// `claude --dangerously-skip-permissions --verbose --output-format stream-json -p PROMPT`,
// and Claude Code 2.1.197 given -p as its first argument, as the bare loop
// and ralph gave it, reaches its first model request about 60 ms later.
// CLAUDE_CODE_PROFILE_STARTUP=1 shows the time spread over its startup
// (20 ms more to import its main module, 15 ms more to read the prompt,
// and so on), before it has parsed its options; why the first argument
// matters there is Claude Code's own business, not visible from outside.
//
// Each run is one story in a fresh repository, the prompt on stdin as ralph
// passes it, against the scripted model; the variants alternate, in a
// rotated order each repetition, so that a slow minute of this shared VM
// falls on all of them.
var flagArgOrderReps = flag.Int("argorder-reps", 20, "BenchmarkClaudeArgOrder: repetitions of each argv")

func BenchmarkClaudeArgOrder(b *testing.B) {
	t := findTools(b)
	var ralphArgv []string
	for _, s := range agent.Builtins() {
		if s.Name == "claude" {
			ralphArgv = s.Headless
		}
	}
	variants := []struct{ name, argv string }{
		{"ralph's argv (-p last)", strings.Join(ralphArgv, " ")},
		{"-p first (ralph before, the bare loop)", "claude -p --output-format stream-json --verbose --dangerously-skip-permissions"},
		{"--print first", "claude --print --output-format stream-json --verbose --dangerously-skip-permissions"},
		{"ralphy's order", "claude --dangerously-skip-permissions --verbose --output-format stream-json -p"},
	}
	const id = "US-001"
	prompt := barePrompt(id, *flagBarePrompt)
	type run struct{ wall, first, cpu time.Duration }
	runs := make([][]run, len(variants))

	w := os.Stdout
	fmt.Fprintf(w, "\none story per run, prompt on stdin (%d bytes), the model answers after %v; agent claude %s\nmachine: %s; load average at start %s\n\n",
		len(prompt), *flagSerialDelay, t.claudeVersion, machine(), loadavg())
	order := make([]int, len(variants))
	for i := range order {
		order[i] = i
	}
	for rep := 0; rep <= *flagArgOrderReps; rep++ {
		for _, v := range roundOrder(order, rep) {
			r, err := runClaudeOnce(b, t, strings.Fields(variants[v].argv), id, prompt)
			if err != nil {
				b.Fatalf("%s: %v", variants[v].argv, err)
			}
			// Repetition 0 warms the page cache for all of them.
			if rep > 0 {
				runs[v] = append(runs[v], r)
			}
		}
	}
	fmt.Fprintf(w, "load average at end %s\n\n", loadavg())

	med := func(rs []run, f func(run) time.Duration) time.Duration {
		var ds []time.Duration
		for _, r := range rs {
			ds = append(ds, f(r))
		}
		return median(ds)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000) }
	wall := func(r run) time.Duration { return r.wall }
	first := func(r run) time.Duration { return r.first }
	cpu := func(r run) time.Duration { return r.cpu }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "argv\twall (median)\tover ralph's, paired\tto first request\tCPU\truns")
	for i, v := range variants {
		var diffs []time.Duration
		for k := range runs[i] {
			diffs = append(diffs, runs[i][k].wall-runs[0][k].wall)
		}
		over := "-"
		if i > 0 {
			over = fmt.Sprintf("%+.0f ms", median(diffs).Seconds()*1000)
		}
		fmt.Fprintf(tw, "%s: %s\t%s\t%s\t%s\t%s\t%d\n", v.name, v.argv, ms(med(runs[i], wall)), over, ms(med(runs[i], first)), ms(med(runs[i], cpu)), len(runs[i]))
		b.ReportMetric(med(runs[i], wall).Seconds()*1000, fmt.Sprintf("ms-wall/v%d", i))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nover ralph's, paired: the median over repetitions of (this run minus ralph's argv's run in the same repetition)")
}

// runClaudeOnce runs argv (a claude command) once on story id in a fresh
// repository and HOME, with the prompt on stdin, and returns its wall time,
// the time until its first model request and its CPU time.
func runClaudeOnce(b *testing.B, t *tools, argv []string, id, prompt string) (r struct{ wall, first, cpu time.Duration }, err error) {
	base := b.TempDir()
	repo, home, tmp := filepath.Join(base, "repo"), filepath.Join(base, "home"), filepath.Join(base, "tmp")
	for _, d := range []string{repo, home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return r, err
		}
	}
	model := startStoryModel(b, []string{id}, *flagSerialDelay)
	// The arrival of the first model request: the CLI's startup ends there.
	var mu sync.Mutex
	var firstAt time.Time
	inner := model.srv.Config.Handler
	model.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v1/messages" {
			mu.Lock()
			if firstAt.IsZero() {
				firstAt = time.Now()
			}
			mu.Unlock()
		}
		inner.ServeHTTP(w, req)
	})
	env := append(modelserver.ClaudeEnv(home, model.URL),
		"PATH="+t.claudeDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LANG=C.UTF-8", "TMPDIR="+tmp,
		"GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"), "GIT_CONFIG_NOSYSTEM=1",
		"NO_COLOR=1", "TERM=dumb")
	if err := writeFiles(home, map[string]string{".gitconfig": "[user]\n\tname = Bench\n\temail = bench@example.invalid\n"}); err != nil {
		return r, err
	}
	if err := writeFiles(repo, tuiFiles([]string{id})); err != nil {
		return r, err
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "initial"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = repo, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return r, fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	out, err := os.Create(filepath.Join(base, "output.log"))
	if err != nil {
		return r, err
	}
	defer out.Close()
	// The CLI by its path: exec.Command looks a bare name up in this
	// process's PATH, not in env's.
	cmd := exec.Command(filepath.Join(t.claudeDir, argv[0]), argv[1:]...)
	cmd.Dir, cmd.Env = repo, env
	cmd.Stdin = strings.NewReader(prompt)
	cmd.Stdout, cmd.Stderr = out, out
	began := time.Now()
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(out.Name())
		return r, fmt.Errorf("%v: %s", err, lastLines(string(log), 10))
	}
	r.wall = time.Since(began)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	mu.Lock()
	r.first = firstAt.Sub(began)
	mu.Unlock()
	// The story must be done, or the variants did different work.
	show := exec.Command("git", "show", "main:"+storyFile(id))
	show.Dir, show.Env = repo, env
	if got, err := show.Output(); err != nil || string(got) != storyContent(id) {
		return r, fmt.Errorf("the story did not land on main (%v, %q)", err, got)
	}
	return r, nil
}

// The bare loop is the baseline only if it runs Claude Code exactly as
// ralph does: the order of the flags alone moves it by 60 ms a story.
func TestBareLoopRunsClaudeAsRalphDoes(t *testing.T) {
	for _, s := range agent.Builtins() {
		if s.Name == "claude" && strings.Join(s.Headless, " ") != claudeHeadless {
			t.Errorf("the bare loop runs %q, ralph runs %q", claudeHeadless, strings.Join(s.Headless, " "))
		}
	}
}
