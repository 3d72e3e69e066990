package loop

import (
	"context"

	"github.com/ralphloop/ralph/internal/agent"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/runkit"
)

// The ports are what the loop's runner does to the world outside its own
// records: run an agent, ask git, run a check. The memory store
// (Options.Memory), the task source (Options.Source) and the clock
// (Options.Now) are the other ports; each is an interface or a func already.
// Options leaves every port nil for the real thing, so that the CLI and
// every caller keep working unchanged; tests give scripted ones and drive
// the runner over the table without starting a process.

// AgentPort runs one agent attempt of iteration n with prompt, and returns
// what runkit.Attempt returns: the outcome, the files that hold the prompt
// and the agent's log ("" if there are none), and the attempt's judgement
// of a usage limit (Limit) and of an agent that cannot run at all
// (EnvFailure), which the runner acts on rather than judging again. An
// error means the agent could not be run or waited for.
type AgentPort interface {
	RunAgent(ctx context.Context, spec agent.Spec, n int, prompt string) (runkit.Result, error)
}

// GitPort is the part of a git repository the loop uses: *gitx.Repo, plus
// Unstage. Every runner's git (runkit.Git) with the listing commit that
// reads the tree around it (runkit.ListingGit); trees is what asks them.
type GitPort interface {
	runkit.ListingGit
	CommitsBetween(ctx context.Context, from, to string) ([]gitx.Commit, error)
	ChangedFiles(ctx context.Context, from, to string) ([]string, error)
	// Range tells the commits, the files they changed and whether to
	// descends from from in one git process: what CommitsBetween,
	// ChangedFiles and IsAncestor tell in three.
	Range(ctx context.Context, from, to string) (gitx.Range, error)
	IsAncestor(ctx context.Context, a, b string) (bool, error)
	SetAside(ctx context.Context, ref, message string, exclude ...string) (string, error)
	Untracked(ctx context.Context, pathspecs ...string) ([]string, error)
	CommitPaths(ctx context.Context, message string, paths ...string) (string, error)
	// Unstage empties the index and keeps the work tree: what a refused
	// commit leaves staged goes back to being plain changes.
	Unstage(ctx context.Context) error
	// FilesAt reads files of a commit's tree (the start's versions of
	// protected files).
	FilesAt(ctx context.Context, rev string, paths []string) ([]gitx.FileAt, error)
	// UpdateRef points ref at commit.
	UpdateRef(ctx context.Context, ref, commit string) error
	// MoveBranchBack moves the checked-out branch back to base after its
	// unverified commits were kept elsewhere, keeping the work tree's
	// versions of the keep paths (ralph's own files).
	MoveBranchBack(ctx context.Context, base string, keep ...string) error
}

// repoGit is the real GitPort.
type repoGit struct{ *gitx.Repo }

func (g repoGit) HeadFiles() (head, branch string, ok bool) { return gitx.ReadHead(g.Dir) }

func (g repoGit) Unstage(ctx context.Context) error {
	_, err := g.Runner.Git(ctx, g.Dir, "reset", "-q")
	return err
}

// runAgentPort is the real AgentPort: runkit.Attempt with the run's prompt
// file, log, timeouts and process-group records.
type runAgentPort struct{ r *run }

func (p runAgentPort) RunAgent(ctx context.Context, spec agent.Spec, n int, prompt string) (runkit.Result, error) {
	return p.r.runAgentAs(ctx, spec, n, prompt)
}

// gitPort is opts' git port, or the workspace's repository.
func (o *Options) gitPort(repo *gitx.Repo) GitPort {
	if o.Git != nil {
		return o.Git
	}
	return repoGit{repo}
}

func (o *Options) checkPort() runkit.CheckPort {
	if o.Checker != nil {
		return o.Checker
	}
	return runkit.ExecChecks{}
}
