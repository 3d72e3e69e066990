package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralphloop/ralph/internal/app"
	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/fleet"
	"github.com/ralphloop/ralph/internal/notify"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/thread"
)

// repo is a fresh git repository; its root is returned.
func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("git", "init", "-q", dir)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+filepath.Join(t.TempDir(), "gitconfig"), "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return dir
}

// open opens the repository at dir as app does for a command, with
// config.toml holding toml (none when empty).
func open(t *testing.T, dir, toml string) *app.App {
	t.Helper()
	if toml != "" {
		if err := os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".ralph", "config.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := app.Open(context.Background(), dir, os.Getenv, time.Now)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return a
}

// ralph init's config.toml is one that loads, names the detected checks
// (a check without a timeout gets ten minutes) and lists the agent
// registry's names; a second Init changes nothing.
func TestInitWritesTheTemplateItLoads(t *testing.T) {
	dir := repo(t)
	ws := open(t, dir, "").WS
	detected := []check.Check{{Name: "tests", Kind: "test", Run: "go test ./...", Format: "go-json"}}
	created, err := app.Init(ws, time.Now(), detected)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if !slices.Contains(created, ws.ConfigPath()) {
		t.Fatalf("Init created %q, not config.toml", created)
	}
	t.Setenv("AGENT_CMD", "") // the configuration's agent, not the environment's
	a := open(t, dir, "")
	prd := a.LoopOptions(false).PRDPath
	if spec, err := a.Agent(""); err != nil || spec.Name != "codex" || prd != filepath.Join(dir, ".agents/tasks/prd.md") {
		t.Errorf("config after Init: agent %+v (%v), PRD %q; want codex and .agents/tasks/prd.md", spec, err, prd)
	}
	got := a.Checks()
	want := []check.Check{{Name: "tests", Kind: "test", Run: "go test ./...", Format: "go-json", Timeout: 10 * time.Minute}}
	if !slices.EqualFunc(got, want, func(a, b check.Check) bool {
		return a.Name == b.Name && a.Kind == b.Kind && a.Run == b.Run && a.Format == b.Format && a.Timeout == b.Timeout
	}) {
		t.Errorf("checks after Init = %+v, want %+v", got, want)
	}
	b, err := os.ReadFile(ws.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "claude") || !strings.Contains(string(b), "codex") {
		t.Errorf("config.toml does not name the registry's agents:\n%s", b)
	}
	again, err := app.Init(ws, time.Now(), nil)
	if err != nil || len(again) != 0 {
		t.Errorf("second Init created %q (%v), want nothing", again, err)
	}
}

// A config.toml that does not load is reported, and the workspace still
// comes back with the defaults: `ralph doctor` goes on to report it.
func TestOpenReportsABrokenConfig(t *testing.T) {
	dir := repo(t)
	if err := os.MkdirAll(filepath.Join(dir, ".ralph"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".ralph", "config.toml"), []byte("[build\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(context.Background(), dir, os.Getenv, time.Now)
	if err == nil || a == nil || a.WS == nil {
		t.Fatalf("Open = %v, %v; want the workspace and the config's error", a, err)
	}
}

// [security] redact names variables every record masks from the moment
// the workspace is open.
func TestOpenMasksTheVariablesConfigNames(t *testing.T) {
	t.Setenv("APP_TEST_SHOP_COLOUR", "hunter2-hunter2-hunter2")
	open(t, repo(t), "[security]\nredact = [\"APP_TEST_SHOP_COLOUR\"]\n")
	if got := redact.Default().Redact("pw hunter2-hunter2-hunter2"); strings.Contains(got, "hunter2") {
		t.Errorf("the variable [security] redact names is not masked: %q", got)
	}
}

// notify takes the event names from its own list: it must be the one
// config validates [notify] events against.
func TestNotifyEventsAreConfigs(t *testing.T) {
	if !slices.Equal(notify.Events, config.NotifyEvents) {
		t.Errorf("notify.Events = %q, config.NotifyEvents = %q", notify.Events, config.NotifyEvents)
	}
}

func TestNotifySettingsFromConfig(t *testing.T) {
	a := open(t, repo(t), `[notify]
webhooks = ["https://hooks.example.com/a"]
events = ["task_blocked"]
secret_env = "APP_TEST_NOTIFY_SECRET"
timeout = "3s"

[[notify.channel]]
type = "ntfy"
url = "https://ntfy.sh/topic"
events = ["run_finished", "limit_wait_ended"]
`)
	s := a.NotifySettings()
	if s.SecretEnv != "APP_TEST_NOTIFY_SECRET" || s.Timeout != 3*time.Second {
		t.Errorf("settings = %+v", s)
	}
	want := []notify.Channel{
		{Type: "webhook", URL: "https://hooks.example.com/a", Events: []string{"task_blocked"}},
		{Type: "ntfy", URL: "https://ntfy.sh/topic", Events: []string{"run_finished", "limit_wait_ended"}},
	}
	if len(s.Channels) != len(want) {
		t.Fatalf("channels = %+v, want %+v", s.Channels, want)
	}
	for i, c := range s.Channels {
		if c.Type != want[i].Type || c.URL != want[i].URL || !slices.Equal(c.Events, want[i].Events) {
			t.Errorf("channel %d = %+v, want %+v", i, c, want[i])
		}
	}
}

func TestThreadSettingsFromConfig(t *testing.T) {
	a := open(t, repo(t), `[agent]
fallbacks = ["claude"]
timeout = "7m"
idle_timeout = "90s"
max_log_bytes = 4096

[build]
max_iterations = 12
worktree_root = "../trees"

[budget]
max_tokens = 5000
max_cost_usd = 2.5
max_wall_time = "1h"
`)
	got := a.ThreadSettings()
	want := thread.Settings{Fallbacks: []string{"claude"}, MaxIterations: 12, WorktreeRoot: "../trees",
		AgentTimeout: 7 * time.Minute, AgentIdleTimeout: 90 * time.Second, MaxLogBytes: 4096,
		Budget: runkit.Budget{MaxTokens: 5000, MaxCost: 2.5, MaxWall: time.Hour}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ThreadSettings = %+v, want %+v", got, want)
	}
}

func TestTemporalServerFromConfig(t *testing.T) {
	a := open(t, repo(t), "[engine]\nkind = \"temporal\"\naddress = \"temporal.example.com:7233\"\nnamespace = \"shop\"\ntls = true\n")
	want := fleet.Server{Address: "temporal.example.com:7233", Namespace: "shop", TLS: true}
	if got := a.Temporal().Server; got != want {
		t.Errorf("Temporal().Server = %+v, want %+v", got, want)
	}
}

// A role's agent named in config that the registry does not know is the
// configuration's mistake: the error names the key.
func TestNamedAgentNamesTheConfigKey(t *testing.T) {
	a := open(t, repo(t), "[agents.mine]\ncommand = [\"my-agent\", \"{prompt}\"]\n")
	if s, err := a.NamedAgent("mine", "[validate] reviewer"); err != nil || s.Name != "mine" {
		t.Errorf("NamedAgent(mine) = %+v, %v; want the custom agent", s, err)
	}
	_, err := a.NamedAgent("nosuchagent", "[validate] reviewer")
	if err == nil || !strings.Contains(err.Error(), "[validate] reviewer") {
		t.Errorf("NamedAgent(nosuchagent) = %v, want an error naming [validate] reviewer", err)
	}
}
