package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ProcessesIn lists the live processes whose working directory is dir or
// below it (Linux; elsewhere none): what a killed ralph left running.
func ProcessesIn(dir string) []int {
	return processes(func(pid int) bool {
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
		if err != nil {
			return false
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		return cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))
	})
}

// ProcessesWith lists the live processes whose command line holds s.
func ProcessesWith(s string) []int {
	return processes(func(pid int) bool { return strings.Contains(Cmdline(pid), s) })
}

func processes(match func(pid int) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !Alive(pid) {
			continue
		}
		if match(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Alive reports whether pid is a process that has not exited (a zombie
// nobody reaped has).
func Alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// Cmdline is pid's command line, its arguments joined by spaces.
func Cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\x00", " ")), " ")
}
