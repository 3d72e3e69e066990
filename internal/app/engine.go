package app

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ralphloop/ralph/internal/config"
	"github.com/ralphloop/ralph/internal/engine"
	"github.com/ralphloop/ralph/internal/errs"
	"github.com/ralphloop/ralph/internal/fleet"
)

// EngineLocal is the --engine value of the engine in this process.
const EngineLocal = config.EngineLocal

// OnTemporal reports whether a command runs on the Temporal engine: flag
// is --engine (local or temporal; "" leaves it to [engine] kind).
func (a *App) OnTemporal(flag string) (bool, error) {
	switch flag {
	case "":
		return a.cfg.Engine.Kind == config.EngineTemporal, nil
	case config.EngineLocal, config.EngineTemporal:
		return flag == config.EngineTemporal, nil
	}
	return false, errs.Usagef("--engine %q: use local or temporal", flag)
}

// Temporal is the Temporal engine as [engine] sets it: the server, the
// queue every worker polls (HOST's own is fleet.HostQueue(TaskQueue,
// HOST)), the git remote task branches travel through ("" runs no build,
// only sessions and threads), the heartbeat, and how long a command
// waits on a worker before it says that none polls.
type Temporal struct {
	fleet.Server
	TaskQueue, ExchangeRemote string
	Heartbeat, WorkerWait     time.Duration
}

// Temporal is [engine]'s Temporal server and queues.
func (a *App) Temporal() Temporal {
	e := a.cfg.Engine
	if e.WorkerWait.Duration <= 0 {
		e.WorkerWait = config.DefaultEngine().WorkerWait
	}
	return Temporal{Server: fleet.Server{Address: e.Address, Namespace: e.Namespace, TLS: e.TLS}, TaskQueue: e.TaskQueue,
		ExchangeRemote: e.ExchangeRemote, Heartbeat: e.Heartbeat.Duration, WorkerWait: e.WorkerWait.Duration}
}

// Dial connects to the Temporal frontend; the secrets come from the
// environment (fleet.EnvTemporalAPIKey and the TLS paths).
func (t Temporal) Dial(ctx context.Context) (client.Client, error) { return fleet.Dial(ctx, t.Server) }

// FleetBuild is a build on Temporal as [engine] and [build] set it (the
// queues, the landing attempts, the host timeout, the heartbeat, the
// history limit); the command adds the run, the target, the task file,
// the workers and the iterations. Without [engine] exchange_remote the
// tasks' branches could not travel: an error.
func (a *App) FleetBuild() (Temporal, fleet.BuildInput, error) {
	t, e := a.Temporal(), a.cfg.Engine
	if t.ExchangeRemote == "" {
		return t, fleet.BuildInput{}, errs.Usagef("the Temporal engine needs [engine] exchange_remote in .ralph/config.toml: the git remote through which task branches travel between machines, such as a bare repository on a shared disk (docs/temporal.md)")
	}
	return t, fleet.BuildInput{LandAttempts: a.cfg.Build.LandAttempts, Shared: t.TaskQueue, Integration: fleet.IntegrationQueue(t.TaskQueue),
		HostTimeout: e.HostTimeout.Duration, Heartbeat: t.Heartbeat, HistoryLimit: e.HistoryLimit}, nil
}

// FleetHost is `ralph worker`'s host name as [engine] and [build] set it
// (the exchange remote, pushing the target, the worktree root, the
// heartbeat's beat); the command adds the checks, the sink and the
// loop's options.
func (a *App) FleetHost(name string) *fleet.Host {
	e := a.cfg.Engine
	return &fleet.Host{Name: name, WS: a.WS, Exchange: e.ExchangeRemote, PushTarget: e.PushTarget,
		WorktreeRoot: a.cfg.Build.WorktreeRoot, HeartbeatEvery: max(e.Heartbeat.Duration/4, time.Second), Now: a.now}
}

// Workers is how many tasks a build works at once unless --workers says.
func (a *App) Workers() int { return a.cfg.Build.Workers }

// WorktreeRoot holds the parallel workers' and the threads' worktrees.
func (a *App) WorktreeRoot() string { return a.cfg.Build.WorktreeRoot }

// Parallel are the parallel engine's options for workers tasks at once as
// [build] sets them (the worktree root, the landing attempts, the free
// disk it needs); the command adds the source, the loop's options, the
// control and the sink.
func (a *App) Parallel(workers int) engine.Options {
	b := a.cfg.Build
	return engine.Options{Workers: workers, WS: a.WS, WorktreeRoot: b.WorktreeRoot, RetryLimit: b.LandAttempts,
		MaxBatch: b.MaxBatch, MinFreeDisk: b.MinFreeDisk << 20, Now: a.now}
}
