package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Engine kinds: where runs execute.
const (
	EngineLocal    = "local"    // in this process (the default; no server)
	EngineTemporal = "temporal" // as Temporal workflows, on the workers of many machines
)

// EngineSection is [engine]: where runs execute.
type EngineSection struct {
	// Kind is "local" (default) or "temporal".
	Kind string `toml:"kind"`
	// Address is the Temporal frontend, host:port (default 127.0.0.1:7233).
	Address string `toml:"address"`
	// Namespace is the Temporal namespace (default "default").
	Namespace string `toml:"namespace"`
	// TaskQueue is the queue every ralph worker polls; each worker also
	// polls TaskQueue@<host> for the work of the checkouts it holds, and
	// the integration host TaskQueue.integration (default "ralph").
	TaskQueue string `toml:"task_queue"`
	// ExchangeRemote is the git remote, named for ralph, through which
	// task branches travel between machines: a URL or a path (a bare
	// repository on a shared disk, a git server). ralph pushes only
	// ralph/ branches to it.
	ExchangeRemote string `toml:"exchange_remote"`
	// PushTarget lets the integration host also push the target branch
	// to the exchange remote after each landing (default false).
	PushTarget bool `toml:"push_target"`
	// HostTimeout is how long work waits for the host that holds its
	// checkout before it is given to another host (default 10m).
	HostTimeout Duration `toml:"host_timeout"`
	// Heartbeat is how long an agent attempt may go without a heartbeat
	// before Temporal takes its worker for dead and retries it (default 1m).
	Heartbeat Duration `toml:"heartbeat"`
	// HistoryLimit is the history length (events) at which a run
	// continues as new once its in-flight work is done (0: 8000; Temporal
	// refuses a history past 51,200 events and warns at 10,240).
	HistoryLimit int `toml:"history_limit"`
	// WorkerWait is how long a command waits on a ralph worker (to start
	// a session, record an answer, run a build) before it says that no
	// worker polls the task queue it needs and how to start one; it shows
	// progress meanwhile (default 30s).
	WorkerWait Duration `toml:"worker_wait"`
	// TLS turns on TLS without client certificates (Temporal Cloud with
	// an API key sets it by itself).
	TLS bool `toml:"tls"`
}

// DefaultEngine is [engine] when the file says nothing.
func DefaultEngine() EngineSection {
	return EngineSection{Kind: EngineLocal, Address: "127.0.0.1:7233", Namespace: "default", TaskQueue: "ralph",
		HostTimeout: Duration{10 * time.Minute}, Heartbeat: Duration{time.Minute}, WorkerWait: Duration{30 * time.Second}}
}

func (e EngineSection) validate() error {
	switch e.Kind {
	case EngineLocal, EngineTemporal:
	default:
		return fmt.Errorf("[engine] kind = %q: use \"local\" (the default) or \"temporal\"", e.Kind)
	}
	if _, _, err := net.SplitHostPort(e.Address); err != nil {
		return fmt.Errorf("[engine] address = %q: give the Temporal frontend as host:port, such as \"127.0.0.1:7233\"", e.Address)
	}
	if strings.TrimSpace(e.Namespace) == "" {
		return fmt.Errorf("[engine] namespace is empty: leave it out for \"default\"")
	}
	if e.TaskQueue == "" || strings.ContainsAny(e.TaskQueue, " @/\t\n") {
		return fmt.Errorf("[engine] task_queue = %q: use a name without spaces, '@' or '/', such as \"ralph\"", e.TaskQueue)
	}
	if u, err := url.Parse(e.ExchangeRemote); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return fmt.Errorf("[engine] exchange_remote holds a password: use an SSH key or a git credential helper, never a secret in config.toml")
		}
	}
	if e.HostTimeout.Duration < time.Second {
		return fmt.Errorf("[engine] host_timeout = %q: use at least 1s, such as \"10m\"", e.HostTimeout.String())
	}
	if e.Heartbeat.Duration < time.Second {
		return fmt.Errorf("[engine] heartbeat = %q: use at least 1s, such as \"1m\"", e.Heartbeat.String())
	}
	if e.WorkerWait.Duration < time.Second {
		return fmt.Errorf("[engine] worker_wait = %q: use at least 1s, such as \"30s\"", e.WorkerWait.String())
	}
	if e.HistoryLimit != 0 && (e.HistoryLimit < 100 || e.HistoryLimit > 40000) {
		return fmt.Errorf("[engine] history_limit = %d: use 0 (the default, 8000) or 100 to 40000 events; Temporal refuses histories past 51,200", e.HistoryLimit)
	}
	return nil
}
