package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sandboxExec is macOS's Seatbelt launcher, by its full path so that a
// program of the same name earlier on PATH cannot stand in for it.
const sandboxExec = "/usr/bin/sandbox-exec"

// SeatbeltProfile is the sandbox-exec profile (SBPL) that holds a process
// to p's rules on macOS, resolved against this filesystem as Wrap
// resolves them for bubblewrap: deny by default; the system readable and
// not writable; the home unreadable except the work tree, the agent's
// state, Readable and Writable under it; writes only to the work tree
// (its git metadata as far as commits on its own branch need), the
// agent's state, Writable and the per-user temporary folder ($TMPDIR,
// which stands in for bwrap's private /tmp and is not size-limited);
// signals only to its own processes; and the network off, open, or only
// the proxy's unix socket.
func SeatbeltProfile(p Policy) (string, error) {
	pl, err := resolve(p, []string{"true"}, seatbeltTmp(p))
	if err != nil {
		return "", err
	}
	return seatbeltRules(p, pl), nil
}

// seatbeltTmp is the writable temporary folder: macOS gives each user one
// of their own ($TMPDIR, under /var/folders), where /tmp is shared.
func seatbeltTmp(p Policy) mount {
	environ := p.Environ
	if environ == nil {
		environ = os.Environ()
	}
	tmp := lookup(environ, "TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	if c, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = c
	}
	return mount{kind: "rw", path: filepath.Clean(tmp)}
}

// seatbeltBase is what every sandboxed process needs. In SBPL the last
// rule that matches an operation decides, so the paths' rules below come
// after it, parents first, as bwrap stacks its mounts.
const seatbeltBase = `(version 1)
(deny default)
; processes: start programs; see and signal only those of this sandbox
(allow process-exec process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow ipc-posix-sem ipc-posix-shm)
(allow pseudo-tty)
(allow file-ioctl)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.notification_center")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.logd")
  (global-name "com.apple.SecurityServer")
  (global-name "com.apple.trustd.agent"))
; the system: readable, not writable, but for the terminal and the null device
(allow file-read*)
(allow file-write* (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/ptmx") (literal "/dev/dtracehelper"))
(allow file-write* (regex #"^/dev/ttys[0-9]+$") (regex #"^/dev/fd/"))
`

// seatbeltRules turns a resolved plan into the profile.
func seatbeltRules(p Policy, pl plan) string {
	var b strings.Builder
	b.WriteString(seatbeltBase)
	b.WriteString("; the paths, parents first: a later rule wins\n")
	for _, m := range pl.mounts {
		q := sbplString(m.path)
		switch m.kind {
		case "tmpfs":
			// Hidden; its own entry stays visible, as bwrap's empty
			// folder does, so that programs that stat $HOME still run.
			fmt.Fprintf(&b, "(deny file-read* file-write* (subpath %s))\n(allow file-read-metadata (literal %s))\n", q, q)
		case "ro":
			fmt.Fprintf(&b, "(allow file-read* (subpath %s))\n(deny file-write* (subpath %s))\n", q, q)
		case "protect":
			fmt.Fprintf(&b, "(deny file-write* (subpath %s))\n", q)
		case "rw":
			fmt.Fprintf(&b, "(allow file-read* file-write* (subpath %s))\n", q)
		}
	}
	switch p.Network {
	case NetOpen:
		b.WriteString("; the network: open\n(allow network*)\n(allow mach-lookup (global-name \"com.apple.dnssd.service\"))\n")
	case NetProxy:
		// By its canonical path (/private/var/..., not /var/...), which
		// resolve has checked exists.
		sock, _ := filepath.EvalSymlinks(p.ProxySocket)
		fmt.Fprintf(&b, "; the network: only the allow-list proxy's socket\n(allow network-outbound (remote unix-socket (path-literal %s)))\n", sbplString(sock))
	default:
		b.WriteString("; the network: none\n")
	}
	return b.String()
}

// sbplString quotes s as an SBPL string literal.
func sbplString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
