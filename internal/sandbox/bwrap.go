package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// bwrapTmp is bwrap's private temporary folder: a size-limited tmpfs.
var bwrapTmp = mount{kind: "tmpfs", path: "/tmp"}

// bwrapArgs is the bubblewrap command line that runs pl's command.
func bwrapArgs(p Policy, pl plan) []string {
	size := p.TmpSize
	if size <= 0 {
		size = DefaultTmpSize
	}
	args := []string{"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"}
	for _, m := range pl.mounts {
		switch m.kind {
		case "tmpfs":
			args = append(args, "--size", strconv.FormatInt(size, 10), "--tmpfs", m.path)
		case "ro", "protect":
			args = append(args, "--ro-bind", m.path, m.path)
		case "rw":
			src := m.path
			if m.from != "" {
				src = m.from
			}
			args = append(args, "--bind", src, m.path)
		}
	}
	if p.Network != NetOpen {
		args = append(args, "--unshare-net")
	}
	args = append(args, "--unshare-pid", "--die-with-parent")
	if !p.Terminal {
		// A process without ralph's terminal cannot push input into it.
		args = append(args, "--new-session")
	}
	args = append(args, "--chdir", pl.workTree, "--")
	return append(args, pl.argv...)
}

// probeBwrap starts bwrap once with the namespaces Wrap asks for and says
// what is missing when it cannot.
func probeBwrap(ctx context.Context) error {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return errors.New("sandbox: bwrap is not installed: install bubblewrap (apt-get install bubblewrap)")
	}
	return tryStart(exec.CommandContext(ctx, path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session", "--", "true"),
		"bwrap cannot start a sandbox here (are user namespaces disabled?)")
}

// tryStart runs a probe's cmd and, when it fails, says so as cannot
// followed by what the sandbox program printed.
func tryStart(cmd *exec.Cmd, cannot string) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("sandbox: %s: %s", cannot, msg)
	}
	return nil
}
