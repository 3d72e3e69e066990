package sandbox

import (
	"context"
	"errors"
	"os/exec"
)

// wrap runs argv under sandbox-exec with p's profile. Compiled for macOS
// but not exercised by this project's tests, which run on Linux.
func wrap(p Policy, argv []string) (Cmd, error) {
	if p.Network == NetProxy {
		// The forwarder needs a network of its own to listen in, which
		// macOS does not give a process.
		return Cmd{}, errors.New(`sandbox: network "proxy" needs Linux; on macOS set [sandbox] network = "none" or "open"`)
	}
	pl, err := resolve(p, argv, seatbeltTmp(p))
	if err != nil {
		return Cmd{}, err
	}
	args := append([]string{sandboxExec, "-p", seatbeltRules(p, pl), "--"}, pl.argv...)
	// sandbox-exec has no --chdir: the caller's working directory (proc's
	// Spec.Dir) is the work tree already.
	return Cmd{Args: args, Env: pl.env, branch: pl.branch}, nil
}

// Probe starts sandbox-exec once and says why it cannot when it cannot.
func Probe(ctx context.Context) error {
	return tryStart(exec.CommandContext(ctx, sandboxExec, "-p", "(version 1)\n(allow default)\n", "--", "/usr/bin/true"),
		"sandbox-exec cannot start a sandbox here")
}
