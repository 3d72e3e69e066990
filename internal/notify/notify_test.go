package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// hook is an httptest server that records what it was sent.
type hook struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
	got  chan struct{}
}

type request struct {
	header http.Header
	body   []byte
	path   string
}

func newHook(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *hook {
	h := &hook{got: make(chan struct{}, 100)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.reqs = append(h.reqs, request{r.Header.Clone(), b, r.URL.RequestURI()})
		h.mu.Unlock()
		h.got <- struct{}{}
		if answer != nil {
			answer(w, r)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) requests() []request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]request(nil), h.reqs...)
}

// logs collects what a Notifier logs.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(s string) { l.mu.Lock(); l.lines = append(l.lines, s); l.mu.Unlock() }
func (l *logs) all() string  { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.lines, "\n") }

// testSection is a [notify] section as the tests write it: shorthand
// lists of one kind of channel each, sharing Events. settings expands it
// into a Notifier's Settings as internal/app does from config.
type testSection struct {
	Webhooks, Slack, Ntfy, Command, Events []string
	Desktop                                bool
	SecretEnv                              string
	Timeout                                time.Duration
}

func section(timeout time.Duration) testSection { return testSection{Timeout: timeout} }

func (s testSection) settings() Settings {
	events := s.Events
	if len(events) == 0 {
		// config's default: everything but limit_wait_ended.
		events = []string{EventRunFinished, EventTaskBlocked, EventTaskNeedsReview, EventLimitWaitStarted, EventBreakerOpened, EventWaitingForPerson}
	}
	out := Settings{SecretEnv: s.SecretEnv, Timeout: s.Timeout}
	for _, u := range s.Webhooks {
		out.Channels = append(out.Channels, Channel{Type: "webhook", URL: u, Events: events})
	}
	for _, u := range s.Slack {
		out.Channels = append(out.Channels, Channel{Type: "slack", URL: u, Events: events})
	}
	for _, u := range s.Ntfy {
		out.Channels = append(out.Channels, Channel{Type: "ntfy", URL: u, Events: events})
	}
	if len(s.Command) > 0 {
		out.Channels = append(out.Channels, Channel{Type: "command", Command: s.Command, Events: events})
	}
	if s.Desktop {
		out.Channels = append(out.Channels, Channel{Type: "desktop", Events: events})
	}
	return out
}

func fastOptions(l *logs) Options {
	return Options{Workspace: "/work/shop", Log: l.add, Backoff: func(int) time.Duration { return 20 * time.Millisecond }}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The journal events of a loop run that ends blocked, with a task blocked
// on the way, as the loop emits them.
func blockedRun() []report.Event {
	return []report.Event{
		{V: 1, Seq: 10, Time: t0, Run: "r1", Machine: "loop", Kind: report.KindAgentOutput, Task: "US-1", Text: "working\n"},
		{V: 1, Seq: 11, Time: t0, Run: "r1", Machine: "loop", Kind: report.KindTransition, From: "TEST", To: "BLOCKER", Trigger: "tests_failed", Task: "US-1", Data: readData(report.KindTransition, map[string]any{"detail": "go test failed: TestCart"})},
		{V: 1, Seq: 12, Time: t0, Run: "r1", Machine: "loop", Kind: report.KindBlocker, Task: "US-1", Text: "⛔ US-1 blocked (permanent): go test failed\n"},
		{V: 1, Seq: 13, Time: t0, Run: "r1", Machine: "loop", Kind: report.KindSummary, Data: readData(report.KindSummary, map[string]any{"complete": false, "stories_completed": 2, "stories_total": 3, "iterations": 5, "blocked": []string{"US-1"}})},
		{V: 1, Seq: 14, Time: t0, Run: "r1", Machine: "loop", Kind: report.KindTransition, From: "STORY_SELECT", To: "EXIT", Trigger: "none_selectable"},
	}
}

// A generic webhook gets the documented payload, signed with the secret
// from the environment; a receiver verifies the signature. It gets only
// the events it selects, and each once, even when an event is emitted
// twice.
func TestWebhookPayloadSignatureSelectionAndDedupe(t *testing.T) {
	h := newHook(t, nil)
	var l logs
	s := section(5 * time.Second)
	s.Webhooks = []string{h.URL + "/hook"}
	s.Events = []string{EventRunFinished}
	s.SecretEnv = "RALPH_NOTIFY_SECRET"
	o := fastOptions(&l)
	o.Getenv = func(k string) string {
		if k == "RALPH_NOTIFY_SECRET" {
			return "s3cret-for-hmac"
		}
		return ""
	}
	n := New(s.settings(), o)
	evs := blockedRun()
	for _, ev := range evs {
		n.Emit(ev)
	}
	n.Emit(evs[len(evs)-1]) // a repair emits the same line again
	if left := n.Close(5 * time.Second); left != 0 {
		t.Fatalf("%d not delivered; log:\n%s", left, l.all())
	}
	reqs := h.requests()
	if len(reqs) != 1 {
		t.Fatalf("the webhook got %d requests, want 1 (run_finished only, once)", len(reqs))
	}
	r := reqs[0]
	if r.path != "/hook" || r.header.Get("Content-Type") != "application/json" || r.header.Get(EventHeader) != "run_finished" {
		t.Fatalf("request %s with headers %v", r.path, r.header)
	}
	// Verified as a receiver would, with its own HMAC.
	mac := hmac.New(sha256.New, []byte("s3cret-for-hmac"))
	mac.Write(r.body)
	if got, want := r.header.Get("X-Ralph-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
	var p map[string]any
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"schema_version": 1.0, "event": "run_finished", "time": "2026-03-01T12:00:00Z", "workspace": "/work/shop",
		"run": "r1", "machine": "loop", "outcome": "blocked", "journal_seq": 14.0}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("payload %s = %v, want %v", k, p[k], v)
		}
	}
	if s, _ := p["summary"].(string); !strings.Contains(s, "run r1 finished: blocked") {
		t.Errorf("summary = %q", s)
	}
	if d, _ := p["details"].(map[string]any); d["stories_completed"] != 2.0 || d["stories_total"] != 3.0 {
		t.Errorf("details = %v", p["details"])
	}
	if _, ok := p["task"]; ok {
		t.Errorf("run_finished names a task: %v", p["task"])
	}
}

// Slack gets {"text": ...}; ntfy gets a plain-text body with its title,
// priority and tags headers.
func TestSlackAndNtfyFormats(t *testing.T) {
	slack, ntfy := newHook(t, nil), newHook(t, nil)
	var l logs
	s := section(5 * time.Second)
	s.Slack = []string{slack.URL + "/services/T0/B0/tok"}
	s.Ntfy = []string{ntfy.URL + "/ralph-topic"}
	n := New(s.settings(), fastOptions(&l))
	for _, ev := range blockedRun() {
		n.Emit(ev)
	}
	n.Close(5 * time.Second)
	if got := len(slack.requests()); got != 2 {
		t.Fatalf("slack got %d requests, want 2 (task_blocked, run_finished); log: %s", got, l.all())
	}
	var msg map[string]any
	if err := json.Unmarshal(slack.requests()[0].body, &msg); err != nil || len(msg) != 1 {
		t.Fatalf("slack body %s: %v", slack.requests()[0].body, err)
	}
	if msg["text"] != "ralph [shop]: task US-1 is blocked: go test failed: TestCart" {
		t.Fatalf("slack text = %q", msg["text"])
	}
	r := ntfy.requests()
	if len(r) != 2 || r[1].path != "/ralph-topic" {
		t.Fatalf("ntfy requests: %+v", r)
	}
	if string(r[1].body) != "run r1 finished: blocked (only blocked stories are left: a person must decide)" {
		t.Fatalf("ntfy body = %q", r[1].body)
	}
	if r[1].header.Get("Title") != "ralph [shop]: run finished: blocked" || r[1].header.Get("Priority") != "4" || r[1].header.Get("Tags") != "ralph,no_entry" {
		t.Fatalf("ntfy headers = %v", r[1].header)
	}
}

// Emit only queues: it returns while the receiver still holds the first
// request, which it answers only once the test has seen Emit return (an
// Emit that waited for delivery would wait out the minute's timeout and
// fail the wait below).
func TestEmitReturnsWhileTheReceiverHolds(t *testing.T) {
	release := make(chan struct{})
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	var l logs
	s := section(time.Minute)
	s.Webhooks = []string{h.URL + "/held"}
	n := New(s.settings(), fastOptions(&l))
	emitted := make(chan struct{})
	go func() {
		for _, ev := range blockedRun() {
			n.Emit(ev)
		}
		close(emitted)
	}()
	wait.Recv(t, emitted, wait.Long, "Emit to return while the receiver holds the request")
	wait.Recv(t, h.got, wait.Long, "the receiver to get the first notification")
	close(release)
	if left := n.Close(wait.Long); left != 0 || len(h.requests()) != 2 {
		t.Fatalf("%d not delivered, %d requests; want both delivered once released; log:\n%s", left, len(h.requests()), l.all())
	}
}

// A server that never answers: each attempt ends at the timeout and is
// retried three times.
func TestHangingServerTimesOutAndRetries(t *testing.T) {
	release := make(chan struct{})
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	var l logs
	s := section(150 * time.Millisecond)
	s.Webhooks = []string{h.URL + "/hang"}
	n := New(s.settings(), fastOptions(&l))
	for _, ev := range blockedRun() {
		n.Emit(ev)
	}
	if left := n.Close(wait.Long); left != 2 {
		t.Fatalf("%d not delivered, want 2; log:\n%s", left, l.all())
	}
	if got := len(h.requests()); got != 2*(1+Retries) {
		t.Fatalf("%d attempts, want %d (two notifications, each tried 1+%d times)", got, 2*(1+Retries), Retries)
	}
	if !strings.Contains(l.all(), "not delivered after 4 attempts: no answer within 150ms") {
		t.Fatalf("log:\n%s", l.all())
	}
}

// A server that answers 500 gets the notification four times, then the
// failure is logged with the URL's token redacted.
func TestServerErrorIsRetriedThenLoggedRedacted(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) })
	var l logs
	s := section(2 * time.Second)
	s.Slack = []string{h.URL + "/services/T000/B000/XOXBSECRETTOKEN?key=QUERYSECRET"}
	n := New(s.settings(), fastOptions(&l))
	n.Emit(blockedRun()[4])
	n.Close(5 * time.Second)
	if got := len(h.requests()); got != 1+Retries {
		t.Fatalf("%d attempts, want %d", got, 1+Retries)
	}
	log := l.all()
	if !strings.Contains(log, "notify: slack "+h.URL+"/[REDACTED]: run_finished (run r1) not delivered after 4 attempts: the server answered 500 Internal Server Error") {
		t.Fatalf("log:\n%s", log)
	}
	if strings.Contains(log, "XOXBSECRETTOKEN") || strings.Contains(log, "QUERYSECRET") || strings.Contains(log, "services") {
		t.Fatalf("the log shows the URL's secret:\n%s", log)
	}
}

// A refused request (404: a wrong URL) is not retried.
func TestClientErrorIsNotRetried(t *testing.T) {
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	var l logs
	s := section(2 * time.Second)
	s.Webhooks = []string{h.URL + "/gone"}
	n := New(s.settings(), fastOptions(&l))
	n.Emit(blockedRun()[4])
	n.Close(5 * time.Second)
	if got := len(h.requests()); got != 1 {
		t.Fatalf("%d attempts at a 404, want 1", got)
	}
	if !strings.Contains(l.all(), "after 1 attempt: the server answered 404 Not Found") {
		t.Fatalf("log:\n%s", l.all())
	}
}

// Close waits for the run's last notification, and gives up at its
// deadline when the receiver is too slow.
func TestCloseDeliversTheLastNotificationWithinItsDeadline(t *testing.T) {
	// A slow receiver: the sleep is the behaviour under test, an answer
	// that comes after Close was called and that Close must wait for.
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(300 * time.Millisecond) })
	var l logs
	s := section(wait.Long)
	s.Webhooks = []string{h.URL + "/slow"}
	n := New(s.settings(), fastOptions(&l))
	n.Emit(blockedRun()[4])
	wait.Recv(t, h.got, wait.Long, "the slow receiver to get the notification")
	if left := n.Close(wait.Long); left != 0 || len(h.requests()) != 1 {
		t.Fatalf("not delivered before Close returned: %d left, %d requests", left, len(h.requests()))
	}

	hang := newHook(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	s.Webhooks = []string{hang.URL + "/hang"}
	n = New(s.settings(), fastOptions(&l))
	n.Emit(blockedRun()[4])
	// The receiver would hold each attempt for the section's timeout (a
	// minute): Close's deadline is the behaviour, so the bound is generous
	// and still far below what a Close that ignored it would take.
	start := time.Now()
	if left := n.Close(300 * time.Millisecond); left != 1 {
		t.Fatalf("%d left, want 1", left)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("Close took %s with a 300ms deadline", took)
	}
	if !strings.Contains(l.all(), "ralph was exiting") {
		t.Fatalf("log:\n%s", l.all())
	}
}

// A full queue drops the notification and logs it; Emit still returns.
func TestFullQueueDropsAndLogs(t *testing.T) {
	release := make(chan struct{})
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	var l logs
	s := section(5 * time.Second)
	s.Webhooks = []string{h.URL + "/x"}
	s.Events = []string{EventTaskBlocked}
	o := fastOptions(&l)
	o.Queue = 1
	n := New(s.settings(), o)
	for i, task := range []string{"A", "B", "C", "D"} {
		n.Emit(report.Event{Seq: int64(i), Run: "r", Machine: "loop", Kind: report.KindTransition, To: "BLOCKER", Trigger: "tests_failed", Task: task})
		if i == 0 {
			<-h.got // A is being delivered; B fills the queue
		}
	}
	close(release)
	n.Close(5 * time.Second)
	if got := len(h.requests()); got != 2 {
		t.Fatalf("%d delivered, want 2 (one in flight, one queued)", got)
	}
	if c := strings.Count(l.all(), "task_blocked dropped"); c != 2 {
		t.Fatalf("log:\n%s", l.all())
	}
}

// The command channel runs the argv with the payload on stdin.
func TestCommandGetsThePayloadOnStdin(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "got.json")
	var l logs
	s := section(5 * time.Second)
	s.Command = []string{"sh", "-c", `cat > "$1"; echo "$RALPH_NOTIFY_EVENT" > "$1.event"`, "sh", out}
	n := New(s.settings(), fastOptions(&l))
	n.Emit(report.Event{Seq: 7, Time: t0, Run: "s1", Machine: "session", Kind: report.KindWait, Data: readData(report.KindWait, map[string]any{"questions": []string{"Q2", "Q1"}})})
	n.Emit(report.Event{Seq: 8, Time: t0, Run: "s1", Machine: "session", Kind: report.KindTransition, From: "Planning", To: "Stopped", Trigger: "waiting_for_answers", Data: readData(report.KindTransition, map[string]any{"detail": "Q1, Q2"})})
	if left := n.Close(5 * time.Second); left != 0 {
		t.Fatalf("log:\n%s", l.all())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if p.Event != "waiting_for_person" || p.Run != "s1" || p.JournalSeq != 7 ||
		p.Summary != `session s1 waits for a person to answer Q1, Q2: ralph answer Q1 "...", then ralph run --resume` {
		t.Fatalf("payload = %+v", p)
	}
	ev, _ := os.ReadFile(out + ".event")
	if strings.TrimSpace(string(ev)) != "waiting_for_person" {
		t.Fatalf("RALPH_NOTIFY_EVENT = %q", ev)
	}
}

// A command that fails is retried and logged with its last words; its
// arguments (which may hold a token) are not.
func TestFailingCommandIsLogged(t *testing.T) {
	var l logs
	s := section(5 * time.Second)
	s.Command = []string{"sh", "-c", `echo "no route to pager" >&2; exit 3`, "TOKEN-ARG-123"}
	n := New(s.settings(), fastOptions(&l))
	n.Emit(blockedRun()[4])
	n.Close(5 * time.Second)
	log := l.all()
	if !strings.Contains(log, "notify: command sh: run_finished (run r1) not delivered after 4 attempts: sh exited with status 3: no route to pager") || strings.Contains(log, "TOKEN-ARG-123") {
		t.Fatalf("log:\n%s", log)
	}
}

// desktop = true without notify-send gives one warning and sends nothing;
// with it, notify-send is run with the title and summary.
func TestDesktop(t *testing.T) {
	var l logs
	s := section(5 * time.Second)
	s.Desktop = true
	o := fastOptions(&l)
	o.LookPath = func(string) (string, error) { return "", os.ErrNotExist }
	n := New(s.settings(), o)
	if w := n.Warnings(); len(w) != 1 || !strings.Contains(w[0], "notify-send is not installed") {
		t.Fatalf("warnings = %q", w)
	}
	n.Emit(blockedRun()[4])
	n.Close(time.Second)

	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	fake := filepath.Join(dir, "notify-send")
	os.WriteFile(fake, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+args+"\n"), 0o755)
	o.LookPath = func(string) (string, error) { return fake, nil }
	n = New(s.settings(), o)
	n.Emit(blockedRun()[4])
	n.Close(5 * time.Second)
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatalf("notify-send was not run: %v; log:\n%s", err, l.all())
	}
	want := "--app-name=ralph\n--urgency=critical\nralph [shop]: run finished: blocked\nrun r1 finished: blocked (only blocked stories are left: a person must decide)\n"
	if string(b) != want {
		t.Fatalf("notify-send got:\n%s\nwant:\n%s", b, want)
	}
}

// An empty secret_env disables the webhooks, with a warning, rather than
// sending what the receiver would reject.
func TestEmptySecretEnvDisablesWebhooks(t *testing.T) {
	h := newHook(t, nil)
	s := section(time.Second)
	s.Webhooks = []string{h.URL + "/x"}
	s.SecretEnv = "RALPH_NOTIFY_SECRET"
	n := New(s.settings(), Options{})
	res := n.Test(t0)
	n.Close(time.Second)
	if len(res) != 1 || res[0].OK || !strings.Contains(res[0].Error, "secret_env RALPH_NOTIFY_SECRET is empty") || len(h.requests()) != 0 {
		t.Fatalf("results %+v, %d requests", res, len(h.requests()))
	}
}

// Test sends one sample to each channel and reports each, redacted.
func TestTestReportsEachChannel(t *testing.T) {
	ok := newHook(t, nil)
	bad := newHook(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 503) })
	s := section(2 * time.Second)
	s.Webhooks = []string{ok.URL + "/a"}
	s.Ntfy = []string{bad.URL + "/secret-topic"}
	n := New(s.settings(), Options{Workspace: "/w/shop"})
	res := n.Test(t0)
	n.Close(time.Second)
	if len(res) != 2 || !res[0].OK || res[1].OK || res[1].Error != "the server answered 503 Service Unavailable" || res[1].Target != bad.URL+"/[REDACTED]" {
		t.Fatalf("results = %+v", res)
	}
	if len(bad.requests()) != 1 {
		t.Fatalf("ralph notify test retried: %d requests", len(bad.requests()))
	}
	var p Payload
	json.Unmarshal(ok.requests()[0].body, &p)
	if !p.Test || p.Event != "run_finished" || p.Workspace != "/w/shop" {
		t.Fatalf("sample payload = %+v", p)
	}
}
