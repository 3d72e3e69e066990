package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/notify"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/testing/wait"
)

// receiver is a webhook receiver that records bodies and verifies the
// signature as a real one would.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	sigOK  []bool
	hold   chan struct{} // when set, answers wait until it is closed
}

func newReceiver(t *testing.T, status int, secret string) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(b))
		r.sigOK = append(r.sigOK, req.Header.Get(notify.SignatureHeader) == notify.Sign([]byte(secret), b))
		hold := r.hold
		r.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-req.Context().Done():
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() ([]string, []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...), append([]bool(nil), r.sigOK...)
}

func notifyRepo(t *testing.T, config string) string {
	dir := newTestRepo(t)
	os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, ".ralph", "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ralph notify test against real HTTP receivers: the signed webhook takes
// it, the Slack one answering 500 fails the command (exit 1), and neither
// URL's path, which is the credential, is printed.
func TestNotifyTestAgainstHTTP(t *testing.T) {
	ok := newReceiver(t, 200, "hmac-key-0123")
	bad := newReceiver(t, 500, "")
	dir := notifyRepo(t, "[notify]\nwebhooks = [\""+ok.URL+"/in/TOKENPATH1\"]\nslack = [\""+bad.URL+"/services/TOKENPATH2\"]\nsecret_env = \"HOOK_SECRET\"\n")
	env, out, errb := testEnv(dir, nil, false)
	env.Getenv = func(k string) string {
		if k == "HOOK_SECRET" {
			return "hmac-key-0123"
		}
		return ""
	}
	code := Run(context.Background(), env, []string{"notify", "test"})
	if code != ExitFailure {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	want := "ok      webhook  " + ok.URL + "/[REDACTED]\nfailed  slack    " + bad.URL + "/[REDACTED]: the server answered 500 Internal Server Error\n"
	if out.String() != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if strings.Contains(out.String()+errb.String(), "TOKENPATH") {
		t.Fatal("a URL's path was printed")
	}
	bodies, sig := ok.got()
	if len(bodies) != 1 || !sig[0] {
		t.Fatalf("webhook got %d bodies, signature valid: %v", len(bodies), sig)
	}
	var p notify.Payload
	if err := json.Unmarshal([]byte(bodies[0]), &p); err != nil || !p.Test || p.Workspace != dir {
		t.Fatalf("payload %s: %v", bodies[0], err)
	}

	env, out, _ = testEnv(dir, nil, false)
	if code := Run(context.Background(), env, []string{"notify", "test", "--json"}); code != ExitFailure {
		t.Fatalf("--json exit %d", code)
	}
	var rep struct {
		OK       bool            `json:"ok"`
		Channels []notify.Result `json:"channels"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.OK || len(rep.Channels) != 2 || rep.Channels[0].Error == "" {
		// Without HOOK_SECRET the webhook is refused rather than sent unsigned.
		t.Fatalf("--json: %s (%v)", out, err)
	}
	if !strings.Contains(rep.Channels[0].Error, "secret_env HOOK_SECRET is empty") {
		t.Fatalf("webhook without its secret: %+v", rep.Channels[0])
	}
}

// The sinks a run gets deliver its notifications; flushNotifications waits
// for the last one; a channel that fails is logged in errors.log, redacted,
// and the run's emitter never waits for it.
func TestNotifySinksDeliverAndLogFailures(t *testing.T) {
	ok := newReceiver(t, 200, "")
	bad := newReceiver(t, 503, "")
	// The webhook holds its answer until the test has seen Emit return;
	// the timeout is long enough that an Emit waiting for delivery would
	// fail the wait below rather than time out and pass.
	hold := make(chan struct{})
	ok.mu.Lock()
	ok.hold = hold
	ok.mu.Unlock()
	dir := notifyRepo(t, "[notify]\nwebhooks = [\""+ok.URL+"/a\"]\nntfy = [\""+bad.URL+"/topic-SECRETTOPIC\"]\ntimeout = \"2m\"\n")
	notifyBackoff = func(int) time.Duration { return 10 * time.Millisecond }
	t.Cleanup(func() { notifyBackoff = nil })
	env, _, errb := testEnv(dir, nil, false)
	ws, a, err := openWorkspace(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	sink := notifier(env, a)
	if sink == nil || errb.Len() != 0 {
		t.Fatalf("sink %v, stderr %q", sink, errb)
	}
	em := report.NewEmitter("loop", "run-7", 0, env.Now, sink)
	emitted := make(chan struct{})
	go func() {
		em.Emit(report.Event{Kind: report.KindTransition, From: "STORY_SELECT", To: "EXIT", Trigger: "all_complete"})
		close(emitted)
	}()
	wait.Recv(t, emitted, wait.Long, "Emit to return while the webhook holds its answer")
	close(hold)
	flushNotifications()
	bodies, _ := ok.got()
	if len(bodies) != 1 || !strings.Contains(bodies[0], `"summary":"run run-7 finished: done (all stories complete)"`) {
		t.Fatalf("webhook got %q", bodies)
	}
	if b, _ := bad.got(); len(b) != 1+notify.Retries {
		t.Fatalf("the failing ntfy topic got %d attempts", len(b))
	}
	log, _ := os.ReadFile(ws.ErrorsLogPath())
	if !strings.Contains(string(log), "notify: ntfy "+bad.URL+"/[REDACTED]: run_finished (run run-7) not delivered after 4 attempts: the server answered 503 Service Unavailable") ||
		strings.Contains(string(log), "SECRETTOPIC") {
		t.Fatalf("errors.log:\n%s", log)
	}
	if notifier(env, a) == nil {
		t.Fatal("a second run gets no sink")
	}
	flushNotifications()
}

// No [notify]: no sink, nothing to flush.
func TestNoNotifyNoSinks(t *testing.T) {
	dir := notifyRepo(t, "")
	env, _, _ := testEnv(dir, nil, false)
	_, a, err := openWorkspace(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if s := notifier(env, a); s != nil {
		t.Fatalf("sinks = %v", s)
	}
}

// A channel that cannot send is told once, not on every command: the same
// warnings again, in this process or a later one, stay quiet (errors.log
// has them once); a config that changes them is told again; ralph notify
// test always says what cannot send.
func TestNotifyWarningToldOnce(t *testing.T) {
	reset := func() {
		shownNotifyWarnings.Lock()
		shownNotifyWarnings.last = ""
		shownNotifyWarnings.Unlock()
	}
	reset()
	t.Cleanup(reset)
	dir := notifyRepo(t, "[notify]\nwebhooks = [\"http://127.0.0.1:9/hook\"]\nsecret_env = \"HOOK_SECRET\"\n")
	sinks := func() string {
		env, _, errb := testEnv(dir, nil, false)
		_, a, err := openWorkspace(context.Background(), env)
		if err != nil {
			t.Fatal(err)
		}
		if notifier(env, a) == nil {
			t.Fatal("no notify sink")
		}
		flushNotifications()
		return errb.String()
	}
	first := sinks()
	if !strings.Contains(first, "ralph: warning: notify: webhook") || !strings.Contains(first, "secret_env HOOK_SECRET is empty") {
		t.Fatalf("first command's stderr = %q; want the warning", first)
	}
	if again := sinks(); again != "" {
		t.Fatalf("same process, second sink: stderr %q; want nothing", again)
	}
	reset() // a later command
	if again := sinks(); again != "" {
		t.Fatalf("a later command: stderr %q; want nothing", again)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, ".ralph", "errors.log")); strings.Count(string(log), "secret_env HOOK_SECRET is empty") != 1 {
		t.Fatalf("errors.log has the warning %d times:\n%s", strings.Count(string(log), "secret_env HOOK_SECRET is empty"), log)
	}
	// The warning is machine state, never committed.
	if out, err := exec.Command("git", "-C", dir, "check-ignore", "-q", ".ralph/notify-warned").CombinedOutput(); err != nil {
		t.Fatalf(".ralph/notify-warned is not ignored by git: %v %s", err, out)
	}
	// Another channel that cannot send: told again, both.
	if err := os.WriteFile(filepath.Join(dir, ".ralph", "config.toml"), []byte("[notify]\nwebhooks = [\"http://127.0.0.1:9/hook\", \"http://127.0.0.1:9/other\"]\nsecret_env = \"HOOK_SECRET\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reset()
	if changed := sinks(); strings.Count(changed, "ralph: warning: notify: webhook") != 2 {
		t.Fatalf("changed config: stderr %q; want both warnings", changed)
	}
	// ralph notify test says it every time.
	for i := 0; i < 2; i++ {
		r := run(t, dir, nil, false, "notify", "test")
		if !strings.Contains(r.out+r.err, "secret_env HOOK_SECRET is empty") {
			t.Fatalf("ralph notify test #%d:\n%s", i+1, r)
		}
	}
}
