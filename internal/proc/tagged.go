package proc

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a live process found by a scan of /proc.
type Process struct {
	PID, PGID, SID int
	// Cmd is the command line, arguments separated by spaces, cut short.
	Cmd string
	// Start is the start time in clock ticks since boot; it orders
	// processes by age.
	Start uint64
}

func (p Process) String() string { return fmt.Sprintf("pid %d (%s)", p.PID, p.Cmd) }

// Tag returns the environment entry that marks every process of one agent
// run: name=value. Children inherit it, in their process group or outside
// it (setsid), so a scan finds all of them after ralph itself died.
func Tag(name, value string) string { return name + "=" + value }

// FindTagged returns the live processes whose initial environment holds
// tag ("NAME=VALUE") exactly, oldest first. Processes of other users, whose
// environment cannot be read, are never found: ralph's agents run as ralph's
// user. Zombies have no environment left and are not found either.
func FindTagged(tag string) []Process {
	if tag == "" || !strings.Contains(tag, "=") {
		return nil
	}
	want := []byte(tag)
	var out []Process
	for _, pid := range pids() {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !hasEntry(env, want) {
			continue
		}
		if p, ok := readProcess(pid); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Process) int {
		if a.Start != b.Start {
			return cmpUint(a.Start, b.Start)
		}
		return a.PID - b.PID
	})
	return out
}

// Lookup reads the live process pid; ok is false when there is none (or
// only a zombie).
func Lookup(pid int) (p Process, ok bool) { return readProcess(pid) }

// Identity returns a keep function for StopTagged that accepts only the
// process pid started at start (Process.Start, clock ticks since boot):
// a pid is reused, a pid with its start time is not. A zero start
// accepts nothing, for a record that never held one.
func Identity(pid int, start uint64) func(Process) bool {
	return func(p Process) bool { return start != 0 && pid > 0 && p.PID == pid && p.Start == start }
}

// GroupMembers returns the live processes of process group pgid.
func GroupMembers(pgid int) []Process {
	var out []Process
	if pgid <= 1 {
		return nil
	}
	for _, pid := range pids() {
		if p, ok := readStat(pid); ok && p.PGID == pgid {
			p.Cmd = cmdline(pid, p.Cmd)
			out = append(out, p)
		}
	}
	return out
}

// Stopped reports what StopTagged stopped.
type Stopped struct {
	// Groups are the process groups signalled, the agent's first.
	Groups []int
	// Processes are the tagged processes found, oldest first.
	Processes []Process
	// Escaped are tagged processes outside the agent's process group: they
	// left it (setsid, setpgid) and would have outlived a kill of the group.
	Escaped []Process
}

// Any reports whether anything was stopped.
func (s Stopped) Any() bool { return len(s.Groups) > 0 || len(s.Processes) > 0 }

// StopTagged stops every process carrying tag, and the process group pgid
// (the agent's, when known; 0 when not) if one of its live members carries
// tag or keep (nil: none) accepts it. A group number alone proves nothing:
// after a crash it may have been reused by the user's editor, shell or dev
// server, so keep must check an identity that cannot be reused (see
// Identity), never where a process works. Each group found gets SIGTERM,
// then SIGKILL after grace; a tagged process in a group that also holds
// ralph itself gets the signals alone. It scans again after the kill, so
// that children forked meanwhile are caught too.
func StopTagged(tag string, pgid int, keep func(Process) bool, grace time.Duration) Stopped {
	var st Stopped
	own := syscall.Getpgrp()
	seen := map[int]bool{}
	for round := 0; round < 3; round++ {
		tagged := FindTagged(tag)
		if round == 0 {
			st.Processes = tagged
			if pgid <= 1 && len(tagged) > 0 {
				// Without a recorded group, the oldest tagged process is
				// the agent or what is left of its group.
				pgid = tagged[0].PGID
			}
		}
		var groups, singles []int
		// kill(-pgid, 0) says whether the group has any member left without
		// reading every process's files: after a normal run it has none.
		if round == 0 && pgid > 1 && pgid != own && syscall.Kill(-pgid, 0) == nil {
			for _, m := range GroupMembers(pgid) {
				if (keep != nil && keep(m)) || (tag != "" && hasTag(m.PID, tag)) {
					groups = append(groups, pgid)
					break
				}
			}
		}
		for _, p := range tagged {
			if p.PID == os.Getpid() {
				continue
			}
			if p.PGID != pgid && !seen[p.PID] && round == 0 {
				st.Escaped = append(st.Escaped, p)
			}
			seen[p.PID] = true
			switch {
			case p.PGID <= 1 || p.PGID == own:
				singles = append(singles, p.PID)
			case !slices.Contains(groups, p.PGID):
				groups = append(groups, p.PGID)
			}
		}
		if len(groups) == 0 && len(singles) == 0 {
			break
		}
		for _, g := range groups {
			if !slices.Contains(st.Groups, g) {
				st.Groups = append(st.Groups, g)
			}
		}
		terminate(groups, singles, grace)
	}
	return st
}

// terminate sends SIGTERM to the groups and the single processes, waits up
// to grace for all of them to go, and sends SIGKILL to what is left.
func terminate(groups, singles []int, grace time.Duration) {
	signal := func(sig syscall.Signal) {
		for _, g := range groups {
			_ = syscall.Kill(-g, sig)
		}
		for _, p := range singles {
			_ = syscall.Kill(p, sig)
		}
	}
	alive := func() bool {
		for _, g := range groups {
			if len(GroupMembers(g)) > 0 {
				return true
			}
		}
		for _, p := range singles {
			if _, ok := readProcess(p); ok {
				return true
			}
		}
		return false
	}
	signal(syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	signal(syscall.SIGKILL)
	// SIGKILL is not instant; wait a little so that a caller that goes on
	// to read the tree does not race the dying processes.
	deadline = time.Now().Add(time.Second)
	for alive() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// pids lists the numeric entries of /proc.
func pids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// readProcess reads a live process's ids from /proc/PID/stat. Zombies
// count as gone: they hold no files and can run no code.
func readProcess(pid int) (Process, bool) {
	p, ok := readStat(pid)
	if ok {
		p.Cmd = cmdline(pid, p.Cmd)
	}
	return p, ok
}

// readStat reads /proc/<pid>/stat only; Cmd holds the short command name
// (comm), which cmdline turns into the whole command line when needed.
func readStat(pid int) (Process, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Process{}, false
	}
	// The command name in parentheses may hold spaces and parentheses;
	// the fields after it start behind the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Process{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), f[2] pgrp, f[3] session, f[19] starttime.
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return Process{}, false
	}
	p := Process{PID: pid}
	p.PGID, _ = strconv.Atoi(f[2])
	p.SID, _ = strconv.Atoi(f[3])
	p.Start, _ = strconv.ParseUint(f[19], 10, 64)
	p.Cmd = string(b[bytes.IndexByte(b, '(')+1 : i])
	return p, true
}

func cmdline(pid int, comm string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if s == "" {
		s = comm
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func hasTag(pid int, tag string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && hasEntry(env, []byte(tag))
}

// hasEntry reports whether a NUL-separated environment block holds entry.
func hasEntry(env, entry []byte) bool {
	for len(env) > 0 {
		i := bytes.IndexByte(env, 0)
		if i < 0 {
			return bytes.Equal(env, entry)
		}
		if bytes.Equal(env[:i], entry) {
			return true
		}
		env = env[i+1:]
	}
	return false
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
