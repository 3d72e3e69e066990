// Package runkit is what every runner shares when it runs an agent: one
// attempt, with its prompt file, capped log, timeouts, the token that finds
// the agent after a crash, the heartbeat and the usage-limit check. The
// loop's executor and reviewer, the session's roles and the thread's spec
// agents all run through it, so that none of them lacks a part the others
// have.
package runkit

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/heartbeat"
	"github.com/ralphloop/ralph/internal/redact"
	"github.com/ralphloop/ralph/internal/report"
	"github.com/ralphloop/ralph/internal/sandbox"
	"github.com/ralphloop/ralph/internal/store"
	"github.com/ralphloop/ralph/internal/text"
)

// Attempt is one headless run of an agent.
type Attempt struct {
	Spec   agent.Spec
	Prompt string
	// PromptFile is where the prompt is written (redacted) for the
	// agent's {prompt} placeholder and for the record.
	PromptFile string
	// LogFile receives the agent's raw output, capped at MaxLogBytes.
	LogFile string
	// AppendLog keeps what LogFile already holds, so that a run repeated
	// after a usage limit keeps the limited run's output too; otherwise
	// the log is started afresh.
	AppendLog bool
	// Dir is where the agent works.
	Dir string
	// Timeout bounds the run's wall time; IdleTimeout ends a run that
	// prints nothing for that long. Zero is no bound.
	Timeout, IdleTimeout time.Duration
	// MaxLogBytes bounds the raw log (0: agent.DefaultMaxLogBytes).
	MaxLogBytes int64
	// Token tags every process of the agent (agent.TokenVar); "" makes
	// Run pick a new one.
	Token string
	// SaveToken records the token before the agent starts, so that a
	// crash at any instant after the start leaves what finds and stops
	// the agent. An error stops the attempt before anything runs: an
	// agent nobody could find again is not started.
	SaveToken func(token string) error
	// OnStart receives the agent's process group id once it runs.
	OnStart func(pgid int)
	// OnExit is called once the agent's process group is stopped
	// (agent.Invocation.OnExit); it must not block.
	OnExit func()
	// Events receives the agent's display text and the heartbeat of a
	// silent agent; nil shows nothing.
	Events *report.Emitter
	// Working names the step in the heartbeat ("reviewer rev working");
	// "" means "agent NAME working".
	Working string
	// Terminal lets the heartbeat redraw one line in place.
	Terminal bool
	// LimitPatterns are matched against a failed run's final message and
	// errors when the agent gave no structured usage-limit event.
	LimitPatterns []string
	// Sandbox confines the agent (its work tree is Dir unless it names
	// one); nil runs it as the user.
	Sandbox *sandbox.Policy
}

// Result is what an attempt produced.
type Result struct {
	agent.Outcome
	PromptFile, LogFile string
	// Token is the token the agent's processes carried.
	Token string
	// Limit is the usage limit the agent hit, nil when none; LimitSource
	// says how it was found: "event" (structured) or "pattern". A run
	// ralph killed (timeout, idle, interrupt) never has one.
	Limit       *agent.Limit
	LimitSource string
	// EnvFailure is set when the agent could not run at all (missing,
	// not logged in, bad flags): the environment's failure, not the task's.
	EnvFailure *agent.EnvError
}

// Run writes the prompt file, opens the log, records the token and runs
// the agent. The error is ralph's own (a file it could not write, an agent
// program it could not start); how the agent ended is in the Result.
func (a Attempt) Run(ctx context.Context) (res Result, err error) {
	res = Result{PromptFile: a.PromptFile, LogFile: a.LogFile}
	// Failure output fed back into a prompt, or a file the agent wrote,
	// may quote a secret; neither the agent nor the record gets it.
	prompt := redact.Default().Redact(a.Prompt)
	if a.PromptFile != "" {
		// An agent that reads its prompt on stdin never opens the file,
		// which is then only the record of what it was told: it is
		// written while the agent runs, off the time between two agents.
		// The attempt does not return before it is written.
		if _, stdin := agent.Argv(a.Spec.Headless, a.PromptFile); stdin {
			written := make(chan error, 1)
			go func() { written <- store.WriteRecord(a.PromptFile, []byte(prompt), 0o644) }()
			defer func() {
				if werr := <-written; werr != nil && err == nil {
					err = werr
				}
			}()
		} else if err := store.WriteRecord(a.PromptFile, []byte(prompt), 0o644); err != nil {
			return res, err
		}
	}
	var log io.Writer = io.Discard
	if a.LogFile != "" {
		flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if a.AppendLog {
			flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(a.LogFile, flags, 0o644)
		if err != nil {
			return res, err
		}
		defer f.Close()
		log = f
	}
	res.Token = a.Token
	if res.Token == "" {
		res.Token = agent.NewToken()
	}
	if a.SaveToken != nil {
		if err := a.SaveToken(res.Token); err != nil {
			return res, err
		}
	}
	display := io.Writer(io.Discard)
	var denied func(sandbox.Denied)
	if a.Events != nil {
		// A thinking agent can be silent for minutes: the heartbeat
		// shows it is alive.
		working := a.Working
		if working == "" {
			working = "agent " + a.Spec.Name + " working"
		}
		beatOut, agentOut := a.Events.Writer(report.KindHeartbeat), a.Events.Writer(report.KindAgentOutput)
		beat := heartbeat.Start(beatOut, working, a.Terminal)
		// Deferred in this order: the agent's last line without a
		// newline is shown as it left it, then the heartbeat's line is
		// cleared.
		defer beatOut.Flush()
		defer beat.Stop()
		defer agentOut.Flush()
		display = touchWriter{beat.Writer(), agentOut}
		// Each refused connection is shown as it happens, on its own line.
		denied = func(d sandbox.Denied) {
			beat.Writer().Write(nil)
			a.Events.Emit(report.Event{Kind: report.KindDenied, Data: report.Denied{Host: d.Host, Port: d.Port, At: d.At}})
		}
	}
	out, err := agent.Run(ctx, agent.Invocation{
		Spec:        a.Spec,
		Prompt:      prompt,
		PromptFile:  a.PromptFile,
		Dir:         a.Dir,
		Log:         log,
		Display:     display,
		Timeout:     a.Timeout,
		IdleTimeout: a.IdleTimeout,
		MaxLogBytes: a.MaxLogBytes,
		OnStart:     a.OnStart,
		OnExit:      a.OnExit,
		Token:       res.Token,
		Sandbox:     a.Sandbox,
		OnDenied:    denied,
	})
	res.Outcome = out
	res.EnvFailure = agent.EnvironmentFailure(a.Spec, out, err)
	res.Limit, res.LimitSource = DetectLimit(out, err, a.LimitPatterns)
	return res, err
}

// DetectLimit says whether an agent run ended on a usage limit, and how
// ralph knows ("event": the CLI's structured report; "pattern": a
// configured pattern in the final message or the errors of a failed run).
// A timeout, an idle kill or an interrupt is ralph's own stop, never a
// limit. It returns nil, "" when there was none.
func DetectLimit(out agent.Outcome, err error, patterns []string) (*agent.Limit, string) {
	if err != nil || out.Interrupted || out.TimedOut || out.Idle {
		return nil, ""
	}
	if out.Result.Limit != nil {
		return out.Result.Limit, "event"
	}
	if out.ExitCode != 0 || out.Result.IsError {
		if l := MatchLimit(out.Result, patterns); l != nil {
			return l, "pattern"
		}
	}
	return nil, ""
}

// MatchLimit looks for a usage limit by the configured patterns, for CLIs
// that give no structured limit event. Only the final message and the
// reported errors are searched, never tool output or the echoed prompt,
// where a task about rate limits would match.
func MatchLimit(res agent.Result, patterns []string) *agent.Limit {
	hay := strings.ToLower(res.FinalMessage + "\n" + strings.Join(res.Errors, "\n"))
	for _, p := range patterns {
		if p != "" && strings.Contains(hay, strings.ToLower(p)) {
			msg := strings.TrimSpace(res.FinalMessage)
			if len(res.Errors) > 0 {
				msg = res.Errors[len(res.Errors)-1]
			}
			return &agent.Limit{Kind: "pattern", Message: text.Clip(msg, 300)}
		}
	}
	return nil
}

// touchWriter tells the heartbeat that the agent showed something (an
// empty write clears its terminal line and restarts its clock), then sends
// the text on as agent output events: the heartbeat's own line and the
// agent's lines stay separate events.
type touchWriter struct {
	beat io.Writer
	out  io.Writer
}

func (t touchWriter) Write(p []byte) (int, error) {
	t.beat.Write(p[:0])
	return t.out.Write(p)
}
