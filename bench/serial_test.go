package bench

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// BenchmarkSerial measures what an orchestrator costs per story over the
// agent CLI alone, one story at a time: a bare loop that runs `claude -p`
// once per story, ralph build --workers 1, ralph-tui --serial --delay 0 and
// ralphy, on the same stories with the same Claude Code against a model
// that answers after a small fixed delay, so that the orchestrators' own
// time is not lost in the model's.
//
// The contenders run in rounds, one after another, each round in another
// order (a rotation), so that a slow minute of this shared VM falls on all
// of them rather than on one. The "over bare" figures are paired: each
// round's run minus the same round's bare loop, then the median.
var (
	flagSerialRounds  = flag.Int("serial-rounds", 3, "BenchmarkSerial: rounds; each runs every contender once, in a rotated order")
	flagSerialStories = flag.Int("serial-stories", 10, "BenchmarkSerial: independent stories in the task file")
	flagSerialDelay   = flag.Duration("serial-delay", 200*time.Millisecond, "BenchmarkSerial: how long the model takes to answer each request")
	flagSerialOnly    = flag.String("serial-only", "", "BenchmarkSerial: comma-separated contenders to run (bare, bare-arg, bare-pfirst, ralph, tui, ralphy); empty runs all; bare always runs")
	// ralph's build prompt for one of these stories is about this long
	// (its median as the model received it, printed in the table's prompt
	// column); the bare loop's prompt is padded to it so that the CLI
	// does the same work on both.
	// -ralph-base runs a second ralph binary beside the first in the same
	// rounds: a before and after on the same machine at the same minutes.
	flagRalphBase  = flag.String("ralph-base", "", "BenchmarkSerial: another ralph binary to run as its own contender (say, one built before a change)")
	flagBarePrompt = flag.Int("bare-prompt-bytes", 3300, "BenchmarkSerial: size the bare loop's prompt is padded to")
)

// claudeHeadless is how ralph runs Claude Code (internal/agent/registry.go),
// the prompt on stdin; the bare loop runs it the same way. The order of the
// flags matters to Claude Code 2.1.197: -p first costs it about 60 ms per
// run (BenchmarkClaudeArgOrder), which the bare-pfirst loop shows.
const claudeHeadless = "claude --output-format stream-json --verbose --dangerously-skip-permissions -p"

// claudePFirst is the order ralph used before, and the bare loop with it.
const claudePFirst = "claude -p --output-format stream-json --verbose --dangerously-skip-permissions"

// bareLoop is the baseline: no orchestration at all, one CLI run per story
// in order, each prompt from a file. A failing run does not stop the loop.
const bareLoop = `st=0
for p in "$1"/*.md; do
	` + claudeHeadless + ` <"$p" || st=$?
done
exit $st`

// bareLoopPFirst is the bare loop with -p as Claude Code's first argument.
const bareLoopPFirst = `st=0
for p in "$1"/*.md; do
	` + claudePFirst + ` <"$p" || st=$?
done
exit $st`

// bareLoopArg is the bare loop with the prompt on the command line, as
// ralphy passes it, rather than on stdin, as ralph does: the two differ in
// what Claude Code does before its first request.
const bareLoopArg = `st=0
for p in "$1"/*.md; do
	` + claudeHeadless + ` "$(cat "$p")" </dev/null || st=$?
done
exit $st`

// barePrompt asks for one story in ralph's words, so that the scripted
// model knows which (see storyLine), and asks for the commit that every
// orchestrator makes for a story: the bare loop ends with the same commits
// on main, and "over bare" is the orchestration, not the commit.
func barePrompt(id string, size int) string {
	head := fmt.Sprintf("Story: %s: %s\n\nCreate %s holding the line %q, then commit your changes.\n\n",
		id, storyTitle(id), storyFile(id), id+" done")
	const filler = "This line only pads the prompt to the size of ralph's; there is nothing to do for it.\n"
	if size <= len(head) {
		return head
	}
	return head + strings.Repeat(filler, (size-len(head))/len(filler)+1)[:size-len(head)]
}

func serialContenders(n int) []contender {
	return []contender{
		{
			key: "bare", name: "bare loop: " + strings.Fields(claudeHeadless)[0] + " -p per story", tool: "claude",
			// The task file is in its repository too, as in the others'.
			files: tuiFiles,
			argv:  func(t *tools) []string { return []string{"bash", "-c", bareLoop, "bare", t.barePrompts} },
		},
		{
			key: "bare-arg", name: "bare loop, prompt as argument", tool: "claude",
			files: tuiFiles,
			argv:  func(t *tools) []string { return []string{"bash", "-c", bareLoopArg, "bare", t.barePrompts} },
		},
		{
			key: "bare-pfirst", name: "bare loop, -p first", tool: "claude",
			files: tuiFiles,
			argv:  func(t *tools) []string { return []string{"bash", "-c", bareLoopPFirst, "bare", t.barePrompts} },
		},
		{
			key: "ralph", name: "ralph build --workers 1", tool: "ralph",
			files: ralphFiles,
			argv:  func(t *tools) []string { return []string{t.ralph, "build", "--workers", "1"} },
		},
		{
			key: "ralph-base", name: "ralph build --workers 1 (-ralph-base)", tool: "ralph-base",
			files: ralphFiles,
			argv:  func(t *tools) []string { return []string{t.ralphBase, "build", "--workers", "1"} },
		},
		{
			// ralph-tui waits 1 s between iterations unless told; its
			// default of 10 iterations would leave no room for a retry.
			key: "tui", name: "ralph-tui run --serial --delay 0", tool: "ralph-tui",
			files: tuiFiles, homeFiles: tuiHome,
			argv: func(t *tools) []string {
				return []string{t.bun, t.ralphTUI, "run", "--prd", "prd.json", "--agent", "claude", "--headless", "--no-setup", "--no-notify",
					"--serial", "--delay", "0", "--iterations", fmt.Sprint(2 * n)}
			},
		},
		{
			// Serial is ralphy's default; it has no delay between tasks.
			key: "ralphy", name: "ralphy --yaml tasks.yaml", tool: "ralphy",
			files: ralphyFiles,
			argv:  func(t *tools) []string { return []string{t.ralphy, "--yaml", "tasks.yaml"} },
		},
	}
}

// roundOrder is round r's order: the contenders rotated by r, so that each
// takes each place in turn.
func roundOrder[T any](cs []T, r int) []T {
	k := r % len(cs)
	return append(slices.Clone(cs[k:]), cs[:k]...)
}

// BenchmarkSerial runs the serial comparison and prints one table. It is a
// benchmark only in name: run it through `make bench-serial`.
func BenchmarkSerial(b *testing.B) {
	t := findTools(b)
	ids := storyIDs(*flagSerialStories)
	var run []contender
	for _, c := range serialContenders(len(ids)) {
		named := slices.Contains(strings.Split(*flagSerialOnly, ","), c.key)
		// bare-arg and bare-pfirst only answer a question (does stdin or
		// argv matter to the CLI? Not here: -6 ms per story. Does -p first?
		// Yes: about 60 ms), so they run when named.
		if c.key == "ralph-base" && *flagRalphBase == "" {
			continue
		}
		if c.key == "bare" || named || (*flagSerialOnly == "" && c.key != "bare-arg" && c.key != "bare-pfirst") {
			run = append(run, c)
		}
	}
	if *flagRalphBase != "" {
		var err error
		if t.ralphBase, err = filepath.Abs(*flagRalphBase); err != nil {
			b.Fatal(err)
		}
		if _, err := os.Stat(t.ralphBase); err != nil {
			t.missing["ralph-base"] = err.Error()
		}
	}
	t.barePrompts = b.TempDir()
	for _, id := range ids {
		if err := os.WriteFile(filepath.Join(t.barePrompts, id+".md"), []byte(barePrompt(id, *flagBarePrompt)), 0o644); err != nil {
			b.Fatal(err)
		}
	}

	w := os.Stdout
	fmt.Fprintf(w, "\n%d independent stories, one at a time, each one tool call and a final answer; the model answers every request after %v\n", len(ids), *flagSerialDelay)
	base := ""
	if t.ralphBase != "" {
		base = "; -ralph-base " + t.ralphBase
	}
	fmt.Fprintf(w, "%s%s; %s (bun 1.4.5); %s; agent claude %s\nmachine: %s; load average at start %s\n\n",
		t.ralphVersion, base, tuiPeer, ralphyPeer, t.claudeVersion, machine(), loadavg())

	// One unmeasured run of the CLI first: the first start of node and
	// Claude Code after a while reads its files from disk, and would
	// count against whichever contender came first.
	warm := *flagKeep
	*flagKeep = false
	runOnceQuiet(b, t, run[0], ids, *flagSerialDelay)
	*flagKeep = warm

	results := map[string][]result{}
	for round := 0; round < *flagSerialRounds; round++ {
		for _, c := range roundOrder(run, round) {
			if why := t.missing[c.tool]; why != "" {
				results[c.key] = append(results[c.key], result{err: fmt.Errorf("%s", why)})
				fmt.Fprintf(w, "  round %d/%d  %-36s could not run: %s\n", round+1, *flagSerialRounds, c.name, why)
				continue
			}
			r := runOnceDelay(b, t, c, ids, *flagSerialDelay)
			results[c.key] = append(results[c.key], r)
			fmt.Fprintf(w, "  round %d/%d  %-36s %s  cpu %5.1fs\n", round+1, *flagSerialRounds, c.name, r.short(len(ids)), r.cpu.Seconds())
		}
	}
	fmt.Fprintf(w, "\nload average at end %s\n\n", loadavg())
	printSerialTable(w, run, results, len(ids))
	for _, c := range run {
		if rs := results[c.key]; rs[0].err == nil || rs[0].wall > 0 {
			b.ReportMetric(medianOf(rs, func(r result) time.Duration { return r.wall }).Seconds()*1000/float64(len(ids)), "ms-wall/story/"+c.key)
		}
	}
	for _, c := range run {
		if rs := results[c.key]; len(rs) > 0 && rs[0].err != nil && rs[0].wall == 0 {
			b.Errorf("%s could not run: %v", c.name, rs[0].err)
		}
	}
}

// runOnceDelay is runOnce with the model's delay set for this benchmark.
func runOnceDelay(b *testing.B, t *tools, c contender, ids []string, delay time.Duration) result {
	old := *flagDelay
	*flagDelay = delay
	defer func() { *flagDelay = old }()
	return runOnce(b, t, c, ids)
}

// runOnceQuiet runs c without printing its output on a failure: the warm-up.
func runOnceQuiet(b *testing.B, t *tools, c contender, ids []string, delay time.Duration) {
	stdout := os.Stdout
	if null, err := os.Open(os.DevNull); err == nil {
		os.Stdout = null
		defer func() { os.Stdout = stdout; null.Close() }()
	}
	runOnceDelay(b, t, c, ids, delay)
}

// medianOf is the median of f over the runs that ran.
func medianOf(rs []result, f func(result) time.Duration) time.Duration {
	var vs []time.Duration
	for _, r := range rs {
		if r.wall > 0 {
			vs = append(vs, f(r))
		}
	}
	return median(vs)
}

func median(vs []time.Duration) time.Duration {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// pairedOverBare is the median over rounds of f(contender's run) minus
// f(that round's bare loop), for the rounds where both ran.
func pairedOverBare(rs, bare []result, f func(result) time.Duration) (time.Duration, bool) {
	var ds []time.Duration
	for i := range rs {
		if i < len(bare) && rs[i].wall > 0 && bare[i].wall > 0 {
			ds = append(ds, f(rs[i])-f(bare[i]))
		}
	}
	return median(ds), len(ds) > 0
}

func printSerialTable(w io.Writer, run []contender, results map[string][]result, n int) {
	perStory := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000/float64(n)) }
	signed := func(d time.Duration) string { return fmt.Sprintf("%+.0f ms", d.Seconds()*1000/float64(n)) }
	wall := func(r result) time.Duration { return r.wall }
	cpu := func(r result) time.Duration { return r.cpu }
	bare := results["bare"]

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "contender\twall/story\tover bare\tover bare by round (ms)\toutside the agent/story\tbetween agent runs\tagent runs\tCPU/story\tover bare\twall per run (s)\tCPU per run (s)\tstories done\tcommits\tprompt bytes\texit\tnotes")
	var whys []string
	for _, c := range run {
		rs := results[c.key]
		if len(rs) > 0 && rs[0].err != nil && rs[0].wall == 0 {
			fmt.Fprintf(tw, "%s\tcould not run: see below\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", c.name)
			whys = append(whys, fmt.Sprintf("%s could not run: %v", c.name, rs[0].err))
			continue
		}
		overWall, overCPU := "-", "-"
		if c.key != "bare" {
			if d, ok := pairedOverBare(rs, bare, wall); ok {
				overWall = signed(d)
			}
			if d, ok := pairedOverBare(rs, bare, cpu); ok {
				overCPU = signed(d)
			}
		}
		var rounds []string // this round's wall minus its bare loop's, per story
		for i, r := range rs {
			if c.key != "bare" && i < len(bare) && r.wall > 0 && bare[i].wall > 0 {
				rounds = append(rounds, fmt.Sprintf("%+.0f", (r.wall-bare[i].wall).Seconds()*1000/float64(n)))
			}
		}
		var walls, cpus, done, commits, prompts, exits, notes, runs []string
		var gaps []time.Duration
		for _, r := range rs {
			gaps = append(gaps, r.gaps...)
			runs = append(runs, fmt.Sprint(r.agentRuns))
			walls = append(walls, fmt.Sprintf("%.2f", r.wall.Seconds()))
			cpus = append(cpus, fmt.Sprintf("%.2f", r.cpu.Seconds()))
			done = append(done, fmt.Sprintf("%d/%d", r.landed, n))
			commits = append(commits, fmt.Sprint(r.commits))
			prompts = append(prompts, fmt.Sprint(r.promptBytes))
			e := fmt.Sprint(r.exit)
			if r.timedOut {
				e = "timeout"
			}
			exits = append(exits, e)
			for _, note := range r.notes {
				if !slices.Contains(notes, note) {
					notes = append(notes, note)
				}
			}
		}
		outside := func(r result) time.Duration { return r.wall - r.agentTime }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f ms\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.name,
			perStory(medianOf(rs, wall)), overWall, strings.Join(rounds, " "), perStory(medianOf(rs, outside)), median(gaps).Seconds()*1000, same(runs),
			perStory(medianOf(rs, cpu)), overCPU,
			strings.Join(walls, " "), strings.Join(cpus, " "), same(done), same(commits), same(prompts), same(exits), strings.Join(notes, "; "))
	}
	tw.Flush()
	for _, why := range whys {
		fmt.Fprintln(w, why)
	}
	fmt.Fprintln(w, "\nwall and CPU per story: medians over the rounds, divided by the stories; CPU is user+system of the contender's whole process tree (every waited-for descendant: the CLI, git, bun);")
	fmt.Fprintln(w, "over bare: the median over rounds of (that run minus the same round's bare loop), per story;")
	fmt.Fprintln(w, "outside the agent: the median over rounds of (wall minus the agent runs' time), per story; between agent runs: the median time from the end of one agent run to the start of the next,")
	fmt.Fprintln(w, "both as a timing shim in front of the CLI saw them (the orchestrator's own time, and the part of it that sits between agent runs)")
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}
