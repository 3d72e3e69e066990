package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/testing/clitest"
	"github.com/ralphloop/ralph/internal/testing/harness"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// BenchmarkTemporalEngine measures what the Temporal engine costs ralph per
// story over the local engine: the same stories, the same fake agent (which
// writes one file, ticks its story and says COMPLETE at once, so nearly all
// of the time is ralph's), the same machine, in one run whose rounds
// alternate the engines. It also reads the workflow history each Temporal
// build left (events and bytes, as the server counts them) and runs one
// long build with a low [engine] history_limit, which must continue as new
// and still land every story exactly once, each run's history far under
// Temporal's limits. It is a benchmark only in name: run it through
// `make bench-temporal`.
var (
	flagTemporalStories = flag.Int("temporal-stories", 10, "BenchmarkTemporalEngine: independent stories of each measured build")
	flagTemporalRounds  = flag.Int("temporal-rounds", 3, "BenchmarkTemporalEngine: rounds; each builds once with every engine, alternating")
	flagTemporalWorkers = flag.String("temporal-workers", "1", "BenchmarkTemporalEngine: comma-separated --workers values to measure on both engines (2 puts a second host on Temporal)")
	flagTemporalLong    = flag.Int("temporal-long", 100, "BenchmarkTemporalEngine: stories of the long Temporal build that must continue as new (0: none)")
	flagTemporalLimit   = flag.Int("temporal-long-history-limit", 500, "BenchmarkTemporalEngine: [engine] history_limit of the long build (events; 100 to 40000)")
)

// Temporal's hard limits on one run's history: past them the server
// terminates the workflow.
const (
	temporalMaxEvents = 51200
	temporalMaxBytes  = 50 << 20
)

// engineRun is one build measured.
type engineRun struct {
	key     string // local-1, temporal-1, ...
	wall    time.Duration
	agent   time.Duration // the fake agent's own time, from the iteration records
	iters   int           // agent runs (iteration records)
	landed  int           // stories whose file is on main, landed by exactly one commit
	twice   []string      // stories landed by more than one commit
	retries int           // activity attempts that failed and were retried (Temporal)
	sentBk  int           // tasks sent back by the merge queue (Temporal)
	hist    []runHistory  // the build workflow's runs, oldest first (Temporal)
	gen     int           // `ralph status --json` generation after the build (Temporal)
	err     error
}

// overhead is ralph's own time per story: the wall time minus the agent's.
func (r engineRun) overhead(n int) time.Duration { return (r.wall - r.agent) / time.Duration(n) }

// runHistory is one run (generation) of a build workflow, as the server
// counts it.
type runHistory struct {
	runID  string
	events int64
	bytes  int64
	status enumspb.WorkflowExecutionStatus
	types  map[string]int
}

// temporalEnv is what every build of the benchmark shares: the binaries,
// the dev server and a client of it.
type temporalEnv struct {
	ralph, temporal string
	version         string
	addr            string
	c               client.Client
	base            string // the benchmark's folder
	env             []string
}

func BenchmarkTemporalEngine(b *testing.B) {
	te := startTemporalEnv(b)
	n := *flagTemporalStories
	var keys []string
	for _, w := range strings.Split(*flagTemporalWorkers, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || k < 1 || k > 2 {
			b.Fatalf("-temporal-workers %q: use 1, 2 or 1,2", *flagTemporalWorkers)
		}
		keys = append(keys, fmt.Sprintf("local-%d", k), fmt.Sprintf("temporal-%d", k))
	}
	w := os.Stdout
	fmt.Fprintf(w, "\n%d independent stories per build, fake agent (writes one file, ticks its story, says COMPLETE; no sleep); %d rounds alternating the engines\n", n, *flagTemporalRounds)
	fmt.Fprintf(w, "%s; Temporal dev server %s on %s\nmachine: %s; load average at start %s\n\n", te.version, filepath.Base(filepath.Dir(mustEval(te.temporal))), te.addr, machine(), loadavg())

	// One unmeasured build of each engine first: the first start of the
	// binaries and the server's first workflow of a namespace are slower.
	for _, k := range keys {
		te.build(b, "warm-"+k, k, n, 0)
	}
	results := map[string][]engineRun{}
	for round := 0; round < *flagTemporalRounds; round++ {
		for _, k := range roundOrder(keys, round) {
			r := te.build(b, fmt.Sprintf("r%d-%s", round+1, k), k, n, 0)
			results[k] = append(results[k], r)
			fmt.Fprintf(w, "  round %d/%d  %-11s %s\n", round+1, *flagTemporalRounds, k, r.short(n))
		}
	}
	var long *engineRun
	if *flagTemporalLong > 0 {
		r := te.build(b, "long", "temporal-1", *flagTemporalLong, *flagTemporalLimit)
		long = &r
		fmt.Fprintf(w, "  long build  temporal-1  %s\n", r.short(*flagTemporalLong))
	}
	fmt.Fprintf(w, "\nload average at end %s\n\n", loadavg())
	printTemporalTable(w, keys, results, n)
	if long != nil {
		printLongRun(w, *long, *flagTemporalLong, *flagTemporalLimit)
	}

	for _, k := range keys {
		if m := medianRuns(results[k], func(r engineRun) time.Duration { return r.overhead(n) }); m > 0 {
			b.ReportMetric(float64(m.Microseconds())/1000, "ms/story-"+k)
		}
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "temporal-") {
			continue
		}
		wk := strings.TrimPrefix(k, "temporal-")
		if ratio, ok := pairedRatio(results["local-"+wk], results[k], n); ok {
			b.ReportMetric(ratio, "temporal/local-"+wk)
		}
		if ev, by, ok := historyPerStory(results[k], n); ok {
			b.ReportMetric(ev, "events/story-"+k)
			b.ReportMetric(by, "bytes/story-"+k)
		}
	}
	if long != nil && long.err == nil {
		b.ReportMetric(float64(len(long.hist)), "runs-long")
		b.ReportMetric(long.wall.Seconds(), "s-long")
	}

	// What must hold, after the table: a build that did not land every
	// story exactly once, or a history near Temporal's limits, fails.
	for _, k := range keys {
		for i, r := range results[k] {
			te.judge(b, fmt.Sprintf("%s round %d", k, i+1), r, n)
		}
	}
	if long != nil {
		te.judge(b, "the long build", *long, *flagTemporalLong)
		if long.err == nil && len(long.hist) < 2 {
			b.Errorf("the long build of %d stories with history_limit %d never continued as new (one run of %d events)", *flagTemporalLong, *flagTemporalLimit, long.hist[0].events)
		}
		if long.err == nil && long.gen != len(long.hist)-1 {
			b.Errorf("ralph status --json says generation %d after the long build, but the server holds %d runs of it", long.gen, len(long.hist))
		}
	}
}

func (te *temporalEnv) judge(b *testing.B, what string, r engineRun, n int) {
	b.Helper()
	switch {
	case r.err != nil:
		b.Errorf("%s: %v", what, r.err)
	case r.landed != n || len(r.twice) > 0:
		b.Errorf("%s: %d of %d stories landed exactly once (more than once: %v)", what, r.landed, n, r.twice)
	}
	for _, h := range r.hist {
		if h.events > temporalMaxEvents/2 || h.bytes > temporalMaxBytes/2 {
			b.Errorf("%s: run %s of the workflow holds %d events, %d bytes: over half of Temporal's limits (%d events, %d bytes)", what, h.runID, h.events, h.bytes, temporalMaxEvents, temporalMaxBytes)
		}
	}
}

// startTemporalEnv builds ralph (or takes -ralph), finds the Temporal CLI
// that `make temporal` builds, starts its dev server on a free port of
// 127.0.0.1 for the whole benchmark, and dials it.
func startTemporalEnv(b *testing.B) *temporalEnv {
	b.Helper()
	root, err := clitest.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	te := &temporalEnv{temporal: filepath.Join(root, ".tools", "temporal", "temporal")}
	if _, err := os.Stat(te.temporal); err != nil {
		b.Fatalf("the benchmark needs the Temporal dev server at %s: run `make temporal` first "+
			"(scripts/install-temporal.sh builds the pinned Temporal CLI, about 4 minutes the first time): %v", te.temporal, err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		b.Fatal("the benchmark needs git on PATH")
	}
	if *flagKeep {
		if te.base, err = os.MkdirTemp("", "ralph-bench-temporal-"); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("keeping every build's repositories and logs in %s\n", te.base)
	} else {
		te.base = b.TempDir()
	}
	if *flagRalph != "" {
		if te.ralph, err = filepath.Abs(*flagRalph); err != nil {
			b.Fatal(err)
		}
		te.version = "ralph binary " + te.ralph
	} else {
		te.ralph = filepath.Join(te.base, "bin", "ralph")
		build := exec.Command("go", "build", "-o", te.ralph, "./cmd/ralph")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build ./cmd/ralph: %v\n%s", err, out)
		}
		te.version = "ralph at " + gitOut(root, "rev-parse", "--short", "HEAD")
		if gitOut(root, "status", "--porcelain", "--untracked-files=no") != "" {
			te.version += " with uncommitted changes"
		}
	}
	home := filepath.Join(te.base, "home")
	if err := writeFiles(home, map[string]string{".gitconfig": "[user]\n\tname = Bench\n\temail = bench@example.invalid\n"}); err != nil {
		b.Fatal(err)
	}
	te.env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"), "GIT_CONFIG_NOSYSTEM=1",
		"NO_COLOR=1", "TERM=dumb", "LANG=C.UTF-8")

	for try := 1; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		te.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		srv, err := startProc(te.base, os.Environ(), filepath.Join(te.base, fmt.Sprintf("temporal-server-%d.log", try)),
			te.temporal, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--ui-port", "0", "--log-level", "warn")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { stopProc(srv) })
		if te.c, err = dialServer(te.addr, srv, time.Minute); err == nil {
			b.Cleanup(te.c.Close)
			return te
		}
		// The port may have been taken between Listen and the server's bind.
		if srv.Exited() && try < 3 {
			continue
		}
		b.Fatalf("the Temporal dev server (%s) did not answer on %s: %v\n%s", te.temporal, te.addr, err, lastLines(srv.Output(), 30))
	}
}

func dialServer(addr string, srv *harness.Proc, limit time.Duration) (client.Client, error) {
	quiet := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	end := time.Now().Add(limit)
	var last error
	for time.Now().Before(end) {
		if srv.Exited() {
			return nil, errors.New("the server exited")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quiet})
		if err == nil {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			if err != nil {
				c.Close()
			}
		}
		cancel()
		if err == nil {
			return c, nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("not up after %s: %v", limit, last)
}

// build runs one build of n stories in a fresh repository: key says the
// engine and the workers ("local-1", "temporal-2"). On Temporal, host a
// (the clone the build starts in) runs the merge queue, and with 2 workers
// a second clone is host b; each build has a task queue of its own, so
// its workflow id and history are its own. historyLimit is [engine]
// history_limit (0: the default).
func (te *temporalEnv) build(b *testing.B, name, key string, n, historyLimit int) (r engineRun) {
	b.Helper()
	r.key = key
	engine, ws, _ := strings.Cut(key, "-")
	workers, _ := strconv.Atoi(ws)
	dir := filepath.Join(te.base, name)
	queue := "bench-" + name
	if err := te.makeRepo(dir, n, engine == "temporal", queue, historyLimit); err != nil {
		r.err = err
		return r
	}
	a := filepath.Join(dir, "a")
	hosts := []string{a}
	var procs []*harness.Proc
	defer func() {
		for _, p := range procs {
			stopProc(p)
		}
	}()
	if engine == "temporal" {
		if workers > 1 {
			hosts = append(hosts, filepath.Join(dir, "b"))
		}
		for i, h := range hosts {
			host := string(rune('a' + i))
			args := []string{te.ralph, "worker", "--host", host}
			if i == 0 {
				args = append(args, "--integrate")
			}
			p, err := startProc(h, te.env, filepath.Join(dir, "worker-"+host+".log"), args...)
			if err != nil {
				r.err = err
				return r
			}
			procs = append(procs, p)
			if err := waitOutput(p, "polling", 30*time.Second); err != nil {
				r.err = fmt.Errorf("ralph worker --host %s: %v\n%s", host, err, lastLines(p.Output(), 20))
				return r
			}
		}
		// The worker prints before its pollers start: wait until the
		// server sees them on every queue the build uses, so that the
		// build does not time their start.
		queues := []string{queue, fleet.IntegrationQueue(queue)}
		for i := range hosts {
			queues = append(queues, fleet.HostQueue(queue, string(rune('a'+i))))
		}
		polled := func() bool {
			for _, q := range queues {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				n, err := fleet.Pollers(ctx, te.c, q)
				cancel()
				if err != nil || n == 0 {
					return false
				}
			}
			return true
		}
		if !wait.Within(wait.Long, polled) {
			r.err = fmt.Errorf("the workers' pollers did not reach the server within %s on %v", wait.Long, queues)
			return r
		}
	}
	argv := []string{te.ralph, "build", "--workers", strconv.Itoa(workers)}
	if engine == "temporal" {
		argv = append(argv, "--engine", "temporal")
	}
	logPath := filepath.Join(dir, "build.log")
	began := time.Now()
	p, err := startProc(a, te.env, logPath, argv...)
	if err != nil {
		r.err = err
		return r
	}
	// A build that hangs (a worker stuck, a lost task) fails in minutes,
	// not at go test's timeout: a story takes well under a second here.
	limit := 2*time.Minute + time.Duration(n)*3*time.Second
	select {
	case <-p.Done:
	case <-time.After(limit):
		stopProc(p)
		r.err = fmt.Errorf("%s still running after %s:\n%s", strings.Join(argv[1:], " "), limit, lastLines(p.Output(), 20))
		return r
	}
	r.wall = time.Since(began)
	if p.Err != nil {
		r.err = fmt.Errorf("%s: %v:\n%s", strings.Join(argv[1:], " "), p.Err, lastLines(p.Output(), 20))
	}
	r.sentBk = strings.Count(p.Output(), "] sent_back")

	for _, h := range hosts {
		ms, iters, err := agentTime(filepath.Join(h, ".ralph", "runs"))
		if err != nil && r.err == nil {
			r.err = err
		}
		r.agent += ms
		r.iters += iters
	}
	r.landed, r.twice = landedOnce(a, n)
	if engine == "temporal" {
		for _, q := range procs {
			// The SDK logs a failed activity attempt that it retries.
			r.retries += strings.Count(q.Output(), `msg="Activity error."`)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		hist, err := historyOf(ctx, te.c, fleet.BuildID(queue, "main"))
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("reading the workflow history: %w", err)
		}
		r.hist = hist
		// What a person sees: ralph status reads the run through its
		// Query (answered by host a's worker, still running).
		st := exec.Command(te.ralph, "status", "--json")
		st.Dir, st.Env = a, te.env
		out, err := st.Output()
		var doc struct {
			Temporal struct {
				Generation int `json:"generation"`
			} `json:"temporal"`
		}
		if err == nil {
			err = json.Unmarshal(out, &doc)
		}
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("ralph status --json: %v: %s", err, out)
		}
		r.gen = doc.Temporal.Generation
	}
	if r.err != nil || *flagKeep {
		fmt.Printf("--- %s (%s): last lines of its output (%s)\n%s\n", name, key, logPath, lastLines(p.Output(), 15))
	}
	return r
}

// makeRepo writes a repository of n stories, each of which the fake agent
// does at once, with ralph's config set for the engine, and on Temporal a
// bare exchange repository and a second clone (host b).
func (te *temporalEnv) makeRepo(dir string, n int, temporal bool, queue string, historyLimit int) error {
	a := filepath.Join(dir, "a")
	ids := storyIDs(n)
	var prd strings.Builder
	prd.WriteString("# PRD: bench\n")
	type step map[string]any
	type invocation struct {
		Match string `json:"match"`
		Steps []step `json:"steps"`
	}
	var invs []invocation
	for i, id := range ids {
		fmt.Fprintf(&prd, "\n### [ ] %s: %s\n- [ ] %s holds %q\n", id, storyTitle(id), storyFile(id), id+" done")
		// ralph's prompt names the story it assigns as "Story: US-001";
		// other stories' ids may appear in it too.
		invs = append(invs, invocation{Match: "Story: " + id, Steps: []step{
			{"write": storyFile(id), "content": storyContent(id)},
			{"check_story": id},
			{"final": fmt.Sprintf("Wrote %s (%d). <promise>COMPLETE</promise>", storyFile(id), i+1)},
		}})
	}
	scenario, err := json.Marshal(map[string]any{"format": "claude", "invocations": invs})
	if err != nil {
		return err
	}
	scenarioPath := filepath.Join(dir, "scenario.json")
	if err := writeFiles(dir, map[string]string{"scenario.json": string(scenario)}); err != nil {
		return err
	}
	if err := writeFiles(a, map[string]string{".agents/tasks/prd.md": prd.String()}); err != nil {
		return err
	}
	run := func(dir string, argv ...string) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, te.env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	if err := run(a, "git", "init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := run(a, te.ralph, "init"); err != nil {
		return err
	}
	cfgPath := filepath.Join(a, ".ralph", "config.toml")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	cfg := string(data)
	for _, kv := range [][2]string{{"default", `"fake"`}, {"require_plan", "false"}, {"min_free_disk", "1"}} {
		cfg, err = setKey(cfg, kv[0], kv[1])
		if err != nil {
			return err
		}
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cfg += fmt.Sprintf("\n[agents.fake]\ncommand = [%s, \"__demo-agent\", \"--scenario\", %s]\nformat = \"claude\"\n\n[[checks]]\nname = \"files\"\nrun = \"true\"\n",
		q(te.ralph), q(scenarioPath))
	if temporal {
		cfg += fmt.Sprintf("\n[engine]\nkind = \"temporal\"\naddress = %q\ntask_queue = %q\nexchange_remote = %s\n", te.addr, queue, q(filepath.Join(dir, "exchange.git")))
		if historyLimit > 0 {
			cfg += fmt.Sprintf("history_limit = %d\n", historyLimit)
		}
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "initial"}} {
		if err := run(a, append([]string{"git"}, args...)...); err != nil {
			return err
		}
	}
	if temporal {
		if err := run(dir, "git", "init", "-q", "--bare", "exchange.git"); err != nil {
			return err
		}
		if err := run(dir, "git", "clone", "-q", "a", "b"); err != nil {
			return err
		}
	}
	return nil
}

// setKey sets the first `key = ...` line of a TOML file ralph init wrote.
func setKey(cfg, key, value string) (string, error) {
	lines := strings.Split(cfg, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, key+" = ") {
			lines[i] = key + " = " + value
			return strings.Join(lines, "\n"), nil
		}
	}
	return "", fmt.Errorf("ralph init's config has no %q line", key)
}

var iterRecord = regexp.MustCompile(`^iter-\d+\.json$`)

// agentTime sums the agent durations of every iteration record under runs
// (the local engine's runs/<run>/iter-N.json, and the Temporal hosts'
// runs/<run>/workers/<task>/<attempt>/runs/<loop run>/iter-N.json).
func agentTime(runs string) (time.Duration, int, error) {
	var total time.Duration
	n := 0
	err := filepath.WalkDir(runs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// iter-N.json only: iter-N.checks.json beside it is what TEST ran.
		if d.IsDir() || !iterRecord.MatchString(d.Name()) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var rec struct {
			DurationMS *int64 `json:"duration_ms"`
		}
		if err := json.Unmarshal(data, &rec); err != nil || rec.DurationMS == nil {
			return fmt.Errorf("%s: no duration_ms (%v)", p, err)
		}
		total += time.Duration(*rec.DurationMS) * time.Millisecond
		n++
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return total, n, err
}

// landedOnce counts the stories whose file is on main as written and whose
// commit (subject "US-001: ...") is there exactly once, and names those
// landed more than once.
func landedOnce(repo string, n int) (int, []string) {
	subjects := strings.Split(gitOut(repo, "log", "--format=%s", "main"), "\n")
	landed := 0
	var twice []string
	for _, id := range storyIDs(n) {
		c := 0
		for _, s := range subjects {
			if strings.HasPrefix(s, id+": ") {
				c++
			}
		}
		if c > 1 {
			twice = append(twice, id)
		}
		if c == 1 && gitOut(repo, "show", "main:"+storyFile(id))+"\n" == storyContent(id) {
			landed++
		}
	}
	return landed, twice
}

// historyOf returns every run of a workflow, oldest first: the latest run,
// then the one it continued from (its start event names it), and so on.
// Events and bytes are the server's own counts, the ones its limits check.
func historyOf(ctx context.Context, c client.Client, id string) ([]runHistory, error) {
	var out []runHistory
	runID := ""
	for len(out) < 1000 {
		d, err := c.DescribeWorkflowExecution(ctx, id, runID)
		if err != nil {
			return out, err
		}
		info := d.GetWorkflowExecutionInfo()
		h := runHistory{runID: info.GetExecution().GetRunId(), events: info.GetHistoryLength(), bytes: info.GetHistorySizeBytes(),
			status: info.GetStatus(), types: map[string]int{}}
		it := c.GetWorkflowHistory(ctx, id, h.runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		prev := ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return out, err
			}
			h.types[strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")]++
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				prev = a.GetContinuedExecutionRunId()
			}
		}
		out = append([]runHistory{h}, out...)
		if prev == "" {
			return out, nil
		}
		runID = prev
	}
	return out, errors.New("more than 1000 runs")
}

func (r engineRun) short(n int) string {
	if r.err != nil && r.wall == 0 {
		return "could not run: " + firstLines(r.err.Error(), 3)
	}
	s := fmt.Sprintf("%6.2fs  agent %5.2fs  ralph %6.1f ms/story  landed once %d/%d  agent runs %d", r.wall.Seconds(), r.agent.Seconds(),
		float64(r.overhead(n).Microseconds())/1000, r.landed, n, r.iters)
	if strings.HasPrefix(r.key, "temporal") {
		var ev, by int64
		for _, h := range r.hist {
			ev += h.events
			by += h.bytes
		}
		s += fmt.Sprintf("  history %d events %d bytes in %d runs  retried activities %d  sent back %d", ev, by, len(r.hist), r.retries, r.sentBk)
		// A workflow task that timed out (a busy machine: the worker did
		// not answer in 10 s) costs its timeout; the history says so.
		if to := countTypes(r.hist, "WORKFLOW_TASK_TIMED_OUT", "WORKFLOW_TASK_FAILED", "ACTIVITY_TASK_TIMED_OUT", "ACTIVITY_TASK_FAILED"); to != "" {
			s += "  " + to
		}
	}
	if r.err != nil {
		s += "  FAILED: " + firstLines(r.err.Error(), 2)
	}
	return s
}

// countTypes names the events of these types in the histories, with their
// counts ("" when there are none).
func countTypes(hist []runHistory, types ...string) string {
	var parts []string
	for _, t := range types {
		c := 0
		for _, h := range hist {
			c += h.types[t]
		}
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(t), c))
		}
	}
	return strings.Join(parts, ", ")
}

func medianRuns(rs []engineRun, f func(engineRun) time.Duration) time.Duration {
	var vs []time.Duration
	for _, r := range rs {
		if r.err == nil {
			vs = append(vs, f(r))
		}
	}
	return median(vs)
}

// pairedRatio is the median over rounds of the Temporal build's overhead
// per story over the same round's local build's.
func pairedRatio(local, temporal []engineRun, n int) (float64, bool) {
	var rs []float64
	for i := range temporal {
		if i < len(local) && local[i].err == nil && temporal[i].err == nil && local[i].overhead(n) > 0 {
			rs = append(rs, temporal[i].overhead(n).Seconds()/local[i].overhead(n).Seconds())
		}
	}
	if len(rs) == 0 {
		return 0, false
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2], true
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2, true
}

// historyPerStory is the median over builds of the history's events and
// bytes (every run of the workflow) per story.
func historyPerStory(rs []engineRun, n int) (events, bytes float64, ok bool) {
	var evs, bys []float64
	for _, r := range rs {
		if r.err != nil || len(r.hist) == 0 {
			continue
		}
		var e, by int64
		for _, h := range r.hist {
			e += h.events
			by += h.bytes
		}
		evs = append(evs, float64(e)/float64(n))
		bys = append(bys, float64(by)/float64(n))
	}
	if len(evs) == 0 {
		return 0, 0, false
	}
	slices.Sort(evs)
	slices.Sort(bys)
	return evs[len(evs)/2], bys[len(bys)/2], true
}

func printTemporalTable(w io.Writer, keys []string, results map[string][]engineRun, n int) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "engine\tralph ms/story (median)\tper round\twall s per build\tagent s per build\tvs local (paired median)\tevents/story\tbytes/story\tretried activities\tsent back\tlanded once")
	for _, k := range keys {
		rs := results[k]
		var rounds, walls, agents, retried, sent, landed []string
		for _, r := range rs {
			if r.err != nil {
				rounds = append(rounds, "failed")
				continue
			}
			rounds = append(rounds, ms(r.overhead(n)))
			walls = append(walls, fmt.Sprintf("%.2f", r.wall.Seconds()))
			agents = append(agents, fmt.Sprintf("%.2f", r.agent.Seconds()))
			retried = append(retried, strconv.Itoa(r.retries))
			sent = append(sent, strconv.Itoa(r.sentBk))
			landed = append(landed, fmt.Sprintf("%d/%d", r.landed, n))
		}
		ratio, evs, bys := "-", "-", "-"
		if strings.HasPrefix(k, "temporal-") {
			if x, ok := pairedRatio(results["local-"+strings.TrimPrefix(k, "temporal-")], rs, n); ok {
				ratio = fmt.Sprintf("%.1fx", x)
			}
			if e, by, ok := historyPerStory(rs, n); ok {
				evs, bys = fmt.Sprintf("%.1f", e), fmt.Sprintf("%.0f", by)
			}
		} else {
			retried, sent = nil, nil
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k, ms(medianRuns(rs, func(r engineRun) time.Duration { return r.overhead(n) })),
			strings.Join(rounds, " "), strings.Join(walls, " "), strings.Join(agents, " "), ratio, evs, bys,
			dash(strings.Join(retried, " ")), dash(strings.Join(sent, " ")), same(landed))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nralph ms/story: (wall time of `ralph build` - the agent's time from the iteration records) / stories; vs local: the median over rounds of temporal/local of the same round")
	// Where a Temporal build's events go, per story (the first round's).
	for _, k := range keys {
		if rs := results[k]; strings.HasPrefix(k, "temporal-") && len(rs) > 0 && rs[0].err == nil {
			fmt.Fprintf(w, "%s, round 1, events per story by type: %s\n", k, eventTypes(rs[0].hist, n))
		}
	}
}

func eventTypes(hist []runHistory, n int) string {
	all := map[string]int{}
	for _, h := range hist {
		for t, c := range h.types {
			all[t] += c
		}
	}
	keys := slices.SortedFunc(func(yield func(string) bool) {
		for k := range all {
			if !yield(k) {
				return
			}
		}
	}, func(a, b string) int { return all[b] - all[a] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(all[k])/float64(n)))
	}
	return strings.Join(parts, ", ")
}

func printLongRun(w io.Writer, r engineRun, n, limit int) {
	fmt.Fprintf(w, "\nlong build: %d stories on Temporal, --workers 1, [engine] history_limit = %d\n", n, limit)
	if r.err != nil && r.wall == 0 {
		fmt.Fprintf(w, "  could not run: %v\n", r.err)
		return
	}
	var ev, by, maxEv, maxBy int64
	for i, h := range r.hist {
		fmt.Fprintf(w, "  run %d (%s): %d events, %d bytes, %s\n", i, h.runID, h.events, h.bytes, strings.TrimPrefix(h.status.String(), "WORKFLOW_EXECUTION_STATUS_"))
		ev += h.events
		by += h.bytes
		maxEv, maxBy = max(maxEv, h.events), max(maxBy, h.bytes)
	}
	fmt.Fprintf(w, "  wall %.1f s (%.0f ms per story, of which ralph's %.0f ms); %d stories landed exactly once; %d runs (ralph status --json: generation %d); "+
		"%.1f events and %.0f bytes per story; the largest run %d events (%.1f%% of %d), %d bytes (%.3f%% of 50 MB)\n",
		r.wall.Seconds(), r.wall.Seconds()*1000/float64(n), float64(r.overhead(n).Microseconds())/1000, r.landed, len(r.hist), r.gen,
		float64(ev)/float64(n), float64(by)/float64(n), maxEv, 100*float64(maxEv)/temporalMaxEvents, temporalMaxEvents, maxBy, 100*float64(maxBy)/temporalMaxBytes)
	if ev > 0 {
		perStory := float64(ev) / float64(n)
		fmt.Fprintf(w, "  at %.1f events per story, one run reaches the default history_limit (%d) after about %.0f stories and Temporal's %d-event limit after about %.0f: continuing as new keeps every run under the first\n",
			perStory, fleet.DefaultHistoryLimit, fleet.DefaultHistoryLimit/perStory, temporalMaxEvents, temporalMaxEvents/perStory)
	}
	fmt.Fprintf(w, "  retried activities %d, sent back %d\n", r.retries, r.sentBk)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func mustEval(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// startProc starts argv in its own process group, its output in logPath.
func startProc(dir string, env []string, logPath string, argv ...string) (*harness.Proc, error) {
	return harness.Start(filepath.Base(argv[0]), dir, env, logPath, argv[0], argv[1:]...)
}

// stop interrupts the process group (a ralph worker stops on Ctrl+C) and
// kills it when it has not ended after 10 seconds.
func stopProc(p *harness.Proc) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-p.Done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.Done
	}
}

func waitOutput(p *harness.Proc, s string, limit time.Duration) error {
	if !wait.Within(limit, func() bool { return p.Exited() || strings.Contains(p.Output(), s) }) {
		return fmt.Errorf("did not print %q in %s", s, limit)
	}
	if !strings.Contains(p.Output(), s) {
		return fmt.Errorf("exited (%v) before printing %q", p.Err, s)
	}
	return nil
}
