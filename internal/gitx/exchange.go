package gitx

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ExchangeBranchPrefix is the only branch namespace ralph pushes to an
// exchange remote on its own: task branches and a run's integrated tip.
const ExchangeBranchPrefix = "ralph/"

// ErrNoSuchRemoteBranch is returned by FetchBranch when the remote does
// not have the branch.
var ErrNoSuchRemoteBranch = errors.New("the remote has no such branch")

// FetchBranch fetches branch from remote (a URL or a path, given to git
// as it is, never configured as a named remote) and returns the commit it
// points at there. The commit is kept under refs/ralph/exchange/<branch>
// so that later diffs and worktrees can use it.
func (r *Repo) FetchBranch(ctx context.Context, remote, branch string) (string, error) {
	local := "refs/ralph/exchange/" + branch
	if _, err := r.git(ctx, "fetch", "--quiet", "--no-tags", "--force", remote, "refs/heads/"+branch+":"+local); err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && strings.Contains(ee.Stderr, "couldn't find remote ref") {
			return "", fmt.Errorf("%s: %w", branch, ErrNoSuchRemoteBranch)
		}
		return "", fmt.Errorf("fetching %s from the exchange remote: %w", branch, err)
	}
	return r.RevParse(ctx, local)
}

// PushBranch sets branch on remote to commit. When old is not "", the
// push succeeds only if the remote's branch is still at old ("" old with
// lease means the branch must not exist: pass NoBranch). Only branches
// under ralph/ are pushed unless target is true: ralph never moves a
// person's branch on a remote the person did not ask it to.
func (r *Repo) PushBranch(ctx context.Context, remote, branch, commit, old string, target bool) error {
	if !strings.HasPrefix(branch, ExchangeBranchPrefix) && !target {
		return fmt.Errorf("refusing to push %s: ralph pushes only %s branches to the exchange remote unless [engine] push_target is on", branch, ExchangeBranchPrefix)
	}
	args := []string{"push", "--quiet", "--no-verify"}
	switch old {
	case "":
		args = append(args, "--force")
	case NoBranch:
		args = append(args, "--force-with-lease=refs/heads/"+branch+":")
	default:
		args = append(args, "--force-with-lease=refs/heads/"+branch+":"+old)
	}
	args = append(args, remote, commit+":refs/heads/"+branch)
	if _, err := r.git(ctx, args...); err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && (strings.Contains(ee.Stderr, "stale info") || strings.Contains(ee.Stderr, "rejected")) {
			return fmt.Errorf("pushing %s to the exchange remote: %w", branch, ErrBranchMoved)
		}
		return fmt.Errorf("pushing %s to the exchange remote: %w", branch, err)
	}
	return nil
}

// NoBranch as PushBranch's old value means the branch must not exist yet.
const NoBranch = "\x00none"

// DeleteRemoteBranch removes one of ralph's branches from remote.
func (r *Repo) DeleteRemoteBranch(ctx context.Context, remote, branch string) error {
	if !strings.HasPrefix(branch, ExchangeBranchPrefix) {
		return fmt.Errorf("refusing to delete %s: ralph deletes only its own %s branches on the exchange remote", branch, ExchangeBranchPrefix)
	}
	_, err := r.git(ctx, "push", "--quiet", "--no-verify", remote, "--delete", "refs/heads/"+branch)
	return err
}
