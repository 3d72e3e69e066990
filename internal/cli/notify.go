package cli

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/notify"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/workspace"
	"github.com/spf13/cobra"
)

// notifyFlushTimeout bounds how long a finished run waits for its last
// notifications before the process exits.
const notifyFlushTimeout = 15 * time.Second

// notifyHowTo is what ralph notify test says when nothing is configured.
const notifyHowTo = `no notification channels are configured. Add a [notify] section to .ralph/config.toml, for example:

  [notify]
  slack = ["https://hooks.slack.com/services/..."]
  ntfy = ["https://ntfy.sh/your-topic"]
  webhooks = ["https://example.com/ralph"]
  command = ["notify-me", "--quiet"]   # gets the JSON payload on stdin
  desktop = true                       # notify-send
  events = ["run_finished", "waiting_for_person"]

then run ralph notify test again. docs/watching.md (Notifications) lists every key.`

// notifyTestReport is what ralph notify test --json prints.
type notifyTestReport struct {
	SchemaVersion int             `json:"schema_version"`
	OK            bool            `json:"ok"`
	Configured    bool            `json:"configured"`
	Channels      []notify.Result `json:"channels"`
	Hint          string          `json:"hint,omitempty"`
}

// newNotifyCmd is `ralph notify`: for now its one subcommand, test.
func newNotifyCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Notifications: ralph notify test sends a sample to each [notify] channel",
		Long: `ralph tells people when a run needs them, through the channels of [notify] in
.ralph/config.toml: generic webhooks (signed JSON), Slack-compatible webhooks,
ntfy topics, a command that reads the JSON on stdin, and desktop notifications.
The events: run_finished, task_blocked, task_needs_review, limit_wait_started,
limit_wait_ended, breaker_opened, waiting_for_person.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("ralph notify needs a subcommand: ralph notify test")
		},
	}
	var jsonOut bool
	test := &cobra.Command{
		Use:   "test",
		Short: "Send a sample notification to each configured channel and report how each took it",
		Long: `Send a sample run_finished notification (its payload has "test": true) to
each channel of [notify], one attempt each, and report each channel ok or
failed with its target redacted. Exits 1 when any channel failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, a, err := openWorkspace(cmd.Context(), env)
			if err != nil {
				return err
			}
			n := a.Notifier(nil, nil)
			rep := notifyTestReport{SchemaVersion: 1, Configured: n != nil, Channels: []notify.Result{}}
			if !rep.Configured {
				rep.Hint = notifyHowTo
				// Nothing was sent, so nothing was shown to work.
				if jsonOut {
					if err := writeJSON(env, rep); err != nil {
						return err
					}
				}
				return &ExitError{Code: ExitFailure, Msg: notifyHowTo, Silent: jsonOut}
			}
			rep.Channels = n.Test(env.Now())
			n.Close(time.Second)
			rep.OK = true
			for _, r := range rep.Channels {
				rep.OK = rep.OK && r.OK
			}
			if jsonOut {
				if err := writeJSON(env, rep); err != nil {
					return err
				}
			} else {
				for _, r := range rep.Channels {
					if r.OK {
						fmt.Fprintf(env.IO.Out, "ok      %-8s %s\n", r.Type, r.Target)
					} else {
						fmt.Fprintf(env.IO.Out, "failed  %-8s %s: %s\n", r.Type, r.Target, r.Error)
					}
				}
			}
			if !rep.OK {
				return &ExitError{Code: ExitFailure, Msg: "some notification channels failed: check their URLs, the receiving service, and .ralph/config.toml [notify]", Silent: jsonOut}
			}
			return nil
		},
	}
	test.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	cmd.AddCommand(test)
	return cmd
}

// notifyBackoff is the wait before each retry; nil is notify's default
// (1 s, 2 s, 4 s). Tests shorten it.
var notifyBackoff func(n int) time.Duration

// openNotifiers are the notifiers notifier made, for flushNotifications.
var openNotifiers struct {
	sync.Mutex
	list []*notify.Notifier
}

// notifier returns the sink that sends the [notify] notifications of a
// run's events (nil when none is configured); every run's emitter gets
// it. Channels that cannot send
// are told once on stderr and in errors.log; delivery failures go to
// errors.log and never change the run. flushNotifications must run before
// the process exits, so that the run's last notification goes out.
func notifier(env *Env, a *app.App) report.Sink {
	ws := a.WS
	logf := func(msg string) { _ = ws.LogError(env.Now(), msg) }
	n := a.Notifier(logf, notifyBackoff)
	if n == nil {
		return nil
	}
	if warns := n.Warnings(); len(warns) > 0 && firstNotifyWarning(warns, ws, logf) {
		for _, w := range warns {
			fmt.Fprintf(env.IO.Err, "ralph: warning: %s\n", w)
			logf(w)
		}
	}
	openNotifiers.Lock()
	openNotifiers.list = append(openNotifiers.list, n)
	openNotifiers.Unlock()
	return n
}

// notifyWarnedFile holds the channel warnings last told, so that the same
// ones are told once, not on every command: a thread's every step and
// each run would otherwise repeat them until the config changes.
// `ralph notify test` always says what cannot send.
const notifyWarnedFile = "notify-warned"

// shownNotifyWarnings are the warnings this process told already: one
// command may make several sinks (a thread step and the loop it runs).
var shownNotifyWarnings struct {
	sync.Mutex
	last string
}

// firstNotifyWarning reports whether warns are new: not told by this
// process, nor recorded in .ralph/notify-warned by an earlier command. It
// records them; a workspace whose record cannot be written tells them
// every time, which errs on the side of telling.
func firstNotifyWarning(warns []string, ws *workspace.Workspace, logf func(string)) bool {
	key := strings.Join(warns, "\n") + "\n"
	shownNotifyWarnings.Lock()
	defer shownNotifyWarnings.Unlock()
	if shownNotifyWarnings.last == key {
		return false
	}
	shownNotifyWarnings.last = key
	p := ws.Path(notifyWarnedFile)
	if b, err := os.ReadFile(p); err == nil && string(b) == key {
		return false
	}
	// The record is machine state: .ralph/.gitignore keeps it out of git
	// before it exists.
	err := ws.EnsureIgnoreFile()
	if err == nil {
		err = store.WriteFileAtomic(p, []byte(key), 0o644)
	}
	if err != nil {
		logf("notify: could not record the warnings told, they will be told again: " + err.Error())
	}
	return true
}

// flushNotifications waits, at most notifyFlushTimeout in all, for the
// notifications of every sink notifier made to be delivered, and
// closes them. What could not be delivered is in errors.log.
func flushNotifications() {
	openNotifiers.Lock()
	list := openNotifiers.list
	openNotifiers.list = nil
	openNotifiers.Unlock()
	deadline := time.Now().Add(notifyFlushTimeout)
	var wg sync.WaitGroup
	for _, n := range list {
		wg.Add(1)
		go func() { defer wg.Done(); n.Close(time.Until(deadline)) }()
	}
	wg.Wait()
}
