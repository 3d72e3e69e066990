package config

import (
	"strings"
	"testing"
	"time"
)

// A [notify] section in the documented shape is read back whole, and each
// channel gets the events it sends.
func TestNotifySectionIsRead(t *testing.T) {
	cfg, err := Load(write(t, `
[notify]
webhooks = ["https://example.com/hook"]
slack = ["https://hooks.slack.com/services/T/B/X"]
ntfy = ["https://ntfy.sh/topic"]
command = ["notify-me", "--quiet"]
desktop = true
events = ["run_finished", "task_blocked"]
secret_env = "RALPH_NOTIFY_SECRET"
timeout = "3s"

[[notify.channel]]
type = "ntfy"
url = "https://ntfy.sh/people"
events = ["waiting_for_person"]
`))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Notify
	if !n.Configured() || n.Timeout.Duration != 3*time.Second || n.SecretEnv != "RALPH_NOTIFY_SECRET" {
		t.Fatalf("notify = %+v", n)
	}
	var got []string
	for _, c := range n.AllChannels() {
		got = append(got, c.Type+":"+strings.Join(c.Events, "+"))
	}
	want := "webhook:run_finished+task_blocked slack:run_finished+task_blocked ntfy:run_finished+task_blocked command:run_finished+task_blocked desktop:run_finished+task_blocked ntfy:waiting_for_person"
	if strings.Join(got, " ") != want {
		t.Fatalf("channels = %s\nwant       %s", strings.Join(got, " "), want)
	}
}

func TestNotifyDefaults(t *testing.T) {
	cfg, err := Load(write(t, "[notify]\nslack = [\"https://hooks.slack.com/services/x\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Notify.Timeout.Duration != 10*time.Second {
		t.Fatalf("default timeout = %s, want 10s", cfg.Notify.Timeout)
	}
	ch := cfg.Notify.AllChannels()
	if len(ch) != 1 || strings.Join(ch[0].Events, ",") != strings.Join(DefaultNotifyEvents, ",") {
		t.Fatalf("channels = %+v", ch)
	}
	if Default().Notify.Configured() {
		t.Fatal("the default config has notification channels")
	}
}

func TestNotifyErrors(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"unknown event", "[notify]\nevents = [\"run_done\"]\n", `"run_done" is not an event`},
		{"not a url", "[notify]\nslack = [\"hooks.slack.com/x\"]\n", "not an http:// or https:// URL"},
		{"both secrets", "[notify]\nsecret = \"abc\"\nsecret_env = \"X\"\n", "both secret and secret_env"},
		{"secret in secret_env", "[notify]\nsecret_env = \"s3cr=t value\"\n", "name of an environment variable"},
		{"shell string", "[notify]\ncommand = [\"notify-me --quiet | tee\"]\n", "never run through a shell"},
		{"zero timeout", "[notify]\ntimeout = \"0s\"\n", "timeout"},
		{"bad channel type", "[[notify.channel]]\ntype = \"email\"\n", "type must be one of"},
		{"channel without url", "[[notify.channel]]\ntype = \"slack\"\n", "not an http"},
		{"channel event", "[[notify.channel]]\ntype = \"desktop\"\nevents = [\"x\"]\n", `"x" is not an event`},
		{"misspelt key", "[notify]\nwebhook = [\"https://e.com\"]\n", "unknown key notify.webhook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// The URL is never quoted back: its path is often the token.
	_, err := Load(write(t, "[notify]\nslack = [\"hooks.slack.com/services/T000/B000/SECRETTOKEN\"]\n"))
	if err == nil || strings.Contains(err.Error(), "SECRETTOKEN") {
		t.Fatalf("err = %v", err)
	}
}

// The template ralph init writes documents [notify] and loads back with no
// channel set.
func TestTemplateHasNotify(t *testing.T) {
	tpl := string(Template(nil, nil))
	for _, want := range []string{"[notify]", "secret_env", "waiting_for_person", "[[notify.channel]]"} {
		if !strings.Contains(tpl, want) {
			t.Errorf("template lacks %q", want)
		}
	}
	cfg, err := Load(write(t, tpl))
	if err != nil || cfg.Notify.Configured() {
		t.Fatalf("cfg.Notify = %+v, err = %v", cfg.Notify, err)
	}
}
