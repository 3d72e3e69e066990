package check

import (
	"github.com/ralphloop/ralph/internal/sandbox"
)

// hiddenNote follows the output of a sandboxed check whose program was not
// found: it may be installed where the sandbox hides it.
const hiddenNote = "ralph: the check ran in the sandbox, which hides your home and /tmp: " +
	"if its program is installed there, add its folder to [sandbox] readable, or set [sandbox] checks = false"

// confined returns the command line and environment that run argv under
// box with dir, the check's folder, as the work tree: the checkout, a
// worker's worktree, a thread's worktree or the merge queue's integration
// worktree. Of env (ralph's environment less its secrets) the check gets
// PATH, HOME, LANG, TERM and the names [sandbox] env lists, and none of
// an agent's credential variables: a check runs the project's own tools,
// which need no model's API key, and it is code the agent could write.
//
// The network is the agent's when it is open; with the allow-list proxy
// (there for the agent to reach its model) a check gets none.
func confined(box sandbox.Policy, dir string, argv, env []string) ([]string, []string, error) {
	box.WorkTree = dir
	if box.Network == sandbox.NetProxy {
		box.Network, box.ProxySocket = sandbox.NetNone, ""
	}
	box.Environ = env
	cmd, err := sandbox.Wrap(box, argv)
	return cmd.Args, cmd.Env, err
}
