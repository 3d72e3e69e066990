// Package notify tells people what a run needs from them: a sink of the
// journal's events that turns the few a person acts on (a run finished, a
// task blocked or needing review, a usage-limit wait, the breaker opening,
// a question or checkpoint waiting) into notifications, and delivers them
// to the channels [notify] configures: generic webhooks, Slack-compatible
// webhooks, ntfy, a command, the desktop.
//
// Delivery never touches the run: Emit only queues (a full queue drops the
// notification and logs it), each channel delivers from its own goroutine
// with a timeout per attempt and three retries with backoff, and failures
// go to a log callback with every URL and token redacted. Close waits a
// bounded time for what is queued, so that a run's last notification goes
// out before the process exits.
package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/report"
)

// Retries is how often a failed delivery is tried again.
const Retries = 3

// DefaultQueue is how many notifications a channel holds while it delivers
// an earlier one; more are dropped and logged.
const DefaultQueue = 64

// Options are what a Notifier needs from its caller.
type Options struct {
	// Workspace is the workspace's root folder, the payload's "workspace".
	Workspace string
	// Getenv reads secret_env; nil means no environment.
	Getenv func(string) string
	// Log receives one line per failure or dropped notification, already
	// redacted; nil discards them. It is called from other goroutines.
	Log func(msg string)
	// Backoff is the wait before retry n (1, 2, 3); nil means 1 s, 2 s, 4 s.
	Backoff func(n int) time.Duration
	// Queue is each channel's queue length; 0 means DefaultQueue.
	Queue int
	// LookPath finds notify-send; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// Client sends the HTTP requests; nil means a client of its own.
	Client *http.Client
}

// Notifier is a report.Sink that notifies. Create it with New; Close it
// before the process exits.
type Notifier struct {
	opts    Options
	timeout time.Duration
	red     []*redact.Redactor
	chans   []*channel
	warns   []string

	mu     sync.Mutex
	der    *deriver
	closed bool

	ctx    context.Context // cancelled when Close gives up waiting
	cancel context.CancelFunc
	wg     sync.WaitGroup
	failed atomic.Int64
}

// New returns a Notifier for the channels of sec, their deliveries already
// waiting for events. Problems that leave a channel unable to send (no
// notify-send, an empty secret_env) are in Warnings; the other channels
// work regardless.
func New(sec Settings, o Options) *Notifier {
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Log == nil {
		o.Log = func(string) {}
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration { return time.Second << (n - 1) }
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	n := &Notifier{opts: o, timeout: sec.Timeout, der: newDeriver(), red: []*redact.Redactor{redact.Default()}}
	if n.timeout <= 0 {
		n.timeout = 10 * time.Second
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	secret := sec.Secret
	if sec.SecretEnv != "" {
		secret = o.Getenv(sec.SecretEnv)
	}
	if secret != "" {
		// The secret is masked wherever it would show, like an API key.
		n.red = append(n.red, redact.New([]string{"NOTIFY_SECRET=" + secret}, nil))
	}
	for _, cc := range sec.Channels {
		c := &channel{typ: cc.Type, url: cc.URL, argv: cc.Command, events: cc.Events}
		c.target = c.describe()
		switch {
		case c.typ == "webhook" && sec.SecretEnv != "" && secret == "":
			c.disabled = fmt.Sprintf("secret_env %s is empty: set it (the receiver checks the signature) or remove secret_env from [notify]", sec.SecretEnv)
		case c.typ == "webhook":
			c.secret = []byte(secret)
		case c.typ == "desktop":
			p, err := o.LookPath("notify-send")
			if err != nil {
				c.disabled = "notify-send is not installed (Debian and Ubuntu: apt install libnotify-bin); desktop notifications are off"
			}
			c.argv = []string{p}
		}
		if c.disabled != "" {
			n.warns = append(n.warns, fmt.Sprintf("notify: %s %s: %s", c.typ, c.target, c.disabled))
		} else {
			c.queue = make(chan Notification, o.Queue)
			c.sent = map[string]bool{}
			n.wg.Add(1)
			go n.run(c)
		}
		n.chans = append(n.chans, c)
	}
	return n
}

// Warnings are the channels that cannot send, and why.
func (n *Notifier) Warnings() []string { return slices.Clone(n.warns) }

// Emit implements report.Sink. It never blocks: the notifications an event
// makes are queued for their channels, each key once per channel.
func (n *Notifier) Emit(ev report.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	for _, x := range n.der.derive(ev) {
		x.Summary, x.Reason = n.redact(x.Summary), n.redact(x.Reason)
		for _, c := range n.chans {
			if c.queue == nil || c.sent[x.key] || !slices.Contains(c.events, x.Event) {
				continue
			}
			select {
			case c.queue <- x:
				c.sent[x.key] = true
			default:
				n.failed.Add(1)
				n.opts.Log(fmt.Sprintf("notify: %s %s: %s dropped: %d notifications are already waiting to be delivered", c.typ, c.target, x.Event, cap(c.queue)))
			}
		}
	}
}

// Close stops taking events and waits at most timeout for the queued
// notifications to be delivered; what is left then is given up and
// logged. It returns how many notifications were not delivered since New.
func (n *Notifier) Close(timeout time.Duration) int {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		for _, c := range n.chans {
			if c.queue != nil {
				close(c.queue)
			}
		}
	}
	n.mu.Unlock()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// Attempts in flight and backoffs end at once; the rest of each
		// queue is logged as given up.
		n.cancel()
		<-done
	}
	n.cancel()
	return int(n.failed.Load())
}

// run delivers c's queue, one notification at a time, in order.
func (n *Notifier) run(c *channel) {
	defer n.wg.Done()
	for x := range c.queue {
		n.deliver(c, x)
	}
}

// errExiting is a delivery given up because ralph is exiting.
var errExiting = errors.New("ralph was exiting and could not wait longer")

func (n *Notifier) deliver(c *channel, x Notification) {
	body := payload(x, n.opts.Workspace)
	var err error
	tries := 0
	for try := 0; try <= Retries; try++ {
		if try > 0 {
			t := time.NewTimer(n.opts.Backoff(try))
			select {
			case <-t.C:
			case <-n.ctx.Done():
				t.Stop()
				err = fmt.Errorf("%w (last error: %v)", errExiting, err)
			}
		}
		if n.ctx.Err() != nil {
			if err == nil {
				err = errExiting
			}
			break
		}
		tries++
		if err = n.attempt(c, x, body); err == nil {
			return
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			break
		}
	}
	n.failed.Add(1)
	n.opts.Log(fmt.Sprintf("notify: %s %s: %s (run %s) not delivered after %s: %s",
		c.typ, c.target, x.Event, x.Run, attempts(tries), n.redact(c.scrub(err.Error()))))
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// attempt makes one delivery of x to c within the timeout.
func (n *Notifier) attempt(c *channel, x Notification, body []byte) error {
	ctx, cancel := context.WithTimeout(n.ctx, n.timeout)
	defer cancel()
	err := c.send(ctx, n, x, body)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s", n.timeout)
	}
	return err
}

func (n *Notifier) redact(s string) string {
	for _, r := range n.red {
		s = r.Redact(s)
	}
	return s
}

// wsName is the workspace's folder name, which titles a notification.
func (n *Notifier) wsName() string {
	if n.opts.Workspace == "" {
		return "ralph"
	}
	return filepath.Base(n.opts.Workspace)
}

// Result is how one channel took `ralph notify test`'s sample.
type Result struct {
	Type   string `json:"type"`
	Target string `json:"target"` // the URL or program, redacted
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

// Test sends a sample notification to every channel, one attempt each,
// and reports how each took it.
func (n *Notifier) Test(now time.Time) []Result {
	x := Notification{Event: EventRunFinished, Time: now.UTC(), Run: "test", Outcome: OutcomeDone, Test: true,
		Summary: "a test notification from ralph notify test: this channel works", Reason: "ralph notify test"}
	body := payload(x, n.opts.Workspace)
	out := make([]Result, len(n.chans))
	var wg sync.WaitGroup
	for i, c := range n.chans {
		out[i] = Result{Type: c.typ, Target: c.target}
		if c.disabled != "" {
			out[i].Error = c.disabled
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.attempt(c, x, body); err != nil {
				out[i].Error = n.redact(c.scrub(err.Error()))
			} else {
				out[i].OK = true
			}
		}()
	}
	wg.Wait()
	return out
}
