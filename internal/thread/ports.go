package thread

import (
	"context"
	"strings"

	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/loop"
	"github.com/ralphloop/ralph/internal/runkit"
	"github.com/ralphloop/ralph/internal/workspace"
)

// The ports are what the thread's runner does to the world outside its own
// records: run a spec agent, run the loop, ask git, run a check. The clock
// is Env.Now. Ports leaves each nil for the real one, so that the command
// line needs no change; tests give scripted ones and drive the runner over
// the table without starting an agent or a loop.

// Ports are the runner's ways out; a nil field is the real one.
type Ports struct {
	Agent AgentPort
	Loop  LoopPort
	Git   GitPort
	// Checks runs a criterion's verify command and the verifiers.
	Checks runkit.CheckPort
}

// AgentPort runs one headless attempt of a spec agent (the spec
// conversation, the assessment, polish). The attempt carries the prompt,
// files and timeouts; the error is ralph's own, how the agent ended is in
// the Result, as with runkit.Attempt.Run.
type AgentPort interface {
	RunAgent(ctx context.Context, a runkit.Attempt) (runkit.Result, error)
}

// LoopPort runs the loop over the thread's PRD copy, as loop.Build does.
type LoopPort interface {
	Build(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error)
}

// GitPort is the part of the workspace's repository the runner uses:
// every runner's git, *gitx.Repo's ancestry and setting aside, and any
// other git command in the work tree.
type GitPort interface {
	runkit.Git
	IsAncestor(ctx context.Context, a, b string) (bool, error)
	SetAside(ctx context.Context, ref, message string, exclude ...string) (string, error)
	// Git runs git with args in the work tree and returns its output
	// without the surrounding white space.
	Git(ctx context.Context, args ...string) (string, error)
}

// attemptAgent is the real AgentPort.
type attemptAgent struct{}

func (attemptAgent) RunAgent(ctx context.Context, a runkit.Attempt) (runkit.Result, error) {
	return a.Run(ctx)
}

// buildLoop is the real LoopPort.
type buildLoop struct{}

func (buildLoop) Build(ctx context.Context, ws *workspace.Workspace, opts loop.Options) (loop.Report, error) {
	return loop.Build(ctx, ws, opts)
}

// repoGit is the real GitPort: the workspace's repository.
type repoGit struct{ *gitx.Repo }

func (g repoGit) Git(ctx context.Context, args ...string) (string, error) {
	out, err := g.Runner.Git(ctx, g.Dir, args...)
	return strings.TrimSpace(string(out)), err
}

// withDefaults fills the nil ports with the real ones, but Git: its real
// one is the repository of the work tree the runner chooses (chooseWork).
func (p Ports) withDefaults() Ports {
	if p.Agent == nil {
		p.Agent = attemptAgent{}
	}
	if p.Loop == nil {
		p.Loop = buildLoop{}
	}
	if p.Checks == nil {
		p.Checks = runkit.ExecChecks{}
	}
	return p
}
