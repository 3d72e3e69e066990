package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The notification events, by the names [notify] events lists. They are
// part of ralph's interface: scripts branch on them, so they never change
// meaning.
const (
	NotifyRunFinished      = "run_finished"       // a run ended: done, blocked, limit, budget, error or interrupted
	NotifyTaskBlocked      = "task_blocked"       // a task was blocked
	NotifyTaskNeedsReview  = "task_needs_review"  // the merge queue set a task aside for a person's review
	NotifyLimitWaitStarted = "limit_wait_started" // every agent is at a usage limit: the run waits for a reset
	NotifyLimitWaitEnded   = "limit_wait_ended"   // that wait is over and the run goes on
	NotifyBreakerOpened    = "breaker_opened"     // the circuit breaker opened: iterations made no progress
	NotifyWaitingForPerson = "waiting_for_person" // a question or a thread checkpoint waits for a person
)

// NotifyEvents are every notification event, in the order docs/watching.md
// lists them.
var NotifyEvents = []string{NotifyRunFinished, NotifyTaskBlocked, NotifyTaskNeedsReview,
	NotifyLimitWaitStarted, NotifyLimitWaitEnded, NotifyBreakerOpened, NotifyWaitingForPerson}

// DefaultNotifyEvents are sent when neither the channel nor [notify]
// lists events: everything a person acts on. limit_wait_ended is left out
// because the run goes on by itself.
var DefaultNotifyEvents = []string{NotifyRunFinished, NotifyTaskBlocked, NotifyTaskNeedsReview,
	NotifyLimitWaitStarted, NotifyBreakerOpened, NotifyWaitingForPerson}

// NotifyChannelTypes are the kinds of channel a [[notify.channel]] can be.
var NotifyChannelTypes = []string{"webhook", "slack", "ntfy", "command", "desktop"}

// NotifySection is [notify]: who is told what while a run goes.
type NotifySection struct {
	// Webhooks get a POST of the notification as JSON (the payload schema
	// in docs/watching.md), signed when a secret is set.
	Webhooks []string `toml:"webhooks"`
	// Slack are Slack-compatible incoming webhooks: a POST of {"text": ...}.
	Slack []string `toml:"slack"`
	// Ntfy are ntfy topic URLs, such as https://ntfy.sh/my-topic.
	Ntfy []string `toml:"ntfy"`
	// Command is an argv (never a shell string) that gets the JSON payload
	// on its standard input, once per notification.
	Command []string `toml:"command"`
	// Desktop shows notifications with notify-send when it is installed.
	Desktop bool `toml:"desktop"`
	// Events are the events sent to the channels above; empty means
	// DefaultNotifyEvents.
	Events []string `toml:"events"`
	// Secret signs webhook bodies (X-Ralph-Signature: sha256=<hex HMAC>);
	// SecretEnv names an environment variable holding it instead, which
	// keeps it out of a committed file. At most one of the two.
	Secret    string `toml:"secret"`
	SecretEnv string `toml:"secret_env"`
	// Timeout bounds one delivery attempt.
	Timeout Duration `toml:"timeout"`
	// Channels are channels with their own choice of events.
	Channels []NotifyChannel `toml:"channel"`
}

// NotifyChannel is one [[notify.channel]]: a channel of Type with its own
// events (empty: those of [notify]).
type NotifyChannel struct {
	Type    string   `toml:"type"`
	URL     string   `toml:"url"`
	Command []string `toml:"command"`
	Events  []string `toml:"events"`
}

// Configured reports whether any channel is set.
func (n NotifySection) Configured() bool {
	return len(n.Webhooks)+len(n.Slack)+len(n.Ntfy)+len(n.Command)+len(n.Channels) > 0 || n.Desktop
}

// AllChannels lists every configured channel, the shorthand lists first,
// each with the events it sends.
func (n NotifySection) AllChannels() []NotifyChannel {
	var out []NotifyChannel
	add := func(typ string, urls []string) {
		for _, u := range urls {
			out = append(out, NotifyChannel{Type: typ, URL: u, Events: n.events(nil)})
		}
	}
	add("webhook", n.Webhooks)
	add("slack", n.Slack)
	add("ntfy", n.Ntfy)
	if len(n.Command) > 0 {
		out = append(out, NotifyChannel{Type: "command", Command: n.Command, Events: n.events(nil)})
	}
	if n.Desktop {
		out = append(out, NotifyChannel{Type: "desktop", Events: n.events(nil)})
	}
	for _, c := range n.Channels {
		c.Events = n.events(c.Events)
		out = append(out, c)
	}
	return out
}

func (n NotifySection) events(own []string) []string {
	switch {
	case len(own) > 0:
		return own
	case len(n.Events) > 0:
		return n.Events
	}
	return DefaultNotifyEvents
}

func (n NotifySection) validate() error {
	if err := checkNotifyEvents("[notify] events", n.Events); err != nil {
		return err
	}
	if n.Secret != "" && n.SecretEnv != "" {
		return errors.New("[notify] sets both secret and secret_env: keep one (secret_env keeps the secret out of this file)")
	}
	if n.SecretEnv != "" && (strings.ContainsAny(n.SecretEnv, " =$") || n.SecretEnv != strings.TrimSpace(n.SecretEnv)) {
		return fmt.Errorf("[notify] secret_env = %q: give the name of an environment variable, such as \"RALPH_NOTIFY_SECRET\", not the secret", n.SecretEnv)
	}
	if n.Timeout.Duration <= 0 || n.Timeout.Duration > 5*time.Minute {
		return fmt.Errorf("[notify] timeout = %q: use a duration above 0 and at most 5m, such as \"10s\"", n.Timeout.String())
	}
	for _, u := range n.Webhooks {
		if err := checkNotifyURL("[notify] webhooks", u); err != nil {
			return err
		}
	}
	for _, u := range n.Slack {
		if err := checkNotifyURL("[notify] slack", u); err != nil {
			return err
		}
	}
	for _, u := range n.Ntfy {
		if err := checkNotifyURL("[notify] ntfy", u); err != nil {
			return err
		}
	}
	if len(n.Command) > 0 && strings.TrimSpace(n.Command[0]) == "" {
		return errors.New("[notify] command: the first element is the program to run, such as [\"notify-me\", \"--quiet\"]")
	}
	if len(n.Command) == 1 && strings.ContainsAny(n.Command[0], " |;&") {
		return fmt.Errorf("[notify] command = [%q]: give an argv, one element per argument, such as [\"notify-me\", \"--quiet\"]; it is never run through a shell", n.Command[0])
	}
	for i, c := range n.Channels {
		where := fmt.Sprintf("[[notify.channel]] %d (type %q)", i+1, c.Type)
		if !slices.Contains(NotifyChannelTypes, c.Type) {
			return fmt.Errorf("%s: type must be one of %s", where, strings.Join(NotifyChannelTypes, ", "))
		}
		if err := checkNotifyEvents(where+" events", c.Events); err != nil {
			return err
		}
		switch c.Type {
		case "webhook", "slack", "ntfy":
			if len(c.Command) > 0 {
				return fmt.Errorf("%s: a %s channel takes url, not command", where, c.Type)
			}
			if err := checkNotifyURL(where+" url", c.URL); err != nil {
				return err
			}
		case "command":
			if c.URL != "" || len(c.Command) == 0 || strings.TrimSpace(c.Command[0]) == "" {
				return fmt.Errorf("%s: a command channel takes command = [\"program\", \"args\"...] and no url", where)
			}
		case "desktop":
			if c.URL != "" || len(c.Command) > 0 {
				return fmt.Errorf("%s: a desktop channel takes neither url nor command", where)
			}
		}
	}
	return nil
}

func checkNotifyEvents(where string, events []string) error {
	for _, e := range events {
		if !slices.Contains(NotifyEvents, e) {
			return fmt.Errorf("%s: %q is not an event: use %s", where, e, strings.Join(NotifyEvents, ", "))
		}
	}
	return nil
}

// checkNotifyURL accepts http and https URLs with a host. The URL itself
// is never quoted back: its path and query are often the secret.
func checkNotifyURL(where, raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s: an entry is not an http:// or https:// URL with a host", where)
	}
	return nil
}
