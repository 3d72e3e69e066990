package browser

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ralphloop/ralph/internal/serve"
	"github.com/ralphloop/ralph/internal/testing/clitest"
)

const chromium = "/usr/bin/chromium"

// browser starts a headless chromium with a fresh profile. Without the
// background-networking flags chromium's own connections are refused in
// the test machines, and it stalls on them.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the browser test needs %s: make test installs it (scripts/install-debs.sh)", chromium)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first action starts the browser; it must not run under a
	// timeout, which would end the browser with it.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("could not start %s: %v (make test installs it: scripts/install-debs.sh)", chromium, err)
	}
	return ctx
}

// artifactDir is where screenshots go: RALPH_ARTIFACTS, or a temp dir.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("RALPH_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "ralph-serve-artifacts-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDashboardFollowsABuildAndSendsAHint opens the dashboard of `ralph
// serve` in chromium, starts a build with the fake agent, sees a story
// turn done without a reload, sends a hint from the page and finds it in
// the next iteration's prompt.
func TestDashboardFollowsABuildAndSendsAHint(t *testing.T) {
	r := newRepo(t, "1500ms")
	s := r.serve(t)
	ctx := browser(t)
	ctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()

	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#token="+s.Token),
		chromedp.WaitVisible(chromedp.CSS(`#conn.on`)),
		chromedp.WaitVisible(chromedp.CSS(`#auth.on`)),
	); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	if strings.Contains(loc, s.Token) {
		t.Errorf("the page left the token in its address: %s", loc)
	}

	bctx, bcancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer bcancel()
	build := r.ralphCmd(bctx, "build", "10")
	var bout strings.Builder
	build.Stdout, build.Stderr = &bout, &bout
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	buildDone := make(chan error, 1)
	go func() { buildDone <- build.Wait() }()

	// The page was loaded before the build began: the story turns done
	// on it only through the live stream, and as what it is: nothing
	// ralph ran proves it (its check passed before the work), so it is
	// done on the agent's word, never shown as verified.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#board tr[data-story="US-001"][data-state="done_agent_word"]`))); err != nil {
		t.Fatalf("US-001 never showed done on the page: %v\n%s", err, bout.String())
	}
	// The agent's lines reach the page only through the event stream.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("output").textContent.includes("wrote one")`)); err != nil {
		t.Fatalf("the agent's output never reached the page: %v", err)
	}
	hint := fmt.Sprintf("hint from the browser %d", time.Now().UnixNano())
	sent := time.Now()
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#hint`), hint),
		chromedp.Click(chromedp.CSS(`#send-hint`)),
		chromedp.WaitVisible(chromedp.CSS(`#result.ok`)),
	); err != nil {
		t.Fatalf("send a hint from the page: %v", err)
	}
	result, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#result`)))
	if !strings.Contains(result, "applied") {
		t.Errorf("the page says %q after the hint, want applied", result)
	}

	select {
	case err := <-buildDone:
		if err != nil {
			t.Fatalf("ralph build: %v\n%s", err, bout.String())
		}
	case <-bctx.Done():
		t.Fatalf("the build did not end\n%s", bout.String())
	}
	// The next prompt written after the hint was sent carries it.
	prompts, _ := filepath.Glob(filepath.Join(r.dir, ".ralph", "runs", "*", "iter-*.prompt.md"))
	var next string
	var nextAt time.Time
	for _, p := range prompts {
		fi, err := os.Stat(p)
		if err != nil || fi.ModTime().Before(sent) {
			continue
		}
		if next == "" || fi.ModTime().Before(nextAt) {
			next, nextAt = p, fi.ModTime()
		}
	}
	if next == "" {
		t.Fatalf("no iteration started after the hint was sent\n%s", bout.String())
	}
	if b, _ := os.ReadFile(next); !strings.Contains(string(b), hint) {
		t.Errorf("%s, the next prompt after the hint, does not hold it", next)
	}

	// Every story done, still without a reload; the receipts show the
	// retried story's two attempts.
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#board tr[data-story="US-003"][data-state="done_agent_word"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#receipts tr[data-receipt="US-003"]`)),
	); err != nil {
		t.Fatalf("the page did not follow the build to its end: %v", err)
	}
	var rc serve.Receipts
	s.get(t, "/api/receipts", &rc)
	byTask := map[string]serve.Receipt{}
	for _, x := range rc.Stories {
		byTask[x.Task] = x
	}
	two := byTask["US-002"]
	if two.State != "done_agent_word" || two.Verdict != "agent_word" || two.Attempts != 2 || len(two.Checks) != 1 || two.Checks[0].Failed != 1 || two.Checks[0].Passed != 1 || two.Commit == "" || two.Tokens.InputTokens == 0 {
		t.Errorf("US-002's receipt: %+v, want done after 2 attempts, check tests failed once then passed, a commit and tokens", two)
	}
	if log := r.git(t, "log", "--format=%h %s"); two.Commit != "" && !strings.Contains(log, two.Commit+" US-002") {
		t.Errorf("US-002's receipt names commit %s; git log:\n%s", two.Commit, log)
	}

	chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond))
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100 makes a PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), "serve.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the dashboard: %s", path)
	if os.Getenv("RALPH_UPDATE_DOCS") == "1" {
		root, err := clitest.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		doc := filepath.Join(root, "docs", "img", "serve.png")
		if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(doc, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", doc)
	}
}
