package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/proc"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/text"
)

// SignatureHeader carries a generic webhook body's signature:
// "sha256=" and the hex HMAC-SHA256 of the body under the secret.
const SignatureHeader = "X-Ralph-Signature"

// EventHeader names the event of a generic webhook's body.
const EventHeader = "X-Ralph-Event"

// Sign returns the SignatureHeader value of body under secret, for a
// receiver to compare (in constant time) with the one it got.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// channel is one place notifications go.
type channel struct {
	typ      string // webhook, slack, ntfy, command, desktop
	url      string
	argv     []string
	events   []string
	secret   []byte
	target   string // what logs and ralph notify test show: never a secret
	disabled string // why it cannot send; "" when it can

	queue chan Notification
	sent  map[string]bool // keys queued already; guarded by Notifier.mu
}

// describe is the channel's target as logs show it. The path and query of
// a webhook URL are its credential (Slack's and Discord's tokens, an ntfy
// topic anyone can post to), so only the scheme and host are kept.
func (c *channel) describe() string {
	switch c.typ {
	case "command", "desktop":
		if len(c.argv) == 0 {
			return "notify-send"
		}
		return filepath.Base(c.argv[0])
	}
	u, err := url.Parse(c.url)
	if err != nil || u.Host == "" {
		return redact.Mask
	}
	s := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		s += "/" + redact.Mask
	}
	return s
}

// scrub masks the channel's URL, its path, query and password, and the
// command's arguments, wherever an error message repeats them.
func (c *channel) scrub(s string) string {
	var secrets []string
	if c.url != "" {
		secrets = append(secrets, c.url)
		if u, err := url.Parse(c.url); err == nil {
			secrets = append(secrets, u.RawQuery, u.EscapedPath(), u.Path)
			if p, ok := u.User.Password(); ok {
				secrets = append(secrets, p)
			}
		}
	}
	if len(c.argv) > 1 {
		secrets = append(secrets, c.argv[1:]...)
	}
	for _, v := range secrets {
		// Short words ("sh", "-c") are no secret and are everywhere.
		if len(v) >= redact.MinLen || (v != "" && strings.Contains(c.url, v) && len(v) > 1) {
			s = strings.ReplaceAll(s, v, redact.Mask)
		}
	}
	return s
}

// permanentError is a failure that retrying cannot fix: the receiver
// refused the request (a 4xx other than 408 and 429), or the program does
// not exist.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func (c *channel) send(ctx context.Context, n *Notifier, x Notification, body []byte) error {
	switch c.typ {
	case "webhook":
		h := http.Header{"Content-Type": {"application/json"}, EventHeader: {x.Event}}
		if len(c.secret) > 0 {
			h.Set(SignatureHeader, Sign(c.secret, body))
		}
		return c.post(ctx, n, body, h)
	case "slack":
		b, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("ralph [%s]: %s", n.wsName(), x.Summary)})
		return c.post(ctx, n, b, http.Header{"Content-Type": {"application/json"}})
	case "ntfy":
		msg := x.Summary
		h := http.Header{"Content-Type": {"text/plain; charset=utf-8"},
			"Title":    {fmt.Sprintf("ralph [%s]: %s", n.wsName(), title(x))},
			"Priority": {strconv.Itoa(priority(x))},
			"Tags":     {"ralph," + tag(x)}}
		return c.post(ctx, n, []byte(msg), h)
	case "command":
		env := append(os.Environ(), "RALPH_NOTIFY_EVENT="+x.Event)
		return c.exec(ctx, n, c.argv, body, env)
	case "desktop":
		urgency := "normal"
		if priority(x) >= 4 {
			urgency = "critical"
		}
		argv := []string{c.argv[0], "--app-name=ralph", "--urgency=" + urgency,
			fmt.Sprintf("ralph [%s]: %s", n.wsName(), title(x)), x.Summary}
		return c.exec(ctx, n, argv, nil, nil)
	}
	return &permanentError{fmt.Errorf("unknown channel type %q", c.typ)}
}

func (c *channel) post(ctx context.Context, n *Notifier, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return &permanentError{errors.New("the URL cannot be requested")}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "ralph-notify/1")
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		// url.Error repeats the whole URL; keep only what went wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("the server answered %s", resp.Status)
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
		return &permanentError{err}
	}
	return err
}

// tailWriter keeps the last bytes written to it: a failing command's last
// words.
type tailWriter struct{ b []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > 4096 {
		w.b = w.b[len(w.b)-4096:]
	}
	return len(p), nil
}

func (c *channel) exec(ctx context.Context, n *Notifier, argv []string, stdin []byte, env []string) error {
	var errOut tailWriter
	spec := proc.Spec{Args: argv, Env: env, Stderr: &errOut, Grace: 500 * time.Millisecond}
	if fi, err := os.Stat(n.opts.Workspace); err == nil && fi.IsDir() {
		spec.Dir = n.opts.Workspace
	}
	if stdin != nil {
		spec.Stdin = bytes.NewReader(stdin)
	}
	out, err := proc.Run(ctx, spec)
	switch {
	case out.NotFound:
		return &permanentError{fmt.Errorf("%s cannot be run: it is not installed or not executable", filepath.Base(argv[0]))}
	case err != nil:
		return err
	case out.Interrupted:
		return ctx.Err()
	case out.ExitCode != 0:
		last := strings.TrimSpace(string(errOut.b))
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if last != "" {
			return fmt.Errorf("%s exited with status %d: %s", filepath.Base(argv[0]), out.ExitCode, text.Clip(last, 200))
		}
		return fmt.Errorf("%s exited with status %d", filepath.Base(argv[0]), out.ExitCode)
	}
	return nil
}

// title is a notification's few words, for a title line.
func title(x Notification) string {
	switch x.Event {
	case EventRunFinished:
		return "run finished: " + x.Outcome
	case EventTaskBlocked:
		return "task " + x.Task + " blocked"
	case EventTaskNeedsReview:
		return "task " + x.Task + " needs review"
	case EventLimitWaitStarted:
		return "waiting for a usage limit"
	case EventLimitWaitEnded:
		return "usage-limit wait over"
	case EventBreakerOpened:
		return "circuit breaker opened"
	case EventWaitingForPerson:
		return "waiting for you"
	}
	return x.Event
}

// priority is ntfy's 1 (min) to 5 (max): what waits for a person is high.
func priority(x Notification) int {
	switch x.Event {
	case EventWaitingForPerson, EventTaskNeedsReview:
		return 4
	case EventRunFinished:
		if x.Outcome == OutcomeError || x.Outcome == OutcomeBlocked {
			return 4
		}
	case EventLimitWaitStarted, EventLimitWaitEnded:
		return 2
	}
	return 3
}

// tag is ntfy's emoji tag of a notification.
func tag(x Notification) string {
	switch x.Event {
	case EventRunFinished:
		switch x.Outcome {
		case OutcomeDone:
			return "white_check_mark"
		case OutcomeBlocked:
			return "no_entry"
		case OutcomeError:
			return "x"
		case OutcomeInterrupted:
			return "stop_sign"
		}
		return "hourglass"
	case EventTaskBlocked:
		return "no_entry"
	case EventTaskNeedsReview:
		return "eyes"
	case EventLimitWaitStarted:
		return "hourglass"
	case EventLimitWaitEnded:
		return "arrow_forward"
	case EventBreakerOpened:
		return "zap"
	case EventWaitingForPerson:
		return "raising_hand"
	}
	return "bell"
}
