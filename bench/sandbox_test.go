package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/testing/clitest"
)

// BenchmarkSandbox measures what the sandbox (bubblewrap) costs, in two
// parts, both in alternating rounds so that a slow minute of this shared
// VM falls on every contender rather than on one:
//
//   - the start cost of one process, flag by flag: `true` plain, under
//     the least bwrap can do (a user and a mount namespace, / bound), under
//     that plus each flag sandbox.Wrap uses, and under Wrap's own command
//     line for a git worktree; with `unshare -Urm true` beside them as the
//     kernel's floor for the two namespaces every bwrap run creates;
//   - the cost per story: a one-story `ralph build` with the fake agent,
//     paired, --sandbox off against --sandbox bwrap, the order swapped in
//     every other pair; the medians and the median of the paired
//     differences (one probe, one sandboxed agent start behind the proxy, and its sandboxed checks per build).
//
// It is a benchmark only in name: run it through `make bench-sandbox`.
var (
	flagSandboxStarts = flag.Int("sandbox-starts", 40, "BenchmarkSandbox: rounds of the start-cost part; each starts every variant once (0: skip it)")
	flagSandboxPairs  = flag.Int("sandbox-pairs", 7, "BenchmarkSandbox: paired one-story builds, --sandbox off and bwrap (0: skip them)")
)

// startVariant is one way of starting `true`.
type startVariant struct {
	name string
	argv []string
}

func BenchmarkSandbox(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Fatal("the benchmark needs bubblewrap: apt-get install bubblewrap (scripts/install-debs.sh)")
	}
	w := os.Stdout
	fmt.Fprintf(w, "\nmachine: %s; load average at start %s\n", machine(), loadavg())
	ralph := ralphBinary(b)
	if *flagSandboxStarts > 0 {
		startCost(b, w, ralph)
	}
	if *flagSandboxPairs > 0 {
		storyCost(b, w, ralph)
	}
	fmt.Fprintf(w, "load average at end %s\n", loadavg())
}

// startVariants are the flags of sandbox.Wrap's command line one at a
// time over bwrap's least, then Wrap's command line itself for the
// worktree wt of a repository (its git mounts are the most Wrap makes).
func startVariants(b *testing.B, wt, ralph, proxySocket string) []startVariant {
	least := []string{"bwrap", "--bind", "/", "/"}
	with := func(flags ...string) []string {
		return append(append(slices.Clone(least), flags...), "true")
	}
	c, err := sandbox.Wrap(sandbox.Policy{WorkTree: wt, Environ: os.Environ()}, []string{"true"})
	if err != nil {
		b.Fatal(err)
	}
	// Network "proxy", the default once the sandbox is on: ralph's
	// forwarder starts inside first and runs the command.
	proxied := func(fwd ...string) []string {
		c, err := sandbox.Wrap(sandbox.Policy{WorkTree: wt, Environ: os.Environ(), Network: sandbox.NetProxy, ProxySocket: proxySocket,
			Forwarder: fwd, Allow: []string{"127.0.0.1:8787"}}, []string{"true"})
		if err != nil {
			b.Fatal(err)
		}
		return c.Args
	}
	return []startVariant{
		{"plain true", []string{"true"}},
		{"unshare -Urm (floor)", []string{"unshare", "-Urm", "true"}},
		{"bwrap, / bound", with()},
		{"  + --ro-bind / /", append([]string{"bwrap", "--ro-bind", "/", "/"}, "true")},
		{"  + --dev /dev", with("--dev", "/dev")},
		{"  + --unshare-pid", with("--unshare-pid")},
		{"  + --unshare-pid --proc", with("--unshare-pid", "--proc", "/proc")},
		{"  + --unshare-net", with("--unshare-net")},
		{"  + --tmpfs /tmp", with("--tmpfs", "/tmp")},
		{"  + --die-with-parent --new-session", with("--die-with-parent", "--new-session")},
		{"every flag, no policy mounts (the probe)", []string{"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--", "true"}},
		{fmt.Sprintf("sandbox.Wrap (%d mounts)", strings.Count(strings.Join(c.Args, " "), "-bind ")+strings.Count(strings.Join(c.Args, " "), "--tmpfs ")), c.Args},
		{"sandbox.Wrap, network proxy, ralph-sandbox-net", proxied(filepath.Join(filepath.Dir(ralph), sandbox.ForwarderProgram))},
		{"sandbox.Wrap, network proxy, ralph __sandbox-net", proxied(ralph, sandbox.ForwardCommand)},
	}
}

func startCost(b *testing.B, w io.Writer, ralph string) {
	dir := b.TempDir()
	main := filepath.Join(dir, "main")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", main},
		{"-C", main, "-c", "user.name=b", "-c", "user.email=b@example.invalid", "commit", "-q", "--allow-empty", "-m", "initial"},
		{"-C", main, "worktree", "add", "-q", "-b", "ralph/run/t1", filepath.Join(dir, "wt")},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	proxy, err := sandbox.StartProxy(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	vs := startVariants(b, filepath.Join(dir, "wt"), ralph, proxy.Socket)
	// Wall time is what a run waits; CPU time (user and system, of the
	// process and the children it waited for) is what it costs the
	// machine, and is less at the mercy of the other load of a shared VM.
	times, cpus := make([][]time.Duration, len(vs)), make([][]time.Duration, len(vs))
	for round := 0; round < *flagSandboxStarts; round++ {
		for _, i := range roundOrder(indexes(len(vs)), round) {
			cmd := exec.Command(vs[i].argv[0], vs[i].argv[1:]...)
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s: %v\n%s", strings.Join(vs[i].argv, " "), err, out)
			}
			times[i] = append(times[i], time.Since(start))
			cpus[i] = append(cpus[i], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		}
	}
	fmt.Fprintf(w, "\nstart cost of `true`, %d rounds, every variant once per round in a rotated order; medians\n\n", *flagSandboxStarts)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\twall\tover plain\tover bwrap's least\tCPU\tover plain\tover bwrap's least\t")
	plain, least := median(times[0]), median(times[2])
	plainCPU, leastCPU := median(cpus[0]), median(cpus[2])
	for i, v := range vs {
		m, c := median(times[i]), median(cpus[i])
		over, overCPU := "-", "-"
		if i > 2 {
			over, overCPU = ms(m-least), ms(c-leastCPU)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", v.name, ms(m), ms(m-plain), over, ms(c), ms(c-plainCPU), overCPU)
	}
	tw.Flush()
}

// storyCost runs the paired one-story builds.
// ralphBinary is -ralph, or ralph built from this checkout with the
// small forwarder (cmd/ralph-sandbox-net) beside it, as `go install
// ./cmd/...` installs them.
func ralphBinary(b *testing.B) string {
	if *flagRalph != "" {
		return *flagRalph
	}
	root, err := clitest.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for _, name := range []string{"ralph", sandbox.ForwarderProgram} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
		}
	}
	return filepath.Join(dir, "ralph")
}

func storyCost(b *testing.B, w io.Writer, ralph string) {
	base := b.TempDir()
	home := filepath.Join(base, "home")
	if err := writeFiles(home, map[string]string{".gitconfig": "[user]\n\tname = Bench\n\temail = bench@example.invalid\n"}); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+home, "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"), "GIT_CONFIG_NOSYSTEM=1",
		"NO_COLOR=1", "TERM=dumb", "LANG=C.UTF-8")
	modes := []string{"off", "bwrap"}
	build := func(name, mode string) time.Duration {
		dir := filepath.Join(base, name)
		if err := oneStoryRepo(dir, ralph, env); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(ralph, "build", "1", "--sandbox", mode)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil {
			b.Fatalf("ralph build 1 --sandbox %s in %s: %v\n%s", mode, dir, err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, storyFile("US-001"))); err != nil {
			b.Fatalf("ralph build 1 --sandbox %s: the story did not land: %v\n%s", mode, err, out)
		}
		return took
	}
	for _, m := range modes {
		build("warm-"+m, m)
	}
	walls := map[string][]time.Duration{}
	var diffs []time.Duration
	fmt.Fprintf(w, "\none-story `ralph build 1`, fake agent, %d pairs (--sandbox off and bwrap, the order swapped every other pair)\n\n", *flagSandboxPairs)
	for p := 0; p < *flagSandboxPairs; p++ {
		got := map[string]time.Duration{}
		for _, m := range roundOrder(modes, p) {
			got[m] = build(fmt.Sprintf("p%d-%s", p+1, m), m)
			walls[m] = append(walls[m], got[m])
		}
		diffs = append(diffs, got["bwrap"]-got["off"])
		fmt.Fprintf(w, "  pair %d: off %s  bwrap %s  difference %s\n", p+1, ms(got["off"]), ms(got["bwrap"]), ms(got["bwrap"]-got["off"]))
	}
	off, on := median(walls["off"]), median(walls["bwrap"])
	fmt.Fprintf(w, "\nmedian off %s, bwrap %s (ratio %.2f); median paired difference %s per story (one probe, one sandboxed agent run behind the proxy, and its sandboxed checks)\n\n",
		ms(off), ms(on), float64(on)/float64(off), ms(median(diffs)))
}

// oneStoryRepo is a repository with one story that the fake agent does at
// once, and a check that passes.
func oneStoryRepo(dir, ralph string, env []string) error {
	id := "US-001"
	scenario, err := json.Marshal(map[string]any{"format": "claude", "invocations": []map[string]any{{
		"match": "Story: " + id,
		"steps": []map[string]any{
			{"write": storyFile(id), "content": storyContent(id)},
			{"check_story": id},
			{"final": "Wrote it. <promise>COMPLETE</promise>"},
		},
	}}})
	if err != nil {
		return err
	}
	prd := fmt.Sprintf("# PRD: bench\n\n### [ ] %s: %s\n- [ ] %s holds %q\n", id, storyTitle(id), storyFile(id), id+" done")
	if err := writeFiles(dir, map[string]string{".agents/tasks/prd.md": prd, ".bench/scenario.json": string(scenario)}); err != nil {
		return err
	}
	run := func(argv ...string) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	if err := run("git", "init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := run(ralph, "init"); err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, ".ralph", "config.toml")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	cfg := string(data)
	for _, kv := range [][2]string{{"default", `"fake"`}, {"require_plan", "false"}, {"min_free_disk", "1"}} {
		if cfg, err = setKey(cfg, kv[0], kv[1]); err != nil {
			return err
		}
	}
	// The scenario is in the work tree so that the sandboxed fake agent
	// can read it; ralph itself is outside the home, readable.
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cfg += fmt.Sprintf("\n[agents.fake]\ncommand = [%s, \"__demo-agent\", \"--scenario\", %s]\nformat = \"claude\"\n\n[[checks]]\nname = \"files\"\nrun = \"true\"\n",
		q(ralph), q(filepath.Join(dir, ".bench", "scenario.json")))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := run("git", "add", "-A"); err != nil {
		return err
	}
	return run("git", "commit", "-q", "-m", "initial")
}

func indexes(n int) []int {
	is := make([]int, n)
	for i := range is {
		is[i] = i
	}
	return is
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
