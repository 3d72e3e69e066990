package runkit

import (
	"context"

	"github.com/ralphloop/ralph/internal/check"
	"github.com/ralphloop/ralph/internal/gitx"
	"github.com/ralphloop/ralph/internal/sandbox"
)

// Git is the part of a repository every runner (loop, session, thread)
// uses; *gitx.Repo is the real one. Each runner's git port is Git plus
// only what that runner alone asks of git.
type Git interface {
	CommitGit
	Head(ctx context.Context) (string, error)
	Snapshot(ctx context.Context) (gitx.Snapshot, error)
}

// CheckPort runs one of ralph's checks in dir: the port through which
// every runner runs its checks, so that tests can script them.
type CheckPort interface {
	RunCheck(ctx context.Context, dir string, c check.Check) check.Result
}

// ExecChecks is the real CheckPort: the check's command as a process.
type ExecChecks struct {
	// Sandbox, when set, confines every check to the folder it runs in
	// ([sandbox] checks): the agents' policy, so that a check reaches no
	// more than the agent that may have written it.
	Sandbox *sandbox.Policy
}

// RunCheck implements CheckPort.
func (e ExecChecks) RunCheck(ctx context.Context, dir string, c check.Check) check.Result {
	return check.RunIn(ctx, dir, c, e.Sandbox)
}

// RunAll runs checks in dir through p in order and stops at the first
// that does not pass. It returns the results of the checks that ran, the
// failing one last, and whether all passed; an empty list passes.
func RunAll(ctx context.Context, p CheckPort, dir string, checks []check.Check) ([]check.Result, bool) {
	var results []check.Result
	for _, c := range checks {
		r := p.RunCheck(ctx, dir, c)
		results = append(results, r)
		if !r.Passed() {
			return results, false
		}
	}
	return results, true
}
