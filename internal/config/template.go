package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Template returns the commented config.toml that `ralph init` writes, with
// the checks detected in the project filled in, and agents, the built-in
// agents' names (the agent registry's, which config does not import).
func Template(checks []CheckConfig, agents []string) []byte {
	var b strings.Builder
	b.WriteString(`# ralph configuration. docs/configuration.md lists every key.
schema_version = 1

[agent]
`)
	choice := "The name of an [agents.NAME] table below."
	if len(agents) > 0 {
		choice = strings.Join(agents, ", ") + ", or the name of an [agents.NAME] table below."
	}
	b.WriteString(wrapComment(choice, 76))
	b.WriteString(`# Precedence: --agent flag, then the AGENT_CMD environment variable, then this.
default = "codex"
# Wall-clock limit for one agent run; its whole process group is killed after it.
timeout = "30m"
# Kill an agent that prints nothing for this long ("0s": never).
idle_timeout = "0s"
# Bound one agent run's raw log (bytes); past it the first and last halves are kept.
max_log_bytes = 52428800
# Agents to rotate to while the default one cools down after a usage limit.
fallbacks = []
# Rest after a limit whose reset time the agent did not say.
limit_cooldown = "30m"
# Matched (case-insensitively) against the agent's final message and reported
# errors only, when its CLI gave no structured limit event.
limit_patterns = ["usage limit", "rate limit", "hit your limit", "quota exceeded", "resource_exhausted", "too many requests"]

[build]
prd = ".agents/tasks/prd.md"
plan = ".ralph/IMPLEMENTATION_PLAN.md"
max_iterations = 25
no_commit = false
# Refuse to build before ` + "`ralph plan`" + ` has written the plan.
require_plan = true
# A fresh run first runs the checks below on the starting tree. One that
# already fails there: "judge-new-failures" reports it and fails an attempt
# only when a check that passed at the start fails; "stop" does not start.
on_failing_baseline = "judge-new-failures"
# Tasks worked at once. Above 1, each task gets its own worktree and branch
# (ralph/<run>/<task>) and ralph's merge queue lands them (together when
# several wait: max_batch) on your branch, only after the checks pass on
# the integrated result.
workers = 1
# Where the worktrees go ("" is ../.ralph-worktrees/<repo>), the free disk
# (MB) a parallel build needs to start, and the attempts a task gets at
# landing before it is left for your review.
worktree_root = ""
min_free_disk = 500
land_attempts = 3
# Verified tasks waiting to land are integrated together and checked once
# (a batch that fails is split until the task that breaks it is found):
# at most this many at once; 1 lands them one at a time.
max_batch = 8

[plan]
max_iterations = 1

[tasks]
# prd-md, prd-json, progress or beads (beads:MOL-ID: inside a molecule);
# empty: .beads, then progress.txt, then prd.json, then the PRD.
source = ""
path = ""

[loop]
# Failed attempts (tests, acceptance criteria, agent errors) that block a task.
max_retries = 2
# Context-window thresholds (percent) given to the agent: skip nice-to-haves,
# then commit and hand over to a fresh agent.
context_soft = 70
context_hard = 80

[budget]
# Bounds of one run, kept across resume; 0 means none. Reaching one exits 4.
max_tokens = 0
max_cost_usd = 0.0    # the CLIs' own estimates
max_wall_time = "0s"

[breaker]
# The circuit breaker opens after this many iterations in a row without
# progress (no commit, no change), with the same error, or with permission
# denials (0 turns a rule off); it lets one iteration try after the cooldown.
no_progress = 3
same_error = 3
permission_denials = 3
cooldown = "5m"

[validate]
# An agent that judges each story's acceptance criteria (e.g. "claude");
# empty: only verify commands, and for the markdown PRD the agent's own marks.
reviewer = ""

[verify]
# "Verified" needs evidence ralph produced itself: a test that failed before
# the work and passes now, a new test that passes, a verify command that
# failed before the work and passes now, or the reviewer's verdict. A story
# whose checks all pass with none of that is "done, agent's word";
# true sends it back instead.
require_evidence = false
# Count a test the agent added only when it fails against the code the
# story started from (write the failing test first).
red_green = false
# Files whose change makes ralph also run their start versions against the
# new code, besides the tests and the files the checks run, which ralph
# finds itself. Globs; ** is any number of folders.
protected = []

[memory]
# Where lessons, blockers and task events are kept and queried at MEMORY_LOAD:
# "sqlite" (embedded, .ralph/memory.db, no server), "neo4j", or "file"
# (.ralph/memory.jsonl). NEO4J_URI in the environment selects neo4j.
# While the store is unreachable ralph goes on with file-only context and
# queues writes in .ralph/memory-queue.jsonl; they are replayed in order
# on the next successful connection.
store = "sqlite"
# Neo4j only: the server (NEO4J_URI overrides), the user (NEO4J_USER
# overrides), the name of the environment variable holding the password.
uri = ""
user = ""
password_env = "NEO4J_PASSWORD"
database = ""

[security]
# Environment variables whose values ralph masks in its logs, records and
# prompts, besides those named *_API_KEY, *_TOKEN, *SECRET* or *PASSWORD*.
redact = []

[sandbox]
# Run each agent in a bubblewrap sandbox (Linux): the system read-only, its
# work tree and its own state folders writable, the rest of your home
# hidden (~/.ssh, cloud credentials), its own PID namespace, and only its
# credential variables passed in. "off", "bwrap" (fail when it cannot start
# here) or "auto" (bwrap when it works, else a warning). Off by default: an
# agent or a test suite that relies on something under your home (a login
# kept elsewhere, a tool in ~/go/bin, a module cache) or on other hosts fails
# inside until you name it below. Run ralph doctor, then one story with
# --sandbox bwrap, then turn it on (docs/containment.md).
mode = "off"
# "proxy": the agent reaches only its API hosts (or the host of its base URL,
# like ANTHROPIC_BASE_URL) and allow_hosts, through ralph's allow-list proxy,
# and every other connection is refused and shown as an event. "none": no
# network at all. "open": the host's network (the filesystem limits stay).
network = "proxy"
# More destinations: "host" (ports 80 and 443), "host:port", "*.domain".
allow_hosts = []
# More paths the agent may write or read (absolute, or "~/..."), and more
# environment variables it gets.
writable = []
readable = []
env = []
# Run ralph's checks in the same sandbox whenever the agents run in one,
# with only PATH, HOME, LANG, TERM and env above: a test suite is code the
# agent could write. Caches under the home (~/.cache/go-build, ~/go/pkg/mod,
# ~/.npm) start empty inside; list them in writable to keep them.
checks = true

[notify]
# Tell people when a run needs them (docs/watching.md, Notifications). No channel is
# set by default; uncomment the ones you use:
# webhooks = ["https://example.com/ralph"]          # POST of the JSON payload
# slack = ["https://hooks.slack.com/services/..."]  # Slack-compatible incoming webhooks
# ntfy = ["https://ntfy.sh/your-topic"]             # ntfy topics
# command = ["notify-me", "--quiet"]                # an argv; gets the JSON payload on stdin
# desktop = true                                    # notify-send, when installed
# Events sent; the default is all but limit_wait_ended: run_finished,
# task_blocked, task_needs_review, limit_wait_started, limit_wait_ended,
# breaker_opened, waiting_for_person.
# events = ["run_finished", "waiting_for_person"]
# Sign webhook bodies (X-Ralph-Signature: sha256=<HMAC-SHA256 of the body>)
# with the secret in this environment variable.
# secret_env = "RALPH_NOTIFY_SECRET"
# One delivery attempt's limit; a failed one is retried three times.
timeout = "10s"
# A channel with its own events:
# [[notify.channel]]
# type = "ntfy"                                     # webhook, slack, ntfy, command or desktop
# url = "https://ntfy.sh/your-topic"
# events = ["waiting_for_person"]

# A custom agent. "{prompt}" is replaced by the path of the rendered prompt
# file; without it the prompt is sent on stdin.
# [agents.mine]
# command = ["my-agent", "--headless"]
# interactive = ["my-agent", "--prompt-file", "{prompt}"]
# format = "plain"   # plain, claude, codex, opencode, gemini, droid, cursor

# Checks ralph runs itself to verify a story (typecheck, lint, test, e2e).
# format reads the tests one by one: "go-json" (go test -json), "tap" (on the
# output), "junit" (with report = "path/to/junit.xml"), "none" (exit code).
`)
	if len(checks) == 0 {
		b.WriteString("# None were detected; add yours, for example:\n# [[checks]]\n# name = \"unit tests\"\n# kind = \"test\"\n# run = \"make test\"\n# timeout = \"10m\"\n")
	}
	for _, c := range checks {
		fmt.Fprintf(&b, "\n[[checks]]\nname = %s\nkind = %s\nrun = %s\ntimeout = %s\n",
			strconv.Quote(c.Name), strconv.Quote(c.Kind), strconv.Quote(c.Run), strconv.Quote(c.Timeout.String()))
		if c.Format != "" {
			fmt.Fprintf(&b, "# Its tests one by one: ralph tells a fixed test from a broken one.\nformat = %s\n", strconv.Quote(c.Format))
		}
		if c.Report != "" {
			fmt.Fprintf(&b, "report = %s\n", strconv.Quote(c.Report))
		}
	}
	return []byte(b.String())
}

// wrapComment is text as TOML comment lines of at most width characters,
// broken between words.
func wrapComment(text string, width int) string {
	var b, line strings.Builder
	for _, w := range strings.Fields(text) {
		if line.Len() > 0 && line.Len()+1+len(w) > width-2 {
			b.WriteString("# " + line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	if line.Len() > 0 {
		b.WriteString("# " + line.String() + "\n")
	}
	return b.String()
}
