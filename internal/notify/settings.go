package notify

import "time"

// The notification events, by the names [notify] events lists. They are
// part of ralph's interface: scripts branch on them, so they never change
// meaning. config validates [notify] against the same names
// (config.NotifyEvents); internal/app's tests hold the two lists equal.
const (
	EventRunFinished      = "run_finished"       // a run ended: done, blocked, limit, budget, error or interrupted
	EventTaskBlocked      = "task_blocked"       // a task was blocked
	EventTaskNeedsReview  = "task_needs_review"  // the merge queue set a task aside for a person's review
	EventLimitWaitStarted = "limit_wait_started" // every agent is at a usage limit: the run waits for a reset
	EventLimitWaitEnded   = "limit_wait_ended"   // that wait is over and the run goes on
	EventBreakerOpened    = "breaker_opened"     // the circuit breaker opened: iterations made no progress
	EventWaitingForPerson = "waiting_for_person" // a question or a thread checkpoint waits for a person
)

// Events are every notification event, in the order docs/watching.md
// lists them.
var Events = []string{EventRunFinished, EventTaskBlocked, EventTaskNeedsReview,
	EventLimitWaitStarted, EventLimitWaitEnded, EventBreakerOpened, EventWaitingForPerson}

// Settings are who a Notifier tells what: internal/app fills them from
// [notify].
type Settings struct {
	// Channels are every channel, each with the events it sends.
	Channels []Channel
	// Secret signs webhook bodies; SecretEnv names an environment
	// variable holding it instead (read through Options.Getenv).
	Secret    string
	SecretEnv string
	// Timeout bounds one delivery attempt (10s when zero).
	Timeout time.Duration
}

// Channel is one place notifications go: a webhook, slack or ntfy URL,
// a command's argv, or the desktop.
type Channel struct {
	Type    string // webhook, slack, ntfy, command or desktop
	URL     string
	Command []string
	Events  []string
}
